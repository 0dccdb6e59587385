"""Time model against published measured throughput (calibration/published.yaml).

Each case is a real training run: its settings become a scenario, trainplan's own efficiency
model (no MFU given) predicts tokens/s per GPU, and the error must stay within the tolerance
stated on the case. The whole set must keep a median absolute error under 12%.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from time_reference import CASES, TimeCase, evaluate


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_tolerance(case: TimeCase) -> None:
    row = evaluate(case)
    assert abs(row.error) <= case.tolerance, f"{row.error:+.1%} ({case.conversion})"


def test_median_error() -> None:
    errors = [abs(evaluate(case).error) for case in CASES]
    assert len(errors) >= 15
    assert statistics.median(errors) < 0.12
