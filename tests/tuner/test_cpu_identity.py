"""A CPU's device name tells apart what changes a kernel's best config (issue 25, item 6):
the model string, the cores used, the vector ISA and the cache sizes; a device named the old
way (model and cores) stays a device of the log, and a job started under it resumes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ktune
from ktune.db import TuningLog
from ktune.tuner.budget import Budget
from ktune.tuner.jobs import JobRequest, create_job, run_job
from ktune.tuner.measure.cpu_detect import cpu_spec, former_names
from ktune.tuner.sources import Environment, SourceRequest, local_cpu, open_source, request_options

INFO = "vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\ncpu family\t: 25\nflags\t\t: {}\n"


def _caches(root: Path, l2: str, l3: str) -> Path:
    for level, kind, size in (("1", "Data", "32K"), ("2", "Unified", l2), ("3", "Unified", l3)):
        index = root / f"index{level}"
        index.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(value + "\n")
    return root


def test_one_model_string_with_other_isa_or_caches_is_another_device(tmp_path: Path) -> None:
    small = _caches(tmp_path / "small", "512K", "16M")
    large = _caches(tmp_path / "large", "1024K", "32M")
    avx2 = cpu_spec(INFO.format("sse2 avx avx2"), small)
    avx512 = cpu_spec(INFO.format("sse2 avx avx2 avx512f"), small)
    bigger = cpu_spec(INFO.format("sse2 avx avx2"), large)
    cores = avx2["cores"]
    assert avx2["name"] == f"AMD EPYC ({cores} cores, avx2, L1d 32K, L2 512K, L3 16M)"
    assert avx512["name"] == f"AMD EPYC ({cores} cores, avx512, L1d 32K, L2 512K, L3 16M)"
    assert bigger["name"] == f"AMD EPYC ({cores} cores, avx2, L1d 32K, L2 1M, L3 32M)"
    # the rest is in the spec
    assert (avx2["family"], avx2["model"], avx2["isa"]) == ("25", "AMD EPYC", "avx2")
    assert former_names(avx2) == former_names(bigger) == (f"AMD EPYC ({cores} cores)",)
    # no caches or vector flags known: the name says only what is known
    bare = cpu_spec("model name\t: Mystery\n", tmp_path / "none")
    assert bare["name"] == f"Mystery ({cores} cores)" and bare["isa"] == "unknown"


@pytest.mark.both_databases
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_a_device_named_the_old_way_stays_a_device(db_url: str) -> None:
    request = request_options(SourceRequest(operator="cpu_matmul", shape="24x24x24"))
    here = local_cpu()
    (old,) = former_names(here)
    # a job an older ktune created under this CPU's old name, stopped before it measured
    then = open_source(request, Environment(local_cpu=lambda: {**here, "name": old}))
    with TuningLog.open(db_url) as tlog:
        stopped = create_job(tlog, JobRequest(then, "random", Budget(max_trials=3), seed=1))
        # resumed by this ktune, which names the CPU the new way: it goes on as the old device
        run_job(tlog, stopped.id)
        done = tlog.get_job(stopped.id)
        assert done is not None and done.state == "done" and done.device_name == old
        # a new job on the same CPU is the new device, not the old one
        now = open_source(request)
        assert now.device_name == here["name"] != old
        new_job = create_job(tlog, JobRequest(now, "random", Budget(max_trials=2), seed=9))
        run_job(tlog, new_job.id, source=now)
        devices = {d.name for d in tlog.list_devices()}
        assert {old, here["name"]} <= devices
    # each answers by its own name; the old trials are not served as exact for the new name
    by_old = ktune.lookup("cpu_matmul", "24x24x24", device=old, db=db_url)
    by_new = ktune.lookup("cpu_matmul", "24x24x24", device=here["name"], db=db_url)
    assert by_old is not None and by_old.tier == "exact" and by_old.device == old
    assert by_new is not None and by_new.tier == "exact" and by_new.device == here["name"]
