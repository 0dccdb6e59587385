"""Variant layouts read from the architecture table, hand-computed: DeepSeek sparse attention's
indexer, gated attention, a wrapper whose causal-LM class is its language model alone."""

from __future__ import annotations

from typing import Any

from configs import TINY_LLAMA

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.activations import ActivationMode, attention_bytes
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.weights import total_params

# MLA: hidden 64, 4 heads, q latent 32, kv latent 16, rope 8 + nope 8, v 8; 2 dense layers
TINY_MLA: dict[str, Any] = {
    "model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8, "v_head_dim": 8, "vocab_size": 256, "n_routed_experts": 0,
}  # fmt: skip
BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")


def test_dsa_indexer_parameters() -> None:
    dsa = {**TINY_MLA, "model_type": "deepseek_v32", "index_n_heads": 2, "index_head_dim": 8}
    # per layer: wq_b 32 x (2 x 8) = 512, wk 64 x 8 = 512, weights_proj 64 x 2 = 128,
    # k_norm LayerNorm 2 x 8 = 16 -> 1,168; two layers -> 2,336
    assert (
        total_params(spec_from_config(dsa, "dsa")) - total_params(spec_from_config(TINY_MLA, "v3")) == 2_336
    )
    note = spec_from_config(dsa, "dsa").approximations[0]
    assert note.startswith("DeepSeek sparse attention: the indexer's weights are counted exactly")


def test_dsa_layers_that_share_an_indexer_are_refused() -> None:
    import pytest

    from trainplan.specs.errors import ConfigError

    dsa = {**TINY_MLA, "model_type": "deepseek_v32", "index_n_heads": 2, "index_head_dim": 8,
           "indexer_types": ["full", "shared"]}  # fmt: skip
    with pytest.raises(ConfigError) as error:
        spec_from_config(dsa, "dsa")
    assert error.value.field == "indexer_types[1]"


def test_gated_attention_parameters_and_activations() -> None:
    qwen3 = spec_from_config({**TINY_LLAMA, "model_type": "qwen3"}, "q")
    per_head = spec_from_config({**TINY_LLAMA, "model_type": "laguna"}, "l")
    per_channel = spec_from_config({**TINY_LLAMA, "model_type": "laguna", "gating": "per-element"}, "l")
    # g_proj: hidden 64 x 4 heads = 256 per layer, or 64 x (4 x 16) = 4,096; two layers
    assert total_params(per_head) - total_params(qwen3) == 512
    assert total_params(per_channel) - total_params(qwen3) == 8_192
    # bf16 full training, no autocast copy: the gate's output (4 heads) and the gated product
    # (64 channels) are kept, 2 bytes each -> 136 bytes per token per layer
    gated = per_head.blocks[0].attention
    plain = qwen3.blocks[0].attention
    assert gated is not None and plain is not None
    kept = attention_bytes(per_head, gated, BF16_FULL)[0] - attention_bytes(qwen3, plain, BF16_FULL)[0]
    assert kept == 136


def test_llama4_causal_lm_is_its_language_model_with_a_note() -> None:
    text = {**TINY_LLAMA, "model_type": "llama4_text", "intermediate_size_mlp": 128, "num_local_experts": 0,
            "interleave_moe_layer_step": 1}  # fmt: skip
    wrapper = {
        "model_type": "llama4",
        "text_config": text,
        "vision_config": {"model_type": "llama4_vision_model"},
    }
    spec = spec_from_config(wrapper, "l4")
    assert total_params(spec) == total_params(spec_from_config(text, "t"))
    assert (
        not spec.approximations and "encoders (vision_config, audio_config) are not counted" in spec.notes[0]
    )
    result = estimate({"model": "Llama-3.1-8B"}, model=spec)
    assert spec.notes[0] in result.warnings
