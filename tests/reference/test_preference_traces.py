"""Preference and reward-model peak memory against traced TRL steps (calibration/
preference_trace.json, scripts/trace_diffusion.py --set preference), against calibration/
claims.py's claim for them: each case, and the median of each split (development cases were
traced while the loss-side formulas were derived; held-out ones only after)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import claim_for, verdict
from diffusion_memory_reference import PREFERENCE_TRACE, evaluate, load_records

RECORDS = load_records(PREFERENCE_TRACE)
CLAIM = claim_for("traced-preference-memory", "held-out")


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_the_claim(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert verdict(CLAIM.figure, row.id, row.split, row.error) is None


@pytest.mark.parametrize("split", ["development", "held-out"])
def test_median_claim(split: str) -> None:
    rows = [evaluate(record) for record in RECORDS]
    errors = [abs(row.error) for row in rows if row.split == split]
    assert len(errors) >= 4
    assert CLAIM.median is not None
    assert statistics.median(errors) <= CLAIM.median


def test_every_stage_and_reference_is_traced() -> None:
    """The set covers each stage and each kind of reference, full and LoRA, with and without
    checkpointing: a case dropped from it fails here."""
    scenarios = [record["case"]["scenario"] for record in RECORDS]
    assert {s["stage"] for s in scenarios} == {"dpo", "kto", "orpo", "simpo", "rm"}
    dpo = [s for s in scenarios if s["stage"] == "dpo"]
    kinds = {s.get("reference") or ("model" if s["method"] == "full" else "adapter") for s in dpo}
    assert kinds == {"model", "adapter", "precomputed"}
    assert {s["method"] for s in scenarios} == {"full", "lora"}
    assert {s["activation_checkpointing"] for s in scenarios} == {"none", "full"}
