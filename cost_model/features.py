"""Features of (config, workload, device): one fixed-length float64 row per config.

Columns, in order (:attr:`FeatureExtractor.names` lists them):

- ``knob:*`` - every parameter's numeric encoding (numbers as is, bools 0/1, strings by
  position), and ``log2:*`` for every parameter whose values are all positive numbers.
- ``align2:*`` - the alignment of a positive integer knob whose values are not all powers of
  two: log2 of the largest power of two dividing the value (48 -> 4, 64 -> 6, capped at 10).
  Memory transactions, warps and the problem's own sizes are powers of two, so 64 and 48 can
  differ more than 64 and 128; a tree on ``knob`` or ``log2`` needs a split per value to see it.
- ``pow2:*`` (with ``pow2=True``) - for the same knobs, 1 where the value is a power of two:
  ``align2`` gives 192 and 64 the same alignment, and on some GPUs only the powers of two run
  well (every other block width of the AMD convolution recordings is over 10x slower).
- generic derived quantities that mean the same in any GPU kernel space, computed when the
  knobs they need exist: ``threads_per_block`` (product of ``block_size_x/y/z``),
  ``work_per_thread`` (product of ``tile_size`` / ``tile_size_x/y/z``), ``elements_per_block``,
  ``lane_fill_32`` (the share of the lanes of a block's 32-thread groups that have work: 48
  threads take 2 groups, 0.75), and the number of blocks in the grid. Grid blocks follow
  Kernel Tuner's convention:
  ``prod_d ceil(problem_size[d] / prod(grid_div_d))`` with ``grid_div_x`` defaulting to
  ``block_size_x`` (likewise y, z); an operator can pass its own divisors. Because many
  spaces also divide by the tile (each thread computes ``tile_size_d`` outputs), a second
  ``grid_blocks_tiled`` divides by ``block_size_d * tile_size_d``.
- the workload's shape: ``log2`` of its first three dimensions and of their product.
- device-dependent quantities (only with ``device_features=True``): an occupancy estimate
  against the device's limits (warps per block, lane utilisation of the last warp, resident
  blocks and threads per SM, limited by the thread, shared-memory and register budgets when an
  operator states a config's use of them), the number of waves the grid takes over all SMs and
  how full the last wave is, and the device embedding (:mod:`ktune.cost_model.embedding`).
- ``op:*`` - features an operator derives for a config (see :class:`DerivedFeatures`).

Everything is computed on whole columns at once (a space of 10^4 configs takes milliseconds),
deterministic, and finite: a quantity that cannot be computed is 0, never NaN.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ktune.cost_model.devices import DeviceSpec
from ktune.cost_model.embedding import EMBEDDING_NAMES, embed
from ktune.search_space.parameters import Parameter, Value
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = [
    "OCCUPANCY_INPUTS",
    "DerivedFeatures",
    "FeatureError",
    "FeatureExtractor",
    "parameter_signature",
]

_DIMS = ("x", "y", "z")
_SHAPE_DIMS = 3
#: threads that issue together on NVIDIA GPUs (a warp) and on AMD's RDNA (wave32); the
#: device's own warp size is in the device columns, this one is there with no device known
LANE_GROUP = 32.0
#: alignments above 2^10 are all "aligned" for memory and for the problem's tiling
MAX_ALIGNMENT = 10.0
#: knobs paired in ``ldiff`` / ``lsum`` columns at most (the ones with the most values)
MAX_PAIR_KNOBS = 8
#: operator feature names the occupancy estimate reads when an operator provides them
OCCUPANCY_INPUTS = ("shared_memory_bytes", "registers_per_thread")


class FeatureError(ValueError):
    """Features cannot be computed as asked (a config outside the parameters, a bad hook)."""


@runtime_checkable
class DerivedFeatures(Protocol):
    """What an operator implements to add its own features (e.g. FLOPs per byte of a tile,
    bytes of shared memory a config allocates). Every config must give the same keys; values
    are numbers. The keys in :data:`OCCUPANCY_INPUTS` also refine the occupancy estimate."""

    def derived_features(
        self, config: Mapping[str, Value], workload: Workload
    ) -> Mapping[str, float]: ...


class FeatureExtractor:
    """Turns configs of one parameter set, a workload and a device into feature rows.

    ``parameters`` fixes the columns, so every space with these parameters (any device, any
    problem shape) gets rows of the same length and meaning.
    """

    def __init__(
        self,
        parameters: Sequence[Parameter],
        *,
        device_features: bool = True,
        embedding: bool = True,
        grid_divisors: Mapping[str, Sequence[str]] | None = None,
        operator: DerivedFeatures | None = None,
        operator_features: Sequence[str] | None = None,
        knob_pairs: bool = False,
        pow2: bool = False,
    ) -> None:
        self.parameters = tuple(parameters)
        if not self.parameters:
            raise FeatureError("a feature extractor needs at least one parameter")
        self.param_names = tuple(p.name for p in self.parameters)
        self.device_features = device_features
        self.embedding = embedding and device_features
        self.operator = operator
        self._col = {n: i for i, n in enumerate(self.param_names)}
        self._tables = [_encoding_table(p) for p in self.parameters]
        self._logged = [
            i
            for i, p in enumerate(self.parameters)
            if p.kind in ("int", "float") and min(float(v) for v in p.values) > 0
        ]
        self._aligned = [i for i in self._logged if _alignment_varies(self.parameters[i])]
        self.pow2 = pow2
        self.knob_pairs = knob_pairs
        self._pairs = _knob_pairs(self.parameters, self._logged) if knob_pairs else []
        # each pair's two columns of the log2 block (``_logged`` order), fixed per extractor
        at = {i: k for k, i in enumerate(self._logged)}
        self._pair_a = np.array([at[a] for a, _ in self._pairs], dtype=np.intp)
        self._pair_b = np.array([at[b] for _, b in self._pairs], dtype=np.intp)
        self._block = {d: self._col.get(f"block_size_{d}") for d in _DIMS}
        tiles = {d: self._col.get(f"tile_size_{d}") for d in _DIMS}
        if tiles["x"] is None and "tile_size" in self._col:
            tiles["x"] = self._col["tile_size"]
        self._tile = tiles
        self.grid_divisors = self._divisors(grid_divisors)
        self.operator_features = tuple(operator_features or ())
        self.names = self._schema()

    # --- public API

    @property
    def n_features(self) -> int:
        return len(self.names)

    def for_space(
        self,
        space: SearchSpace,
        indices: Sequence[int] | np.ndarray | None,
        workload: Workload,
        device: DeviceSpec | None,
    ) -> np.ndarray:
        """Rows for the configs at dense ``indices`` of ``space`` (all when ``None``)."""
        if tuple(space.names) != self.param_names:
            raise FeatureError(
                f"space parameters {list(space.names)} differ from the extractor's "
                f"{list(self.param_names)}"
            )
        raw = space.encode(indices)
        configs = (
            space.configs(np.arange(len(space)) if indices is None else indices)
            if self.operator
            else None
        )
        return self._assemble(raw, workload, device, configs)

    def for_configs(
        self, configs: Sequence[Mapping[str, Any]], workload: Workload, device: DeviceSpec | None
    ) -> np.ndarray:
        """Rows for config dicts (e.g. from the tuning log); a value outside its parameter's
        list is a :class:`FeatureError`."""
        raw = np.empty((len(configs), len(self.parameters)), dtype=np.float64)
        for j, (name, table) in enumerate(zip(self.param_names, self._tables)):
            try:
                raw[:, j] = [table[c[name]] for c in configs]
            except KeyError as exc:
                raise FeatureError(
                    f"a config has no known value for parameter {name!r}: {exc}"
                ) from None
            except TypeError:
                raise FeatureError(
                    f"a config has an unhashable value for parameter {name!r}"
                ) from None
        return self._assemble(raw, workload, device, configs if self.operator else None)

    def encodable(self, config: Mapping[str, Any]) -> bool:
        """Whether ``config`` has a known value for every parameter."""
        try:
            return all(config[n] in t for n, t in zip(self.param_names, self._tables))
        except (KeyError, TypeError):
            return False

    def to_dict(self) -> dict[str, Any]:
        """Settings that rebuild an equal extractor (the operator object itself is not saved)."""
        return {
            "parameters": [p.to_dict() for p in self.parameters],
            "device_features": self.device_features,
            "embedding": self.embedding,
            "grid_divisors": {d: list(v) for d, v in self.grid_divisors.items()},
            "operator_features": list(self.operator_features),
            "knob_pairs": self.knob_pairs,
            "pow2": self.pow2,
            "names": list(self.names),
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], operator: DerivedFeatures | None = None
    ) -> FeatureExtractor:
        extractor = cls(
            [Parameter.from_dict(p) for p in data["parameters"]],
            device_features=bool(data["device_features"]),
            embedding=bool(data.get("embedding", True)),
            grid_divisors=data.get("grid_divisors"),
            operator=operator,
            operator_features=data.get("operator_features") or (),
            knob_pairs=bool(data.get("knob_pairs", False)),
            pow2=bool(data.get("pow2", False)),
        )
        if list(extractor.names) != list(data.get("names", extractor.names)):
            raise FeatureError("saved feature names differ from what this version computes")
        return extractor

    # --- construction

    def _divisors(self, given: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for d in _DIMS:
            if given is not None and d in given:
                names = tuple(given[d])
            else:  # Kernel Tuner's default: grid_div_d = ["block_size_d"]
                names = (f"block_size_{d}",) if self._block[d] is not None else ()
            unknown = [n for n in names if n not in self._col]
            if unknown:
                raise FeatureError(f"grid divisor(s) {unknown} for {d} are not parameters")
            out[d] = names
        return out

    def _has_block(self) -> bool:
        return any(i is not None for i in self._block.values())

    def _has_tile(self) -> bool:
        return any(i is not None for i in self._tile.values())

    def _schema(self) -> tuple[str, ...]:
        names = [f"knob:{n}" for n in self.param_names]
        names += [f"log2:{self.param_names[i]}" for i in self._logged]
        names += [f"align2:{self.param_names[i]}" for i in self._aligned]
        if self.pow2:
            names += [f"pow2:{self.param_names[i]}" for i in self._aligned]
        for a, b in self._pairs:
            names += [
                f"ldiff:{self.param_names[a]}/{self.param_names[b]}",
                f"lsum:{self.param_names[a]}*{self.param_names[b]}",
            ]
        if self._has_block():
            names += ["log2_threads_per_block", "lane_fill_32"]
        if self._has_tile():
            names += ["log2_work_per_thread"]
        if self._has_block() and self._has_tile():
            names += ["log2_elements_per_block"]
        names += ["log2_grid_blocks"]
        if self._has_tile():
            names += ["log2_grid_blocks_tiled"]
        names += [f"log2_shape_{i}" for i in range(_SHAPE_DIMS)] + ["log2_problem_elements"]
        if self.device_features:
            names += [
                "warps_per_block",
                "lane_utilisation",
                "log2_blocks_per_sm",
                "occupancy",
                "log2_waves",
                "last_wave_fill",
            ]
            if self._has_tile():
                names += ["log2_waves_tiled", "last_wave_fill_tiled"]
            if self.embedding:
                names += [f"device:{n}" for n in EMBEDDING_NAMES]
        names += [f"op:{n}" for n in self.operator_features]
        return tuple(names)

    # --- computation

    def _column(self, raw: np.ndarray, col: int | None) -> np.ndarray:
        return np.ones(len(raw)) if col is None else raw[:, col]

    def _product(self, raw: np.ndarray, names: Sequence[str]) -> np.ndarray:
        out = np.ones(len(raw))
        for n in names:
            out = out * raw[:, self._col[n]]
        return out

    def _grid(
        self, raw: np.ndarray, shape: tuple[int, ...], divisor: Mapping[str, np.ndarray]
    ) -> np.ndarray:
        blocks = np.ones(len(raw))
        for k, d in enumerate(_DIMS):
            size = shape[k] if k < len(shape) else 1
            div = np.maximum(divisor[d], 1.0)
            blocks = blocks * np.ceil(size / div)
        return blocks

    def _assemble(
        self,
        raw: np.ndarray,
        workload: Workload,
        device: DeviceSpec | None,
        configs: Sequence[Mapping[str, Any]] | None,
    ) -> np.ndarray:
        n = len(raw)
        cols: list[np.ndarray] = [raw]
        logs = np.log2(raw[:, self._logged])
        if self._logged:
            cols.append(logs)
        if self._aligned:
            cols.append(_alignment(raw[:, self._aligned]))
            if self.pow2:
                cols.append(_is_power_of_two(raw[:, self._aligned]))
        if self._pairs:
            la, lb = logs[:, self._pair_a], logs[:, self._pair_b]
            cols.append(np.stack([la - lb, la + lb], axis=2).reshape(n, -1))  # ldiff, lsum
        threads = (
            self._column(raw, self._block["x"])
            * self._column(raw, self._block["y"])
            * self._column(raw, self._block["z"])
        )
        work = (
            self._column(raw, self._tile["x"])
            * self._column(raw, self._tile["y"])
            * self._column(raw, self._tile["z"])
        )
        extra: list[np.ndarray] = []
        if self._has_block():
            extra += [_log2(threads), _lane_share(threads, LANE_GROUP)]
        if self._has_tile():
            extra.append(_log2(work))
        if self._has_block() and self._has_tile():
            extra.append(_log2(threads * work))
        shape = tuple(workload.shape)
        grid = self._grid(raw, shape, {d: self._product(raw, self.grid_divisors[d]) for d in _DIMS})
        extra.append(_log2(grid))
        grid_tiled = None
        if self._has_tile():
            tiled = {
                d: self._column(raw, self._block[d]) * self._column(raw, self._tile[d])
                for d in _DIMS
            }
            grid_tiled = self._grid(raw, shape, tiled)
            extra.append(_log2(grid_tiled))
        dims = [math.log2(shape[i]) if i < len(shape) else 0.0 for i in range(_SHAPE_DIMS)]
        dims.append(math.log2(math.prod(shape)))
        extra.extend(np.full(n, v) for v in dims)
        op = self._operator_columns(configs, workload, n)
        if self.device_features:
            extra.extend(self._device_columns(threads, grid, grid_tiled, op, device))
        cols.append(np.column_stack(extra) if extra else np.empty((n, 0)))
        if op.shape[1]:
            cols.append(op)
        out = np.hstack(cols)
        if out.shape[1] != len(self.names):
            raise FeatureError(f"computed {out.shape[1]} features, schema has {len(self.names)}")
        finite: np.ndarray = np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0)
        return finite

    def _device_columns(
        self,
        threads: np.ndarray,
        grid: np.ndarray,
        grid_tiled: np.ndarray | None,
        op: np.ndarray,
        device: DeviceSpec | None,
    ) -> list[np.ndarray]:
        n = len(threads)
        n_cols = 6 + (2 if grid_tiled is not None else 0)
        if device is None:
            cols = [np.zeros(n) for _ in range(n_cols)]
        else:
            warp = float(device.warp_size)
            warps = np.ceil(threads / warp)
            lanes = _lane_share(threads, warp)
            fits = threads <= device.max_threads_per_block
            by_threads = np.floor(device.max_threads_per_sm / (warps * warp))
            blocks = np.where(fits, np.minimum(by_threads, device.max_blocks_per_sm), 0.0)
            blocks = self._resource_limit(blocks, op, warps * warp, device)
            occupancy = blocks * warps * warp / device.max_threads_per_sm
            cols = [warps, lanes, _log2(blocks), occupancy]
            for g in (grid, grid_tiled):
                if g is None:
                    continue
                slots = device.sm_count * np.maximum(blocks, 1.0)
                waves = g / slots
                cols += [_log2(waves), waves / np.ceil(waves)]
        if not self.embedding:
            return cols
        return cols + [np.full(n, v) for v in embed(device)]

    def _resource_limit(
        self, blocks: np.ndarray, op: np.ndarray, threads: np.ndarray, device: DeviceSpec
    ) -> np.ndarray:
        """Resident blocks also limited by shared memory and registers, when the operator
        states a config's use of them."""
        names = self.operator_features
        if "shared_memory_bytes" in names:
            smem = op[:, names.index("shared_memory_bytes")]
            per_sm = device.shared_memory_per_sm_kib * 1024
            limit = np.where(smem > 0, np.floor(per_sm / np.maximum(smem, 1.0)), np.inf)
            limit = np.where(smem > device.shared_memory_per_block_optin_kib * 1024, 0.0, limit)
            blocks = np.minimum(blocks, limit)
        if "registers_per_thread" in names:
            regs = op[:, names.index("registers_per_thread")] * threads
            limit = np.where(
                regs > 0, np.floor(device.registers_per_sm / np.maximum(regs, 1.0)), np.inf
            )
            limit = np.where(regs > device.registers_per_block, 0.0, limit)
            blocks = np.minimum(blocks, limit)
        return blocks

    def _operator_columns(
        self, configs: Sequence[Mapping[str, Any]] | None, workload: Workload, n: int
    ) -> np.ndarray:
        if self.operator is None:
            if self.operator_features:
                raise FeatureError(
                    f"this extractor expects operator features {list(self.operator_features)} "
                    "but has no operator"
                )
            return np.empty((n, 0))
        assert configs is not None
        rows = [self.operator.derived_features(c, workload) for c in configs]
        if not self.operator_features and rows:
            # the first config fixes the operator's feature names (sorted: a stable order)
            self.operator_features = tuple(sorted(rows[0]))
            self.names = self._schema()
        out = np.zeros((n, len(self.operator_features)))
        for i, row in enumerate(rows):
            if set(row) != set(self.operator_features):
                raise FeatureError(
                    f"operator features of config {i} are {sorted(row)}, "
                    f"expected {list(self.operator_features)}"
                )
            try:
                out[i] = [float(row[k]) for k in self.operator_features]
            except (TypeError, ValueError):
                raise FeatureError(
                    f"operator feature of config {i} is not a number: {dict(row)}"
                ) from None
        return out


