"""Submit the C stencil (or, with --cuda, the CUDA transpose) to a ktune service over REST.

    KTUNE_TOKEN=... python examples/own_kernel/submit_rest.py http://localhost:8000 [--cuda]

The server stores the spec and source with the job and compiles nothing; a runner whose
backend matches (`ktune worker --backend cpu`, or the Ray cluster for CUDA) measures it.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--cuda", action="store_true", help="the CUDA transpose (Ray cluster)")
    args = parser.parse_args()
    stem, suffix = ("transpose", ".cu") if args.cuda else ("stencil", ".c")
    body = {
        "kernel": {
            "spec": json.loads((HERE / f"{stem}.json").read_text()),
            "source": (HERE / f"{stem}{suffix}").read_text(),
        },
        "budget": {"trials": 20},
    }
    request = urllib.request.Request(
        f"{args.url}/v1/jobs",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['KTUNE_TOKEN']}",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            print(response.status, json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        print(exc.code, exc.read().decode())


if __name__ == "__main__":
    main()
