"""Memory model against published real-GPU peaks of framework recipes (calibration/published.yaml).

Each case is a published run with its settings as a scenario (recipe presets included); the
estimated peak, less any paged optimizer state the allocator never sees, must be within the
tolerance stated on the case. Nothing here is fitted (calibration/published_memory.py says
which cases were looked at while the derivations were written).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from published_memory import CASES, PublishedMemoryCase, evaluate


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_tolerance(case: PublishedMemoryCase) -> None:
    row = evaluate(case)
    assert abs(row.error) <= case.tolerance, f"{row.error:+.1%} ({case.unstated})"


def test_median_errors() -> None:
    rows = [evaluate(case) for case in CASES]
    held_out = [abs(row.error) for row in rows if row.case.split == "held-out"]
    assert len(held_out) >= 5 and len(rows) >= 12
    # the goal: a median error of at most 15% on published real-GPU figures
    assert statistics.median(abs(row.error) for row in rows) <= 0.15
    assert statistics.median(held_out) <= 0.15
