"""A small tanh MLP with hand-written backpropagation and Adam, in numpy.

Enough for the RL agent's policy and value networks (a few thousand weights): no deep-learning
framework is needed to install ktune.
"""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["MLP"]


class MLP:
    def __init__(
        self,
        sizes: list[int],
        rng: np.random.Generator,
        *,
        out_scale: float = 1.0,
        lr: float = 3e-3,
    ) -> None:
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        for i, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
            scale = np.sqrt(1.0 / fan_in) * (out_scale if i == len(sizes) - 2 else 1.0)
            self.weights.append(rng.normal(0.0, scale, size=(fan_in, fan_out)))
            self.biases.append(np.zeros(fan_out))
        self.lr = lr
        self._m = [np.zeros_like(p) for p in self.params]
        self._v = [np.zeros_like(p) for p in self.params]
        self._t = 0

    @property
    def params(self) -> list[np.ndarray]:
        return [*self.weights, *self.biases]

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Output and the activations backprop needs."""
        acts = [x]
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            x = x @ w + b
            if i < len(self.weights) - 1:
                x = np.tanh(x)
            acts.append(x)
        return x, acts

    def backward(self, acts: list[np.ndarray], grad_out: np.ndarray) -> list[np.ndarray]:
        """Gradients of the loss w.r.t. ``params`` (weights first, then biases)."""
        gw: list[np.ndarray] = [np.empty(0)] * len(self.weights)
        gb: list[np.ndarray] = [np.empty(0)] * len(self.biases)
        g = grad_out
        for i in reversed(range(len(self.weights))):
            gw[i] = acts[i].T @ g
            gb[i] = g.sum(axis=0)
            if i > 0:
                g = (g @ self.weights[i].T) * (1.0 - acts[i] ** 2)  # tanh'
        return [*gw, *gb]

    def step(
        self, grads: list[np.ndarray], beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ) -> None:
        """One Adam step (in place), with global gradient-norm clipping at 1."""
        norm = np.sqrt(sum(float((g**2).sum()) for g in grads))
        if norm > 1.0:
            grads = [g / norm for g in grads]
        self._t += 1
        for p, g, m, v in zip(self.params, grads, self._m, self._v):
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            v += (1 - beta2) * g * g
            m_hat = m / (1 - beta1**self._t)
            v_hat = v / (1 - beta2**self._t)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + eps)
