"""Estimated peak memory against traced training steps (calibration/fake_trace.json).

The traces ran real Hugging Face training steps (forward with the causal-LM loss, backward,
optimizer step; two steps so optimizer state is resident) on fake tensors. Tolerances: every
case within 8%, nine in ten within 5%, median under 3%.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from memory_reference import evaluate, load_records

RECORDS = load_records()


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_8_percent(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert abs(row.error) <= 0.08, f"{row.error:+.1%}"


def test_aggregate_accuracy() -> None:
    errors = [abs(evaluate(record).error) for record in RECORDS]
    assert len(errors) >= 30
    assert statistics.median(errors) < 0.03
    assert sum(error <= 0.05 for error in errors) >= 0.9 * len(errors)
