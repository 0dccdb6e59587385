"""GRPO training-round peak memory against traced TRL steps (calibration/grpo_trace.json,
scripts/trace_diffusion.py --set grpo), against calibration/claims.py's claim for them: each
case and the median of each split (development cases were traced while TRL 1.10's full-logits
formula was read off them; held-out ones only after)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import claim_for, verdict
from diffusion_memory_reference import GRPO_TRACE, evaluate, load_records

RECORDS = load_records(GRPO_TRACE)
CLAIM = claim_for("traced-grpo-memory", "held-out")


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: record["case"]["id"])
def test_case_within_the_claim(record: dict[str, object]) -> None:
    row = evaluate(record)  # type: ignore[arg-type]
    assert verdict(CLAIM.figure, row.id, row.split, row.error) is None


@pytest.mark.parametrize(("split", "least"), [("development", 4), ("held-out", 12)])
def test_median_claim(split: str, least: int) -> None:
    errors = [abs(row.error) for row in map(evaluate, RECORDS) if row.split == split]
    assert len(errors) >= least
    assert CLAIM.median is not None
    assert statistics.median(errors) <= CLAIM.median


def test_every_fused_head_case_is_held_out() -> None:
    """No coefficient of the fused-head path was set from a GRPO trace."""
    for record in RECORDS:
        if record["case"]["scenario"].get("loss", "logprob") == "logprob":
            assert record["case"]["split"] == "held-out", record["case"]["id"]


def test_the_set_covers_the_recipes() -> None:
    """Full and LoRA, with and without checkpointing, each kind of reference GRPO takes, both
    engines, amp-bf16, bf16-mixed and pure bf16: a case dropped from the set fails here."""
    scenarios = [record["case"]["scenario"] for record in RECORDS]
    assert {s["stage"] for s in scenarios} == {"grpo"}
    assert {s["method"] for s in scenarios} == {"full", "lora"}
    assert {s["activation_checkpointing"] for s in scenarios} == {"none", "full"}
    assert {s.get("reference", "none") for s in scenarios} == {"none", "model", "adapter"}
    assert {s.get("rollout_engine", "hf") for s in scenarios} == {"hf", "vllm"}
    assert {s["precision"] for s in scenarios} == {"amp-bf16", "bf16-mixed", "bf16"}
    assert {s.get("loss", "logprob") for s in scenarios} == {"logprob", "selective"}
    # the traced step is TRL 1.16.0's
    assert {record["versions"]["trl"] for record in RECORDS} == {"1.16.0"}
