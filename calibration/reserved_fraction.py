"""The caching allocator's cache beyond the live tensors, as a fraction of the allocated peak,
fitted on traced steps replayed through the allocator's rules, with a held-out share.

Every record of calibration/fake_trace.json carries the traced allocated peak and the reserved
peak that replaying its allocations and frees through terms/allocator.py gives (without and
with expandable segments; modelled: fake tensors never reach the real allocator). The estimate
adds `fraction x allocated` for the blocks the allocator keeps reserved beyond the live tensors
(src/trainplan/data/device_memory.yaml `cache_fraction`). The fraction is the median of
reserved / allocated - 1 over the development models; the held-out models (every second model
name in sorted order) are never looked at by the fit. Used by tests/reference/test_reserved.py
and scripts/accuracy.py.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACE = Path(__file__).resolve().parent / "fake_trace.json"


@dataclass(frozen=True)
class ReplayRow:
    """One traced step: its allocated peak and modelled reserved peaks."""

    id: str
    model: str
    allocated: float
    reserved: float
    reserved_expandable: float
    split: str  # development | held-out


def rows(path: Path = TRACE) -> list[ReplayRow]:
    """Every traced record with a replayed reserved peak, split by model name."""
    records: list[dict[str, Any]] = json.loads(path.read_text())
    models = sorted({str(r["case"]["model"]) for r in records})
    held_out = set(models[1::2])
    return [
        ReplayRow(
            str(r["case"]["id"]),
            str(r["case"]["model"]),
            float(r["measured"]["peak_bytes"]),
            float(r["measured"]["reserved_peak_bytes"]),
            float(r["measured"]["reserved_peak_expandable_bytes"]),
            "held-out" if r["case"]["model"] in held_out else "development",
        )
        for r in records
        if "reserved_peak_bytes" in r.get("measured", {})
    ]


def fitted(expandable: bool, data: list[ReplayRow] | None = None) -> float:
    """The median cache fraction over the development rows."""
    data = rows() if data is None else data
    return statistics.median(
        (r.reserved_expandable if expandable else r.reserved) / r.allocated - 1
        for r in data
        if r.split == "development"
    )


def errors(fraction: float, split: str, expandable: bool = False) -> list[float]:
    """(allocated x (1 + fraction)) / replayed reserved - 1 for each row of a split."""
    return [
        r.allocated * (1 + fraction) / (r.reserved_expandable if expandable else r.reserved) - 1
        for r in rows()
        if r.split == split
    ]