def _knob_pairs(parameters: Sequence[Parameter], logged: Sequence[int]) -> list[tuple[int, int]]:
    """The pairs of ``ldiff`` / ``lsum`` columns: positive numeric knobs (``logged``) with more
    than one value, at most ``MAX_PAIR_KNOBS`` of them (the most values first, then the
    earliest), in parameter order."""
    varying = [i for i in logged if len(parameters[i].values) > 1]
    chosen = sorted(sorted(varying, key=lambda i: -len(parameters[i].values))[:MAX_PAIR_KNOBS])
    return [(a, b) for k, a in enumerate(chosen) for b in chosen[k + 1 :]]


def _encoding_table(p: Parameter) -> dict[Value, float]:
    """Value -> the same number ``SearchSpace.encode`` gives it."""
    if p.kind in ("int", "float"):
        return {v: float(v) for v in p.values}
    if p.kind == "bool":
        return {v: float(v) for v in p.values}
    return {v: float(i) for i, v in enumerate(p.values)}


def _lane_share(threads: np.ndarray, width: float) -> np.ndarray:
    """The share of the lanes of a block's ``width``-thread groups (warps) that have work."""
    groups = np.maximum(np.ceil(threads / width), 1.0)
    share: np.ndarray = threads / (groups * width)
    return share


