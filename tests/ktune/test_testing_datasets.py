"""The benchmarks' recordings: ``$KTUNE_DATASETS`` when set, else the bundled ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from ktune.testing.recordings import DATASETS_ENV, RECORDED, datasets


def test_without_the_variable_the_bundled_recordings_are_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DATASETS_ENV, raising=False)
    found = datasets("*/*.json.gz", "*.json.gz")
    assert found and all(p.parent == RECORDED for p in found)
    assert {p.name for p in datasets("*/space_t1.json", "*_t1.json")} == {
        "convolution_t1.json",
        "dedispersion_t1.json",
    }


def test_the_variable_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conv").mkdir()
    (tmp_path / "conv" / "B.json.gz").write_bytes(b"")
    (tmp_path / "conv" / "A.json.gz").write_bytes(b"")
    monkeypatch.setenv(DATASETS_ENV, str(tmp_path))
    assert [p.name for p in datasets("*/*.json.gz", "*.json.gz")] == ["A.json.gz", "B.json.gz"]
    monkeypatch.setenv(DATASETS_ENV, str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="no such folder"):
        datasets("*/*.json.gz", "*.json.gz")
