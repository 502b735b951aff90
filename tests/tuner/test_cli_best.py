"""``ktune best`` as a build system uses it: every way of asking gets the lookup's answer, the
header compiles whatever the parameters are called, and a failed lookup never leaves a file
half-written or a stale answer behind."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ktune
from ktune.cli.app import main
from ktune.db import DatabaseError, TrialIn, TuningLog
from ktune.search_space.workload import MAX_DIM, Workload, WorkloadError

A4000 = "NVIDIA RTX A4000"
A6000 = "NVIDIA RTX A6000"  # in the catalog, nothing tuned on it: the A4000 is its most similar
#: parameter names that are C/C++ keywords, predefined macros or the header's own macro names
ODD = ["int", "class", "unix", "errno", "h", "tier", "n_tuned", "block_size_x"]
SHAPES = [(1024, 1024), (4096, 4096)]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def odd(db_url: str) -> str:
    """Tuned shapes of an operator ``kw`` on an A4000 whose parameters have awkward names."""
    with TuningLog.open(db_url) as tlog:
        d = tlog.get_or_create_device(A4000)
        for i, shape in enumerate(SHAPES):
            wl = Workload("kw", shape)
            w = tlog.get_or_create_workload(wl.key, wl.operator, wl.shape, wl.dtype)
            config = {name: 10 * i + j for j, name in enumerate(ODD)}
            tlog.add_trials(
                None,
                w.id,
                d.id,
                "import",
                [
                    TrialIn(
                        config=config, config_key=json.dumps(config), status="ok", time_ms=1.0 + i
                    )
                ],
            )
    return db_url


@pytest.mark.both_databases
def test_a_workload_key_and_a_device_get_the_lookups_answer(
    capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    code, out, _ = run(
        capsys, "best", "-w", "kw/2048x1024/-", "-d", A4000, "-f", "json", "--db", odd
    )
    answer = ktune.lookup(workload="kw/2048x1024/-", device=A4000, db=odd)
    assert code == 0 and answer is not None and answer.tier == "nearest_shape"
    assert json.loads(out) == answer.to_dict()
    code, _, err = run(
        capsys, "best", "-w", "kw/2048x1024/-", "-d", A4000, "-f", "json", "--exact", "--db", odd
    )
    assert code == 1 and "no tuned config" in err
    code, _, err = run(capsys, "best", "-w", "garbage", "-d", A4000, "-f", "json", "--db", odd)
    assert code == 2 and err.startswith("error: --workload:")
    code, _, err = run(
        capsys, "best", "-w", "kw/1024x1024/-", "-d", A4000, "--dtype", "float16", "--db", odd
    )
    assert code == 2 and "give either" in err
    code, _, err = run(capsys, "best", "--exact", "--db", odd)
    assert code == 2 and "apply to a lookup" in err


def test_a_device_name_in_another_case_is_the_same_device(
    capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    answer = ktune.lookup("kw", "1024x1024", device="nvidia  rtx_a4000", db=odd)
    assert answer is not None and answer.tier == "exact" and answer.device == A4000
    code, out, _ = run(
        capsys, "best", "--operator", "kw", "-d", "nvidia rtx a4000", "-f", "header", "--db", odd
    )
    assert code == 0 and f"on {A4000}:" in out


@pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc and g++"
)
def test_the_header_compiles_whatever_the_parameters_are_called(
    capsys: pytest.CaptureFixture[str], odd: str, tmp_path: Path
) -> None:
    code, _, _ = run(
        capsys,
        "best",
        "--operator",
        "kw",
        "--shape",
        "1000x1000",
        "-d",
        A4000,
        "-f",
        "header",
        "-o",
        str(tmp_path / "tuned.h"),
        "--db",
        odd,
    )
    assert code == 0
    fields = ["int_", "class_", "unix_", "errno_", "h", "tier", "n_tuned", "block_size_x"]
    program = (
        '#include <errno.h>\n#include <stdio.h>\n#include "tuned.h"\nint main(void) {\n'
        "    const long long s[2] = {5000, 4000}, bad[2] = {0, 64};\n"
        "    const ktune_kw_config *c = ktune_kw_select(s);\n"
        + "".join(f'    printf("%d\\n", c->{f});\n' for f in fields)
        + '    printf("%d %d %s %d\\n", KTUNE_KW_TIER_, KTUNE_KW_H, KTUNE_KW_TIER, '
        "ktune_kw_select(bad) == 0);\n"
        "    return 0;\n}\n"
    )
    for compiler, source, std in (("gcc", "main.c", "-std=c99"), ("g++", "main.cpp", "-std=c++17")):
        (tmp_path / source).write_text(program)
        exe = tmp_path / f"prog-{compiler}"
        build = subprocess.run(
            [compiler, std, "-Wall", "-Wextra", "-Werror", "-o", str(exe), source, "-lm"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert build.returncode == 0, build.stderr
        lines = subprocess.run(
            [str(exe)], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert lines[:-1] == [str(10 + j) for j in range(len(ODD))]  # 4096x4096 is nearest
        assert (
            lines[-1] == f"{ODD.index('tier')} {ODD.index('h')} nearest_shape 1"
        )  # 1000x1000: 1024x1024


def test_the_header_of_a_device_without_tuned_shapes_comes_from_the_most_similar(
    capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    for shape in ([], ["--shape", "1024x1024"]):
        code, out, _ = run(
            capsys, "best", "--operator", "kw", *shape, "-d", A6000, "-f", "header", "--db", odd
        )
        assert (
            code == 0 and f"Asked for {A6000}, which has none: {A4000} is the most similar" in out
        )
    code, _, err = run(
        capsys, "best", "--operator", "kw", "-d", A6000, "-f", "header", "--exact", "--db", odd
    )
    assert code == 1 and "no tuned shapes of kw" in err


def test_the_header_is_the_same_bytes_from_any_copy_of_the_log(
    capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    _, out, _ = run(capsys, "best", "--operator", "kw", "-d", A4000, "-f", "header", "--db", odd)
    assert odd.split("/")[-1] not in out and "/*" not in out.replace("/* ", "").replace("/*\n", "")


def test_output_is_written_whole_or_not_at_all(
    capsys: pytest.CaptureFixture[str], odd: str, tmp_path: Path
) -> None:
    (tmp_path / "out").mkdir()
    target = tmp_path / "out" / "best.json"
    target.write_text("previous answer\n")
    code, _, _ = run(
        capsys,
        "best",
        "--operator",
        "kw",
        "--shape",
        "64x64",
        "-d",
        A4000,
        "-f",
        "json",
        "--exact",
        "-o",
        str(target),
        "--db",
        odd,
    )
    assert code == 1 and target.read_text() == "previous answer\n"
    assert (
        run(
            capsys,
            "best",
            "--operator",
            "kw",
            "--shape",
            "1024x1024",
            "-d",
            A4000,
            "-f",
            "json",
            "-o",
            str(target),
            "--db",
            odd,
        )[0]
        == 0
    )
    assert json.loads(target.read_text())["tier"] == "exact"
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["best.json"]  # no temporary file left
    code, _, err = run(
        capsys,
        "best",
        "--operator",
        "kw",
        "--shape",
        "1024x1024",
        "-d",
        A4000,
        "-f",
        "json",
        "-o",
        str(target / "x.json"),
        "--db",
        odd,
    )
    assert code == 2 and err.count("\n") == 1 and "is not a directory" in err


def test_env_takes_a_prefix_per_kernel(capsys: pytest.CaptureFixture[str], odd: str) -> None:
    args = [
        "best",
        "--operator",
        "kw",
        "--shape",
        "1024x1024",
        "-d",
        A4000,
        "-f",
        "env",
        "--db",
        odd,
    ]
    code, out, _ = run(capsys, *args, "--prefix", "KW_")
    lines = out.splitlines()
    assert (
        code == 0
        and "KW_TIER=exact" in lines
        and "KW_TIER_=5" in lines
        and "KW_BLOCK_SIZE_X=7" in lines
    )
    assert run(capsys, *args, "--prefix", "1X")[0] == 2
    assert run(capsys, "best", "-f", "json", "--prefix", "X_", "--db", odd)[0] == 2


def test_lookup_shapes_numpy_sizes_and_bounds(odd: str) -> None:
    answer = ktune.lookup("kw", np.array([1024, 1024]), device=A4000, dtype=None, db=odd)
    assert answer is not None and answer.tier == "exact" and answer.query.dtype == ""
    for bad in ([True, 4], [1.5, 2], "9" * 5000, f"{MAX_DIM + 1}x2", [MAX_DIM + 1, 2]):
        with pytest.raises(ktune.LookupInputError) as caught:
            ktune.lookup("kw", bad, device=A4000, db=odd)  # type: ignore[arg-type]
        assert caught.value.field == "shape"


def test_workload_keys_take_plain_digits_only() -> None:
    assert Workload.from_key("kw/1024x8/-").shape == (1024, 8)
    for key in (
        "kw/1_024x8/-",
        "kw/+1024x8/-",
        "kw/ 1024x8/-",
        "kw/١٠x8/-",
        "kw/" + "9" * 5000 + "/-",
    ):
        with pytest.raises(WorkloadError):
            Workload.from_key(key)
    with pytest.raises(WorkloadError):
        Workload("kw", (MAX_DIM + 1,))
    assert Workload("kw", (MAX_DIM,)).shape == (MAX_DIM,)


def test_a_build_time_lookup_creates_and_changes_nothing(
    capsys: pytest.CaptureFixture[str], odd: str, tmp_path: Path
) -> None:
    """A build reads the log: a mistyped path is an error naming it (exit 4), not a new empty
    log and an 'unknown workload'; a real log's file is left byte for byte as it was."""
    missing = tmp_path / "nowhere" / "k.db"
    code, out, err = run(
        capsys, "best", "-w", "kw/1024x1024/-", "-d", A4000, "--db", f"sqlite:///{missing}"
    )
    assert code == 4 and out == "" and "no such tuning log" in err and len(err.splitlines()) == 1
    with pytest.raises(DatabaseError, match="no such tuning log"):
        ktune.lookup(workload="kw/1024x1024/-", device=A4000, db=f"sqlite:///{missing}")
    assert not missing.parent.exists()
    if not odd.startswith("sqlite:///"):
        return
    path = Path(odd.removeprefix("sqlite:///"))
    before = path.read_bytes()  # (a WAL reader may add its -shm index beside it: SQLite's own)
    code, _, _ = run(
        capsys, "best", "-w", "kw/1024x1024/-", "-d", A4000, "-f", "header", "--db", odd
    )
    assert code == 0
    assert ktune.lookup(workload="kw/1024x1024/-", device=A4000, db=odd) is not None
    assert path.read_bytes() == before


