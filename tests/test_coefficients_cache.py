"""The coefficients cache: scenarios that differ only in fields the builder never reads share one
record, and a shared record gives the very figures a fresh one gives."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from trainplan import estimate
from trainplan.engine.per_replica import (
    CACHE_SIZE,
    KEY_FIELDS,
    NOT_READ,
    _cache,
    build_coefficients,
    coefficients,
)
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import SCENARIO_FIELDS, Scenario, scenario_from_mapping

# one of each path through the builder: full, LoRA, QLoRA, each checkpointing mode, the losses,
# compile and fp8, MoE, an encoder-decoder, diffusion, video and JEPA models
VARIED: list[dict[str, Any]] = [
    {"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3},
    {"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3, "fsdp_wrap": "root"},
    {"model": "Llama-3.1-8B", "method": "lora", "lora": {"rank": 64, "targets": "all-linear"}},
    {"model": "Llama-3.1-8B", "method": "qlora", "activation_checkpointing": "full", "kbit_upcast": True},
    {"model": "Llama-3.1-8B", "method": "full", "activation_checkpointing": "op", "compile": True},
    {"model": "Llama-3.1-8B", "method": "full", "precision": "fp8-torchao", "loss": "chunked"},
    {"model": "Llama-3.1-8B", "method": "full", "activation_checkpointing": "selective", "loss": "fused"},
    {"model": "Llama-3.1-8B", "method": "full", "activation_offload": True, "kernels": "liger"},
    {"model": "Mixtral-8x7B-v0.1", "method": "qlora"},
    {"model": "Qwen3-30B-A3B", "method": "lora", "activation_checkpointing": "op"},
    {"model": "T5-Base", "method": "full"},
    {"model": "FLUX.1-dev", "method": "lora", "activation_checkpointing": "full"},
    {"model": "Wan2.1-T2V-1.3B", "method": "full", "frozen_encoders": "gpu"},
    {"model": "I-JEPA-ViT-H-14", "method": "full", "gpus": 16, "zero_stage": 2},
]

# layout, GPU, price and region changes: none of them is a key field
LAYOUT_CHANGES: list[dict[str, Any]] = [
    {"gpus": 16, "zero_stage": 3, "micro_batch": 4},
    {"gpu": "A100-80GB", "offload": "optimizer", "overhead_gib": 2.0},
    {"pricing": "spot", "region": "eu-west-1", "comm_overlap": 0.5, "train_tokens": None},
]


class Recording:
    """A scenario that notes every field read from it."""

    def __init__(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(self._scenario, name)


def test_key_fields_and_not_read_split_the_scenario_fields() -> None:
    assert NOT_READ.issubset(SCENARIO_FIELDS)  # a renamed field must be renamed here too
    assert set(KEY_FIELDS) | NOT_READ == set(SCENARIO_FIELDS)
    assert not set(KEY_FIELDS) & NOT_READ


# optimizer-in-backward refuses gradient accumulation and offload, so no layout change above
STEPPED_IN_BACKWARD = {
    "model": "Llama-3.1-8B",
    "method": "full",
    "optimizer_in_backward": True,
    "grad_accum": 1,
}


@pytest.mark.parametrize(
    "data", [*VARIED, STEPPED_IN_BACKWARD], ids=lambda data: f"{data['model']}-{data['method']}"
)
def test_the_builder_reads_no_field_outside_the_key(data: dict[str, Any]) -> None:
    scenario = scenario_from_mapping(data)
    recording = Recording(scenario)
    build_coefficients(resolve_model(scenario.model), recording)  # type: ignore[arg-type]
    assert recording.read, "the recording saw no read at all"
    assert not recording.read & NOT_READ


def _json(scenario: Scenario, model: ModelSpec) -> str:
    return json.dumps(estimate(scenario, model=model).to_dict(), sort_keys=True)


@pytest.mark.parametrize("data", VARIED, ids=lambda data: f"{data['model']}-{data['method']}")
def test_a_shared_record_gives_the_figures_of_a_fresh_one(data: dict[str, Any]) -> None:
    first = scenario_from_mapping(data)
    model = resolve_model(first.model)
    record = coefficients(model, first)
    for change in LAYOUT_CHANGES:
        variant = scenario_from_mapping(change, base=first)
        assert coefficients(model, variant) is record  # shared: only non-key fields differ
        shared = _json(variant, model)
        _cache.clear()
        assert _json(variant, model) == shared  # the same bytes from a record built for it
        record = coefficients(model, first)


def test_a_key_field_or_another_spec_object_builds_a_new_record() -> None:
    scenario = Scenario(model="Llama-3.1-8B", method="full")
    model = resolve_model(scenario.model)
    record = coefficients(model, scenario)
    assert coefficients(model, replace(scenario, precision="fp32")) is not record
    assert coefficients(model, replace(scenario, seq_len=4096)).seq_len == 4096
    other = replace(model)  # an equal spec, another object: keyed by the object it holds
    assert coefficients(other, scenario).model is other
    # bf16-mixed holds bf16 weights (2 bytes, ZeRO's 2+2+12); fp32 holds 4: the new key's record
    assert record.states.trainable_weight_bytes == 2 * 8_030_261_248  # Llama-3.1-8B's published 8.03B
    assert (
        coefficients(model, replace(scenario, precision="fp32")).states.trainable_weight_bytes
        == 4 * 8_030_261_248
    )


def test_a_full_cache_starts_over_and_keeps_answering() -> None:
    model = resolve_model("Llama-3.2-1B")
    _cache.clear()
    for seq_len in range(1, CACHE_SIZE + 2):  # one more key than the cache holds
        assert coefficients(model, Scenario(model=model.name, seq_len=seq_len)).seq_len == seq_len
    assert len(_cache) == 1  # the 257th record, after the cache started over
    assert coefficients(model, Scenario(model=model.name, seq_len=3)).seq_len == 3
