"""Attention beyond the table's softmax variants: JetMoE's mixture of attention heads and its MoE
routing, Doge's dynamic mask, Inkling's relative-position logits and short convolutions.
Hand-computed parameters, active parameters, FLOPs and activations; JetMoE's and Inkling's checked
against what autograd saves on real CPU tensors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from trainplan.engine.terms.activations import ActivationMode, attention_bytes, layer_activations, mlp_bytes
from trainplan.engine.terms.flops import block_matmul_active
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import ConfigError
from trainplan.specs.weights import block_active_params, block_linears, block_params, total_params

# h 64; 2 kv heads of 16 (K = 32); 4 expert pairs, 2 per token (H = 4 query heads); MLP 96 wide
TINY_JETMOE: dict[str, Any] = {
    "model_type": "jetmoe", "hidden_size": 64, "num_hidden_layers": 1, "num_key_value_heads": 2,
    "kv_channels": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 96,
    "vocab_size": 100,
}  # fmt: skip
BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")


def saved_per_token(model: Any, run: Callable[[], object], seq: int) -> float:
    """Bytes a token of `run()` leaves saved for backward: every tensor autograd packs, weights
    left out, each storage counted once."""
    pytest.importorskip("torch")
    from trainplan.engine.measure.tracker import saved_for_backward

    with saved_for_backward(model.parameters()) as saved:
        run()
    return sum(saved.values()) / seq


def tiny() -> Any:
    return spec_from_config(TINY_JETMOE, "tiny-jetmoe")


def test_params_by_hand() -> None:
    # attention: input_linear 4 x 64 x 32 = 8,192; output_linear 4 x 32 x 64 = 8,192; kv_proj
    # 64 x 64 = 4,096; router 64 x 4 = 256; output bias 64                    -> 20,800
    # MLP: input_linear 4 x 64 x 192 = 49,152; output_linear 4 x 96 x 64 = 24,576; router 256;
    # bias 64                                                                 -> 74,048
    # two RMSNorms 128                                        -> 94,976 per layer
    # tied embedding 100 x 64 = 6,400 and the final norm 64   -> 101,440
    spec = tiny()
    (block,) = spec.blocks
    attention = block.attention
    assert attention is not None
    assert (attention.num_heads, attention.num_kv_heads, attention.routed_top_k) == (4, 2, 2)
    assert block_params(block, spec) == 94_976
    assert total_params(spec) == 101_440


def test_active_params_and_flops_count_top_k_expert_pairs() -> None:
    spec = tiny()
    (block,) = spec.blocks
    # unrouted: kv_proj 4,096, two routers 512, two biases 128, norms 128 = 4,864; routed
    # 16,384 + 73,728 = 90,112, of which a token runs 2 / 4              -> 4,864 + 45,056
    assert block_active_params(block, spec) == 49_920
    # matmul weights a token meets: q 2 x 2,048, kv 4,096, router 256, o 2 x 2,048;
    # MLP 2 x 12,288, 2 x 6,144, router 256                             -> 49,664
    assert block_matmul_active(block, spec) == 49_664
    names = [linear.name for linear in block_linears(block, spec.hidden_size)]
    assert names[:4] == ["experts.input_linear", "kv_proj", "experts.router.layer", "experts.output_linear"]


def test_activations_by_hand() -> None:
    spec = tiny()
    (block,) = spec.blocks
    assert block.attention is not None and block.mlp is not None
    # attention: normed input 2 x 64 = 128; routing 2 x (4 + 8 + 16 + 2 + 2 x 64) = 316;
    # per routed copy gathered input 128, query 64, gathered output 64, expert output 128 -> 768;
    # kernel q, k, v 3 x 2 x 64 = 384, output 128 and logsumexp 4 x 4 = 16   -> 1,740
    assert attention_bytes(spec, block.attention, BF16_FULL) == (1_740, 0.0)
    # MLP: input 128; per copy gathered input 128, gate and up 2 x 192, act 192, product 192,
    # expert output 128 -> 2 x 1,024; routing 316                             -> 2,492
    assert mlp_bytes(spec, block.mlp, BF16_FULL) == 2_492
    # eager: no kernel output or logsumexp; per key an fp32 softmax and its bf16 copy per head
    eager = ActivationMode(2, 2, True, frozenset(), "eager", "none")
    assert attention_bytes(spec, block.attention, eager) == (1_740 - 144, 4 * 6)


def test_formulas_match_saved_tensors() -> None:
    """Attention and MLP of one tiny JetMoE layer against what autograd saves (bf16, SDPA)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = tiny()
    (block,) = spec.blocks
    assert block.attention is not None and block.mlp is not None
    seq = 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_JETMOE)
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16, attn_implementation="sdpa"
        )
        layer = model.model.layers[0]
        x = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)
        cos, sin = model.model.rotary_emb(x, torch.arange(seq)[None])
        attention = saved_per_token(
            model, lambda: layer.self_attention(x, attention_mask=None, position_embeddings=(cos, sin)), seq
        )
        mlp = saved_per_token(model, lambda: layer.mlp(x), seq)
    # the RoPE cos / sin tables (per position, not per sample: 2 x 2 x 16 per position here) are
    # the only saved tensors the attention formula leaves out
    rope_tables = 2 * 2 * 16
    assert attention_bytes(spec, block.attention, BF16_FULL)[0] == attention - rope_tables
    assert mlp_bytes(spec, block.mlp, BF16_FULL) == mlp


