"""A user's own kernel as an operator, in the Kernel Tuner style.

The user gives CUDA source, tunable parameters and restrictions, the problem size, the grid
divisors (``grid_div_x`` defaults to ``["block_size_x"]``: grid x = ceil(problem_size[0] /
product of those parameters)), the kernel arguments and, optionally, reference outputs
(``answer``: one entry per argument, ``None`` where not checked). Config values reach the
source as ``#define``s; block sizes that are not tuned are defined too (x 256, y and z 1).

``CustomOperator.from_t1(path)`` builds one from a T1 spec: parameters and conditions,
``KernelFile``, ``KernelName``, ``ProblemSize``, ``GridDiv*`` and ``Arguments`` (filled at
random or with a constant; ``MemType: Constant`` arguments go to ``__constant__`` memory).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ktune.search_space.formats import FormatError, T1Spec, load_t1
from ktune.search_space.operators.base import (
    Arguments,
    DeviceLimits,
    KernelSource,
    Launch,
    Operator,
    OperatorError,
    Tolerance,
    ceil_div,
)
from ktune.search_space.parameters import Config, Parameter, Value
from ktune.search_space.predicates import Predicate, keep_where
from ktune.search_space.space import SearchSpace
from ktune.search_space.workload import Workload

__all__ = ["CustomOperator", "t1_kernel_source"]

_BLOCK = ("block_size_x", "block_size_y", "block_size_z")
#: the most bytes a kernel's arguments may fill, together (a spec's sizes are allocated)
MAX_ARGUMENT_BYTES = 2 << 30
_BLOCK_DEFAULT = (256, 1, 1)
_C_TYPES = {
    "float": np.float32,
    "float32": np.float32,
    "double": np.float64,
    "float64": np.float64,
    "half": np.float16,
    "float16": np.float16,
    "int": np.int32,
    "int32": np.int32,
    "unsigned int": np.uint32,
    "uint32": np.uint32,
    "int64": np.int64,
    "long": np.int64,
    "char": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


class CustomOperator(Operator):
    """A kernel the user wrote; see the module docstring for the fields."""

    def __init__(
        self,
        name: str,
        source: str,
        kernel_name: str,
        problem_size: int | Sequence[int],
        tune_params: Mapping[str, Sequence[Value]],
        arguments: Sequence[Any],
        *,
        restrictions: Sequence[str] = (),
        answer: Sequence[Any] | None = None,
        outputs: Sequence[int] | None = None,
        grid_div_x: Sequence[str] | None = None,
        grid_div_y: Sequence[str] | None = None,
        grid_div_z: Sequence[str] | None = None,
        compiler_options: Sequence[str] = (),
        constant_memory: Mapping[str, np.ndarray] | None = None,
        shared_mem: int = 0,
        atol: float = 1e-6,
        flops: float = 0.0,
        dtype: str = "",
    ) -> None:
        self.name = name  # type: ignore[misc]  # an instance, not a registered class
        self.source = source
        self.kernel_name = kernel_name
        sizes = (problem_size,) if isinstance(problem_size, int) else tuple(problem_size)
        if (
            not sizes
            or any(not isinstance(d, (int, np.integer)) or d <= 0 for d in sizes)
            or len(sizes) > 3
        ):
            raise OperatorError(
                f"{name}: problem_size {problem_size!r} must be 1 to 3 positive ints"
            )
        self.problem_size = tuple(int(d) for d in sizes)
        if not tune_params:
            raise OperatorError(f"{name}: no tunable parameters")
        self.parameters = [Parameter.of(k, list(v)) for k, v in tune_params.items()]
        self.restrictions = list(restrictions)
        self.values = tuple(arguments)
        if answer is not None and len(answer) != len(self.values):
            raise OperatorError(
                f"{name}: answer has {len(answer)} entries for {len(self.values)} arguments"
            )
        self.answer = list(answer) if answer is not None else None
        if outputs is None:
            outputs = [i for i, a in enumerate(self.answer or ()) if a is not None]
        for i in outputs:
            if not 0 <= i < len(self.values) or not isinstance(self.values[i], np.ndarray):
                raise OperatorError(f"{name}: output {i} is not an array argument")
        self.outputs = tuple(outputs)
        self.grid_div = tuple(
            list(g) if g is not None else [_BLOCK[axis]]
            for axis, g in enumerate((grid_div_x, grid_div_y, grid_div_z))
        )
        self.compiler_options = tuple(compiler_options)
        self.constant_memory = dict(constant_memory or {})
        self.shared_mem = int(shared_mem)
        self.atol = float(atol)
        self._flops = float(flops)
        self.dtype_name = dtype
        self.dtypes = (dtype,)  # type: ignore[misc]
        #: restrictions given as Python callables (``ktune.tune``), and the first error one raised
        self.predicates: tuple[Predicate, ...] = ()
        self.predicate_error: str | None = None
        names = {p.name for p in self.parameters}
        for axis in self.grid_div:
            unknown = [d for d in axis if d not in names and d not in _BLOCK]
            if unknown:
                raise OperatorError(
                    f"{name}: grid divisor {unknown[0]!r} is not a tunable parameter"
                )

    # --- Operator

    def workload(
        self, shape: Sequence[int] | str | None = None, dtype: str = "", layout: str = ""
    ) -> Workload:
        return Workload(self.name, self.problem_size, self.dtype_name)

    def space(self, workload: Workload, limits: DeviceLimits) -> SearchSpace:
        names = [p.name for p in self.parameters]
        tuned = [b for b in _BLOCK if b in names]
        constraints = list(self.restrictions)
        if tuned:
            fixed = math.prod(d for b, d in zip(_BLOCK, _BLOCK_DEFAULT) if b not in names)
            constraints.append(f"{' * '.join(tuned)} * {fixed} <= max_threads")
        space = SearchSpace(
            self.parameters,
            constraints,
            constants={"max_threads": limits.max_threads_per_block},
            name=self.name,
        )
        if self.predicates:
            space, self.predicate_error = keep_where(space, self.predicates)
        return space

    def render(self, config: Config, workload: Workload) -> KernelSource:
        block = self.launch(config, workload).block
        defines: dict[str, Value] = {b: d for b, d in zip(_BLOCK, block) if b not in config}
        defines.update(config)
        return KernelSource(
            self.kernel_name, self.source, defines, self.compiler_options, batchable=False
        )

    def launch(self, config: Config, workload: Workload) -> Launch:
        block = tuple(int(config.get(b, d)) for b, d in zip(_BLOCK, _BLOCK_DEFAULT))
        sizes = self.problem_size + (1,) * (3 - len(self.problem_size))
        grid = []
        for axis, size in enumerate(sizes):
            divisor = math.prod(
                int(config.get(d, block[_BLOCK.index(d)] if d in _BLOCK else 1))
                for d in self.grid_div[axis]
            )
            grid.append(ceil_div(size, max(1, divisor)))
        return Launch((grid[0], grid[1], grid[2]), (block[0], block[1], block[2]), self.shared_mem)

    def arguments(self, workload: Workload, rng: np.random.Generator) -> Arguments:
        values = tuple(v.copy() if isinstance(v, np.ndarray) else v for v in self.values)
        return Arguments(values, self.outputs)

    def reference(self, workload: Workload, args: Arguments, xp: Any = np) -> list[Any]:
        if self.answer is None:
            return [None for _ in self.outputs]
        return [
            None if self.answer[i] is None else xp.asarray(self.answer[i]) for i in self.outputs
        ]

    def tolerance(self, workload: Workload) -> Tolerance:
        return Tolerance(1e-5, self.atol, atol_relative=False)  # numpy.allclose, as Kernel Tuner

    def flops(self, workload: Workload) -> float:
        return self._flops

    def bytes_moved(self, workload: Workload) -> float:
        return float(sum(v.nbytes for v in self.values if isinstance(v, np.ndarray)))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for a measuring worker once the space is built: without the predicates."""
        return {**self.__dict__, "predicates": ()}

    # --- T1 specs

    @classmethod
    def from_t1(
        cls,
        path: str | Path,
        *,
        source: str | None = None,
        seed: int = 0,
        answer: Sequence[Any] | None = None,
    ) -> CustomOperator:
        """The kernel a T1 spec describes (``source`` overrides reading ``KernelFile``)."""
        path = Path(path)
        spec = load_t1(path)
        if source is None:
            source = t1_kernel_source(spec, path)
        return cls.from_spec(spec, source, where=str(path), seed=seed, answer=answer)

    @classmethod
    def from_spec(
        cls,
        spec: T1Spec,
        source: str,
        *,
        where: str = "<T1 spec>",
        seed: int = 0,
        answer: Sequence[Any] | None = None,
        values: Sequence[Any] | None = None,
    ) -> CustomOperator:
        """The kernel of a loaded T1 ``spec`` with its ``source`` text; ``values`` replace the
        arguments the spec would fill (one per entry of ``Arguments``, in order)."""
        path = Path(where)
        kernel = spec.raw.get("KernelSpecification", {})
        where = f"{where}: KernelSpecification"
        values_of = {p.name: list(p.values) for p in spec.space.parameters}
        rng = np.random.default_rng(seed)
        args: list[Any] = []
        outputs: list[int] = []
        cmem: dict[str, np.ndarray] = {}
        entries = kernel.get("Arguments", []) or []
        if values is not None and len(values) != len(entries):
            raise FormatError(
                f"{where}.Arguments has {len(entries)} entries for {len(values)} values"
            )
        total = 0
        for i, entry in enumerate(entries):
            value, is_const = _t1_argument(
                entry, spec.problem_size, values_of, rng, f"{where}.Arguments[{i}]"
            )
            if values is not None:
                value = values[i]
            total += value.nbytes if isinstance(value, np.ndarray) else 0
            if total > MAX_ARGUMENT_BYTES:
                raise FormatError(
                    f"{where}.Arguments: more than {MAX_ARGUMENT_BYTES >> 20} MiB of arguments"
                )
            if is_const:
                cmem[str(entry["Name"])] = value
                continue
            if entry.get("Output") or entry.get("AccessType") in ("WriteOnly", "ReadWrite"):
                outputs.append(len(args))
            args.append(value)
        grid = [kernel.get(f"GridDiv{a}") for a in "XYZ"]
        for a, g in zip("XYZ", grid):
            if g is not None and (
                not isinstance(g, list) or not all(isinstance(d, str) for d in g)
            ):
                raise FormatError(f"{where}.GridDiv{a} is not a list of parameter names")
        try:
            return cls(
                spec.name or path.stem,
                source,
                str(kernel.get("KernelName", "")),
                spec.problem_size or (1,),
                values_of,
                args,
                restrictions=[c.expression for c in spec.space.constraints],
                answer=answer,
                outputs=outputs if answer is None else None,
                grid_div_x=grid[0],
                grid_div_y=grid[1],
                grid_div_z=grid[2],
                compiler_options=spec.compiler_options,
                constant_memory=cmem,
            )
        except OperatorError as e:
            raise FormatError(f"{path}: {e}") from None


