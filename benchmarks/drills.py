"""Drills: tuning jobs under kill -9, stalls longer than the lease and gzip bombs.

Three drills, each against a fault-free baseline run in the same process:

1. **Fleet**: ``--jobs`` replay jobs in a SQLite log, run by ``--workers`` ``ktune worker``
   processes with a short lease. Every few seconds a random worker is killed with SIGKILL
   (and a new one started) or stopped with SIGSTOP for twice the lease (then continued). At
   the end: jobs lost (not ``done``), jobs failed, trials repeated (a job with more trials
   than its budget, or seqs not 0..n-1), and the wall time against the fault-free run.
2. **Orphans**: a process measuring a planted CPU kernel that hangs (timeout 600 s) is killed
   with SIGKILL, ``--rounds`` times; a measuring process still alive 3 s later is an orphan.
3. **Bombs**: ``--bombs`` concurrent uploads of a gzip bomb (4 MB that inflate to 4 GiB) to
   ``ktune serve``; its peak resident memory (VmHWM) against its memory before them.

    python benchmarks/drills.py [--jobs 16 --workers 2 --lease 2 --rounds 3 --bombs 8]

A database outage is not drilled here (SQLite has no server to stop).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.db import TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job
from ktune.tuner.sources import ReplaySource, bundled_recordings

KTUNE = [sys.executable, "-c", "import sys; from ktune.cli.app import main; sys.exit(main())"]
TOKEN = "drills-token-0123456789abcdef"
BUDGET = 30


def _worker(url: str, lease: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*KTUNE, "worker", "-j", "2", "--lease", str(lease), "--poll", "0.1", "--db", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def fleet(jobs: int, workers: int, lease: float, faults: bool, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="drills-") as tmp:
        url = f"sqlite:///{tmp}/log.db"
        with TuningLog.open(url) as tlog:
            source = ReplaySource.open(bundled_recordings()["convolution_A4000"], speed=100)
            ids = [
                create_job(tlog, JobRequest(source, "random", Budget(max_trials=BUDGET), seed=i)).id
                for i in range(jobs)
            ]
            procs = [_worker(url, lease) for _ in range(workers)]
            kills = stalls = 0
            started = time.monotonic()
            next_fault = started + rng.uniform(1, 3)
            while time.monotonic() - started < 600:
                states = [tlog.get_job(i).state for i in ids]  # type: ignore[union-attr]
                if all(s in ("done", "failed", "cancelled") for s in states):
                    break
                if faults and time.monotonic() > next_fault:
                    k = rng.randrange(len(procs))
                    if rng.random() < 0.6:
                        procs[k].kill()
                        procs[k].wait()
                        procs[k] = _worker(url, lease)
                        kills += 1
                    else:
                        procs[k].send_signal(signal.SIGSTOP)
                        time.sleep(2 * lease)
                        procs[k].send_signal(signal.SIGCONT)
                        stalls += 1
                    next_fault = time.monotonic() + rng.uniform(1, 3)
                time.sleep(0.1)
            wall = time.monotonic() - started
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(60)
            lost = failed = repeated = 0
            for i in ids:
                job = tlog.get_job(i)
                assert job is not None
                seqs = [t.seq for t in tlog.job_trials(i)]
                lost += job.state != "done"
                failed += job.state == "failed"
                repeated += max(0, len(seqs) - BUDGET) + (seqs != list(range(len(seqs))))
    return {
        "wall_s": wall,
        "kills": kills,
        "stalls": stalls,
        "lost": lost,
        "failed": failed,
        "repeated": repeated,
    }


_MEASURER = """
from ktune.tuner.measure.cpu_backend import CpuBackend
from ktune.tuner.measure.timing import TimingSettings
from tests.tuner.cpu_planted import Planted
op = Planted()
b = CpuBackend(op, op.workload("64"), settings=TimingSettings(warmup=1, min_repeats=1,
               min_time_s=0.0, max_repeats=1), timeout_s=600.0)
