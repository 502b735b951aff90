"""SearchSpace: enumeration vs brute force, lookups, sampling, neighbours, serialisation."""

from __future__ import annotations

import json
import pickle
import random
import time
import tracemalloc

import numpy as np
import pytest

from ktune import search_space
from ktune.search_space import (
    Constraint,
    ConstraintError,
    Parameter,
    ParameterError,
    SearchSpace,
    SpaceError,
    parse_constraint,
)
from ktune.search_space.enumeration import binding_order, enumerate_ranks
from ktune.testing.spaces import large_gpu_space

P = Parameter.of


def small_params() -> list[Parameter]:
    return [
        P("block_size_x", [16, 32, 64, 128]),
        P("block_size_y", [1, 2, 4, 8]),
        P("tile", [1, 2, 3]),
        P("layout", ["row", "col"]),
        P("vector", [1.0, 2.0, 4.0]),
        P("prefetch", [False, True]),
    ]


SMALL_CONSTRAINTS = [
    "block_size_x * block_size_y <= 256",
    "layout == 'row' or tile > 1",
    "vector * tile <= 8",
    "not prefetch or block_size_y > 1",
]


def brute_force(params, constraints, oracle, product):
    return [c for c in product(params) if all(oracle(e, c) for e in constraints)]


@pytest.fixture
def space() -> SearchSpace:
    return SearchSpace(small_params(), SMALL_CONSTRAINTS, name="small")


def test_public_names():
    assert sorted(search_space.__all__) == [
        "Config",
        "Constraint",
        "ConstraintError",
        "Kind",
        "Parameter",
        "ParameterError",
        "SearchSpace",
        "SpaceError",
        "Value",
        "Workload",
        "WorkloadError",
        "parse_constraint",
    ]


def test_matches_brute_force_in_product_order(space, oracle, product):
    want = brute_force(space.parameters, SMALL_CONSTRAINTS, oracle, product)
    assert len(space) == len(want) > 0
    assert space.configs(np.arange(len(space))) == want
    assert space.cartesian_size == 4 * 4 * 3 * 2 * 3 * 2
    assert space.names == tuple(p.name for p in small_params())
    assert [c.expression for c in space.constraints] == SMALL_CONSTRAINTS
    assert np.all(np.diff(space.ranks) > 0)


@pytest.mark.parametrize("seed", range(8))
def test_random_spaces_match_brute_force(seed, make_expression, oracle, product):
    rng = random.Random(seed)
    params = [P(n, sorted(rng.sample(range(-3, 9), rng.randint(1, 5)))) for n in "abcd"]
    constraints = [make_expression(rng, "abcd", depth=2) for _ in range(rng.randint(0, 4))]
    want = brute_force(params, constraints, oracle, product)
    for chunk in (1, 7, 1 << 20):  # tiny chunks force the chunked path
        ranks = enumerate_ranks(
            [p.name for p in params],
            [np.asarray(p.values) for p in params],
            [parse_constraint(e, "abcd") for e in constraints],
            chunk_rows=chunk,
        )
        assert len(ranks) == len(want)
    space = SearchSpace(params, constraints)
    assert space.configs(range(len(space))) == want


def test_binding_order_prunes_early_but_result_is_in_declared_order(oracle, product):
    params = [
        P("free", [0, 1, 2]),
        P("x", list(range(10))),
        P("y", list(range(10))),
        P("z", [1, 2]),
    ]
    constraints = ["y * z < x", "y < 3"]
    names = [p.name for p in params]
    order = binding_order(
        names, [len(p) for p in params], [parse_constraint(c, names) for c in constraints]
    )
    assert order[0] == names.index("y") and order[-1] == names.index("free")
    space = SearchSpace(params, constraints)
    assert space.configs(range(len(space))) == brute_force(params, constraints, oracle, product)


def test_config_index_round_trip(space):
    for i in range(len(space)):
        config = space.config(i)
        assert space.index(config) == i
        assert config in space
    assert space.indices([space.config(3), space.config(0)]).tolist() == [3, 0]
    config = space.config(0)
    assert type(config["block_size_x"]) is int and type(config["vector"]) is float
    assert type(config["prefetch"]) is bool and type(config["layout"]) is str