def t1_kernel_source(spec: T1Spec, path: Path) -> str:
    """The text of the ``KernelFile`` a T1 spec at ``path`` names (relative to its folder)."""
    kernel = spec.raw.get("KernelSpecification", {})
    where = f"{path}: KernelSpecification"
    kfile = kernel.get("KernelFile")
    if not isinstance(kfile, str):
        raise FormatError(f"{where}.KernelFile is missing (or pass the source)")
    try:
        return (path.parent / kfile).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FormatError(
            f"{where}.KernelFile {kfile!r} cannot be read ({type(e).__name__})"
        ) from None


def _t1_argument(
    entry: Any,
    problem_size: Sequence[int],
    values_of: dict[str, list[Value]],
    rng: np.random.Generator,
    where: str,
) -> tuple[Any, bool]:
    if not isinstance(entry, dict) or not isinstance(entry.get("Name"), str):
        raise FormatError(f"{where} has no Name")
    ctype = str(entry.get("Type", "float"))
    dtype = _C_TYPES.get(ctype)
    if dtype is None:
        raise FormatError(f"{where}: unknown Type {ctype!r} (known: {', '.join(_C_TYPES)})")
    fill = entry.get("FillType", "Constant")
    fill_value = entry.get("FillValue", 0)
    if not isinstance(fill_value, (int, float)):
        raise FormatError(f"{where}: FillValue {fill_value!r} is not a number")
    if entry.get("MemoryType", "Vector") == "Scalar":
        return np.asarray(fill_value, dtype=dtype)[()], False
    size = _size(entry.get("Size", 1), problem_size, values_of, where)
    if size * np.dtype(dtype).itemsize > MAX_ARGUMENT_BYTES:
        raise FormatError(f"{where}: Size {size} is more than {MAX_ARGUMENT_BYTES >> 20} MiB")
    data: np.ndarray
    if fill == "Random":
        if np.issubdtype(dtype, np.integer):
            data = rng.integers(0, max(1, int(fill_value)), size).astype(dtype)
        else:
            data = (rng.random(size) * float(fill_value)).astype(dtype)
    elif fill == "Constant":
        data = np.full(size, fill_value, dtype=dtype)
    else:
        raise FormatError(f"{where}: FillType {fill!r} is not supported (Random, Constant)")
    return data, entry.get("MemType") == "Constant"


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}