print(b.pool.pid(), flush=True)
b.measure([{"behaviour": "hang"}])
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def orphans(rounds: int) -> int:
    if shutil.which("cc") is None:
        return -1
    survivors = 0
    for _ in range(rounds):
        parent = subprocess.Popen(
            [sys.executable, "-c", _MEASURER], cwd=ROOT, stdout=subprocess.PIPE
        )
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        while _alive(pid) and _cpu_s(pid) < 0.5:  # spinning in the hung kernel
            time.sleep(0.05)
        parent.kill()
        parent.wait()
        time.sleep(3)
        if _alive(pid):
            survivors += 1
            os.kill(pid, signal.SIGKILL)
    return survivors


def _bomb(inflated: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    return b"".join([*(z.compress(chunk) for _ in range(inflated >> 20)), z.flush()])


def _vm(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def bombs(n: int) -> dict[str, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="drills-") as tmp:
        env = {**os.environ, "KTUNE_API_TOKENS": TOKEN, "KTUNE_RUNNER_CONCURRENCY": "0"}
        server = subprocess.Popen(
            [*KTUNE, "serve", "--port", str(port), "--db", f"sqlite:///{tmp}/log.db"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"{base}/v1/healthz", timeout=1)
                    break
                except OSError:
                    time.sleep(0.1)
            before = _vm(server.pid, "VmRSS")
            data = _bomb(4 << 30)
            codes: list[int] = []

            def upload() -> None:
                request = urllib.request.Request(
                    f"{base}/v1/recordings?filename=bomb.json.gz",
                    data=data,
                    headers={
                        "Authorization": f"Bearer {TOKEN}",
                        "Content-Type": "application/gzip",
                    },
                )
                try:
                    codes.append(urllib.request.urlopen(request, timeout=300).status)
                except urllib.error.HTTPError as exc:
                    codes.append(exc.code)
                except OSError:
                    codes.append(0)

            threads = [threading.Thread(target=upload) for _ in range(n)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            seconds = time.monotonic() - started
            peak = _vm(server.pid, "VmHWM")
        finally:
            server.terminate()
            server.wait(30)
    return {
        "bomb_mb": len(data) / 1e6,
        "rss_before_mb": before / 1e6,
        "peak_mb": peak / 1e6,
        "seconds": seconds,
        "codes": float(sum(c == 413 for c in codes)),
        "n": float(n),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bombs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    calm = fleet(args.jobs, args.workers, args.lease, faults=False, seed=args.seed)
    rough = fleet(args.jobs, args.workers, args.lease, faults=True, seed=args.seed)
    print(
        f"fleet: {args.jobs} jobs of {BUDGET} trials, {args.workers} workers x 2 slots, "
        f"lease {args.lease:g} s"
    )
    print(
        f"{'run':<12}{'kills':>7}{'stalls':>8}{'lost':>6}{'failed':>8}{'repeated':>10}"
        f"{'wall s':>9}{'ratio':>7}"
    )
    for name, r in (("fault-free", calm), ("faults", rough)):
        print(
            f"{name:<12}{r['kills']:>7.0f}{r['stalls']:>8.0f}{r['lost']:>6.0f}"
            f"{r['failed']:>8.0f}{r['repeated']:>10.0f}{r['wall_s']:>9.1f}"
            f"{r['wall_s'] / calm['wall_s']:>7.2f}"
        )
    print(
        f"orphans: {orphans(args.rounds)} of {args.rounds} measuring processes survived "
        "kill -9 of their parent by 3 s (-1: no C compiler)"
    )
    b = bombs(args.bombs)
    print(
        f"bombs: {b['n']:.0f} concurrent uploads of a {b['bomb_mb']:.1f} MB gzip bomb "
        f"(4 GiB inflated): {b['codes']:.0f} answered 413 in {b['seconds']:.1f} s; server "
        f"RSS {b['rss_before_mb']:.0f} MB before, peak {b['peak_mb']:.0f} MB "
        f"(x{b['peak_mb'] / b['rss_before_mb']:.2f})"
    )


if __name__ == "__main__":
    main()