def test_output_makes_missing_folders_and_leaves_an_unchanged_answer_untouched(
    capsys: pytest.CaptureFixture[str], odd: str, tmp_path: Path
) -> None:
    header = tmp_path / "gen" / "include" / "kw.h"
    argv = ("best", "--operator", "kw", "-d", A4000, "-f", "header", "-o", str(header), "--db", odd)
    assert run(capsys, *argv)[0] == 0 and header.read_text().startswith("/*")
    stamp = header.stat().st_mtime_ns
    assert (
        run(capsys, *argv)[0] == 0 and header.stat().st_mtime_ns == stamp
    )  # no rebuild for nothing new
    header.write_text("stale")
    assert run(capsys, *argv)[0] == 0 and header.read_text().startswith("/*")


def test_a_recorded_operator_asked_at_another_rank_is_a_bad_question(odd: str) -> None:
    with pytest.raises(ktune.LookupInputError) as caught:
        ktune.lookup("kw", "1024", device=A4000, db=odd)
    assert caught.value.field == "shape" and "kw workloads have 2 dimension(s), got 1" in str(
        caught.value
    )


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_best_finds_what_tune_just_tuned_as_tune_asked_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """ktune's operators build the workload as ``ktune tune --op`` does: no --dtype is the
    operator's float32, a convolution's 7-size shape is its canonical 11-size one."""
    from ktune.tuner.measure.cpu_detect import cpu_spec

    db = f"sqlite:///{tmp_path / 'k.db'}"
    cpu = cpu_spec()["name"]
    for op, shape in (("cpu_matmul", "32x32x32"), ("cpu_conv2d", "1x4x8x8x4x3x3")):
        code, _, err = run(
            capsys, "tune", "--op", op, "--shape", shape, "--budget", "2", "--db", db
        )
        assert code == 0, err
        code, out, err = run(
            capsys, "best", "--operator", op, "--shape", shape, "-d", cpu, "-f", "json", "--db", db
        )
        answer = json.loads(out)
        assert code == 0 and answer["tier"] == "exact", err
        assert answer["query"]["dtype"] == "float32" and answer["workload"].startswith(op)
        python = ktune.lookup(op, shape, device=cpu, db=db)
        assert python is not None and python.to_dict() == answer
    assert answer["query"]["shape"] == [1, 4, 8, 8, 4, 3, 3, 1, 1, 1, 1]
    assert answer["query"]["layout"] == "NCHW"
    # the header of an operator's tuned shapes takes its defaults too
    code, out, _ = run(
        capsys, "best", "--operator", "cpu_matmul", "-d", cpu, "-f", "header", "--db", db
    )
    assert code == 0 and "cpu_matmul (float32)" in out
    code, out, _ = run(
        capsys, "best", "-w", "cpu_matmul/32x32x32/float32", "-d", cpu, "-f", "header", "--db", db
    )
    assert code == 0 and '#define KTUNE_CPU_MATMUL_FLOAT32_TIER "exact"' in out
    # what the operator cannot take is a bad question, not "nothing tuned"
    code, _, err = run(
        capsys,
        "best",
        "--operator",
        "cpu_matmul",
        "--shape",
        "32x32x32",
        "--dtype",
        "float16",
        "-d",
        cpu,
        "--db",
        db,
    )
    assert code == 2 and err.startswith("error: --dtype: cpu_matmul: dtype 'float16'")


def test_a_url_of_any_form_is_read(capsys: pytest.CaptureFixture[str], odd: str) -> None:
    """The reader takes the plain forms; any other (here a SQLite file: URI) is read through
    the full log, with the same answer."""
    if not odd.startswith("sqlite:///"):
        pytest.skip("a SQLite file URI")
    uri = f"sqlite:///file:{odd.removeprefix('sqlite:///')}?mode=ro&uri=true"
    plain = ktune.lookup("kw", "1000x1000", device=A4000, db=odd)
    other = ktune.lookup("kw", "1000x1000", device=A4000, db=uri)
    assert plain is not None and other is not None and plain.to_dict() == other.to_dict()
    code, out, _ = run(
        capsys,
        "best",
        "--operator",
        "kw",
        "--shape",
        "1000x1000",
        "-d",
        A4000,
        "-f",
        "json",
        "--db",
        uri,
    )
    assert code == 0 and json.loads(out) == plain.to_dict()