def test_index_of_configs_outside_the_space(space):
    config = space.config(0)
    assert space.index({**config, "block_size_x": 17}) is None
    assert (
        space.index({**config, "block_size_x": 128, "block_size_y": 8}) is None
    )  # violates 128*8 <= 256
    assert space.index({**config, "prefetch": 1}) is None  # bools only match bool parameters
    assert space.index({**config, "block_size_x": True}) is None
    assert space.index({**config, "vector": 1}) == space.index({**config, "vector": 1.0})
    assert space.index({**config, "block_size_x": [16]}) is None  # unhashable
    assert space.index({**config, "block_size_x": np.int64(16)}) == space.index(config)
    assert space.indices([config, {**config, "tile": 9}]).tolist() == [0, -1]
    assert {**config, "tile": 9} not in space
    assert "not a mapping" not in space
    with pytest.raises(SpaceError, match="missing \\['tile'\\]"):
        space.index({k: v for k, v in config.items() if k != "tile"})
    with pytest.raises(SpaceError, match="unknown \\['extra'\\]"):
        space.index({**config, "extra": 1})


def test_out_of_range_indices(space):
    for bad in (-1, len(space)):
        with pytest.raises(IndexError):
            space.config(bad)
        with pytest.raises(IndexError):
            space.configs([0, bad])
        with pytest.raises(IndexError):
            space.neighbours(bad)
    with pytest.raises(TypeError):
        space.config(1.5)  # type: ignore[arg-type]
    assert space.configs([]) == []


def test_positions_and_encode(space):
    positions = space.positions()
    assert positions.shape == (len(space), len(space.names))
    for i in (0, 5, len(space) - 1):
        config = space.config(i)
        assert [p.values[k] for p, k in zip(space.parameters, positions[i])] == list(
            config.values()
        )
    encoded = space.encode([0, len(space) - 1])
    assert encoded.dtype == np.float64 and encoded.shape == (2, 6)
    last = space.config(len(space) - 1)
    assert encoded[1].tolist() == [
        last["block_size_x"],
        last["block_size_y"],
        last["tile"],
        ["row", "col"].index(last["layout"]),
        last["vector"],
        float(last["prefetch"]),
    ]
    assert np.array_equal(space.positions(np.array([2, 1])), positions[[2, 1]])


def test_key_matches_kernel_tuner(space):
    assert space.key(space.config(0)) == "16,1,1,row,1.0,False"


def test_sample_is_distinct_deterministic_and_respects_exclude(space):
    n = len(space)
    a = space.sample(10, np.random.default_rng(7))
    assert len(set(a.tolist())) == 10 and a.min() >= 0 and a.max() < n
    assert np.array_equal(a, space.sample(10, np.random.default_rng(7)))
    assert not np.array_equal(a, space.sample(10, np.random.default_rng(8)))
    exclude = set(range(0, n, 2))
    b = space.sample(n, np.random.default_rng(1), exclude=exclude)
    assert sorted(b.tolist()) == list(range(1, n, 2))
    keep = [3, n - 1, 5]
    c = space.sample(10, np.random.default_rng(2), exclude=np.setdiff1d(np.arange(n), keep))
    assert sorted(c.tolist()) == sorted(keep)
    assert space.sample(5, np.random.default_rng(0), exclude=list(range(n))).size == 0
    assert space.sample(0, np.random.default_rng(0)).size == 0
    assert sorted(
        space.sample(n + 10, np.random.default_rng(0), exclude=[-5, n + 3]).tolist()
    ) == list(range(n))
    with pytest.raises(TypeError):
        space.sample(1, np.random.RandomState(0))  # type: ignore[arg-type]


@pytest.mark.parametrize("excluded", [0, 30])
def test_sample_is_uniform(excluded):
    space = SearchSpace([P("a", list(range(8))), P("b", list(range(8)))], ["a + b < 8"])
    n = len(space)  # 36
    exclude = np.arange(excluded)
    rng = np.random.default_rng(123)
    draws = np.concatenate([space.sample(1, rng, exclude=exclude) for _ in range(6000)])
    counts = np.bincount(draws, minlength=n)
    assert counts[:excluded].sum() == 0
    live = counts[excluded:]
    expected = 6000 / len(live)
    chi2 = ((live - expected) ** 2 / expected).sum()
    assert chi2 < len(live) + 6 * np.sqrt(2 * len(live))  # far inside the tail


def test_sample_large_space_with_large_exclude_is_fast():
    space = SearchSpace([P("a", list(range(1000))), P("b", list(range(1000)))], ["a != b"])
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    small = space.sample(20, rng)
    exclude = np.arange(len(space) - 100)
    rest = space.sample(1000, rng, exclude=exclude)
    assert time.perf_counter() - start < 2
    assert len(set(small.tolist())) == 20
    assert sorted(rest.tolist()) == list(range(len(space) - 100, len(space)))


def _brute_neighbours(space, i, method):
    here = space.positions([i])[0]
    out = []
    for j in range(len(space)):
        other = space.positions([j])[0]
        diff = np.flatnonzero(other != here)
        if len(diff) == 1 and (
            method == "hamming" or abs(int(other[diff[0]] - here[diff[0]])) == 1
        ):
            out.append(j)
    return out


