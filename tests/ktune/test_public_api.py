"""The public Python API: its surface is pinned, and it answers without reconnecting."""

from __future__ import annotations

import pytest

import ktune
from ktune.db import LookupQuery, TuningLog


def test_public_surface() -> None:
    assert sorted(ktune.__all__) == [
        "Answer",
        "LookupInputError",
        "ModelChoice",
        "Trial",
        "TuneInputError",
        "TuneResult",
        "lookup",
        "register_model_choice",
        "tune",
    ]
    assert issubclass(ktune.LookupInputError, ValueError)
    assert issubclass(ktune.TuneInputError, ValueError)


@pytest.mark.both_databases
def test_lookup_by_url_reuses_one_open_log(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from ktune.tuner.lookup import tiers

    with TuningLog.open(db_url) as tlog:
        tlog.get_or_create_device("A100")
    assert ktune.lookup("mm", "64x64", device="A100", db=db_url) is None
    opened: list[str | None] = []
    monkeypatch.setattr(tiers, "open_read_only", opened.append)
    monkeypatch.setattr(TuningLog, "open", classmethod(lambda cls, url=None: opened.append(url)))
    assert ktune.lookup("mm", [64, 64], device="A100", db=db_url) is None
    assert opened == []


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"operator": "mm", "shape": "64x64", "device": " "}, "device"),
        ({"operator": "mm", "shape": [64, True], "device": "A"}, "shape"),
        ({"operator": "mm", "shape": "64x-1", "device": "A"}, "shape"),
        ({"operator": "mm", "shape": "x".join(["1"] * 17), "device": "A"}, "shape"),
        ({"operator": "mm", "shape": "64", "dtype": "f 32", "device": "A"}, "dtype"),
        ({"shape": "64", "device": "A"}, "operator"),
    ],
)
def test_malformed_questions_name_the_field(db_url: str, kwargs: dict, field: str) -> None:
    with pytest.raises(ktune.LookupInputError) as info:
        ktune.lookup(db=db_url, **kwargs)
    assert info.value.field == field


def test_a_model_choice_must_say_it_is_the_models(db_url: str) -> None:
    with TuningLog.open(db_url) as tlog:
        tlog.get_or_create_device("A100")

    def liar(tlog: TuningLog, query: LookupQuery) -> ktune.Answer:
        return ktune.Answer(
            query, "exact", query.workload_key, query.device, {}, 1.0, None, 0.0, None
        )

    previous = ktune.register_model_choice(liar)
    try:
        with pytest.raises(ValueError, match="tier 'cost_model'"):
            ktune.lookup("mm", "64", device="A100", db=db_url)
    finally:
        ktune.register_model_choice(previous)