def test_head_count_that_contradicts_the_routing_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_JETMOE, "num_attention_heads": 8}, "x")
    assert error.value.field == "num_attention_heads"
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_JETMOE, "num_experts_per_tok": 5}, "x")
    assert error.value.field == "num_experts_per_tok"


# Doge: h 64, 4 heads over 2 kv heads of 16, MLP 96, untied
TINY_DOGE: dict[str, Any] = {
    "model_type": "doge", "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100,
}  # fmt: skip


def test_doge_params_by_hand() -> None:
    # attention: q 64 x 64 = 4,096, k and v 64 x 32 = 2 x 2,048, dt_proj 32 x 2 = 64, o 4,096,
    # A 2, q/k norms 2 x 16                                                  -> 12,386
    # gated MLP 3 x 64 x 96 = 18,432; two norms and two residual scales 4 x 64 = 256
    #                                                        -> 31,074 per layer
    # embedding and untied head 2 x 6,400, final norm 64      -> 43,938
    spec = spec_from_config(TINY_DOGE, "tiny-doge")
    (block,) = spec.blocks
    assert block.mlp is not None and not block.mlp.is_moe  # num_experts is set, is_moe is not
    assert block_params(block, spec) == 31_074
    assert total_params(spec) == 43_938
    assert any("dynamic mask" in note for note in spec.approximations)


def test_doge_activations_by_hand() -> None:
    spec = spec_from_config(TINY_DOGE, "tiny-doge")
    (block,) = spec.blocks
    layer = layer_activations(spec, block, BF16_FULL)
    # q/k/v input 128; q/k norms: fp32 inputs 4 x (64 + 32), their normed outputs for the trained
    # norm weights 2 x (64 + 32), 1/rms 4 x (4 + 2) = 600; the mask keeps SDPA from GQA: q and k,
    # v repeated to 4 heads 2 x (64 + 2 x 64) = 384; output 128 and logsumexp 16; dt_proj's input
    # (the 32 value channels) 64, softplus / A / exp 3 x 2 x 2 = 12  -> 1,332
    assert layer.attention == 1_332
    # per key: the causal fill pattern 1 and the bias the kernel keeps, 2 bytes x 4 heads
    assert layer.scores_per_key == 9
    eager = layer_activations(spec, block, ActivationMode(2, 2, True, frozenset(), "eager", "none"))
    # eager: no output or logsumexp, the merged heads 128 for o_proj; per key the fp32 softmax and
    # its bf16 copy 4 x 6 and the fill pattern, the bias only added
    assert (eager.attention, eager.scores_per_key) == (1_332 - 144 + 128, 25)
    # one kv head per head: v reaches the kernel as it is, and dt_proj reads that same tensor:
    # input 128, norms 4 x 128 + 2 x 128 (normed outputs) + 4 x 8 = 800, kernel 2 x 192 = 384 + 144,
    # dt 3 x 2 x 4 = 24 -> 1,480
    mha = spec_from_config({**TINY_DOGE, "num_key_value_heads": 4}, "mha")
    assert layer_activations(mha, mha.blocks[0], BF16_FULL).attention == 1_480


