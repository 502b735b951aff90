"""Features and the device embedding: fixed length, deterministic, finite, explainable."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pytest

from ktune.cost_model.devices import default_catalog
from ktune.cost_model.embedding import EMBEDDING_NAMES, embed, explain
from ktune.cost_model.features import MAX_PAIR_KNOBS, FeatureError, FeatureExtractor
from ktune.search_space import Parameter, SearchSpace, Value, Workload
from ktune.search_space.formats import RecordedSpace


@pytest.mark.parametrize("fixture", ["convolution", "pnpoly"])
@pytest.mark.parametrize("device", ["NVIDIA RTX A4000", "AMD Radeon PRO W6600", "Unknown GPU 9000"])
def test_features_on_bundled_recordings_are_deterministic_fixed_length_and_finite(
    fixture: str, device: str, request: pytest.FixtureRequest
) -> None:
    rec: RecordedSpace = request.getfixturevalue(fixture)
    spec = default_catalog().get(device)
    ext = FeatureExtractor(rec.parameters)
    a = ext.for_space(rec.space, None, rec.workload(), spec)
    b = FeatureExtractor(rec.parameters).for_space(rec.space, None, rec.workload(), spec)
    assert a.shape == (len(rec.space), len(ext.names)) and len(set(ext.names)) == len(ext.names)
    assert np.array_equal(a, b)
    assert np.isfinite(a).all()
    idx = np.arange(0, len(rec.space), 7)
    from_dicts = ext.for_configs(rec.space.configs(idx), rec.workload(), spec)
    assert np.array_equal(from_dicts, a[idx])
    unknown = a[:, ext.names.index("device:unknown")]
    assert (unknown == (1.0 if spec is None else 0.0)).all()


def test_pooled_features_have_no_device_columns(convolution: RecordedSpace) -> None:
    ext = FeatureExtractor(convolution.parameters, device_features=False)
    assert not any(n.startswith("device:") or n == "occupancy" for n in ext.names)
    spec = default_catalog().get("NVIDIA RTX A4000")
    a = ext.for_space(convolution.space, [0, 1], convolution.workload(), spec)
    b = ext.for_space(convolution.space, [0, 1], convolution.workload(), None)
    assert np.array_equal(a, b)


def _row(
    ext: FeatureExtractor,
    space: SearchSpace,
    config: Mapping[str, Value],
    wl: Workload,
    device: str,
) -> dict[str, float]:
    idx = space.index(config)
    assert idx is not None
    values = ext.for_space(space, [idx], wl, default_catalog().get(device))[0]
    return dict(zip(ext.names, values))


def test_derived_quantities_follow_kernel_tuner_conventions() -> None:
    space = SearchSpace(
        [
            Parameter.of("block_size_x", [32, 48, 64]),
            Parameter.of("block_size_y", [2, 4]),
            Parameter.of("tile_size_x", [1, 2]),
            Parameter.of("tile_size_y", [1, 3]),
        ]
    )
    wl = Workload("conv", (1000, 600))
    ext = FeatureExtractor(space.parameters)
    r = _row(
        ext,
        space,
        {"block_size_x": 48, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 3},
        wl,
        "NVIDIA A100-PCIE-40GB",
    )
    assert r["log2_threads_per_block"] == pytest.approx(np.log2(192))
    assert r["log2_work_per_thread"] == pytest.approx(np.log2(6))
    # default grid divisors: block_size_x, block_size_y
    assert r["log2_grid_blocks"] == pytest.approx(np.log2(np.ceil(1000 / 48) * np.ceil(600 / 4)))
    assert r["log2_grid_blocks_tiled"] == pytest.approx(
        np.log2(np.ceil(1000 / 96) * np.ceil(600 / 12))
    )
    assert r["warps_per_block"] == 6 and r["lane_utilisation"] == 1.0
    # A100: 2048 threads per SM -> 10 blocks of 192 threads (6 warps), occupancy 1920/2048
    assert r["log2_blocks_per_sm"] == pytest.approx(np.log2(10))
    assert r["occupancy"] == pytest.approx(1920 / 2048)
    # on a wave64 GPU the same block is 3 wavefronts
    amd = _row(
        ext,
        space,
        {"block_size_x": 48, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 3},
        wl,
        "AMD Instinct MI250X",
    )
    assert amd["warps_per_block"] == 3
    # the operator's own divisors
    own = FeatureExtractor(
        space.parameters,
        grid_divisors={"x": ["block_size_x", "tile_size_x"], "y": ["block_size_y"]},
    )
    r2 = _row(
        own,
        space,
        {"block_size_x": 48, "block_size_y": 4, "tile_size_x": 2, "tile_size_y": 3},
        wl,
        "NVIDIA A100-PCIE-40GB",
    )
    assert r2["log2_grid_blocks"] == pytest.approx(np.log2(np.ceil(1000 / 96) * np.ceil(600 / 4)))
    with pytest.raises(FeatureError, match="not parameters"):
        FeatureExtractor(space.parameters, grid_divisors={"x": ["nope"]})


def test_alignment_and_lane_fill_columns() -> None:
    """A knob's power-of-two alignment is a column only where its values are integers and not
    all powers of two (else it repeats ``log2``); lane fill counts partly idle 32-lane groups."""
    space = SearchSpace(
        [
            Parameter.of("block_size_x", [16, 48, 64]),
            Parameter.of("block_size_y", [1, 2]),
            Parameter.of("tile_size_y", [1, 3]),
            Parameter.of("ratio", [0.5, 1.5]),
        ]
    )
    wl = Workload("k", (4096, 4096))
    ext = FeatureExtractor(space.parameters, device_features=False)
    aligned = [n for n in ext.names if n.startswith("align2:")]
    assert aligned == ["align2:block_size_x", "align2:tile_size_y"]

    def row(bx: int, by: int, ty: int) -> dict[str, float]:
        cfg = {"block_size_x": bx, "block_size_y": by, "tile_size_y": ty, "ratio": 0.5}
        return _row(ext, space, cfg, wl, "NVIDIA RTX A4000")

    assert row(48, 1, 3)["align2:block_size_x"] == 4  # 48 = 16 * 3
    assert row(64, 1, 3)["align2:block_size_x"] == 6
    assert row(64, 1, 3)["align2:tile_size_y"] == 0
    assert row(48, 1, 1)["lane_fill_32"] == pytest.approx(48 / 64)  # two groups, 16 idle lanes
    assert row(16, 1, 1)["lane_fill_32"] == pytest.approx(0.5)
    assert row(48, 2, 1)["lane_fill_32"] == 1.0  # 96 threads: three full groups


def test_power_of_two_columns_tell_192_from_64() -> None:
    """``align2`` gives 192 and 64 the same alignment (6); with ``pow2`` each aligned knob also
    says whether its value is a power of two, from config dicts and the space alike, and the
    setting survives a save (an old save has none)."""
    space = SearchSpace(
        [Parameter.of("block_size_x", [16, 48, 64, 192]), Parameter.of("tile_size_x", [1, 2])]
    )
    wl = Workload("k", (4096, 4096))
    plain = FeatureExtractor(space.parameters, device_features=False)
    ext = FeatureExtractor(space.parameters, device_features=False, pow2=True)
    assert not any(n.startswith("pow2:") for n in plain.names)
    assert [n for n in ext.names if n.startswith("pow2:")] == ["pow2:block_size_x"]

    def row(bx: int) -> dict[str, float]:
        return _row(ext, space, {"block_size_x": bx, "tile_size_x": 1}, wl, "NVIDIA RTX A4000")

    assert row(192)["align2:block_size_x"] == row(64)["align2:block_size_x"] == 6
    assert (row(16)["pow2:block_size_x"], row(48)["pow2:block_size_x"]) == (1.0, 0.0)
    assert (row(64)["pow2:block_size_x"], row(192)["pow2:block_size_x"]) == (1.0, 0.0)
    assert FeatureExtractor.from_dict(ext.to_dict()).names == ext.names
    old = plain.to_dict()
    del old["pow2"]
    assert FeatureExtractor.from_dict(old).names == plain.names


def test_knob_pair_columns_give_ratios_and_products_of_unnamed_knobs() -> None:
    """CLBlast-style knobs get no named derived columns; with ``knob_pairs`` every pair of
    varying positive numeric knobs gets log2 of its ratio and product, from config dicts and
    from the space alike, and the setting survives a save (an old save has none)."""
    space = SearchSpace(
        [
            Parameter.of("MWG", [16, 32, 64]),
            Parameter.of("MDIMC", [8, 16]),
            Parameter.of("KWG", [32]),  # one value: no pair
            Parameter.of("SA", [0, 1]),  # not positive: no pair
            Parameter.of("VWM", [1, 2, 4]),
        ]
    )
    wl = Workload("k", (1024,))
    plain = FeatureExtractor(space.parameters, device_features=False)
    ext = FeatureExtractor(space.parameters, device_features=False, knob_pairs=True)
    assert not any(n.startswith(("ldiff:", "lsum:")) for n in plain.names)
    pairs = [n for n in ext.names if n.startswith(("ldiff:", "lsum:"))]
    assert pairs == [
        "ldiff:MWG/MDIMC", "lsum:MWG*MDIMC",
        "ldiff:MWG/VWM", "lsum:MWG*VWM",
        "ldiff:MDIMC/VWM", "lsum:MDIMC*VWM",
    ]  # fmt: skip
    cfg: dict[str, Value] = {"MWG": 64, "MDIMC": 8, "KWG": 32, "SA": 1, "VWM": 2}
    row = dict(zip(ext.names, ext.for_configs([cfg], wl, None)[0]))
    assert row["ldiff:MWG/MDIMC"] == pytest.approx(3.0)  # 64 / 8 = 8 per thread
    assert row["lsum:MWG*MDIMC"] == pytest.approx(9.0)
    assert row["ldiff:MDIMC/VWM"] == pytest.approx(2.0)
    assert _row(ext, space, cfg, wl, "Unknown GPU 9000") == row
    again = FeatureExtractor.from_dict(ext.to_dict())
    assert again.names == ext.names
    old = plain.to_dict()
    del old["knob_pairs"]
    assert FeatureExtractor.from_dict(old).names == plain.names


def test_knob_pairs_are_capped_to_the_knobs_with_most_values() -> None:
    """Many knobs would give quadratically many columns: only ``MAX_PAIR_KNOBS`` pair up."""
    params = [Parameter.of(f"k{i}", [1, 2] + ([4] if i % 2 else [])) for i in range(12)]
    ext = FeatureExtractor(params, device_features=False, knob_pairs=True)
    pairs = [n for n in ext.names if n.startswith("ldiff:")]
    assert len(pairs) == MAX_PAIR_KNOBS * (MAX_PAIR_KNOBS - 1) // 2
    paired = {k for n in pairs for k in n.removeprefix("ldiff:").split("/")}
    odd = {f"k{i}" for i in range(12) if i % 2}  # the six knobs with three values
    assert odd <= paired and len(paired) == MAX_PAIR_KNOBS


class SmemOperator:
    """An operator that states the shared memory each config allocates."""

    def derived_features(
        self, config: Mapping[str, object], workload: Workload
    ) -> Mapping[str, float]:
        bx, by = int(config["block_size_x"]), int(config["block_size_y"])  # type: ignore[call-overload]
        return {"shared_memory_bytes": bx * by * 4 * 40.0, "flops_per_byte": 0.25 * bx}


def test_operator_features_are_added_and_limit_occupancy() -> None:
    space = SearchSpace(
        [Parameter.of("block_size_x", [32, 64]), Parameter.of("block_size_y", [1, 4])]
    )
    wl = Workload("op", (4096,))
    plain = FeatureExtractor(space.parameters)
    ext = FeatureExtractor(space.parameters, operator=SmemOperator())
    rows = ext.for_space(space, None, wl, default_catalog().get("NVIDIA RTX A4000"))
    assert ext.names[-2:] == ("op:flops_per_byte", "op:shared_memory_bytes")
    assert rows.shape[1] == len(plain.names) + 2
    col = ext.names.index("occupancy")
    base = plain.for_space(space, None, wl, default_catalog().get("NVIDIA RTX A4000"))
    # 64x4 threads with 40 KiB of shared memory: 2 blocks fit in 100 KiB, not 6 by threads
    assert rows[-1, col] < base[-1, plain.names.index("occupancy")]
    assert rows[-1, col] == pytest.approx(2 * 256 / 1536)


def test_operator_features_must_be_consistent() -> None:
    class Flaky:
        def derived_features(
            self, config: Mapping[str, object], workload: Workload
        ) -> Mapping[str, float]:
            return {"a": 1.0} if config["block_size_x"] == 32 else {"b": 1.0}

    space = SearchSpace([Parameter.of("block_size_x", [32, 64])])
    with pytest.raises(FeatureError, match="expected"):
        FeatureExtractor(space.parameters, operator=Flaky()).for_space(
            space, None, Workload("op", (64,)), None
        )


def test_configs_outside_the_parameters_are_an_error(convolution: RecordedSpace) -> None:
    ext = FeatureExtractor(convolution.parameters)
    bad = {**convolution.space.config(0), "block_size_x": 17}
    assert not ext.encodable(bad)
    with pytest.raises(FeatureError, match="block_size_x"):
        ext.for_configs([bad], convolution.workload(), None)


def test_embedding_is_fixed_length_explainable_and_spec_less_for_unknown_devices() -> None:
    assert embed(None).tolist() == [0.0] * (len(EMBEDDING_NAMES) - 1) + [1.0]
    a4000 = default_catalog().get("NVIDIA RTX A4000")
    assert a4000 is not None
    e = embed(a4000)
    assert e.shape == (len(EMBEDDING_NAMES),) and np.isfinite(e).all() and e[-1] == 0.0
    assert np.abs(e).max() < 3
    # doubling the bandwidth moves exactly the coordinates explain() says it drives
    faster = dataclasses.replace(a4000, memory_bandwidth_gbs=2 * a4000.memory_bandwidth_gbs)
    moved = {EMBEDDING_NAMES[i] for i in np.flatnonzero(embed(faster) != e)}
    rows = explain(a4000)
    driven = {r["coordinate"] for r in rows if "memory_bandwidth_gbs" in r["fields"]}  # type: ignore[operator]
    assert moved == driven == {"log_memory_bandwidth", "log_flop_per_byte"}
    assert [r["coordinate"] for r in rows] == list(EMBEDDING_NAMES)
    assert all("value" in r for r in rows)
