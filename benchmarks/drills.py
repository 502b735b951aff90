"""Drills: tuning jobs under kill -9, stalls longer than the lease, database outages and gzip
bombs.

Three drills, each against a fault-free baseline run in the same process:

1. **Fleet**: ``--jobs`` replay jobs submitted with ``POST /v1/jobs`` to a ``ktune serve``
   (which runs none itself; each request timed) and run by ``--workers`` ``ktune worker``
   processes with a short lease, on SQLite or (``--db postgresql``) PostgreSQL. Every few
   seconds a random worker is killed with SIGKILL (and a new one started) or stopped with
   SIGSTOP for twice the lease (then continued). With PostgreSQL, ``--outages`` times the
   database goes away for ``--outage-s`` seconds: every ktune process reaches it through a TCP
   proxy of this script, which then drops every connection and refuses new ones, and the
   server-side backends of those connections are ended with ``pg_terminate_backend``. At the
   end: jobs lost (not ``done``), jobs failed, trials repeated (a job with more trials than
   its budget, or seqs not 0..n-1), the wall time against the fault-free run, and the
   submission latency (the first request after the server answers, the median, the worst).
2. **Orphans**: a process measuring a planted CPU kernel that hangs (timeout 600 s) is killed
   with SIGKILL, ``--rounds`` times; a measuring process still alive 3 s later is an orphan.
3. **Bombs**: ``--bombs`` concurrent uploads of a gzip bomb (4 MB that inflate to 4 GiB) to
   ``ktune serve``; its peak resident memory (VmHWM) against its memory before them.

    python benchmarks/drills.py [--jobs 16 --workers 2 --lease 2 --rounds 3 --bombs 8]
    python benchmarks/drills.py --db postgresql --jobs 40 --workers 4 --outages 2 --outage-s 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ktune.db import TuningLog

KTUNE = [sys.executable, "-c", "import sys; from ktune.cli.app import main; sys.exit(main())"]
TOKEN = "drills-token-0123456789abcdef"
BUDGET = 30
PG_URL = os.environ.get("KTUNE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
APP_NAME = "ktune-drills"


def _worker(url: str, lease: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*KTUNE, "worker", "-j", "2", "--lease", str(lease), "--poll", "0.1", "--db", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(url: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A ``ktune serve`` on ``url`` that runs no jobs itself, once it answers; its base URL."""
    port = _free_port()
    env = {**os.environ, "KTUNE_API_TOKENS": TOKEN, "KTUNE_RUNNER_CONCURRENCY": "0", **(env or {})}
    server = subprocess.Popen(
        [*KTUNE, "serve", "--port", str(port), "--db", url],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{base}/v1/healthz", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return server, base


def _submit(base: str, seed: int) -> tuple[int, float]:
    """``POST /v1/jobs`` of a replay job; its id and the seconds the request took."""
    body = {
        "space": "convolution_A4000",
        "strategy": "random",
        "seed": seed,
        "budget": {"trials": BUDGET},
        "replay_speed": 100,
    }
    request = urllib.request.Request(
        f"{base}/v1/jobs",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        job = json.loads(response.read())
    return int(job["id"]), time.perf_counter() - started


class Proxy:
    """A TCP proxy to PostgreSQL; :meth:`outage` drops its connections and refuses new ones."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.down = False
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def outage(self, seconds: float, admin_url: str) -> None:
        """Drop every connection, end their backends, refuse connections for ``seconds``."""
        import psycopg

        self.down = True
        with self.lock:
            dropped, self.open = self.open, []
        for s in dropped:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (APP_NAME,),
            )
        time.sleep(seconds)
        self.down = False


@contextmanager
def _database(kind: str) -> Iterator[tuple[str, Proxy | None]]:
    """A fresh tuning log: a SQLite file, or a PostgreSQL schema reached through a
    :class:`Proxy` (dropped afterwards); its URL and the proxy."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="drills-") as tmp:
            yield f"sqlite:///{tmp}/log.db", None
        return
    import psycopg

    admin = "postgresql://" + PG_URL.split("://", 1)[1]
    rest = PG_URL.split("://", 1)[1]
    userinfo, _, hostpath = rest.rpartition("@")
    hostport, _, dbname = hostpath.partition("/")
    host, _, port = hostport.partition(":")
    proxy = Proxy(host, int(port or 5432))
    schema = f"drills_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    at = f"{userinfo}@" if userinfo else ""
    url = (
        f"postgresql://{at}127.0.0.1:{proxy.port}/{dbname}"
        f"?options=-csearch_path%3D{schema}&application_name={APP_NAME}"
    )
    try:
        yield url, proxy
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def fleet(
    kind: str,
    jobs: int,
    workers: int,
    lease: float,
    faults: bool,
    seed: int,
    outages: int = 0,
    outage_s: float = 5.0,
) -> dict[str, float]:
    rng = random.Random(seed)
    with _database(kind) as (url, proxy):
        subprocess.run([*KTUNE, "db", "upgrade", "--db", url], check=True, capture_output=True)
        server, base = _serve(url)
        try:
            submitted = [_submit(base, i) for i in range(jobs)]
        finally:
            server.terminate()
            server.wait(60)
        ids = [job_id for job_id, _ in submitted]
        latencies = [seconds for _, seconds in submitted]
        with TuningLog.open(url) as tlog:
            procs = [_worker(url, lease) for _ in range(workers)]
            kills = stalls = downs = 0
            started = time.monotonic()
            next_fault = started + rng.uniform(1, 3)
            outage_at = sorted(started + rng.uniform(2, 10) * (k + 1) for k in range(outages))
            while time.monotonic() - started < 900:
                try:
                    states = [tlog.get_job(i).state for i in ids]  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - the database is away: look again later
                    time.sleep(0.5)
                    continue
                if all(s in ("done", "failed", "cancelled") for s in states):
                    break
                if faults and outage_at and proxy is not None and time.monotonic() > outage_at[0]:
                    outage_at.pop(0)
                    proxy.outage(outage_s, "postgresql://" + PG_URL.split("://", 1)[1])
                    downs += 1
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
        "outages": downs,
        "lost": lost,
        "failed": failed,
        "repeated": repeated,
        "submit_first_ms": latencies[0] * 1000,
        "submit_p50_ms": statistics.median(latencies) * 1000,
        "submit_max_ms": max(latencies) * 1000,
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
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--outages", type=int, default=0, help="database outages (PostgreSQL)")
    parser.add_argument("--outage-s", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bombs", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fleet-only", action="store_true", help="skip orphans and bombs")
    args = parser.parse_args()
    if args.outages and args.db != "postgresql":
        parser.error("--outages needs --db postgresql (SQLite has no server to stop)")
    common = (args.db, args.jobs, args.workers, args.lease)
    calm = fleet(*common, faults=False, seed=args.seed)
    rough = fleet(
        *common, faults=True, seed=args.seed, outages=args.outages, outage_s=args.outage_s
    )
    print(
        f"fleet on {args.db}: {args.jobs} jobs of {BUDGET} trials, {args.workers} workers "
        f"x 2 slots, lease {args.lease:g} s"
        + (f", {args.outages} database outages of {args.outage_s:g} s" if args.outages else "")
    )
    print(
        f"{'run':<12}{'kills':>7}{'stalls':>8}{'outages':>9}{'lost':>6}{'failed':>8}"
        f"{'repeated':>10}{'wall s':>9}{'ratio':>7}"
        f"{'submit ms first / p50 / max':>30}"
    )
    for name, r in (("fault-free", calm), ("faults", rough)):
        submit = f"{r['submit_first_ms']:.0f} / {r['submit_p50_ms']:.1f} / {r['submit_max_ms']:.0f}"
        print(
            f"{name:<12}{r['kills']:>7.0f}{r['stalls']:>8.0f}{r['outages']:>9.0f}"
            f"{r['lost']:>6.0f}{r['failed']:>8.0f}{r['repeated']:>10.0f}{r['wall_s']:>9.1f}"
            f"{r['wall_s'] / calm['wall_s']:>7.2f}{submit:>30}"
        )
    if args.fleet_only:
        return
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