def test_doge_cross_domain_moe_is_refused() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_DOGE, "is_moe": True}, "x")
    assert error.value.field == "is_moe"


# LongCat-Flash: h 64; MLA of 2 heads (q latent 16, kv latent 8, nope 8 + rope 4, values 8); dense
# MLPs 48 wide; 4 experts of 16 and 2 zero-computation experts, 2 per token; one layer, untied
TINY_LONGCAT: dict[str, Any] = {
    "model_type": "longcat_flash", "hidden_size": 64, "num_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4, "v_head_dim": 8, "ffn_hidden_size": 48, "n_routed_experts": 4,
    "zero_expert_num": 2, "expert_ffn_hidden_size": 16, "moe_topk": 2, "vocab_size": 100,
}  # fmt: skip


def test_longcat_params_by_hand() -> None:
    # MLA per sub-layer: q_a 64 x 16 = 1,024, its norm 16, q_b 16 x 2 x 12 = 384, kv_a 64 x 12
    # = 768, its norm 8, kv_b 8 x 2 x 16 = 256, o 16 x 64 = 1,024                  -> 3,480
    # dense MLP 3 x 64 x 48 = 9,216 per sub-layer; MoE: gate_up for all 6 experts 6 x 32 x 64 =
    # 12,288, down for the 4 real ones 4 x 64 x 16 = 4,096, router 64 x 6 = 384  -> 16,768
    # four norms 256                          -> 2 x 3,480 + 2 x 9,216 + 16,768 + 256 = 42,416
    # embedding and untied head 2 x 6,400, final norm 64                            -> 55,280
    spec = spec_from_config(TINY_LONGCAT, "tiny-longcat")
    first, second = spec.blocks
    assert first.mlp is not None and first.mlp.is_moe and first.mlp.zero_experts == 2
    assert first.mlp.shared_intermediate_size == 48  # the dense MLP beside the shortcut MoE
    assert second.mlp is not None and not second.mlp.is_moe
    assert total_params(spec) == 55_280
    # the MoE sub-layer: 3,480 + 9,216 + 16,768 + 128; a token runs 2 real experts' gate_up and
    # down (2 x (2,048 + 1,024)) of the 16,384 expert weights             -> 29,592 and 19,352
    assert block_params(first, spec) == 29_592
    assert block_active_params(first, spec) == 19_352
    assert any("zero-computation experts" in note for note in spec.approximations)


# A.X K2: h 64; MLA of 2 heads (q latent 16, kv latent 8, nope 8 + rope 4, values 8) with a DSA
# indexer of 2 heads of 8; gated norms of rank 4; a dense layer (48 wide), then an MoE layer of 4
# experts of 16 (2 per token) and one shared expert
TINY_AXK2: dict[str, Any] = {
    "model_type": "axk2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
    "num_key_value_heads": 2, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8,
    "qk_rope_head_dim": 4, "v_head_dim": 8, "index_n_heads": 2, "index_head_dim": 8,
    "gated_norm_rank": 4, "intermediate_size": 48, "moe_intermediate_size": 16, "n_routed_experts": 4,
    "num_experts_per_tok": 2, "n_shared_experts": 1, "vocab_size": 100,
    "mlp_layer_types": ["dense", "sparse"], "layer_types": ["indexed_attention", "indexed_attention"],
}  # fmt: skip


