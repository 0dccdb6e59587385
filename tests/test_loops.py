"""Layers that run in a loop (HRM): weights once, compute and activations per pass, nothing kept
and no backward for the passes under no_grad. Hand-computed; the meta-device cross-check is in
tests/test_architectures.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.per_replica import coefficients
from trainplan.engine.terms.flops import flops_per_token
from trainplan.engine.terms.params import lora_params, lora_run_params
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.hf.loops import hrm_passes
from trainplan.specs.errors import ConfigError
from trainplan.specs.scenario import LoraSettings, scenario_from_mapping
from trainplan.specs.weights import total_params

# h 64; 4 heads of 16 (MHA); gated MLP 96; two stacks of 2 layers; 2 high cycles of 3 low + 1 high
TINY_HRM: dict[str, Any] = {
    "model_type": "hrm_text", "hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4,
    "head_dim": 16, "num_layers_per_stack": 2, "num_hidden_layers": 16, "vocab_size": 100,
    "H_cycles": 2, "L_cycles": 3, "L_bp_cycles": [2],
}  # fmt: skip


def test_passes_follow_the_cycles() -> None:
    # L_bp_cycles [2] padded to [1, 2]: cycle 0 runs its last L pass with grad, cycle 1 its last two
    assert hrm_passes(TINY_HRM) == [
        ("L", False), ("L", False), ("L", True), ("H", True),
        ("L", False), ("L", True), ("L", True), ("H", True),
    ]  # fmt: skip
    # more grad cycles than L_cycles: every L pass of that cycle has grad
    assert hrm_passes({**TINY_HRM, "L_bp_cycles": [5, 5]})[:4] == [("L", True)] * 3 + [("H", True)]


def test_weights_and_adapters_once() -> None:
    # a layer: q, k, v, o, gate_proj 5 x 64 x 64 = 20,480; MLP 3 x 64 x 96 = 18,432; weightless
    # norms -> 38,912; 2 stacks x 2 layers = 155,648; embedding and untied head 2 x 6,400;
    # z_L_init 64                                                         -> 168,512
    spec = spec_from_config(TINY_HRM, "hrm")
    assert total_params(spec) == 168_512
    assert spec.num_layers == 16  # 8 stack passes of 2 layers
    # LoRA r 8 all-linear: 5 x 8 x 128 + 3 x 8 x 160 = 8,960 per layer, one adapter per module:
    # 4 layers -> 35,840; summed over the 16 layer runs 143,360, over the 10 with grad 89,600
    lora = LoraSettings(rank=8, targets="all-linear")
    assert lora_params(spec, lora) == 35_840
    assert lora_run_params(spec, lora) == (143_360, 89_600)


def test_flops_forward_per_pass_backward_per_grad_pass() -> None:
    spec = spec_from_config(TINY_HRM, "hrm")
    flops = flops_per_token(spec, 64, frozen_base=False, lora_params=0, checkpointing="none")
    # matmul parameters 38,912 a layer run: 16 runs forward, 10 with grad; head 100 x 64 = 6,400;
    # attention 2 x 4 heads x 32 keys (causal half of 64) x (16 + 16) = 8,192 a layer run
    # forward 2 x 16 x 38,912 + 2 x 6,400 + 16 x 8,192          = 1,389,056
    # input grads 2 x (10 x 38,912 + 6,400) + 2 x 10 x 8,192     =   954,880
    # weight grads 2 x (10 x 38,912 + 6,400)                     =   791,040
    assert flops.total == 1_389_056 + 954_880 + 791_040
    # LoRA: frozen base, adapters 2 x (runs) + 4 x (runs with grad) on top
    lora = LoraSettings(rank=8, targets="all-linear")
    frozen = flops_per_token(
        spec,
        64,
        frozen_base=True,
        lora_params=35_840,
        checkpointing="none",
        lora_runs=lora_run_params(spec, lora),
    )
    assert frozen.total == 1_389_056 + 954_880 + 2 * 143_360 + 4 * 89_600


def test_no_grad_passes_keep_no_activations() -> None:
    # the layers' saved tensors equal those of the 10 layer runs with grad alone
    spec = spec_from_config(TINY_HRM, "hrm")
    grad_only = replace(spec, blocks=tuple(block for block in spec.blocks if not block.no_grad))
    plain = {"model": "Llama-3.1-8B", "seq_len": 64, "method": "full", "activation_checkpointing": "none"}
    scenario = scenario_from_mapping(plain)
    ours, reference = coefficients(spec, scenario), coefficients(grad_only, scenario)
    assert ours.activations.layers_sharded == reference.activations.layers_sharded > 0
    assert ours.activations.layers_replicated == reference.activations.layers_replicated
    # and a no_grad block keeps nothing to checkpoint: one input per layer run with grad
    full = scenario_from_mapping({**plain, "activation_checkpointing": "full"})
    assert (
        coefficients(spec, full).activations.layers_replicated
        == coefficients(grad_only, full).activations.layers_replicated
    )
    result = estimate(plain, model=spec)
    assert result.params.total == 168_512 and result.peak.total > 0
    assert any(note.startswith("HRM: 8 stack passes") for note in result.warnings)


def test_biased_gate_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_HRM, "attention_bias": True}, "hrm")
    assert error.value.field == "attention_bias"


def test_qlora_dequantises_per_pass() -> None:
    # a forward + backward dequantises each weight twice: 16 layer runs forward and 10 backward are
    # (16 + 10) / 2 = 13 units of the 38,912 linear weights of one layer -> 505,856 (155,648 once)
    spec = spec_from_config(TINY_HRM, "hrm")
    qlora = scenario_from_mapping({"model": "Llama-3.1-8B", "seq_len": 64, "method": "qlora"})
    assert coefficients(spec, qlora).work.quantised_weights == 13 * 38_912