@pytest.mark.parametrize("method", ["adjacent", "hamming"])
def test_neighbours_match_brute_force(space, method):
    for i in range(0, len(space), 7):
        got = space.neighbours(i, method)
        assert got.tolist() == _brute_neighbours(space, i, method)
    with pytest.raises(ValueError, match="unknown neighbour method"):
        space.neighbours(0, "closest")  # type: ignore[arg-type]


def test_fingerprint_is_stable_and_sensitive():
    def make(**kw):
        return SearchSpace(
            [P("a", [1, 2, 4]), P("s", ["x", "y"])],
            ["a * 2 <= LIMIT"],
            constants={"LIMIT": 4},
            **kw,
        )

    fp = make().fingerprint()
    assert fp == make(name="other").fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0
    # pinned: a change here orphans every stored tuning log that refers to a space by fingerprint
    assert fp == "2623c4e4103f7b29fef006df1c4b190559c4f38614efe1edf909a56c28e629a6"
    changed = SearchSpace(
        [P("a", [1, 2, 4]), P("s", ["x", "y"])], ["a * 2 <= LIMIT"], constants={"LIMIT": 8}
    )
    assert changed.fingerprint() != fp
    assert SearchSpace([P("a", [1, 2, 4]), P("s", ["x", "y"])]).fingerprint() != fp


def test_to_dict_round_trip(space):
    data = json.loads(json.dumps(space.to_dict()))
    assert data["explicit"] is False and data["name"] == "small" and data["constants"] == {}
    again = SearchSpace.from_dict(data)
    assert np.array_equal(again.ranks, space.ranks)
    assert again.parameters == space.parameters and again.name == "small"
    assert again.fingerprint() == space.fingerprint()
    with_constants = SearchSpace([P("a", [1, 2, 4])], ["a <= LIMIT"], constants={"LIMIT": 2})
    assert len(SearchSpace.from_dict(with_constants.to_dict())) == 2


def test_pickle_round_trip(space):
    again = pickle.loads(pickle.dumps(space))
    assert np.array_equal(again.ranks, space.ranks) and again.constraints == space.constraints
    assert again.constraints[0].holds(space.config(0))


@pytest.mark.parametrize("data", [{}, {"parameters": 3}, {"parameters": [{"name": "a"}]}, []])
def test_from_dict_rejects_garbage(data):
    with pytest.raises(SpaceError):
        SearchSpace.from_dict(data)  # type: ignore[arg-type]


def test_from_configs(space):
    members = [space.config(i) for i in (9, 2, 5, 2)]
    explicit = SearchSpace.from_configs(space.parameters, members, name="rec")
    assert len(explicit) == 3 and explicit.explicit and explicit.constraints == ()
    assert explicit.configs(range(3)) == [space.config(i) for i in (2, 5, 9)]
    assert explicit.index(space.config(5)) == 1 and explicit.index(space.config(0)) is None
    assert explicit.to_dict()["explicit"] is True
    with pytest.raises(SpaceError, match="explicit"):
        SearchSpace.from_dict(explicit.to_dict())
    other = SearchSpace.from_configs(space.parameters, members[:2])
    assert other.fingerprint() != explicit.fingerprint()
    assert (
        SearchSpace.from_configs(space.parameters, reversed(members)).fingerprint()
        == explicit.fingerprint()
    )
    assert len(SearchSpace.from_configs(space.parameters, [])) == 0
    with pytest.raises(
        SpaceError, match="value 17 is not among the values of parameter 'block_size_x'"
    ):
        SearchSpace.from_configs(space.parameters, [{**members[0], "block_size_x": 17}])
    with pytest.raises(SpaceError, match="missing"):
        SearchSpace.from_configs(space.parameters, [{"block_size_x": 16}])
    with pytest.raises(SpaceError, match="unknown \\['time'\\]"):
        SearchSpace.from_configs(space.parameters, [{**members[0], "time": 1.0}])


def test_restrict_keeps_the_members_that_satisfy_more_constraints(space):
    names = space.names
    expression = f"{names[0]} * {names[1]} <= 64"
    narrowed = space.restrict([expression])
    kept = [c for c in space.configs(range(len(space))) if c[names[0]] * c[names[1]] <= 64]
    assert 0 < len(narrowed) < len(space)
    assert narrowed.configs(range(len(narrowed))) == kept
    assert narrowed.fingerprint() == SearchSpace.from_configs(space.parameters, kept).fingerprint()
    assert narrowed.restrict([]).fingerprint() == narrowed.fingerprint()
    with pytest.raises(ConstraintError, match="unknown name"):
        space.restrict(["no_such_knob > 1"])


