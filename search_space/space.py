"""A constrained search space: typed parameters, constraints, and its valid configs.

The valid configs are stored as the sorted int64 array of their cartesian ranks (mixed radix
over value positions, first parameter most significant, i.e. ``itertools.product`` order).
A config's *dense index* is its position in that array; strategies work on dense indices and
configs are decoded on demand.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from ktune.search_space.constraints import Constraint, ConstraintError, parse_constraint
from ktune.search_space.enumeration import TooLarge, enumerate_ranks, strides_of
from ktune.search_space.excerpt import excerpt
from ktune.search_space.parameters import Config, Parameter, ParameterError, Value

__all__ = ["SearchSpace", "SpaceError"]

_MAX_CARTESIAN = 2**62


class SpaceError(ValueError):
    """A search space cannot be built or a config does not fit its parameters."""


class SearchSpace:
    """Parameters, constraints over them, and the valid configs, addressed by dense index."""

    parameters: tuple[Parameter, ...]
    names: tuple[str, ...]
    constraints: tuple[Constraint, ...]
    constants: dict[str, Value]
    name: str
    explicit: bool
    cartesian_size: int

    def __init__(
        self,
        parameters: Sequence[Parameter],
        constraints: Sequence[str | Constraint] = (),
        *,
        constants: Mapping[str, Value] | None = None,
        name: str = "",
    ) -> None:
        self._set_parameters(parameters, name)
        self.constants = dict(constants or {})
        clash = sorted(set(self.constants) & set(self.names))
        if clash:
            raise SpaceError(f"constant(s) {clash} have the name of a parameter")
        if isinstance(constraints, (str, Constraint)):
            constraints = [constraints]
        self.constraints = tuple(self._constraint(c) for c in constraints)
        self.explicit = False
        try:
            ranks = enumerate_ranks(self.names, self._columns, self.constraints)
        except TooLarge as exc:  # a space of 10^12 configs: refused, not a MemoryError
            raise SpaceError(str(exc)) from None
        self._set_ranks(ranks)

    @classmethod
    def from_configs(
        cls,
        parameters: Sequence[Parameter],
        configs: Iterable[Mapping[str, Value]],
        *,
        name: str = "",
    ) -> SearchSpace:
        """A space whose members are exactly ``configs`` (e.g. those present in a recording)."""
        space = cls.__new__(cls)
        space._set_parameters(parameters, name)
        space.constants, space.constraints, space.explicit = {}, (), True
        rows = []
        for config in configs:
            rows.append(space._positions_of(config, strict=True))
        matrix = np.asarray(rows, dtype=np.int64).reshape(-1, len(space.names))
        space._set_ranks(_sorted_unique(matrix @ space._strides))
        return space

    def restrict(self, expressions: Sequence[str]) -> SearchSpace:
        """The members of this space that also satisfy ``expressions`` (constraint
        expressions over its parameter names), as a space of the same parameters whose
        members are listed (as :meth:`from_configs` makes). A :class:`ConstraintError` for an
        expression that does not parse."""
        parsed = [parse_constraint(e, self.names, self.constants) for e in expressions]
        positions = self.positions()
        columns = {
            p.name: (self._objects[j] if p.kind == "str" else self._columns[j])[positions[:, j]]
            for j, p in enumerate(self.parameters)
        }
        keep = np.ones(len(self), dtype=bool)
        for c in parsed:
            keep &= c.evaluate(columns)
        space = SearchSpace.__new__(SearchSpace)
        space._set_parameters(self.parameters, self.name)
        space.constants, space.constraints, space.explicit = {}, (), True
        space._set_ranks(self._ranks[keep])
        return space

    # --- construction helpers

    def _set_parameters(self, parameters: Sequence[Parameter], name: str) -> None:
        params = tuple(parameters)
        if not params:
            raise SpaceError("a search space needs at least one parameter")
        for p in params:
            if not isinstance(p, Parameter):
                raise SpaceError(f"{p!r} is not a Parameter")
        names = tuple(p.name for p in params)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise SpaceError(f"duplicate parameter name(s) {duplicates}")
        self.parameters, self.names, self.name = params, names, name
        self.cartesian_size = 1
        for p in params:
            self.cartesian_size *= len(p)
        if self.cartesian_size >= _MAX_CARTESIAN:
            raise SpaceError(f"cartesian size {self.cartesian_size} is too large (limit 2**62)")
        self._radices = np.array([len(p) for p in params], dtype=np.int64)
        self._strides = strides_of([len(p) for p in params])
        self._columns = [np.asarray(p.values) for p in params]
        self._objects = [np.array(p.values, dtype=object) for p in params]
        self._lookup = [{v: i for i, v in enumerate(p.values)} for p in params]
        self._encoding = [_encoding(p) for p in params]
        self._fingerprint: str | None = None

    def _constraint(self, c: str | Constraint) -> Constraint:
        if isinstance(c, str):
            return parse_constraint(c, self.names, self.constants)
        if not isinstance(c, Constraint):
            raise SpaceError(f"constraint {excerpt(c)} is neither a string nor a Constraint")
        unknown = sorted(c.names - set(self.names))
        if unknown:
            raise ConstraintError(
                f"constraint {excerpt(c.expression)}: unknown name {excerpt(unknown[0])}"
            )
        for const, value in c.constants:
            if const in self.names or self.constants.setdefault(const, value) != value:
                raise SpaceError(
                    f"constraint {excerpt(c.expression)}: "
                    f"constant {const!r} conflicts with the space"
                )
        return c

    def _set_ranks(self, ranks: np.ndarray) -> None:
        ranks = np.ascontiguousarray(ranks, dtype=np.int64)
        ranks.setflags(write=False)
        self._ranks = ranks

    # --- size and lookup

    def __len__(self) -> int:
        return len(self._ranks)

    @property
    def ranks(self) -> np.ndarray:
        """The sorted cartesian ranks of the valid configs (read-only)."""
        return self._ranks

    def config(self, index: int) -> Config:
        """The config at dense ``index`` (0..len-1)."""
        i = operator.index(index)
        if not 0 <= i < len(self):
            raise IndexError(f"config index {i} out of range for a space of {len(self)} configs")
        return self._decode(self._ranks[i : i + 1])[0]

    def configs(self, indices: Sequence[int] | np.ndarray) -> list[Config]:
        """The configs at dense ``indices``, in that order."""
        return self._decode(self._ranks[self._checked(indices)])

    def index(self, config: Mapping[str, Value]) -> int | None:
        """Dense index of ``config``; ``None`` if a value is not allowed or a constraint fails."""
        positions = self._positions_of(config)
        if positions is None:
            return None
        found = int(self._find(np.array([positions], dtype=np.int64) @ self._strides)[0])
        return None if found < 0 else found

    def indices(self, configs: Sequence[Mapping[str, Value]]) -> np.ndarray:
        """Dense indices of ``configs``, -1 where a config is not in the space."""
        rows = [self._positions_of(c) for c in configs]
        valid = np.array([r is not None for r in rows], dtype=bool)
        matrix = np.array([r for r in rows if r is not None], dtype=np.int64).reshape(
            -1, len(self.names)
        )
        out = np.full(len(rows), -1, dtype=np.int64)
        out[valid] = self._find(matrix @ self._strides)
        return out

    def indices_of_positions(self, positions: np.ndarray) -> np.ndarray:
        """Dense indices of configs given as (n, n_params) value positions; -1 where a row is
        out of its parameters' ranges or not a valid config. Vectorised, for moves in the space."""
        pos = np.asarray(positions, dtype=np.int64).reshape(-1, len(self.names))
        inside = ((pos >= 0) & (pos < self._radices)).all(axis=1)
        out = np.full(len(pos), -1, dtype=np.int64)
        out[inside] = self._find(pos[inside] @ self._strides)
        return out

    def __contains__(self, config: object) -> bool:
        """``index(config) is not None``; False for anything that is not a mapping."""
        return isinstance(config, Mapping) and self.index(config) is not None

    def positions(self, indices: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """(n, n_params) value positions of the configs at ``indices`` (all when ``None``)."""
        ranks = self._ranks if indices is None else self._ranks[self._checked(indices)]
        out = np.empty((len(ranks), len(self.names)), dtype=np.int64)
        for j in range(len(self.names)):
            out[:, j] = self._digit(ranks, j)
        return out

    def encode(self, indices: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """(n, n_params) float64 features: numeric values as is, bools 0/1, strings by position."""
        ranks = self._ranks if indices is None else self._ranks[self._checked(indices)]
        out = np.empty((len(ranks), len(self.names)), dtype=np.float64)
        for j, table in enumerate(self._encoding):
            out[:, j] = table[self._digit(ranks, j)]
        return out

    def key(self, config: Mapping[str, Value]) -> str:
        """Kernel Tuner's cache key: the values joined by commas, in parameter order."""
        return ",".join(str(config[n]) for n in self.names)

    # --- sampling and neighbourhoods

    def sample(
        self, n: int, rng: np.random.Generator, exclude: Collection[int] | np.ndarray = ()
    ) -> np.ndarray:
        """``n`` distinct dense indices drawn uniformly among valid configs not in ``exclude``
        (fewer if fewer remain), in random order."""
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator")
        if n < 0:
            raise ValueError(f"cannot sample {n} configs")
        if isinstance(exclude, np.ndarray):
            excluded = exclude.astype(np.int64, copy=False).ravel()
        else:
            excluded = np.fromiter(exclude, dtype=np.int64, count=len(exclude))  # a Collection
        excluded = _sorted_unique(excluded[(excluded >= 0) & (excluded < len(self))])
        available = len(self) - len(excluded)
        k = min(n, available)
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        picks = rng.choice(available, size=k, replace=False).astype(np.int64)
        # The j-th config not excluded sits at j + #{excluded e : e - (its rank among them) <= j}.
        return picks + np.searchsorted(excluded - np.arange(len(excluded)), picks, side="right")

    def neighbours(
        self, index: int, method: Literal["adjacent", "hamming"] = "adjacent"
    ) -> np.ndarray:
        """Sorted dense indices of valid configs differing from ``index`` in one parameter:
        by one step in its value list (``adjacent``) or to any other value (``hamming``)."""
        if method not in ("adjacent", "hamming"):
            raise ValueError(f"unknown neighbour method {method!r} (adjacent, hamming)")
        i = operator.index(index)
        if not 0 <= i < len(self):
            raise IndexError(f"config index {i} out of range for a space of {len(self)} configs")
        rank = self._ranks[i]
        here = (rank // self._strides) % self._radices
        moves = []
        for p, radix, stride in zip(here, self._radices, self._strides):
            if method == "adjacent":
                to = np.array([q for q in (p - 1, p + 1) if 0 <= q < radix], dtype=np.int64)
            else:
                to = np.delete(np.arange(radix, dtype=np.int64), p)
            moves.append(rank + (to - p) * stride)
        found = self._find(np.concatenate(moves))
        return np.sort(found[found >= 0])

    # --- identity and serialisation

    def fingerprint(self) -> str:
        """Stable sha256 of the parameters, constraints and constants (and, for explicit
        spaces, the members); the name does not count."""
        if self._fingerprint is None:
            data = self.to_dict()
            del data["name"]
            if self.explicit:
                data["members"] = hashlib.sha256(self._ranks.astype("<i8").tobytes()).hexdigest()
            text = json.dumps(data, sort_keys=True, separators=(",", ":"))
            self._fingerprint = hashlib.sha256(text.encode()).hexdigest()
        return self._fingerprint

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "parameters": [p.to_dict() for p in self.parameters],
            "constraints": [c.expression for c in self.constraints],
            "constants": dict(self.constants),
            "explicit": self.explicit,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Rebuild a constrained space; explicit spaces cannot be (their members are not stored)."""
        try:
            if data.get("explicit"):
                raise SpaceError(
                    f"space {data.get('name', '')!r} is explicit: its members are not stored"
                )
            parameters = [Parameter.from_dict(p) for p in data["parameters"]]
            return cls(
                parameters,
                list(data.get("constraints", ())),
                constants=data.get("constants") or {},
                name=str(data.get("name", "")),
            )
        except (KeyError, TypeError, AttributeError, ParameterError) as e:
            raise SpaceError(f"not a search space dict: {type(e).__name__}: {e}") from None

    def __repr__(self) -> str:
        kind = "explicit" if self.explicit else f"{len(self.constraints)} constraints"
        return (
            f"SearchSpace(name={self.name!r}, parameters={list(self.names)}, {kind}, "
            f"{len(self)} of {self.cartesian_size} configs)"
        )

    # --- internals

    def _positions_of(self, config: Mapping[str, Value], strict: bool = False) -> list[int] | None:
        """Value positions of ``config``; ``None`` (or, if ``strict``, SpaceError) when a value
        is not in its parameter's list. Bools only match bool parameters."""
        if not isinstance(config, Mapping):
            raise SpaceError(f"config {config!r} is not a mapping")
        if len(config) != len(self.names) or any(n not in config for n in self.names):
            missing = [n for n in self.names if n not in config]
            unknown = [k for k in config if k not in self.names]
            raise SpaceError(
                f"config keys do not match the parameters: missing {missing}, unknown {unknown}"
            )
        positions = []
        for lookup, p in zip(self._lookup, self.parameters):
            value = config[p.name]
            pos = None
            if isinstance(value, (bool, np.bool_)) == (p.kind == "bool"):
                try:
                    pos = lookup.get(value)
                except TypeError:  # unhashable
                    pass
            if pos is None:
                if strict:
                    raise SpaceError(
                        f"value {excerpt(value)} is not among the values of parameter {p.name!r}"
                    )
                return None
            positions.append(pos)
        return positions

    def _find(self, ranks: np.ndarray) -> np.ndarray:
        """Dense indices of ``ranks``, -1 where not valid."""
        at = np.searchsorted(self._ranks, ranks)
        hit = at < len(self._ranks)
        hit[hit] = self._ranks[at[hit]] == ranks[hit]
        return np.where(hit, at, -1)

    def _checked(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        idx = np.asarray(indices)
        if idx.size == 0:
            return np.empty(0, dtype=np.int64)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got {idx.dtype}")
        idx = idx.astype(np.int64, copy=False).ravel()
        if idx.min() < 0 or idx.max() >= len(self):
            raise IndexError(f"config index out of range for a space of {len(self)} configs")
        return idx

    def _digit(self, ranks: np.ndarray, j: int) -> np.ndarray:
        """Value positions of parameter ``j`` in ``ranks`` (scalar divisors are fast in numpy)."""
        return (ranks // int(self._strides[j])) % int(self._radices[j])

    def _decode(self, ranks: np.ndarray) -> list[Config]:
        columns = [self._objects[j][self._digit(ranks, j)].tolist() for j in range(len(self.names))]
        return [dict(zip(self.names, row)) for row in zip(*columns)]


def _encoding(param: Parameter) -> np.ndarray:
    if param.kind in ("int", "float"):
        return np.asarray(param.values, dtype=np.float64)
    if param.kind == "bool":
        return np.asarray([float(v) for v in param.values])
    return np.arange(len(param), dtype=np.float64)


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique hashes first, which is slower on large int arrays)."""
    out = np.sort(values)
    if out.size > 1:
        out = out[np.concatenate(([True], out[1:] != out[:-1]))]
    return out
