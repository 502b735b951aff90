"""Answers a build can trust: valid at the asked shape, within a distance, and fresh.

The reproduced defects of issue 25 are tests here: an fp16 matmul config with
``vector_width = 8`` answered for shapes its requirement forbids; pnpoly 20000 answered with
the config tuned for 20000000; a best measured under an older driver served after re-measuring.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ktune
from ktune.cli.app import main
from ktune.db import TrialIn, TuningLog
from ktune.search_space.operators import get
from ktune.search_space.operators.fingerprint import kernel_hash

pytestmark = pytest.mark.both_databases

A100 = "NVIDIA A100-PCIE-40GB"
DRIVER_OLD = {"cuda_driver": "12020", "cuda_runtime": "12020"}
DRIVER_NEW = {"cuda_driver": "12040", "cuda_runtime": "12020"}


def _mma(vector_width: int) -> dict[str, int]:
    return {
        "tile_size_y": 128,
        "tile_size_x": 128,
        "tile_size_k": 32,
        "warp_tile_y": 64,
        "warp_tile_x": 64,
        "stages": 3,
        "vector_width": vector_width,
        "group_m": 8,
    }


def _add(
    tlog: TuningLog,
    operator: str,
    shape: tuple[int, ...],
    dtype: str,
    configs: list[tuple[dict[str, Any], float]],
    toolchain: dict[str, Any] | None = None,
) -> None:
    if operator == "matmul":
        wl = get("matmul").workload(shape, dtype)
        key, layout = wl.key, wl.layout
    else:
        key, layout = f"{operator}/{'x'.join(map(str, shape))}/{dtype or '-'}", ""
    w = tlog.get_or_create_workload(key, operator, shape, dtype, layout)
    d = tlog.get_or_create_device(A100)
    rows = [
        TrialIn(c, json.dumps(c, sort_keys=True), "ok", time_ms=t, toolchain=toolchain or {})
        for c, t in configs
    ]
    tlog.add_trials(None, w.id, d.id, "import", rows)


def test_an_invalid_fallback_is_never_answered(db_url: str) -> None:
    """fp16 matmul, vector_width 8 tuned at 4096^3: at sizes that K or N % 8 forbid, the
    nearest shape whose config is valid there answers instead."""
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "matmul", (4096, 4096, 4096), "float16", [(_mma(8), 1.0)])
        _add(tlog, "matmul", (2048, 2048, 2048), "float16", [(_mma(1), 2.0)])
        for shape in ((4096, 4100, 4100), (4096, 4096, 4098), (1000, 1000, 1001)):
            misses: list[str] = []
            answer = ktune.lookup(
                "matmul", shape, dtype="float16", device=A100, db=tlog, misses=misses
            )
            assert answer is not None and answer.tier == "nearest_shape", shape
            assert answer.config["vector_width"] == 1 and answer.validity == "checked"
            assert answer.workload == "matmul/2048x2048x2048/float16"
            if shape[0] == 4096:  # the vector width 8 config was nearer, and passed over
                assert any("vector_width" in n for n in answer.notes)
        # at 4096^3 + 8 the vector width 8 config is valid and nearest
        near = ktune.lookup("matmul", (4096, 4104, 4096), dtype="float16", device=A100, db=tlog)
        assert near is not None and near.config["vector_width"] == 8


def test_no_answer_beyond_the_distance_limit(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """pnpoly 20000 is not answered with the config tuned for 20000000 (a recorded space:
    validity cannot be checked, and the answer says so)."""
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "pnpoly", (20000000,), "", [({"block_size_x": 256}, 3.0)])
        misses: list[str] = []
        assert ktune.lookup("pnpoly", (20000,), device=A100, db=tlog, misses=misses) is None
        assert any("within distance 4" in m for m in misses)
        near = ktune.lookup("pnpoly", (10000000,), device=A100, db=tlog)
        assert near is not None and near.tier == "nearest_shape"
        assert near.validity == "unchecked"
        far = ktune.lookup("pnpoly", (20000,), device=A100, db=tlog, max_distance=float("inf"))
        assert far is not None and far.distance > 9
        monkeypatch.setenv("KTUNE_MAX_DISTANCE", "20")
        assert ktune.lookup("pnpoly", (20000,), device=A100, db=tlog) is not None


def test_a_stale_best_is_not_served(db_url: str) -> None:
    """a 1.0 ms, b 1.2 ms under one driver; under a newer one a 2.0 ms, b 1.1 ms: b answers."""
    a, b = {"block": 1}, {"block": 2}
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "kw", (64,), "", [(a, 1.0), (b, 1.2)], DRIVER_OLD)
        before = ktune.lookup("kw", (64,), device=A100, db=tlog)
        assert before is not None and before.config == a and not before.stale
        _add(tlog, "kw", (64,), "", [(a, 2.0), (b, 1.1)], DRIVER_NEW)
        after = ktune.lookup("kw", (64,), device=A100, db=tlog)
        assert after is not None and after.config == b and after.time_ms == 1.1
        assert not after.stale


def test_an_answer_only_older_trials_give_is_stale(db_url: str) -> None:
    """Another workload re-measured under a newer driver makes this one's best stale: refused
    by default (with the reason), given with allow_stale and marked."""
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "kw", (64,), "", [({"block": 1}, 1.0)], DRIVER_OLD)
        _add(tlog, "kw", (128,), "", [({"block": 2}, 1.0)], DRIVER_NEW)
        misses: list[str] = []
        fresh = ktune.lookup("kw", (64,), device=A100, db=tlog, misses=misses)
        # the fresh nearest shape answers rather than the stale exact one
        assert fresh is not None and fresh.tier == "nearest_shape" and not fresh.stale
        assert any("cuda_driver 12020 -> 12040" in m for m in misses)
        _add(tlog, "kw", (4096,), "", [({"block": 4}, 1.0)], DRIVER_OLD)
        _add(tlog, "kw", (8,), "", [({"block": 8}, 1.0)], DRIVER_NEW)
        assert ktune.lookup("kw", (4096,), device=A100, db=tlog, max_distance=1) is None
        stale = ktune.lookup("kw", (4096,), device=A100, db=tlog, allow_stale=True)
        assert stale is not None and stale.stale and stale.tier == "exact"
        assert "cuda_driver 12020 -> 12040" in stale.stale_reason
        assert stale.to_dict()["stale"] is True


def test_a_changed_kernel_template_makes_a_best_stale(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        current = kernel_hash("matmul")
        _add(tlog, "matmul", (4096, 4096, 4096), "float16", [(_mma(8), 1.0)], {"kernel": "old"})
        assert (
            ktune.lookup("matmul", (4096, 4096, 4096), dtype="float16", device=A100, db=tlog)
            is None
        )
        _add(tlog, "matmul", (2048, 4096, 4096), "float16", [(_mma(4), 1.0)], {"kernel": current})
        answer = ktune.lookup("matmul", (4096, 4096, 4096), dtype="float16", device=A100, db=tlog)
        assert answer is not None and answer.config["vector_width"] == 4 and not answer.stale


def test_cli_and_rest_refuse_invalid_and_stale_answers(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "matmul", (4096, 4096, 4096), "float16", [(_mma(8), 1.0)])
    args = ["best", "--operator", "matmul", "--dtype", "float16", "-d", A100, "--db", db_url]
    assert main([*args, "--shape", "4096x4100x4100", "-f", "json"]) == 1
    err = capsys.readouterr().err
    assert "K % vector_width == 0" in err and "within distance" in err
    assert main([*args, "--shape", "4096x4096x4096", "-f", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["validity"] == "measured" and answer["stale"] is False
    assert main([*args, "--shape", "4096x4096x4096", "--max-distance", "-1"]) == 2
    capsys.readouterr()


def test_the_header_dispatch_serves_only_valid_configs(db_url: str, tmp_path: Path) -> None:
    """The header's _select skips a config whose requirement fails at the called shape, and
    returns NULL beyond the distance limit; compiled and run."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "matmul", (4096, 4096, 4096), "float16", [(_mma(8), 1.0)])
        _add(tlog, "matmul", (2048, 2048, 2048), "float16", [(_mma(1), 2.0)])
    header = tmp_path / "k.h"
    args = ["best", "--operator", "matmul", "--dtype", "float16", "-d", A100, "--db", db_url]
    assert main([*args, "-f", "header", "-o", str(header)]) == 0
    program = tmp_path / "main.c"
    program.write_text(
        '#include <stdio.h>\n#include "k.h"\n'
        "int main(void) {\n"
        "  long long shapes[4][3] = {{4096,4096,4096},{4096,4100,4100},{1000,1000,1001},{4,4,4}};\n"
        "  for (int i = 0; i < 4; ++i) {\n"
        "    const ktune_matmul_float16_config *c = ktune_matmul_float16_select(shapes[i]);\n"
        '    printf("%d\\n", c ? c->vector_width : -1);\n'
        "  }\n  return 0;\n}\n"
    )
    exe = tmp_path / "main"
    subprocess.run([cc, "-std=c99", "-o", str(exe), str(program), "-lm"], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["8", "1", "1", "-1"]


def test_a_lookup_of_a_stale_free_exact_answer_loads_no_numpy(db_url: str) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("the import check needs one backend")
    with TuningLog.open(db_url) as tlog:
        _add(tlog, "matmul", (4096, 4096, 4096), "float16", [(_mma(8), 1.0)], DRIVER_OLD)
    code = (
        "import sys, ktune\n"
        f"a = ktune.lookup('matmul', (4096, 4096, 4096), dtype='float16', device={A100!r},"
        f" db={db_url!r})\n"
        "assert a is not None and a.validity == 'measured'\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'sqlalchemy'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