def test_construction_errors():
    with pytest.raises(SpaceError, match="duplicate parameter name"):
        SearchSpace([P("a", [1]), P("a", [2])])
    with pytest.raises(ConstraintError, match="unknown name 'bogus'"):
        SearchSpace([P("a", [1])], ["a * bogus <= 1024"])
    with pytest.raises(ConstraintError, match="unknown name 'b'"):
        SearchSpace([P("a", [1])], [parse_constraint("a < b", ["a", "b"])])
    with pytest.raises(SpaceError, match="name of a parameter"):
        SearchSpace([P("a", [1])], constants={"a": 1})
    with pytest.raises(SpaceError, match="too large"):
        SearchSpace([P(f"p{i}", [0, 1]) for i in range(63)])
    with pytest.raises(SpaceError, match="at least one parameter"):
        SearchSpace([])
    with pytest.raises(SpaceError, match="not a Parameter"):
        SearchSpace([("a", [1, 2])])  # type: ignore[list-item]
    with pytest.raises(SpaceError, match="neither a string nor a Constraint"):
        SearchSpace([P("a", [1])], [lambda a: a > 0])  # type: ignore[list-item]


def test_constraint_objects_and_constants():
    c = parse_constraint("a * b <= LIMIT", ["a", "b"], {"LIMIT": 8})
    space = SearchSpace([P("a", [1, 2, 4]), P("b", [1, 2, 4])], [c])
    assert len(space) == 8 and space.constants == {"LIMIT": 8}
    assert space.constraints == (c,)
    with pytest.raises(SpaceError, match="conflicts"):
        SearchSpace([P("a", [1, 2, 4]), P("b", [1, 2, 4])], [c], constants={"LIMIT": 2})
    assert len(SearchSpace([P("a", [1, 2])], "a > 1")) == 1  # a single string is one constraint
    assert isinstance(space.constraints[0], Constraint)


def test_empty_and_constant_constraints():
    params = [P("a", [1, 2, 3]), P("b", [1, 2])]
    empty = SearchSpace(params, ["a > 5"])
    assert len(empty) == 0 and empty.sample(3, np.random.default_rng(0)).size == 0
    assert empty.positions().shape == (0, 2) and empty.encode().shape == (0, 2)
    assert len(SearchSpace(params, ["1 > 2"])) == 0
    assert len(SearchSpace(params, ["LIMIT > 2"], constants={"LIMIT": 3})) == 6
    assert "0 of 6 configs" in repr(empty)


def test_string_and_bool_parameters_in_constraints(oracle, product):
    params = [P("layout", ["row", "col", "tiled"]), P("flag", [False, True]), P("n", [1, 2, 3])]
    constraints = ["layout in ['row', 'tiled'] or n == 1", "flag or layout != 'tiled'", "n > flag"]
    space = SearchSpace(params, constraints)
    assert space.configs(range(len(space))) == brute_force(params, constraints, oracle, product)


def test_1e8_cartesian_space_builds_fast_in_little_memory():
    params, constraints = large_gpu_space()  # the space construction benchmark's too
    tracemalloc.start()
    try:
        start = time.perf_counter()
        space = SearchSpace(params, constraints)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert space.cartesian_size == 111_017_984
    assert len(space) == 5_344_995
    assert peak < 400 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert elapsed < 10
    rng = np.random.default_rng(0)
    for i in space.sample(50, rng):
        config = space.config(int(i))
        assert all(parse_constraint(e, space.names).holds(config) for e in constraints)
        assert space.index(config) == i


def test_indices_of_positions_round_trips_and_rejects_outside_rows() -> None:
    space = SearchSpace(
        [Parameter.of("a", [1, 2, 4, 8]), Parameter.of("b", [1, 2, 4])], ["a * b <= 8"]
    )
    everything = space.positions()
    assert space.indices_of_positions(everything).tolist() == list(range(len(space)))
    # a row past a parameter's range, a negative one, and one that breaks the constraint
    rows = np.array([[4, 0], [-1, 0], [3, 2]])
    assert space.indices_of_positions(rows).tolist() == [-1, -1, -1]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_parameter_refuses_non_finite_values(bad):
    """Every reader of spaces (T1, Kernel Tuner caches, the REST API) relies on this one check."""
    with pytest.raises(
        ParameterError, match=f"parameter 'a': value {bad!r} is not a finite number"
    ):
        P("a", [1.5, bad])
    with pytest.raises(SpaceError):
        SearchSpace.from_dict({"parameters": [{"name": "a", "values": [1.0, bad]}]})
