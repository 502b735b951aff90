"""Tune the C stencil (stencil.c) on this machine's CPU with ktune.tune, then print the best.

    python examples/own_kernel/tune_stencil.py [--db URL]

Read it back with `ktune best -w stencil/1024x1024/- --format header`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import ktune

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="tuning log URL (default: the user's log)")
    parser.add_argument("--budget", type=int, default=30)
    args = parser.parse_args()
    n = 1024
    grid = np.random.default_rng(0).random((n + 2, n + 2), dtype=np.float32)
    out = np.zeros((n, n), np.float32)
    answer = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    result = ktune.tune(
        "stencil",
        HERE / "stencil.c",
        (n, n),
        [out, grid],
        {
            "tile_x": [32, 64, 128, 256, 512],
            "tile_y": [1, 4, 16, 64],
            "unroll_x": [1, 2, 4, 8],
            "threads": [1, 2, 4],
        },
        restrictions=["tile_x * tile_y <= 16384"],
        answer=[answer, None],
        atol=1e-5,
        metrics={"GB/s": lambda p: 2 * 4 * n * n / (p["time"] * 1e6)},
        objective="GB/s",
        budget=args.budget,
        db=args.db,
    )
    print(f"job {result.job_id}: {len(result.trials)} trials on {result.device}")
    if result.best is not None:
        print(
            f"best {result.best.config}: {result.best.time_ms:.4g} ms, "
            f"{result.best.metrics['GB/s']:.3g} GB/s"
        )


if __name__ == "__main__":  # the measuring worker is a spawned process: guard the entry point
    main()
