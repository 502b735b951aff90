"""Generators and factories shared by ktune's test suite and its benchmarks.

Like ``optuna.testing``, this ships with the package so that ``tests/`` and ``benchmarks/``
import one place instead of each other; it is not part of the public API and may change
without notice. Each submodule has one job and this package imports none of them, so that a
spawned measurement worker that unpickles a planted function imports little:

- :mod:`ktune.testing.recordings`: the bundled recordings' names, and small Kernel Tuner caches;
- :mod:`ktune.testing.ktt`: KTT output documents made up from a recording;
- :mod:`ktune.testing.spaces`: synthetic search spaces;
- :mod:`ktune.testing.records`: tuning-log record factories (job specs, trials);
- :mod:`ktune.testing.logs`: tuning logs filled with synthetic GPUs (the cost model's prior);
- :mod:`ktune.testing.planted`: measurement functions that crash, hang or raise on demand.
"""
