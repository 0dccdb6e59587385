"""Linear-attention, recurrent and short-convolution mixers (Gated DeltaNet, lightning attention,
LFM2's short conv, KDA, Griffin's RG-LRU): hand-computed parameters, saved-for-backward bytes and
FLOPs, layer orders, and the naive derivations against the tensors autograd saves."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from trainplan.engine.terms.activations import ActivationMode, layer_activations
from trainplan.engine.terms.flops import flops_per_token
from trainplan.engine.terms.mixers import mixer_bytes, mixer_flops, output_gate_bytes
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.model import LinearMixer, ModelSpec
from trainplan.specs.weights import block_params, mixer_extra_params, mixer_linears, total_params

BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")
FROZEN = ActivationMode(2, 2, False, frozenset(), "sdpa", "none")
_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}

# h 64; Gated DeltaNet with 2 query/key heads of 16 and 4 value heads of 8 (K = 32, V = 32,
# conv channels C = 2K + V = 96, kernel 4); attention 4 heads of 16 with 2 key-value heads
TINY_QWEN3_NEXT: dict[str, Any] = {
    "model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "linear_num_key_heads": 2,
    "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 8,
    "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32, "intermediate_size": 64, "tie_word_embeddings": False,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
}  # fmt: skip
# h 64; lightning attention 4 heads of 16 (V = 64) in blocks of 64
TINY_MINIMAX: dict[str, Any] = {
    "model_type": "minimax", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "block_size": 64,
    "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 32,
    "layer_types": ["full_attention", "linear_attention"] * 2,
}  # fmt: skip
# h 64; short conv kernel 3
TINY_LFM2: dict[str, Any] = {
    "model_type": "lfm2", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96, "conv_L_cache": 3,
    "layer_types": ["conv", "full_attention"] * 2, **_IDS,
}  # fmt: skip
# h 64; KDA 4 heads of 16 (K = V = 64, C = 192, gate rank 16), conv 4; MLA attention layers
TINY_KIMI: dict[str, Any] = {
    "model_type": "kimi_linear", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 100,
    "num_attention_heads": 4, "num_key_value_heads": 4, "linear_num_heads": 4, "linear_head_dim": 16,
    "linear_conv_kernel_dim": 4, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 16, "head_dim": 8, "qk_head_dim": 16, "num_experts": 4, "num_experts_per_token": 2,
    "moe_intermediate_size": 32, "intermediate_size": 64,
    "layer_types": ["linear_attention", "full_attention"] * 2, "mlp_layer_types": ["dense"] * 4, **_IDS,
}  # fmt: skip

# h 64; RG-LRU 64 wide in 4 gate blocks of 16, conv 4; block_types recurrent, recurrent, attention
TINY_RGEMMA: dict[str, Any] = {
    "model_type": "recurrent_gemma", "hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 100,
    "num_attention_heads": 4, "lru_width": 64, "conv1d_width": 4, "intermediate_size": 96,
    "attention_window_size": 32, **_IDS,
}  # fmt: skip


def tiny(config: dict[str, Any]) -> tuple[ModelSpec, LinearMixer]:
    spec = spec_from_config(config, str(config["model_type"]))
    mixer = next(block.mixer for block in spec.blocks if block.mixer is not None)
    return spec, mixer


def mixer_params(mixer: LinearMixer, hidden: int) -> int:
    return sum(linear.params for linear in mixer_linears(mixer, hidden)) + mixer_extra_params(mixer)


def test_gated_deltanet_params_by_hand() -> None:
    # in_proj_qkvz 64 x (2 x 32 + 2 x 32) = 8,192; in_proj_ba 64 x 2 x 4 = 512; out_proj 32 x 64 = 2,048
    # conv 96 x 4 = 384 (no bias); A_log and dt_bias 2 x 4 = 8; gated norm one head wide 8  -> 11,152
    _, mixer = tiny(TINY_QWEN3_NEXT)
    assert mixer.conv_channels == 96
    assert mixer_params(mixer, 64) == 11_152
    # Qwen3.5 splits the projections (qkv 6,144 + z 2,048 + b 256 + a 256 = 8,704 = 8,192 + 512)
    split = spec_from_config({**TINY_QWEN3_NEXT, "model_type": "qwen3_5_text"}, "q35")
    split_mixer = next(block.mixer for block in split.blocks if block.mixer is not None)
    assert split_mixer.projections == "split" and mixer_params(split_mixer, 64) == 11_152
    names = [linear.name for linear in mixer_linears(split_mixer, 64)]
    assert names == ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"]
    # OLMo-Hybrid: one module per projection, the same widths (q, k 2 x 2,048, v and g 2 x 2,048,
    # a and b 2 x 256, o 2,048 = 10,752 = 8,192 + 512 + 2,048)
    olmo = spec_from_config({**TINY_QWEN3_NEXT, "model_type": "olmo_hybrid"}, "olmo")
    olmo_mixer = next(block.mixer for block in olmo.blocks if block.mixer is not None)
    assert olmo_mixer.projections == "separate" and mixer_params(olmo_mixer, 64) == 11_152
    names = [linear.name for linear in mixer_linears(olmo_mixer, 64)]
    assert names == ["q_proj", "k_proj", "v_proj", "a_proj", "b_proj", "g_proj", "o_proj"]


def test_qwen3_next_layer_order_and_gated_attention() -> None:
    spec, _ = tiny(TINY_QWEN3_NEXT)
    kinds = [("attention" if block.attention else "mixer", block.count) for block in spec.blocks]
    assert kinds == [("mixer", 3), ("attention", 1)]
    attention = spec.blocks[1].attention
    assert attention is not None and attention.output_gate
    # q_proj emits the query and its gate: 64 -> 2 x 4 x 16 = 128
    assert [linear.out_features for linear in mixer_linears_of_attention(spec)] == [128, 32, 32, 64]
    # gated output: sigmoid output 2 x 64 + the gated product (o_proj's input) 2 x 64
    assert output_gate_bytes(attention, BF16_FULL) == 256


def mixer_linears_of_attention(spec: ModelSpec) -> list[Any]:
    from trainplan.specs.weights import attention_linears

    attention = spec.blocks[1].attention
    assert attention is not None
    return attention_linears(attention, spec.hidden_size)


def test_interval_gives_the_layer_order_without_layer_types() -> None:
    # a config.json with full_attention_interval and no layer_types (Qwen3NextConfig fills them in)
    config = {key: value for key, value in TINY_QWEN3_NEXT.items() if key != "layer_types"}
    config.update(num_hidden_layers=8, full_attention_interval=4)
    spec = spec_from_config(config, "q")
    assert [(block.attention is not None, block.count) for block in spec.blocks] == [
        (False, 3), (True, 1), (False, 3), (True, 1),
    ]  # fmt: skip


def test_lightning_short_conv_and_kda_params_by_hand() -> None:
    _, lightning = tiny(TINY_MINIMAX)
    # qkv_proj 64 x 192 = 12,288; output_gate 64 x 64 = 4,096; out_proj 64 x 64 = 4,096; norm 64 -> 20,544
    assert mixer_params(lightning, 64) == 20_544
    _, conv = tiny(TINY_LFM2)
    # in_proj 64 x 192 = 12,288; out_proj 64 x 64 = 4,096; conv 64 x 3 = 192 (no bias) -> 16,576
    assert mixer_params(conv, 64) == 16_576
    _, kda = tiny(TINY_KIMI)
    # q/k/v_proj 3 x 64 x 64 = 12,288; f_a 64 x 16 + f_b 16 x 64 = 2,048; b_proj 64 x 4 = 256;
    # g_a + g_b 2,048; o_proj 4,096; conv 192 x 4 = 768; A_log 4; dt_bias 64; o_norm 16 -> 21,588
    assert mixer_params(kda, 64) == 21_588


def test_full_rank_kda_gates_and_per_head_attention_gate() -> None:
    # Ling 3.0 (bailing_hybrid): KDA with full-rank gates f_proj 64 x 64 and g_proj 64 x 64
    # (2 x 4,096) in place of Kimi's two low-rank pairs (2 x 2,048): 21,588 + 4,096 = 25,684
    config = {**TINY_KIMI, "model_type": "bailing_hybrid", "linear_num_heads": 4, "linear_head_dim": 16}
    spec, mixer = tiny(config)
    names = [linear.name for linear in mixer_linears(mixer, 64)]
    assert names == ["q_proj", "k_proj", "v_proj", "f_proj", "b_proj", "g_proj", "o_proj"]
    assert mixer.gate_rank == 0 and mixer_params(mixer, 64) == 25_684
    # its MLA layers gate each head: g_proj 64 -> 4 heads; the gate keeps a H = 8 bytes, and the
    # gated product (o_proj's input, 4 heads x v_head_dim 16 in bf16) 128
    attention = next(block.attention for block in spec.blocks if block.attention is not None)
    assert attention.kind == "mla" and attention.head_gate
    gate = [linear for linear in mixer_linears_of(attention, 64) if linear.name == "g_proj"]
    assert [(linear.in_features, linear.out_features) for linear in gate] == [(64, 4)]
    assert output_gate_bytes(attention, BF16_FULL) == 8 + 128
    # LFM3: the same per-head gate on softmax attention, and sandwich norms (4 per layer)
    lfm3 = spec_from_config({**TINY_LFM2, "model_type": "lfm3"}, "lfm3")
    lfm3_attention = next(block for block in lfm3.blocks if block.attention is not None)
    assert lfm3_attention.attention is not None and lfm3_attention.attention.head_gate
    assert lfm3_attention.norms == 4
    plain = spec_from_config({**TINY_LFM2, "model_type": "lfm3", "use_sandwich_norm": False}, "lfm3")
    assert all(block.norms == 2 for block in plain.blocks)


def mixer_linears_of(attention: Any, hidden: int) -> list[Any]:
    from trainplan.specs.weights import attention_linears

    return attention_linears(attention, hidden)


def test_rg_lru_block_params_and_layer_cycle() -> None:
    spec, mixer = tiny(TINY_RGEMMA)
    # linear_y, linear_x, linear_out 3 x (64 x 64 + 64) = 12,480; conv 64 x 4 + 64 = 320;
    # recurrence parameter 64; input and recurrence gates 2 x (4 x 16 x 16 + 64) = 2,176 -> 15,040
    assert mixer_params(mixer, 64) == 15_040
    assert [(block.attention is not None, block.count) for block in spec.blocks] == [(False, 2), (True, 1)]
    mlp = spec.blocks[0].mlp
    assert mlp is not None and mlp.intermediate_size == 48 and mlp.bias  # half of intermediate_size
    # block_types cycles over the layers: recurrent, recurrent, attention, recurrent, recurrent
    five = spec_from_config({**TINY_RGEMMA, "num_hidden_layers": 5}, "rg")
    assert [(block.attention is not None, block.count) for block in five.blocks] == [
        (False, 2), (True, 1), (False, 2),
    ]  # fmt: skip
    # in_proj inputs 128; twelve V-wide bf16 tensors 12 x 128 = 1,536; conv input 128; the fp32
    # scan 2 x 4 x 64 = 512; linear_out input 128                                       -> 2,432
    assert mixer_bytes(spec, mixer, BF16_FULL, "naive") == 2_432
    # conv 2 x 64 x 4 = 512; gates 4 x 64 x 16 = 4,096; scan 2 x 64 = 128              -> 4,736
    assert mixer_flops(mixer) == 4_736


def test_lfm2_mlp_width_rule() -> None:
    # Lfm2MLP: int(2 x 1000 / 3) = 666; x 1.5 = 999; rounded up to a multiple of 256 -> 1,024
    config = {
        **TINY_LFM2,
        "intermediate_size": 1000,
        "block_ffn_dim_multiplier": 1.5,
        "block_multiple_of": 256,
    }
    spec = spec_from_config(config, "lfm2")
    mlp = spec.blocks[0].mlp
    assert mlp is not None and mlp.intermediate_size == 1_024
    # no adjustment: the width as given
    plain = spec_from_config({**config, "block_auto_adjust_ff_dim": False}, "lfm2")
    assert plain.blocks[0].mlp is not None and plain.blocks[0].mlp.intermediate_size == 1_000


def test_lfm2_attention_indices_without_layer_types() -> None:
    config = {key: value for key, value in TINY_LFM2.items() if key != "layer_types"}
    spec = spec_from_config({**config, "full_attn_idxs": [1, 3]}, "lfm2")
    assert [block.attention is not None for block in spec.blocks] == [False, True, False, True]
    # Lfm2Config's default when neither is given: every layer attention
    every = spec_from_config(config, "lfm2")
    assert len(every.blocks) == 1 and every.blocks[0].attention is not None and every.blocks[0].count == 4


def test_gated_deltanet_activations_by_hand() -> None:
    spec, mixer = tiny(TINY_QWEN3_NEXT)
    # naive, bf16, H 4, d_k 16, d_v 8, V 32, C 96, Q 64 (bytes per token):
    # in_proj input 2 x 64 = 128; conv input and output 2 x 2 x 96 = 384; beta 2 x 4 + softplus 2 x 16 = 40
    # q, k at value heads in fp32 + rstd 2 x (256 + 16) = 544; beta, v, normalised k 16 + 128 + 256 = 400
    # four Q x Q chunk matrices 4 x 1,024 = 4,096; k beta and k 2 x 256 = 512; cumulative decays 48;
    # v beta, decayed k beta 128 + 256 = 384; scan 1,024 + 512 + 128 + 4 x 4 x 16 x 8 / 64 = 1,696
    # gated norm 128 + 16 + 64 + 256 + 64 = 528; out_proj input 2 x 32 = 64          -> 8,824
    assert mixer_bytes(spec, mixer, BF16_FULL, "naive") == 8_824
    # fused (fla, causal-conv1d): 128 + conv input and output 384 + gates 40 + q, k 2 x 2 x 32 = 128
    # + rstd 2 x 4 x 2 = 16 + decay 16 + A 64 x 2 x 4 = 512 + norm 528 + out_proj input 64 -> 1,816
    assert mixer_bytes(spec, mixer, BF16_FULL, "fused") == 1_816
    # frozen weights (LoRA elsewhere): no in_proj / out_proj inputs, conv input, norm cast
    assert mixer_bytes(spec, mixer, FROZEN, "naive") == 8_824 - 128 - 192 - 64 - 64


def test_lightning_short_conv_and_kda_activations_by_hand() -> None:
    spec, lightning = tiny(TINY_MINIMAX)
    # in_proj input 128; qkv_proj output and SiLU output 2 x 2 x 192 = 768; decayed scores 2 x 4 x 64
    # = 512; decayed q and k 2 x 128 = 256; block states 2 x 4 x 256 / 64 = 32; norm 256 + 4 + 128
    # + 128 + sigmoid gate 128 = 644; out_proj input 128                               -> 2,468
    assert mixer_bytes(spec, lightning, BF16_FULL, "naive") == 2_468
    assert mixer_bytes(spec, lightning, BF16_FULL, "fused") == 2_468  # no kernel in transformers
    spec, conv = tiny(TINY_LFM2)
    # in_proj input 128; in_proj output 384; B x (the conv input) 128; conv output 128; out_proj input 128
    assert mixer_bytes(spec, conv, BF16_FULL, "naive") == 896
    assert mixer_bytes(spec, conv, FROZEN, "naive") == 896 - 128 - 128 - 128
    assert mixer_bytes(spec, conv, FROZEN, "fused") == 896 - 128 - 128  # causal-conv1d keeps its input
    spec, kda = tiny(TINY_KIMI)
    # around the kernel: in_proj input 128; conv input and output 768; f_b / g_b inputs 2 x 32 = 64;
    # softplus 3 x 256 + 64 = 832; beta 8; gated norm 256 + 16 + 256 + 512 = 1,040       -> 2,840
    # naive kernel: 768 + 256 + 48 = 1,072; 2 x 4 x 64 x 64 + 256 = 33,024; forward substitution
    # 4 x 4 x (64^2 - 1) / 3 = 21,840; 768 + 1,024 = 1,792; scan 28 x 64 = 1,792 + 1,024 + 16,384
    # + 4 x 4 x 256 / 64 = 64 + 4 = 19,268; out_proj input 128                           -> 79,964
    assert mixer_bytes(spec, kda, BF16_FULL, "naive") == 79_964


def test_mixer_flops_by_hand() -> None:
    _, deltanet = tiny(TINY_QWEN3_NEXT)
    # conv 2 x 96 x 4 = 768; per value head 4 x 64 x 16 + 64 x (16 + 8) + 2 x 64 x 8 + 6 x 16 x 8
    # = 4,096 + 1,536 + 1,024 + 768 = 7,424; x 4 heads = 29,696                        -> 30,464
    assert mixer_flops(deltanet) == 30_464
    _, lightning = tiny(TINY_MINIMAX)
    # per head 4 x 64 x 16 + 4 x 16 x 16 = 5,120; x 4 heads                            -> 20,480
    assert mixer_flops(lightning) == 20_480
    _, conv = tiny(TINY_LFM2)
    # conv 2 x 64 x 3 = 384; the two gate products 2 x 64 = 128                          -> 512
    assert mixer_flops(conv) == 512
    # the mixer's FLOPs enter the training total as attention does (forward + 2x backward)
    spec, _ = tiny(TINY_LFM2)
    flops = flops_per_token(spec, 128, frozen_base=False, lora_params=0, checkpointing="none")
    attention_layers = 2 * 2 * 4 * 64 * (16 + 16)  # 2 layers x 2 x heads x context 64 x (d_qk + d_v)
    assert flops.attention_forward == 2 * 512 + attention_layers


def test_default_configs_read_without_refusal() -> None:
    # the transformers defaults of the modelled types (tests/test_architectures.py compares counts)
    config = {"model_type": "lfm2", "hidden_size": 2560, "num_hidden_layers": 32, "vocab_size": 65536,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12288}  # fmt: skip
    # every layer attention; MLP 8,192 wide: per layer q 2560^2 + k, v 2 x 2560 x 640 + out 2560^2
    # + MLP 3 x 2560 x 8192 + q/k norms 2 x 80 + two norms 2 x 2560; embedding 65536 x 2560 tied
    # + final norm 2560
    per_layer = 2 * 2560**2 + 2 * 2560 * 640 + 3 * 2560 * 8192 + 160 + 2 * 2560
    assert total_params(spec_from_config(config, "lfm2")) == 32 * per_layer + 65536 * 2560 + 2560


_TRACED = [
    pytest.param(TINY_QWEN3_NEXT, 0, "linear_attn", 0.01, id="gated_deltanet"),
    pytest.param(
        {**TINY_QWEN3_NEXT, "model_type": "olmo_hybrid", **_IDS}, 0, "linear_attn", 0.01, id="olmo_hybrid"
    ),
    # lightning: the first block's decayed q is not computed (its state is zero): 2 x 64 x 64 / 256
    pytest.param(TINY_MINIMAX, 1, "self_attn", 0.02, id="lightning"),
    pytest.param(TINY_LFM2, 0, "conv", 0.01, id="short_conv"),
    pytest.param(TINY_KIMI, 0, "self_attn", 0.01, id="kda"),
    pytest.param(TINY_RGEMMA, 0, "temporal_block", 0.01, id="rg_lru"),
]


def saved_bytes_per_token(config: dict[str, Any], module_of: Any, extra_args: Any, seq: int) -> float:
    """Bytes autograd saves per token in one bf16 module (`module_of(model)`) of the model
    transformers builds from `config`, on CPU tensors; weights and the layer's constant tables
    (lightning attention's decays) are not activations."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from trainplan.engine.measure.tracker import saved_for_backward

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = transformers.AutoConfig.for_model(**config)
        model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=torch.bfloat16)
        x = torch.randn(1, seq, config["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
        with saved_for_backward([*model.parameters(), *model.buffers()]) as saved:
            module_of(model)(x, *extra_args(torch, seq))
    return sum(saved.values()) / seq


@pytest.mark.parametrize(("config", "layer", "attribute", "tolerance"), _TRACED)
def test_naive_formula_matches_saved_tensors(
    config: dict[str, Any], layer: int, attribute: str, tolerance: float
) -> None:
    """The naive derivations against what autograd saves for one bf16 mixer on CPU tensors."""
    spec, mixer = tiny(config)

    def extra_args(torch: Any, seq: int) -> tuple[Any, ...]:
        if config is TINY_MINIMAX:
            return (None, None)  # position embeddings, attention mask
        if config is TINY_RGEMMA:
            return (torch.arange(seq)[None], None)  # position ids, attention mask
        return ()

    seq = 256  # four chunks of 64
    measured = saved_bytes_per_token(
        config, lambda model: getattr(model.model.layers[layer], attribute), extra_args, seq
    )
    # tolerance 1 % (2 % for lightning, see above): causal masks and the conv's K - 1 padding rows
    assert mixer_bytes(spec, mixer, BF16_FULL, "naive") == pytest.approx(measured, rel=tolerance)


def test_kimi_checkpoint_config_reads_its_linear_attn_config() -> None:
    """Kimi Linear's checkpoints keep the KDA settings and the (1-based) attention layer list in
    `linear_attn_config`; the count must equal transformers' build of the same config."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = {key: value for key, value in TINY_KIMI.items() if not key.startswith("linear_")}
    config.pop("layer_types")
    config.update(num_hidden_layers=5, mlp_layer_types=["dense"] * 5)
    config["linear_attn_config"] = {"full_attn_layers": [2, 5], "kda_layers": [1, 3, 4], "head_dim": 8,
                                    "num_heads": 4, "short_conv_kernel_size": 3}  # fmt: skip
    spec = spec_from_config(config, "kimi")
    assert [block.attention is not None for block in spec.blocks] == [False, True, False, True]
    mixer = next(block.mixer for block in spec.blocks if block.mixer is not None)
    assert (mixer.num_heads, mixer.head_dim, mixer.conv_kernel) == (4, 8, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = dict(config)
        hf_config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
    assert total_params(spec) == sum(parameter.numel() for parameter in model.parameters())


# h 64; RWKV-4 time mixing over 32 channels, channel mixing 128 wide
TINY_RWKV: dict[str, Any] = {
    "model_type": "rwkv", "hidden_size": 64, "attention_hidden_size": 32, "intermediate_size": 128,
    "num_hidden_layers": 2, "vocab_size": 100, "context_length": 256,
}  # fmt: skip


def test_rwkv_params_activations_and_flops_by_hand() -> None:
    spec, mixer = tiny(TINY_RWKV)
    # time mixing: key, value, receptance 3 x 64 x 32 = 6,144, output 32 x 64 = 2,048, time_decay
    # and time_first 2 x 32; channel mixing key 64 x 128 + value 128 x 64 = 16,384, receptance
    # 64 x 64 = 4,096; five token-shift mix vectors 5 x 64; two LayerNorms 2 x 128   -> 29,312
    # (the first block adds the embedding LayerNorm, 128); embedding and head 2 x 100 x 64;
    # final LayerNorm 128
    assert [block.norms for block in spec.blocks] == [3, 2]
    layer = 6_144 + 2_048 + 64 + 16_384 + 4_096 + 320 + 256
    assert block_params(spec.blocks[1], spec) == layer == 29_312
    assert total_params(spec) == 2 * layer + 128 + 2 * 6_400 + 128
    # naive, bf16, per token: token shifts 2 x 2 x 2 x 64 = 512; time mixing's three inputs 384,
    # sigmoid receptance and WKV output 2 x 64, output input 64; the WKV loop's value 64 and
    # 12 fp32 vectors 12 x 128 = 1,536; channel mixing's gate and value 2 x 128      -> 2,944
    assert mixer_bytes(spec, mixer, BF16_FULL, "naive") == 2_944
    # the CUDA kernel keeps key and value (2 x 64) instead of the loop's 1,600
    assert mixer_bytes(spec, mixer, BF16_FULL, "fused") == 2_944 - 1_600 + 128
    assert mixer_flops(mixer) == 24 * 32
    # tensor parallelism splits RWKV's channel-wise recurrence by channels (32), not one "head"
    assert spec.attention_heads == (32, 32)


def test_rwkv_block_matches_saved_tensors() -> None:
    """The whole RWKV block (norms, time and channel mixing) against what autograd saves."""
    spec, _ = tiny(TINY_RWKV)
    seq = 64
    measured = saved_bytes_per_token(
        TINY_RWKV, lambda model: model.rwkv.blocks[1], lambda torch, seq: (), seq
    )
    mode = ActivationMode(2, 2, True, frozenset(), "sdpa", "none", ssm_kernel="naive")
    # tolerance 1 %: LayerNorm's bf16 mean and rstd (4 bytes, not 8) and the mix vectors' copies
    assert layer_activations(spec, spec.blocks[1], mode).per_token(seq) == pytest.approx(measured, rel=0.01)
