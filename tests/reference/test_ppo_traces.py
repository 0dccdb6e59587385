"""PPO training-round peak memory against traced TRL steps (calibration/ppo_trace.json,
scripts/trace_diffusion.py --set ppo), against calibration/claims.py's claim for them: each case
and the median of each split (the loss's bytes per logit element were read off the development
cases; the held-out ones were compared only after)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import claim_for, verdict
from diffusion_memory_reference import PPO_TRACE, evaluate, load_records

RECORDS = load_records(PPO_TRACE)
CLAIM = claim_for("traced-ppo-memory", "held-out")


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_the_claim(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert verdict(CLAIM.figure, row.id, row.split, row.error) is None


@pytest.mark.parametrize(("split", "least"), [("development", 4), ("held-out", 7)])
def test_median_claim(split: str, least: int) -> None:
    errors = [abs(row.error) for row in map(evaluate, RECORDS) if row.split == split]
    assert len(errors) >= least
    assert CLAIM.median is not None
    assert statistics.median(errors) <= CLAIM.median


def test_the_set_covers_the_recipes() -> None:
    """Full and LoRA, with and without checkpointing, a frozen copy and the adapter-disabled
    policy as the reference, amp-bf16, bf16-mixed and pure bf16: a case dropped from the set
    fails here."""
    scenarios = [record["case"]["scenario"] for record in RECORDS]
    assert {s["stage"] for s in scenarios} == {"ppo"}
    assert {s["method"] for s in scenarios} == {"full", "lora"}
    assert {s["activation_checkpointing"] for s in scenarios} == {"none", "full"}
    assert {s["precision"] for s in scenarios} == {"amp-bf16", "bf16-mixed", "bf16"}
    assert {s.get("reference", "default") for s in scenarios} >= {"default", "model"}
    assert any(s["method"] == "lora" and s.get("reference") is None for s in scenarios)  # adapter
