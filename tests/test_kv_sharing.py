"""KV-shared layers (Gemma 4's last num_kv_shared_layers) and Gemma 4's assistant drafter, whose
every layer reads the backbone's keys and values: hand-computed parameters, LoRA adapters, FLOPs
and activations. The meta-device cross-checks are in tests/test_architectures.py."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.activations import ActivationMode, attention_bytes
from trainplan.engine.terms.flops import block_matmul_active
from trainplan.engine.terms.params import lora_params
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import ConfigError
from trainplan.specs.scenario import LoraSettings
from trainplan.specs.weights import block_linears, block_params, total_params

S, F = "sliding_attention", "full_attention"
# h 64; 2 query heads and 1 kv head of 16 (full layers: 32); gated MLP 96; 6 layers, no per-layer inputs
TINY_GEMMA4: dict[str, Any] = {
    "model_type": "gemma4_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 6,
    "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "global_head_dim": 32,
    "vocab_size": 512, "hidden_size_per_layer_input": 0, "layer_types": [S, S, F, S, S, F],
}  # fmt: skip
BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")


def shared(count: int, **more: Any) -> dict[str, Any]:
    return {**TINY_GEMMA4, "num_kv_shared_layers": count, **more}


def test_shared_layers_have_no_key_value_projections_or_norms() -> None:
    # sliding layer: k_proj and v_proj 64 x 16 = 1,024 each, k_norm 16     -> 2,064 fewer
    # full layer (head_dim 32): k_proj, v_proj 64 x 32 = 2,048 each, k_norm 32 -> 4,128 fewer
    # the last 3 layers (sliding, sliding, full) shared: 2 x 2,064 + 4,128 = 8,256
    assert (
        total_params(spec_from_config(TINY_GEMMA4, "g")) - total_params(spec_from_config(shared(3), "g"))
        == 8_256
    )
    spec = spec_from_config(shared(3), "g")
    kinds = [
        (block.count, block.attention is not None and block.attention.kv_shared) for block in spec.blocks
    ]
    assert kinds == [(2, False), (1, False), (2, True), (1, True)]


def test_double_wide_mlp_only_in_shared_layers() -> None:
    # gate, up and down of 64 x 96 more in each of the 3 shared layers: 3 x 3 x 64 x 96 = 55,296
    wide = spec_from_config(shared(3, use_double_wide_mlp=True), "g")
    assert total_params(wide) - total_params(spec_from_config(shared(3), "g")) == 55_296
    widths = [block.mlp.intermediate_size for block in wide.blocks if block.mlp is not None]
    assert widths == [96, 96, 192, 192]


def test_shared_layer_lora_flops_and_activations() -> None:
    spec = spec_from_config(shared(3), "g")
    plain, kv_shared = spec.blocks[0], spec.blocks[2]  # sliding layers, unshared and shared
    assert plain.attention is not None and kv_shared.attention is not None
    # LoRA r 8 on attention, rank x (in + out) per matrix. Sliding layer: q 8 x 96, k and v 8 x 80,
    # o 8 x 96 = 2,816 unshared, q and o 1,536 shared. Full layer (head_dim 32): q and o 8 x 128,
    # k and v 8 x 96 = 3,584 unshared, 2,048 shared. Unshared 2 x 2,816 + 3,584 = 9,216; shared
    # 2 x 1,536 + 2,048 = 5,120                                                  -> 14,336
    assert lora_params(spec, LoraSettings(rank=8, targets="attention")) == 14_336
    # matmul parameters a token touches: k and v (2 x 1,024) fewer
    assert block_matmul_active(plain, spec) - block_matmul_active(kv_shared, spec) == 2_048
    assert block_params(plain, spec) - block_params(kv_shared, spec) == 2_064
    # bf16 full training, SDPA: the q/k norms keep fp32 input + normed output (6 B) per channel and
    # 4 B of 1/rms per head -- (32 + 16) x 6 + 4 x 3 = 300 unshared, 32 x 6 + 4 x 2 = 200 shared;
    # the kernel inputs q, k, v: 2 x (32 + 16 + 16) = 128 unshared, q alone 64 shared -> 164 fewer
    kept_plain = attention_bytes(spec, plain.attention, BF16_FULL)[0]
    kept_shared = attention_bytes(spec, kv_shared.attention, BF16_FULL)[0]
    assert kept_plain - kept_shared == 164


def test_shared_kinds_need_an_earlier_producer() -> None:
    # the last layer (full) shared, but no earlier full layer computes keys and values
    with pytest.raises(ConfigError) as error:
        spec_from_config(shared(1, layer_types=[S, S, S, S, S, F]), "g")
    assert error.value.field == "num_kv_shared_layers" and "full_attention" in error.value.message
    with pytest.raises(ConfigError) as error:
        spec_from_config(shared(7), "g")
    assert error.value.field == "num_kv_shared_layers"


ASSISTANT: dict[str, Any] = {
    "model_type": "gemma4_unified_assistant",
    "backbone_hidden_size": 128,
    "text_config": {**TINY_GEMMA4, "model_type": "gemma4_unified_text", "num_kv_shared_layers": 6},
}


def test_assistant_is_a_kv_shared_text_model_between_projections() -> None:
    spec = spec_from_config(ASSISTANT, "a")
    assert all(block.attention is not None and block.attention.kv_shared for block in spec.blocks)
    # every layer shared: 4 sliding x 2,064 + 2 full x 4,128 = 16,512 fewer than the unshared text model;
    # pre_projection 2 x 128 x 64 = 16,384 and post_projection 64 x 128 = 8,192 more; head tied
    text = spec_from_config({**ASSISTANT["text_config"], "num_kv_shared_layers": 0}, "t")
    assert total_params(spec) - total_params(text) == -16_512 + 16_384 + 8_192
    assert spec.tied_embeddings and "backbone's weights, forward and the keys" in spec.approximations[0]
    # the projections run once, on the first and last layer: FLOPs and peft's all-linear adapters
    first, last = spec.blocks[0], spec.blocks[-1]
    assert (first.count, last.count) == (1, 1)
    assert block_matmul_active(first, spec) - block_matmul_active(spec.blocks[1], spec) == 16_384
    # LoRA r 8 all-linear adds 8 x (256 + 64) = 2,560 and 8 x (64 + 128) = 1,536 for them
    with_projections = lora_params(spec, LoraSettings(rank=8, targets="all-linear"))
    without = sum(
        8 * (linear.in_features + linear.out_features) * block.count
        for block in spec.blocks
        for linear in block_linears(block, spec.hidden_size)
        if linear.role != "proj"
    )
    assert with_projections - without == 2_560 + 1_536
    result = estimate({"model": "Llama-3.1-8B", "method": "lora"}, model=spec)
    assert spec.approximations[0] in result.approximations


def test_assistant_text_config_without_sharing_shares_every_layer() -> None:
    # Gemma4UnifiedAssistantConfig sets num_kv_shared_layers to the layer count when it is 0 or unset
    text = {key: value for key, value in ASSISTANT["text_config"].items() if key != "num_kv_shared_layers"}
    for text_config in (text, {**text, "num_kv_shared_layers": 0}):
        spec = spec_from_config({**ASSISTANT, "text_config": text_config}, "a")
        assert total_params(spec) == total_params(spec_from_config(ASSISTANT, "a"))


def test_assistant_ordered_embeddings_are_refused() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**ASSISTANT, "use_ordered_embeddings": True}, "a")
    assert error.value.field == "use_ordered_embeddings"