def test_axk2_params_by_hand() -> None:
    # MLA: q_a 64 x 16 = 1,024, its norm 16, q_gate_proj 2 x 16 -> 2 x (12 + 8): 1,280, kv_a 64 x 12
    # = 768, its norm 8, kv_b 8 x 2 x 16 = 256, o 16 x 64 = 1,024; indexer wq_b 16 x 16 = 256, wk
    # 64 x 8 = 512, its LayerNorm 16, weights_proj 64 x 2 = 128                     -> 5,288
    # a gated norm's fc1 and fc2: 2 x 64 x 4 = 512
    # dense layer: 5,288 + MLP 3 x 64 x 48 = 9,216 + norms 128 + one gated norm 512 -> 15,144
    # MoE layer: 5,288 + experts 4 x 3 x 64 x 16 = 12,288 + router 256 + shared 3,072 + norms 128
    # + two gated norms 1,024                                                     -> 22,056
    # embedding and untied head 2 x 6,400, final norm 64                          -> 50,064
    spec = spec_from_config(TINY_AXK2, "tiny-axk2")
    dense, moe = spec.blocks
    assert (dense.gated_norms, moe.gated_norms, moe.gated_norm_rank) == (1, 2, 4)
    assert block_params(dense, spec) == 15_144
    assert block_params(moe, spec) == 22_056
    assert total_params(spec) == 50_064
    names = [linear.name for linear in block_linears(moe, spec.hidden_size)]
    assert "q_gate_proj" in names and "q_b_proj" not in names
    assert names[-2:] == ["post_attention_layernorm.mlp.fc1", "post_attention_layernorm.mlp.fc2"]


def test_axk2_activations_by_hand() -> None:
    spec = spec_from_config(TINY_AXK2, "tiny-axk2")
    dense, _ = spec.blocks
    assert dense.attention is not None
    plain = replace(dense.attention, query_gate=False)
    # q_gate_proj reads both q latents (one more, 2 x 16), the gate's fp32 sigmoid 4 x 16 and the
    # gated product 2 x 16, o_proj's input                                         -> 128 more
    assert (
        attention_bytes(spec, dense.attention, BF16_FULL)[0] - attention_bytes(spec, plain, BF16_FULL)[0]
        == 128
    )
    # the dense layer's norms: two RMSNorms (fp32 input 256, 1/rms 4, normalised 128 each) and the
    # gate of the first: SiLU input 2 x 4 and the fp32 sigmoid 4 x 64 (fc1 keeps y, fc2 its input)
    assert layer_activations(spec, dense, BF16_FULL).norms == 2 * 388 + 8 + 256


