"""CPU variants of a build: each config's C source, compiled as its trials were measured.

A variant's source is what the ``cpu`` backend measured (the operator's template with the
config's ``#define``s and run-time sizes), its entry renamed to the variant's symbol. It is
compiled with the flags recorded with the trial that won (``cflags`` in the trial's toolchain;
the backend's defaults for trials recorded before flags were), as an object for both the static
and the shared library: ``-shared`` dropped, ``-c -fPIC`` added.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ktune.tuner.measure.base import error_text
from ktune.tuner.measure.cpu_worker import Compiler, compiler_from_env
from ktune.tuner.shipping.plan import BuildError, EntryPlan, Variant

__all__ = ["CpuObject", "compile_variants", "variant_flags", "variant_source"]

#: seconds one variant's compile may take
COMPILE_TIMEOUT_S = 300.0


def variant_source(plan: EntryPlan, variant: Variant) -> str:
    """The C of ``variant``: the measured kernel, its entry named ``variant.symbol``."""
    source = plan.operator.render(variant.config, plan.workload(variant))
    defines = {**source.defines, "KERNEL_NAME": variant.symbol}
    return type(source)(variant.symbol, source.body, defines).code  # type: ignore[no-any-return]


def variant_flags(variant: Variant, compiler: Compiler) -> tuple[str, ...]:
    """The flags ``variant`` was measured with (else ``compiler``'s), for an object file."""
    recorded = variant.toolchain.get("cflags")
    flags = tuple(shlex.split(recorded)) if recorded else compiler.flags
    return tuple(f for f in flags if f not in ("-shared", "-c")) + ("-fPIC", "-c")


class CpuObject:
    """A compiled variant: its object file and the flags it was built with."""

    def __init__(self, path: Path, flags: tuple[str, ...]) -> None:
        self.path = path
        self.flags = flags


def compile_variants(
    plans: Sequence[EntryPlan], src: Path, obj: Path, compiler: Compiler | None = None
) -> dict[str, CpuObject]:
    """Write every variant's source under ``src`` and compile it into ``obj``; symbol ->
    object. A :class:`BuildError` with the compiler's first words when one does not compile."""
    compiler = compiler or compiler_from_env()
    jobs: list[tuple[str, Path, Path, tuple[str, ...]]] = []
    for plan in plans:
        for variant in plan.variants:
            source = src / f"{variant.symbol}.c"
            source.write_text(variant_source(plan, variant), encoding="utf-8")
            jobs.append(
                (
                    variant.symbol,
                    source,
                    obj / f"{variant.symbol}.o",
                    variant_flags(variant, compiler),
                )
            )

    def run(job: tuple[str, Path, Path, tuple[str, ...]]) -> CpuObject:
        symbol, source, target, flags = job
        compile_c(compiler.command, flags, source, target, what=f"variant {symbol}")
        return CpuObject(target, flags)

    with ThreadPoolExecutor() as pool:
        built = list(pool.map(run, jobs))
    return {job[0]: o for job, o in zip(jobs, built)}


def compile_c(
    command: Sequence[str], flags: Sequence[str], source: Path, target: Path, *, what: str
) -> None:
    """``command flags source -o target``; a :class:`BuildError` when it fails."""
    try:
        done = subprocess.run(
            [*command, *flags, str(source), "-o", str(target)],
            capture_output=True,
            text=True,
            timeout=COMPILE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BuildError(
            f"{what}: the compiler did not finish in {COMPILE_TIMEOUT_S:g} s"
        ) from None
    except OSError as exc:
        raise BuildError(f"{what}: cannot run {command[0]}: {exc.strerror}") from None
    if done.returncode != 0:
        raise BuildError(f"{what} does not compile: {error_text(done.stderr or done.stdout, 2)}")
