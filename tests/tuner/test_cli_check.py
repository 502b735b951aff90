"""``ktune check --backend emulate``: configs of a GPU operator checked on this CPU; a wrong
answer exits 1, bad input one line and exit 2."""

from __future__ import annotations

import json
import shutil

import pytest

from ktune.cli.app import main

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the emulation needs g++")


def test_random_configs_pass_and_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--op", "softmax", "--shape", "5x40", "--random", "2", "--seed", "4"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert printed.count("│ ok") == 2 and "softmax/5x40/float32" in printed


def test_a_config_that_cannot_give_the_answer_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = {
        "block_size_x": 32,
        "block_size_y": 16,
        "tile_size_x": 1,
        "tile_size_y": 1,
        "tile_size_k": 8,
        "vector_width": 1,
        "double_buffer": 0,
        "split_k": 1,
    }
    code = main(["check", "--op", "matmul", "--shape", "33x17x40", "--config", json.dumps(config)])
    printed = capsys.readouterr().out
    assert code == 0, printed  # a valid config passes
    config["vector_width"] = 2  # K and N are not multiples of 2 here
    code = main(["check", "--op", "matmul", "--shape", "33x17x40", "--config", json.dumps(config)])
    assert code == 1
    assert "invalid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--op", "matmul", "--shape", "8x8x8", "--config", "{"], "not JSON"),
        (["--op", "matmul", "--shape", "8x8x8", "--config", '{"a": 1}'], "wrong knobs"),
        (["--op", "matmul", "--shape", "8x8", "--backend", "emulate"], "matmul"),
        (["--op", "softmax", "--shape", "8x8", "--backend", "cupy"], "--backend cupy"),
        (["--op", "softmax", "--shape", "8x8", "--random", "-1"], "--random"),
    ],
)
def test_bad_input_is_one_line(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
