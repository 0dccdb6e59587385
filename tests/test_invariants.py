"""Properties that must hold for every scenario (hypothesis)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from conftest import LLAMA_8B
from hypothesis import given, settings
from hypothesis import strategies as st

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.precisions import PRECISIONS
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.scenario import Scenario

SPEC = spec_from_config(LLAMA_8B, "l8b")
MOE = spec_from_config(
    {**LLAMA_8B, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}, "moe"
)

scenarios = st.builds(
    Scenario,
    model=st.just("x"),
    method=st.sampled_from(["full", "lora", "qlora"]),
    precision=st.sampled_from(["bf16-mixed", "amp-bf16", "bf16", "fp32"]),
    optimizer=st.sampled_from(["adamw", "adamw-fused", "adamw-8bit", "sgd", "adafactor", "lion"]),
    micro_batch=st.integers(1, 8),
    seq_len=st.integers(1, 8192),
    grad_accum=st.integers(1, 8),
    activation_checkpointing=st.sampled_from(["none", "selective", "full"]),
    attention=st.sampled_from(["flash", "eager"]),
    gpus=st.sampled_from([1, 2, 8]),
    zero_stage=st.integers(0, 3),
)


def total(scenario: Scenario, spec: Any = SPEC) -> float:
    return estimate(scenario, model=spec).total_bytes


@settings(max_examples=60, deadline=None)
@given(scenarios, st.integers(1, 4))
def test_memory_non_decreasing_in_batch_and_sequence(scenario: Scenario, factor: int) -> None:
    bigger_batch = dataclasses.replace(scenario, micro_batch=scenario.micro_batch * factor)
    longer = dataclasses.replace(scenario, seq_len=scenario.seq_len * factor)
    assert total(bigger_batch) >= total(scenario)
    assert total(longer) >= total(scenario)


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_higher_zero_stage_never_increases_memory(scenario: Scenario) -> None:
    # allocated bytes: ZeRO-3 adds FSDP2's reserved side-stream pools (the all-gather outputs and
    # the gradient shards' blocks), which over 2 ranks can make its reserved peak equal ZeRO-2's;
    # what sharding itself divides never grows
    values = [
        estimate(dataclasses.replace(scenario, zero_stage=s), model=SPEC).allocated_peak_bytes
        for s in range(4)
    ]
    assert all(b <= a for a, b in itertools.pairwise(values))


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_qlora_le_lora_le_full(scenario: Scenario) -> None:
    full = total(dataclasses.replace(scenario, method="full"))
    lora = total(dataclasses.replace(scenario, method="lora"))
    qlora = total(dataclasses.replace(scenario, method="qlora"))
    assert qlora <= lora <= full


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_checkpointing_never_increases_memory(scenario: Scenario) -> None:
    none, selective, full = (
        total(dataclasses.replace(scenario, activation_checkpointing=mode))
        for mode in ("none", "selective", "full")
    )
    assert full <= selective <= none


@settings(max_examples=40, deadline=None)
@given(scenarios)
def test_more_sharding_gpus_never_increase_memory(scenario: Scenario) -> None:
    # the allocator's memory never grows with more data-parallel GPUs; the device figure grows
    # by no more than the data-parallel communicator's NCCL buffers (to the rounding of adding
    # those buffers to the terms and taking them away again: a few units in the last place)
    one = estimate(dataclasses.replace(scenario, gpus=1), model=SPEC)
    many = estimate(dataclasses.replace(scenario, gpus=8), model=SPEC)
    assert many.reserved_peak_bytes <= one.reserved_peak_bytes
    assert many.device is not None and one.device is not None
    assert many.device.nccl > 0 and one.device.nccl == 0
    assert many.total_bytes - many.device.nccl <= one.total_bytes * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(scenarios)
def test_fused_loss_never_increases_memory(scenario: Scenario) -> None:
    """The fused loss holds no logits; the one thing it keeps that the standard loss does not
    overlap is the head's autocast copy (Cut Cross-Entropy saves the classifier weight for its
    backward) beside the head's gradient, while the loss runs backward: under an autocast
    precision (fp32 weights, bf16 copies) a short sequence can cost up to that copy more."""
    copy = PRECISIONS[scenario.precision].autocast_copy_bytes * SPEC.vocab_size * SPEC.head_width
    assert total(dataclasses.replace(scenario, loss="fused")) <= total(scenario) + copy


@settings(max_examples=40, deadline=None)
@given(scenarios)
def test_total_is_at_least_every_term_and_moe_at_least_dense(scenario: Scenario) -> None:
    result = estimate(scenario, model=SPEC)
    assert all(0 <= term.value <= result.total_bytes for term in result.peak.terms)
    assert total(scenario, MOE) >= total(scenario, SPEC)
