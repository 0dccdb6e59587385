"""Memory model against published real-GPU peaks of framework recipes (calibration/published.yaml).

Each case is a published run with its settings as a scenario (recipe presets included); the
estimated peak, less any paged optimizer state the allocator never sees, must be within the
claim of calibration/claims.py, known misses apart. Nothing here is fitted
(calibration/published_memory.py says which cases were looked at while the derivations were
written).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import claim_for, verdict
from published_memory import CASES, MAX_CONTEXT_CASES, PublishedMemoryCase, evaluate

from trainplan.engine.estimate import estimate
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.specs.scenario import scenario_from_mapping


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_the_claim(case: PublishedMemoryCase) -> None:
    row = evaluate(case)
    assert verdict("published-memory", case.id, case.split, row.error) is None, case.unstated


@pytest.mark.parametrize("split", ["development", "held-out", None])
def test_median_claim(split: str | None) -> None:
    # the median of each split and of the whole set, within the claim (which is inside the 15%
    # median set as the goal for published real-GPU figures)
    claim = claim_for("published-memory", "held-out")
    errors = [abs(evaluate(case).error) for case in CASES if split in (None, case.split)]
    assert len(errors) >= 5
    assert claim.median is not None and claim.median <= 0.15
    assert statistics.median(errors) <= claim.median


@pytest.mark.parametrize("case", MAX_CONTEXT_CASES, ids=lambda case: case.id)
def test_max_context_case_within_the_claim(case: PublishedMemoryCase) -> None:
    row = evaluate(case)
    assert verdict("published-max-context", case.id, case.split, row.error) is None, case.unstated


def test_unsloth_kernels_move_the_max_context_rows_toward_the_table() -> None:
    # the same rows with the eager modules and the chunked loss (the preset before it followed
    # Unsloth's kernels and its Cut Cross-Entropy) overestimate every row but the first by more
    eager = {"kernels": "eager", "loss": "chunked"}
    for case in MAX_CONTEXT_CASES[1:]:
        fused = abs(evaluate(case).error)
        plain = abs(evaluate(dataclasses.replace(case, scenario={**case.scenario, **eager})).error)
        assert fused < plain


def test_liger_readme_context_statement() -> None:
    # Liger-Kernel README: "LLaMA 3-8B, Batch Size = 8, bf16, AdamW, Gradient Checkpointing = True,
    # FSDP1 on 8 A100s ... Hugging Face + Liger Kernel scales up to 16K" (published.yaml
    # liger-readme-llama3-8b-fsdp): 16K fits an 80 GB A100 with Liger's kernels and loss, 32K does not
    base = {
        "recipe": "hf-trainer", "model": "Llama-3.1-8B", "method": "full", "gpu": "A100 80GB SXM4",
        "gpus": 8, "zero_stage": 3, "micro_batch": 8, "activation_checkpointing": "full",
        "kernels": "liger", "loss": "fused",
    }  # fmt: skip
    capacity = find_gpu("A100 80GB SXM4").memory_bytes
    assert estimate(scenario_from_mapping({**base, "seq_len": 16384})).total_bytes <= capacity
    assert estimate(scenario_from_mapping({**base, "seq_len": 32768})).total_bytes > capacity
    # without Liger, 16K does not fit (the README: Hugging Face runs out of memory from 4K)
    eager = {**base, "seq_len": 16384, "kernels": "eager", "loss": "standard"}
    assert estimate(scenario_from_mapping(eager)).total_bytes > capacity
