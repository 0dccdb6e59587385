"""Diffusion, video and JEPA peak memory against traced training steps (calibration/
diffusion_trace.json, cases the formulas were not tuned to), against calibration/claims.py's
claim for them (each case and the median)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import ALL, claim_for, verdict
from diffusion_memory_reference import evaluate, load_records

RECORDS = load_records()
CLAIM = claim_for("traced-diffusion-memory", ALL)


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_the_claim(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert verdict(CLAIM.figure, row.id, ALL, row.error) is None


def test_median_claim() -> None:
    errors = [abs(evaluate(record).error) for record in RECORDS]
    assert len(errors) >= 8
    assert CLAIM.median is not None
    assert statistics.median(errors) <= CLAIM.median
