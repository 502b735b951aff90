"""KTT output documents made up from a recording: the measurements of a Kernel Tuner cache as
KTT 2.1 writes them (its layout, as in the Benchmark Hub's KTT recordings)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ktune.search_space.formats.kernel_tuner import RecordedSpace

__all__ = ["KTT_STATUS", "ktt_document", "write_json"]

#: ktune's trial status -> KTT's ``Status`` (the statuses a Kernel Tuner cache holds)
KTT_STATUS = {
    "ok": "Ok",
    "compile_error": "CompilationFailed",
    "runtime_error": "ComputationFailed",
}


def ktt_document(
    rec: RecordedSpace, us_per_unit: float = 1.0, unit: str = "Microseconds"
) -> dict[str, Any]:
    """The document KTT writes for ``rec``'s measurements: configs a constraint excludes are
    not in it; times in ``unit`` (``us_per_unit`` microseconds each); the compile time is the
    overhead less 10 microseconds of data movement and searching."""
    results = []
    for r in rec.records.values():
        if r.status == "invalid":
            continue
        ok = r.status == "ok" and r.time_ms is not None
        duration = r.time_ms * 1000 / us_per_unit if ok and r.time_ms is not None else 0.0
        overhead = r.compile_ms * 1000 / us_per_unit
        computations = [
            {
                "CompilationData": {"RegistersCount": 32, "MaxWorkGroupSize": 1024},
                "Duration": duration,
                "GlobalSize": {"X": 4096, "Y": 4096, "Z": 1},
                "KernelFunction": rec.kernel_name,
                "LocalSize": {"X": 32, "Y": 1, "Z": 1},
                "Overhead": overhead,
            }
        ]
        results.append(
            {
                "ComputationResults": computations if ok else [],
                "Configuration": [
                    {"Name": k, "Value": v, "ValueType": "UnsignedInt"} for k, v in r.config.items()
                ],
                "DataMovementOverhead": 7.0 / us_per_unit,
                "ExtraDuration": 0.0,
                "KernelName": rec.kernel_name,
                "SearcherOverhead": 3.0 / us_per_unit,
                "Status": KTT_STATUS[r.status],
                "TotalDuration": duration,
                "TotalOverhead": overhead + 10.0 / us_per_unit,
                "ValidationOverhead": 0.0,
            }
        )
    return {
        "Metadata": {
            "ComputeApi": "CUDA",
            "Device": rec.device_name,
            "KttVersion": "2.1.0",
            "TimeUnit": unit,
        },
        "Results": results,
    }


def write_json(path: Path, doc: Any) -> Path:
    """``doc`` as JSON at ``path`` (gzipped when the name ends in ``.gz``)."""
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path