def test_axk2_gated_norm_matches_saved_tensors() -> None:
    """One gated RMSNorm against what autograd saves (bf16, real CPU tensors): 788 bytes a token."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    spec = spec_from_config(TINY_AXK2, "tiny-axk2")
    dense, _ = spec.blocks
    seq = 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_AXK2)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        x = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)
        measured = saved_per_token(model, lambda: model.model.layers[0].input_layernorm(x), seq)
    # one plain norm 388, the gate's 264, and fc1's and fc2's inputs 128 + 8
    layer = layer_activations(spec, dense, BF16_FULL)
    ungated = layer_activations(spec, replace(dense, gated_norms=0, linears=()), BF16_FULL)
    gated = layer.norms - ungated.norms + layer.mlp - ungated.mlp
    assert 388 + gated == measured == 788


# Inkling: h 64; full layer 4 heads over 2 kv heads of 16, relative logits 4 wide over 32 keys;
# sliding layer 4 kv heads, relative extent = its 16-key window; 4-tap convolutions; layer 0 dense
# (96 wide), layer 1 MoE (4 experts of 32, top 2, 2 shared experts the router also scores); untied
TINY_INKLING: dict[str, Any] = {
    "model_type": "inkling_text", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "swa_num_attention_heads": 4, "swa_num_key_value_heads": 4,
    "swa_head_dim": 16, "sliding_window_size": 16, "d_rel": 4, "rel_extent": 32,
    "layer_types": ["hybrid", "hybrid_sliding"], "mlp_layer_types": ["dense", "sparse"],
    "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 2, "vocab_size": 100, "conv_kernel_size": 4,
}  # fmt: skip


def test_inkling_params_by_hand() -> None:
    spec = spec_from_config(TINY_INKLING, "tiny-inkling")
    full, sliding = spec.blocks
    assert full.attention is not None and sliding.attention is not None
    assert (sliding.attention.num_kv_heads, sliding.attention.relative_extent) == (4, 16)
    # layer 0: q 4,096, k and v 2 x 2,048, r_proj 64 x (4 x 4) = 1,024, o 4,096; q/k norms 32; the
    # bias bank 4 x 32 = 128; key and value convolutions 2 x 32 x 4 = 256              -> 13,728
    # dense MLP 3 x 64 x 96 = 18,432 and its scale 1; two norms 128; the sub-layer convolutions
    # 2 x 64 x 4 = 512                                                               -> 32,801
    assert block_params(full, spec) == 32_801
    # layer 1: q, k, v, o 4 x 4,096, r_proj 1,024, norms 32, bank 4 x 16 = 64, convolutions
    # 2 x 64 x 4 = 512 -> 18,016; experts 4 x (64 x 64 + 32 x 64) = 24,576, router (4 + 2) x 64
    # = 384 and its scale 1, shared experts 2 x 3 x 32 x 64 = 12,288; norms 128, convolutions 512
    assert block_params(sliding, spec) == 18_016 + 37_249 + 640
    # embedding and head 2 x 6,400, the embedding norm and the final norm 2 x 64  -> 101,634, the
    # count transformers 5.24 builds for this config
    assert total_params(spec) == 101_634


def test_inkling_flops_count_convolutions_and_relative_logits() -> None:
    spec = spec_from_config(TINY_INKLING, "tiny-inkling")
    full, sliding = spec.blocks
    # layer 0: linears 13,312 + 18,432; taps 2 x 64 x 4 + 2 x 32 x 4 = 768; each head mixes its 4
    # states into 32 logits: 4 x 128 = 512                                       -> 33,024
    assert block_matmul_active(full, spec) == 33_024
    # layer 1: attention linears 17,408; router 384, shared 12,288, top-2 experts 2 x 6,144;
    # taps 2 x 64 x 4 x 2 = 1,024; logits 4 x 64 = 256                           -> 43,648
    assert block_matmul_active(sliding, spec) == 43_648


def test_inkling_activations_match_saved_tensors() -> None:
    """Each layer's attention, convolutions and MLP against what autograd saves (bf16, eager
    attention, real CPU tensors). CPU SDPA with a float mask that needs a gradient falls back to
    the math path, so the memory-efficient CUDA kernel's copy of the bias is not checked here."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.masking_utils import create_causal_mask

    spec = spec_from_config(TINY_INKLING, "tiny-inkling")
    eager = ActivationMode(2, 2, True, frozenset(), "eager", "none")
    seq = 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_INKLING)
        model = transformers.AutoModelForCausalLM.from_config(
            config, dtype=torch.bfloat16, attn_implementation="eager"
        )
        x = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)
        mask = create_causal_mask(
            config=config, inputs_embeds=x, attention_mask=None, past_key_values=None,
            position_ids=torch.arange(seq)[None],
        )  # fmt: skip

        def mixers(layer: Any) -> float:
            attention = saved_per_token(model, lambda: layer.self_attn(x, attention_mask=mask), seq)
            return attention + saved_per_token(model, lambda: (layer.attn_sconv(x), layer.mlp_sconv(x)), seq)

        measured = [
            (mixers(layer), saved_per_token(model, lambda: layer.mlp(x), seq))  # noqa: B023
            for layer in model.model.layers
        ]
    kept = [layer_activations(spec, block, eager) for block in spec.blocks]
    for (mixer, _), ours in zip(measured, kept, strict=True):
        assert ours.attention + ours.scores_per_key * seq == mixer
    # layer 0: the dense MLP with its scale's saved output; layer 1: the MoE less two things the
    # formula leaves out: the router weight's fp32 copy (per layer, (4 + 2) x 64 x 4 B = 1,536,
    # 24 a token here) and the dispatch bookkeeping the common MoE term does not count (per routed
    # copy two int64 indices and index_add's, and the bf16 weight: 2 x 26; the int32 counts 0.25)
    assert kept[0].mlp == measured[0][1] == 1_024
    assert kept[1].mlp == measured[1][1] - 24 - 52.25