def _size(
    text: Any, problem_size: Sequence[int], values_of: dict[str, list[Value]], where: str
) -> int:
    """A T1 ``Size``: arithmetic over numbers, ``ProblemSize[i]`` and ``max``/``min`` of a
    parameter's values; parsed with :mod:`ast`, never evaluated as Python."""
    if isinstance(text, int):
        return text
    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError:
        raise FormatError(f"{where}: Size {text!r} is not an expression") from None

    def value(node: ast.AST) -> Any:
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ProblemSize"
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
            and 0 <= node.slice.value < len(problem_size)
        ):
            return problem_size[node.slice.value]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("max", "min")
            and not node.keywords
        ):
            pick = max if node.func.id == "max" else min
            items: list[Any] = []
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in values_of:
                    items.extend(values_of[arg.id])
                else:
                    items.append(value(arg))
            if items:
                return pick(items)
        raise FormatError(f"{where}: Size {text!r}: {ast.dump(node)[:60]} is not allowed")

    try:
        result = value(tree.body)
    except ZeroDivisionError:
        raise FormatError(f"{where}: Size {text!r} divides by zero") from None
    if not isinstance(result, (int, float)) or result < 0 or result != int(result):
        raise FormatError(f"{where}: Size {text!r} is {result!r}, not a size")
    return int(result)
