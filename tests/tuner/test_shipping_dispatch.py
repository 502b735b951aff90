"""The build's C dispatch, compiled with the system compiler."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ktune.search_space.operators.entry import EntryAbi, Pointer
from ktune.tuner.shipping.dispatch import Entry, VariantFn, dispatch_source, prototype
from ktune.tuner.shipping.package import header_text

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc)")

ABI = EntryAbi(
    ("M", "N", "K"),
    (Pointer("A", dims=("M", "K")), Pointer("B", dims=("K", "N")), Pointer("C", True, ("M", "N"))),
)
ALIGNED = ("K % vector_width == 0 and N % vector_width == 0",)


def _run_c(tmp_path: Path, files: dict[str, str], args: list[str]) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    sources = [str(tmp_path / n) for n in files if n.endswith(".c")]
    exe = tmp_path / "prog"
    subprocess.run(
        ["cc", "-std=c11", "-O1", f"-I{tmp_path}", *sources, "-o", str(exe), "-lm"], check=True
    )
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout


def test_a_call_runs_the_nearest_tuned_config_that_is_valid_at_its_shape(tmp_path: Path) -> None:
    """The invalid fallback of the issue: vector_width 8 tuned at 4096^3 must not serve
    4096x4100x4100 (K % 8 != 0); the nearest valid tuned config does, else the default."""
    variants = (
        VariantFn("v_w8", {"vector_width": 8}, ALIGNED),
        VariantFn("v_w4", {"vector_width": 4}, ALIGNED),
        VariantFn("v_w1", {"vector_width": 1}, ALIGNED),
    )
    entry = Entry(
        "kt_mm",
        ABI,
        "float",
        False,
        variants,
        (((4096, 4096, 4096), 0), ((1000, 1000, 1000), 1)),
        2,
    )
    stubs = "".join(
        f"{prototype(entry, v.symbol)} {{ (void)M; (void)N; (void)K; (void)A; (void)B; "
        f"C[0] = {i}; return 0; }}\n"
        for i, v in enumerate(variants)
    )
    main = r"""
#include <stdio.h>
#include <stdlib.h>
#include "k.h"
int main(int argc, char **argv) {
    float a = 0, b = 0;
    for (int i = 1; i + 2 < argc; i += 3) {
        float c = -1;
        int code = kt_mm(atoll(argv[i]), atoll(argv[i + 1]), atoll(argv[i + 2]), &a, &b, &c);
        printf("%d %g\n", code, c);
    }
    return 0;
}
"""
    shapes = [
        (4096, 4096, 4096),  # tuned: its own winner
        (4096, 4100, 4100),  # w8 invalid, w4 valid
        (4096, 4096, 4098),  # w8 and w4 invalid: the default
        (1000, 1000, 1001),  # w4 invalid, w8 invalid: the default
        (1000, 1000, 1000),
        (2000, 2048, 2048),  # both valid: the nearer (4096 in log terms is nearer than 1000)
        (0, 8, 8),  # invalid size
    ]
    printed = _run_c(
        tmp_path,
        {
            "k.h": header_text([entry]),
            "dispatch.c": dispatch_source([entry], "k.h"),
            "stubs.c": '#include "k.h"\n' + stubs,
            "main.c": main,
        },
        [str(v) for s in shapes for v in s],
    ).split("\n")
    assert printed[:7] == ["0 0", "0 1", "0 2", "0 2", "0 1", "0 0", "-1 -1"]