# Hy-V4: h 64; MLA of 4 heads (q latent 32, kv latent 16, rope 8 + nope 8, v 8) with sinks and a
# per-channel output gate; a 2-head indexer of 8 on layers 0 and 2, layer 1 sharing layer 0's;
# 4 residual streams; layer 0 dense (96), layers 1-2 MoE (4 experts of 16, top 2, 1 shared)
TINY_HY_V4: dict[str, Any] = {
    "model_type": "hy_v4", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "index_n_heads": 2,
    "index_head_dim": 8, "index_topk": 8, "hc_mult": 4, "mlp_layer_types": ["dense", "sparse", "sparse"],
    "layer_types": ["indexed_attention"] * 3, "indexer_types": ["full", "shared", "full"],
    "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1,
    "topk_group": 1, "n_shared_experts": 1, "moe_intermediate_size": 16, "vocab_size": 100,
    "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
}  # fmt: skip


def test_hy_v4_params_by_hand() -> None:
    spec = spec_from_config(TINY_HY_V4, "tiny-hy-v4")
    first, shared, full = spec.blocks
    # MLA: q_a 64 x 32 = 2,048 and its norm 32, q_b 32 x 64 = 2,048, kv_a 64 x 24 = 1,536 and its
    # norm 16, kv_b 16 x 64 = 1,024, o 32 x 64 = 2,048, gate_proj 64 x 32 = 2,048, 4 sinks -> 10,804;
    # the indexer: wq_b 32 x 16 = 512, wk 64 x 8 = 512, weights_proj 64 x 2 = 128, its LayerNorm
    # 16 -> 1,168; two hyper-connection mixers 2 x (8 x 256 + 8 + 2) = 4,116; two norms 128
    assert block_params(first, spec) == 10_804 + 1_168 + 4_116 + 128 + 3 * 64 * 96
    # MoE: experts 4 x (64 x 32 + 16 x 64) = 12,288, router 256, shared 3 x 64 x 16 = 3,072; the
    # shared-indexer layer has no indexer of its own
    assert block_params(shared, spec) == 10_804 + 4_116 + 128 + 15_616
    assert block_params(full, spec) == block_params(shared, spec) + 1_168
    # embedding and head 2 x 6,400, final norm 64, the head's mixer 4 x 256 + 4 + 1 = 1,029
    # -> 111,037, the count transformers 5.24 builds for this config
    assert total_params(spec) == 111_037
    assert spec.stream_width == 4 * 64


def test_hy_v4_hyper_connection_flops_and_indexer_order() -> None:
    spec = spec_from_config(TINY_HY_V4, "tiny-hy-v4")
    first, shared, _ = spec.blocks
    # the two mixers' fn, 8 x 256 each, are 4,096 multiply-adds a token beside the layer's linears
    without = replace(shared, hyper_streams=0)
    assert block_matmul_active(shared, spec) - block_matmul_active(without, spec) == 4_096
    assert first.attention is not None and first.attention.index_heads == 2
    assert shared.attention is not None and shared.attention.index_heads == 0
    with pytest.raises(ConfigError) as error:  # a shared indexer needs a full one before it
        spec_from_config({**TINY_HY_V4, "indexer_types": ["shared", "full", "full"]}, "x")
    assert error.value.field == "indexer_types[0]"


