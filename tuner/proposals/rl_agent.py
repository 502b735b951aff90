"""Chameleon's RL agent (Ahn et al., ICLR 2020): a PPO policy over knob moves.

The state is a configuration (its value positions scaled to [0, 1]); an action moves every
knob one step down, leaves it, or moves it one step up in its value list (a factored
categorical, one 3-way choice per knob). The reward is the cost model's predicted improvement
``s(next) - s(current)`` in units of the score's spread; a move to a configuration the space
does not hold keeps the agent in place with a small penalty. Several agents roll out in
parallel from the best measured configurations; PPO (clipped surrogate, GAE, value baseline,
entropy bonus) updates the policy after each round of rollouts, and the policy persists across
batches of a job, so it keeps what it learnt about the space. Every configuration an agent
visits is a candidate for adaptive sampling.
"""

from __future__ import annotations

import numpy as np

from ktune.search_space.space import SearchSpace
from ktune.tuner.proposals import Scorer
from ktune.tuner.proposals.mlp import MLP

__all__ = ["KnobMoveAgent"]


class KnobMoveAgent:
    def __init__(
        self,
        space: SearchSpace,
        rng: np.random.Generator,
        *,
        hidden: int = 32,
        agents: int = 16,
        horizon: int = 6,
        rounds: int = 3,
        epochs: int = 4,
        clip: float = 0.2,
        gamma: float = 0.9,
        lam: float = 0.95,
        entropy: float = 0.01,
        invalid_penalty: float = 0.1,
    ) -> None:
        self.space = space
        self.rng = rng
        self.radices = np.array([len(p.values) for p in space.parameters], dtype=np.int64)
        self.d = len(self.radices)
        self.agents, self.horizon, self.rounds, self.epochs = agents, horizon, rounds, epochs
        self.clip, self.gamma, self.lam, self.entropy = clip, gamma, lam, entropy
        self.invalid_penalty = invalid_penalty
        self.policy = MLP([self.d, hidden, hidden, 3 * self.d], rng, out_scale=0.01)
        self.value = MLP([self.d, hidden, hidden, 1], rng, out_scale=1.0)

    def _state(self, pos: np.ndarray) -> np.ndarray:
        return pos / np.maximum(1, self.radices - 1)

    def _logits(self, states: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        out, acts = self.policy.forward(states)
        return out.reshape(len(states), self.d, 3), acts

    def propose(
        self, scorer: Scorer, starts: np.ndarray, n: int = 64
    ) -> tuple[np.ndarray, np.ndarray]:
        """Roll out from ``starts`` (dense indices), learn, and return up to ``n`` visited
        configurations with their predicted scores, best first."""
        starts = np.asarray(starts, dtype=np.int64)
        if len(starts) == 0 or len(self.space) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        visited: dict[int, float] = {}
        for _ in range(self.rounds):
            begin = starts[self.rng.integers(len(starts), size=self.agents)]
            batch = self._rollout(scorer, begin, visited)
            self._update(*batch)
        items = sorted(visited.items(), key=lambda kv: -kv[1])[:n]
        return np.array([i for i, _ in items], dtype=np.int64), np.array([s for _, s in items])

    def _rollout(
        self, scorer: Scorer, begin: np.ndarray, visited: dict[int, float]
    ) -> tuple[np.ndarray, ...]:
        index = begin.copy()
        pos = self.space.positions(index)
        score = scorer(index)
        visited.update(zip(index.tolist(), score.tolist()))
        scale = float(np.std(list(visited.values()))) or 1.0
        states, actions, logps, rewards, values = [], [], [], [], []
        for _ in range(self.horizon):
            s = self._state(pos)
            logits, _ = self._logits(s)
            probs = _softmax(logits)
            # sample one of {down, stay, up} per knob
            u = self.rng.random((len(index), self.d, 1))
            a = (u > np.cumsum(probs, axis=2)).sum(axis=2).clip(0, 2)
            logp = np.log(np.take_along_axis(probs, a[..., None], axis=2)[..., 0] + 1e-12).sum(
                axis=1
            )
            v, _ = self.value.forward(s)
            nxt = np.clip(pos + (a - 1), 0, self.radices - 1)
            nidx = self.space.indices_of_positions(nxt)
            ok = nidx >= 0
            reward = np.full(len(index), -self.invalid_penalty)
            if ok.any():
                nscore = scorer(nidx[ok])
                visited.update(zip(nidx[ok].tolist(), nscore.tolist()))
                reward[ok] = (nscore - score[ok]) / scale
                pos[ok], index[ok], score[ok] = nxt[ok], nidx[ok], nscore
            states.append(s)
            actions.append(a)
            logps.append(logp)
            rewards.append(reward)
            values.append(v[:, 0])
        last, _ = self.value.forward(self._state(pos))
        advantages = np.zeros((self.horizon, len(index)))
        gae = np.zeros(len(index))
        next_value = last[:, 0]
        for t in reversed(range(self.horizon)):
            delta = rewards[t] + self.gamma * next_value - values[t]
            gae = delta + self.gamma * self.lam * gae
            advantages[t] = gae
            next_value = values[t]
        returns = advantages + np.array(values)

        def flat(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts, axis=0)

        return flat(states), flat(actions), flat(logps), advantages.ravel(), returns.ravel()

    def _update(
        self,
        states: np.ndarray,
        actions: np.ndarray,
        old_logp: np.ndarray,
        adv: np.ndarray,
        returns: np.ndarray,
    ) -> None:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        onehot = np.eye(3)[actions]  # (B, d, 3)
        for _ in range(self.epochs):
            logits, acts = self._logits(states)
            probs = _softmax(logits)
            logp_all = np.log(probs + 1e-12)
            logp = (logp_all * onehot).sum(axis=(1, 2))
            ratio = np.exp(logp - old_logp)
            # the clipped surrogate passes gradient only where it is not clipped away
            active = ((adv >= 0) & (ratio < 1 + self.clip)) | ((adv < 0) & (ratio > 1 - self.clip))
            g_logp = -(adv * ratio * active) / len(states)  # d(-surrogate)/d logp
            grad = g_logp[:, None, None] * (onehot - probs)
            # entropy bonus: d(-entropy)/d logits = p * (log p + H) per knob
            ent = -(probs * logp_all).sum(axis=2, keepdims=True)
            grad += self.entropy * probs * (logp_all + ent) / len(states)
            self.policy.step(self.policy.backward(acts, grad.reshape(len(states), -1)))
            v, vacts = self.value.forward(states)
            self.value.step(self.value.backward(vacts, (v - returns[:, None]) / len(states)))


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    probabilities: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return probabilities
