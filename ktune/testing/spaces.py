"""Synthetic search spaces: sizes and restrictions of the usual GPU kinds, no recording needed."""

from __future__ import annotations

from ktune.search_space import Parameter

__all__ = ["large_gpu_space"]


def large_gpu_space() -> tuple[list[Parameter], list[str]]:
    """Parameters and restrictions of about 1.1e8 cartesian points: 11 knobs (block sizes,
    tiles, unroll, vector width, shared memory, prefetch, layout, stages) under 7 restrictions
    of the usual GPU kinds (threads per block, tile extents, shared memory, divisibility)."""
    p = Parameter.of
    params = [
        p("block_size_x", [2**i for i in range(11)]),
        p("block_size_y", [2**i for i in range(11)]),
        p("block_size_z", [1, 2, 4, 8, 16, 32, 64]),
        p("tile_size_x", list(range(1, 9))),
        p("tile_size_y", list(range(1, 9))),
        p("unroll", list(range(8))),
        p("vector", [1, 2, 4, 8]),
        p("use_shmem", [0, 1]),
        p("prefetch", [False, True]),
        p("layout", ["row", "col"]),
        p("stages", list(range(1, 9))),
    ]
    constraints = [
        "32 <= block_size_x * block_size_y * block_size_z <= 1024",
        "block_size_x * tile_size_x <= 256",
        "block_size_y * tile_size_y <= 256",
        (
            "use_shmem == 0 or (block_size_x * tile_size_x + 2) * (block_size_y * tile_size_y + 2)"
            " * 4 * stages <= 48 * 1024"
        ),
        "unroll == 0 or tile_size_x % unroll == 0",
        "layout == 'row' or vector == 1",
        "not prefetch or stages > 1",
    ]
    return params, constraints