def test_hy_v4_hyper_connections_match_saved_tensors() -> None:
    """A mixer with the residual update after its sub-layer, and the head, against what autograd
    saves (bf16 streams, real CPU tensors)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trainplan.engine.terms.variants import hyper_connection_bytes, hyper_head_bytes

    seq = 64
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_HY_V4)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        streams = torch.randn(1, seq, 4, 64, dtype=torch.bfloat16, requires_grad=True)
        mixer = model.model.layers[0].attn_hc
        post, _ = mixer(streams)
        sublayer = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)

        def update() -> object:  # HYV4DecoderLayer.forward's residual update
            weights = post.detach().requires_grad_()
            return (weights.float().unsqueeze(-1) * sublayer.float().unsqueeze(-2) + streams.float()).to(
                torch.bfloat16
            )

        measured = saved_per_token(model, lambda: mixer(streams), seq) + saved_per_token(model, update, seq)
        head = saved_per_token(model, lambda: model.model.hc_head(streams), seq)
    # mixer: fp32 streams 4 x 256 = 1,024, 1/rms 4, mixes 32 twice, sigmoids 32, bf16 streams 512,
    # input weights 16; update: fp32 sub-layer output 256, output weights 16        -> 1,924
    assert hyper_connection_bytes(BF16_FULL, 4, 64) == measured == 1_924
    assert hyper_head_bytes(BF16_FULL, 4, 64) == head == 1_604


def test_hy_v4_checkpointed_layers_keep_every_stream() -> None:
    from trainplan.engine.estimate import estimate
    from trainplan.engine.terms.variants import hyper_head_bytes
    from trainplan.specs.scenario import scenario_from_mapping

    spec = spec_from_config(TINY_HY_V4, "tiny-hy-v4")
    one_stream = replace(spec, residual_streams=1)
    seq = 256

    def forward_activations(model: Any, checkpointing: str) -> float:
        scenario = scenario_from_mapping(
            {"model": "x", "overhead_gib": 0.0, "grad_accum": 1, "method": "full", "precision": "bf16",
             "optimizer": "adamw-fused", "seq_len": seq, "activation_checkpointing": checkpointing}
        )  # fmt: skip
        phase = next(p for p in estimate(scenario, model=model).phases if p.name == "forward")
        return float(phase.term("activations").value)

    head = hyper_head_bytes(BF16_FULL, 4, 64) * seq  # the streams' head, outside the layers
    # full checkpointing: each of the 3 layers keeps its input, 4 streams of 64 in bf16, not one:
    # 3 x 2 x (4 - 1) x 64 bytes a token more
    assert (
        forward_activations(spec, "full") - forward_activations(one_stream, "full")
        == 3 * 2 * 3 * 64 * seq + head
    )
    assert forward_activations(spec, "none") - forward_activations(one_stream, "none") == head


def test_eager_attention_with_sinks_keeps_its_softmax_at_the_logits_dtype() -> None:
    # gpt-oss eager_attention_forward: cat([scores, sinks]) -> softmax at that dtype (kept),
    # probs[..., :-1] @ v. Pure bf16 (and LoRA on a bf16 base): the bmm reads a view of the kept
    # softmax, 2 B per head and key. fp32 weights under autocast: the sink parameter promotes the
    # logits to fp32 (4 B kept) and the cast to the values' bf16 is a second copy (2 B): 6 B,
    # the same as HF's usual fp32 softmax plus its half copy.
    from trainplan.engine.terms.mode import eager_per_key
    from trainplan.specs.model import Attention

    sinks, plain = Attention(8, 2, 64, 64, sinks=True), Attention(8, 2, 64, 64)
    bf16 = ActivationMode(2, 2, False, frozenset({"q_proj"}), "eager", "none")
    amp_full = ActivationMode(2, 4, True, frozenset(), "eager", "none")
    assert eager_per_key(sinks, bf16) == 8 * 2
    assert eager_per_key(sinks, amp_full) == 8 * (4 + 2)
    assert eager_per_key(plain, bf16) == eager_per_key(plain, amp_full) == 8 * (4 + 2)
    assert eager_per_key(sinks, replace(bf16, dropout=True)) == 8 * (2 + 1)
