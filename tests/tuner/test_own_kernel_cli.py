"""``ktune tune --spec T1.json`` alone: the C example (a T1 file as Kernel Tuner writes it, with
``Language: C``) tuned for real on this CPU, then read back; a broken spec is one line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ktune.cli.app import main

pytestmark = pytest.mark.skipif(
    shutil.which("cc") is None, reason="no C compiler (cc) on this machine"
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_kernel"


def small_example(tmp_path: Path) -> Path:
    """The example's spec at 64x64, beside a copy of its kernel file."""
    spec = json.loads((EXAMPLE / "stencil.json").read_text())
    spec["KernelSpecification"]["ProblemSize"] = [64, 64]
    shutil.copy(EXAMPLE / "stencil.c", tmp_path / "stencil.c")
    path = tmp_path / "stencil.json"
    path.write_text(json.dumps(spec))
    return path


def test_the_c_example_tunes_from_its_spec_and_reads_back(capsys, tmp_path, db_url) -> None:
    spec = small_example(tmp_path)
    code = main(["tune", "--spec", str(spec), "--budget", "3", "--seed", "1", "-q", "--db", db_url])
    out = capsys.readouterr().out
    assert code == 0 and "3 ok" in out.replace("(", "").replace(")", "")
    assert main(["jobs", "--db", db_url]) == 0
    jobs = capsys.readouterr().out
    assert "stencil/64x64/-" in jobs and "done" in jobs
    code = main(["best", "--db", db_url, "-w", "stencil/64x64/-", "--format", "json"])
    assert code == 0 and "tile_x" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"KernelFile": "missing.c"}, "cannot be read"),
        ({"Language": "OpenCL"}, "C and CUDA"),
    ],
)
def test_a_broken_spec_is_one_line_and_exit_2(capsys, tmp_path, db_url, change, words) -> None:
    spec_path = small_example(tmp_path)
    spec = json.loads(spec_path.read_text())
    spec["KernelSpecification"].update(change)
    spec_path.write_text(json.dumps(spec))
    code = main(["tune", "--spec", str(spec_path), "--budget", "1", "-q", "--db", db_url])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