def _alignment_varies(p: Parameter) -> bool:
    """Whether ``p``'s values are integers, not all powers of two (else alignment is log2)."""
    if not all(float(v) == int(float(v)) for v in p.values):
        return False
    ints = [int(float(v)) for v in p.values]
    return len(set(ints)) > 1 and any(v & (v - 1) for v in ints)


def _alignment(x: np.ndarray) -> np.ndarray:
    """log2 of the largest power of two dividing each (positive integer) entry, at most
    ``MAX_ALIGNMENT``."""
    ints = np.rint(x).astype(np.int64)
    lowest = ints & -ints  # the lowest set bit: the largest power of two dividing the value
    out: np.ndarray = np.minimum(np.log2(np.maximum(lowest, 1).astype(np.float64)), MAX_ALIGNMENT)
    return out


def _is_power_of_two(x: np.ndarray) -> np.ndarray:
    """1.0 where a (positive integer) entry is a power of two, else 0.0."""
    ints = np.rint(x).astype(np.int64)
    out: np.ndarray = ((ints > 0) & (ints & (ints - 1) == 0)).astype(np.float64)
    return out


def _log2(x: np.ndarray) -> np.ndarray:
    """log2 of positive entries, 0 elsewhere (never -inf or NaN)."""
    out = np.zeros_like(x, dtype=np.float64)
    positive = x > 0
    out[positive] = np.log2(x[positive])
    return out


def parameter_signature(
    parameters: Sequence[Parameter] | Sequence[Mapping[str, Any]],
) -> tuple[Any, ...]:
    """Names and value lists, in order: the identity of a space's feature columns."""
    out = []
    for p in parameters:
        if isinstance(p, Parameter):
            out.append((p.name, tuple(p.values)))
        else:
            out.append((str(p["name"]), tuple(p["values"])))
    return tuple(out)
