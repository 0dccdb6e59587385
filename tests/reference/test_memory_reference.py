"""Estimated peak memory against traced training steps (calibration/fake_trace.json).

The traces ran real Hugging Face training steps (forward with the causal-LM loss, backward,
optimizer step; two steps so optimizer state is resident) on fake tensors. The claim (every case,
the share within a tighter bound, the median) is calibration/claims.py's for traced memory.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import ALL, claim_for, verdict
from memory_reference import evaluate, load_records

RECORDS = load_records()
CLAIM = claim_for("traced-memory", ALL)


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_the_claim(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert verdict(CLAIM.figure, row.id, ALL, row.error) is None


def test_aggregate_claim() -> None:
    errors = [abs(evaluate(record).error) for record in RECORDS]
    assert len(errors) >= 30
    assert CLAIM.median is not None and CLAIM.share is not None
    assert statistics.median(errors) <= CLAIM.median
    fraction, bound = CLAIM.share
    assert sum(error <= bound for error in errors) >= fraction * len(errors)
