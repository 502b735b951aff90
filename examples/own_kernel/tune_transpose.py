"""Tune the CUDA transpose (transpose.cu) on the local GPU with ktune.tune (needs CuPy).

python examples/own_kernel/tune_transpose.py [--db URL]
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
    parser.add_argument("--budget", type=int, default=20)
    args = parser.parse_args()
    nx = ny = 4096
    matrix = np.random.default_rng(0).random((ny, nx), dtype=np.float32)
    out = np.zeros((nx, ny), np.float32)
    result = ktune.tune(
        "transpose",
        HERE / "transpose.cu",
        (nx, ny),
        [out, matrix, np.int32(nx), np.int32(ny)],
        {"block_size_x": [16, 32, 64], "block_size_y": [1, 2, 4, 8, 16], "pad": [0, 1]},
        restrictions=["block_size_y <= block_size_x"],
        grid_div_x=["block_size_x"],
        grid_div_y=["block_size_x"],
        answer=[matrix.T.copy(), None, None, None],
        metrics={"GB/s": lambda p: 2 * 4 * nx * ny / (p["time"] * 1e6)},
        objective="GB/s",
        name="transpose_own",
        budget=args.budget,
        db=args.db,
    )
    print(f"job {result.job_id}: {len(result.trials)} trials on {result.device}")
    if result.best is not None:
        print(f"best {result.best.config}: {result.best.time_ms:.4g} ms")


if __name__ == "__main__":
    main()
