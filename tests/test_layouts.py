"""Layouts beyond the Llama block: Mamba / Mamba-2 mixers and hybrids (hand-computed parameters,
activations, FLOPs, layer order), parallel blocks, and the refusals that keep an unmodelled
layout from being read as a Llama."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.terms.activations import ActivationMode
from trainplan.engine.terms.ssm import ssm_bytes, ssm_scan_flops
from trainplan.inputs.catalogs.models import find_model_record
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import record_spec
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import Ssm
from trainplan.specs.weights import block_params, total_params

# Mamba-2: h 64, expand 2 -> D 128, 4 heads of 32, 1 group, state 16, conv 4, chunk 64
TINY_MAMBA2: dict[str, Any] = {
    "model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2, "num_heads": 4, "head_dim": 32,
    "expand": 2, "n_groups": 1, "state_size": 16, "conv_kernel": 4, "chunk_size": 64, "vocab_size": 100,
    "tie_word_embeddings": False,
}  # fmt: skip
BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")


def tiny_ssm() -> tuple[Any, Ssm]:
    spec = spec_from_config(TINY_MAMBA2, "m2")
    ssm = spec.blocks[0].ssm
    assert ssm is not None
    return spec, ssm


def test_mamba2_layer_params_by_hand() -> None:
    # conv channels = D + 2 G N = 128 + 32 = 160; in_proj width W = D + 160 + H = 292
    # in_proj 64 x 292 = 18,688; out_proj 128 x 64 = 8,192; conv 160 x 4 + 160 = 800
    # A_log, D, dt_bias 3 x 4 = 12; gated norm 128; layer norm 64         -> 27,884 per layer
    # 2 layers + embedding 100 x 64 + head 100 x 64 + final norm 64        -> 68,632
    spec, ssm = tiny_ssm()
    assert ssm.conv_channels == 160
    assert block_params(spec.blocks[0], spec) == 27_884
    assert spec.blocks[0].attention is None and spec.blocks[0].mlp is None
    assert total_params(spec) == 2 * 27_884 + 2 * 6_400 + 64


def test_fused_and_naive_activations_by_hand() -> None:
    spec, ssm = tiny_ssm()
    # fused (mamba-ssm): in_proj input 2 x 64 + zxbcdt 2 x 292 + out_x 2 x 128 + rstd 4 x 1 = 972
    assert ssm_bytes(spec, ssm, BF16_FULL, "fused") == 972
    # naive: 128 (in_proj input) + 584 (W) + 320 (conv out) + 16 (2 a H) + 2 x 512 (4 D)
    # + 2 x 16 (4 H) + 3 x 4 x 4 x 64 (H Q) + 5 x 4 x 4 x 16 (H N) + 3 x 512 + 2 x 16
    # + 2 x 4 x 128 x 16 / 64 (D N / Q) + 5 x 512 + 4 + 256 (out_proj input) = 11,100
    assert ssm_bytes(spec, ssm, BF16_FULL, "naive") == 11_100
    # autocast over fp32: the einsum operands are bf16 (G, M's copy -1,024; B/C copies -384;
    # B_decay's copy -128; x copies and C x states -768; chunk states -128), the conv keeps a
    # cast input (+320) and softplus / clamp fp32 inputs (+16)              -> 9,004
    amp = ActivationMode(2, 4, True, frozenset(), "sdpa", "none")
    assert ssm_bytes(spec, ssm, amp, "naive") == 9_004
    # LoRA on nothing in the mixer: the frozen projections keep no inputs
    frozen = ActivationMode(2, 2, False, frozenset(), "sdpa", "none")
    assert ssm_bytes(spec, ssm, frozen, "fused") == 972 - 128


def test_scan_flops_by_hand() -> None:
    _, ssm = tiny_ssm()
    # conv 2 x 160 x 4 = 1,280; C B^T 2 x 64 x 4 x 16 = 8,192; M x 2 x 64 x 128 = 16,384;
    # states and read-out 4 x 128 x 16 = 8,192; skip 2 x 128 = 256  -> 34,304
    assert ssm_scan_flops(ssm) == 34_304
    mamba = Ssm("mamba", inner_size=128, state_size=16, conv_kernel=4, dt_rank=4)
    # conv 2 x 128 x 4 = 1,024; scan 7 x 128 x 16 = 14,336; skip and gate 3 x 128 = 384
    assert ssm_scan_flops(mamba) == 15_744


def test_jamba_layer_order() -> None:
    record = find_model_record("Jamba-v0.1")
    assert record is not None
    spec = record_spec(record)
    kinds = [
        ("attention" if b.attention else "ssm", "moe" if b.mlp and b.mlp.is_moe else "dense")
        for b in spec.blocks
        for _ in range(b.count)
    ]
    # attention at i % 8 == 4, MoE at odd layers
    assert [i for i, (mixer, _) in enumerate(kinds) if mixer == "attention"] == [4, 12, 20, 28]
    assert [i for i, (_, mlp) in enumerate(kinds) if mlp == "moe"] == list(range(1, 32, 2))


def test_nemotron_h_layer_letters() -> None:
    record = find_model_record("Nemotron-H-8B-Base-8K")
    assert record is not None
    spec = record_spec(record)
    counts = {"ssm": 0, "attention": 0, "mlp": 0}
    for block in spec.blocks:
        key = "ssm" if block.ssm else "attention" if block.attention else "mlp"
        counts[key] += block.count
        assert block.norms == 1
    assert counts == {"ssm": 24, "attention": 4, "mlp": 24}  # Nemotron-H paper: 24 / 4 / 24


def test_falcon_h1_runs_attention_and_mamba_side_by_side() -> None:
    cfg = {"model_type": "falcon_h1", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 50, "mamba_d_ssm": 64,
           "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 8,
           "mamba_d_conv": 4, "mamba_expand": 2}  # fmt: skip
    block = spec_from_config(cfg, "fh1").blocks[0]
    assert block.attention is not None and block.ssm is not None and block.mlp is not None
    assert block.ssm.inner_size == 64 and not block.ssm.gated_norm  # mamba_rms_norm defaults off


@pytest.mark.parametrize(
    ("config", "field"),
    [
        # a config of a type on the refusal list names model_type
        ({"model_type": "xlstm", "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10}, "model_type"),
        # a layer kind we do not model is named with its index
        (
            {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "vocab_size": 10,
             "layer_types": ["full_attention", "linear_attention"]},
            "layer_types[1]",
        ),
        # an unknown model type with SSM keys is refused, not read as a Llama
        (
            {"model_type": "my_hybrid", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 128, "vocab_size": 10, "mamba_d_state": 16},
            "mamba_d_state",
        ),
        # a hybrid's per-layer list with a kind its family does not map
        (
            {"model_type": "nemotron_h", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10,
             "intermediate_size": 128, "layers_block_type": ["mamba", "conv"], "mamba_num_heads": 4,
             "mamba_head_dim": 32, "ssm_state_size": 8, "n_groups": 1, "conv_kernel": 4, "expand": 2},
            "layers_block_type[1]",
        ),
    ],
)  # fmt: skip
def test_unmodelled_layouts_are_refused_by_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "x")
    assert error.value.field == field


def test_naive_formula_matches_saved_tensors() -> None:
    """The naive Mamba-2 derivation against what autograd actually saves (real CPU tensors)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import warnings

    from trainplan.engine.measure.tracker import saved_for_backward

    spec, ssm = tiny_ssm()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_MAMBA2)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        seq = 256  # four chunks of 64
        x = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)
        with saved_for_backward(model.parameters()) as saved:
            model.backbone.layers[0].mixer(x)
    measured = sum(saved.values()) / seq
    # tolerance 2 %: the conv output's K - 1 padding rows and chunk-level tensors are left out
    assert ssm_bytes(spec, ssm, BF16_FULL, "naive") == pytest.approx(measured, rel=0.02)


def test_unknown_model_type_without_signals_is_read_and_flagged() -> None:
    # a Llama-shaped config of a type the table does not name is read, and says it was guessed
    cfg = {"model_type": "my_llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 10}  # fmt: skip
    spec = spec_from_config(cfg, "x")
    # per layer 4 x 64 x 64 + 3 x 64 x 128 + 2 x 64 = 41,088; embedding and head 2 x 640; final norm 64
    assert total_params(spec) == 2 * 41_088 + 1_280 + 64
    assert "not in the architecture table" in spec.approximations[0]


def test_parallel_block_keeps_the_shared_input_once() -> None:
    # GPT-J: attention and MLP read one normed tensor; a sequential block keeps two inputs
    from dataclasses import replace

    from trainplan.engine.terms.activations import layer_activations

    cfg = {"model_type": "gptj", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100,
           "n_positions": 128, "tie_word_embeddings": False}  # fmt: skip
    spec = spec_from_config(cfg, "gptj")
    block = spec.blocks[0]
    assert block.parallel and block.norms == 1
    sequential = replace(block, parallel=False)
    # bf16 full fine-tune: one bf16 copy of the 64-wide input fewer, 2 x 64 = 128 bytes a token
    together = layer_activations(spec, block, BF16_FULL)
    apart = layer_activations(spec, sequential, BF16_FULL)
    assert apart.mlp - together.mlp == 128


ZAMBA2: dict[str, Any] = {
    "model_type": "zamba2", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
    "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"], "num_attention_heads": 4,
    "num_key_value_heads": 4, "n_mamba_heads": 4, "mamba_d_state": 32, "mamba_expand": 2, "mamba_d_conv": 4,
    "mamba_ngroups": 1, "vocab_size": 512, "chunk_size": 64, "num_mem_blocks": 1, "adapter_rank": 16,
}  # fmt: skip


def test_zamba2_shared_block_counted_once_and_adapted_per_layer() -> None:
    from trainplan.engine.terms.params import count_params
    from trainplan.specs.scenario import LoraSettings

    spec = spec_from_config(ZAMBA2, "z2")
    # one shared block: q, k, v 512 x 512 each, o 512 x 256, gate_up 256 x 1024, down 512 x 256,
    # norms 512 + 256 = 1,180,416; run by both hybrid layers, counted once
    (shared,) = spec.extras
    assert shared.params == 3 * 512 * 512 + 512 * 256 + 256 * 1024 + 512 * 256 + 768
    # LoRA qv: peft wraps the shared q and v once per layer that runs them:
    # 2 layers x 2 modules x rank 8 x (512 + 512) = 32,768
    lora = count_params(spec, "lora", LoraSettings(rank=8, targets="qv"))
    assert lora.trainable == 32_768


def test_weight_matrices_of_a_shared_block_exist_once_per_copy() -> None:
    from trainplan.specs.weights import weight_linears

    spec = spec_from_config({**ZAMBA2, "num_mem_blocks": 2}, "z2")
    weights = weight_linears(spec)
    q = [count for count, linear in weights if linear.name == "q_proj"]
    linear = [count for count, lin in weights if lin.name == "linear"]
    assert q == [2]  # two shared blocks, run by two hybrid layers
    assert sum(linear) == 2  # the per-layer output linear, once per hybrid layer
    # every matrix parameter is inside the model total: 2 copies of the shared block's matrices
    shared_matrices = sum(c * lin.params for c, lin in weights if lin.name in ("q_proj", "k_proj", "v_proj",
                          "o_proj", "gate_up_proj", "down_proj"))  # fmt: skip
    assert shared_matrices + 2 * (512 + 256) == spec.extras[0].params


# Zamba (v1): h 64, expand 2 -> D 128 in 2 Mamba heads, state 16, conv 4, dt rank 8; 8 layers, of
# which ZambaConfig makes layers 2 and 7 hybrid (i % 6 == 4 after the first three); the shared block's
# attention reads 2 h = 128 channels in 4 heads of 32
TINY_ZAMBA: dict[str, Any] = {
    "model_type": "zamba", "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
    "num_key_value_heads": 4, "n_mamba_heads": 2, "mamba_d_state": 16, "mamba_expand": 2,
    "mamba_d_conv": 4, "mamba_dt_rank": 8, "intermediate_size": 128, "vocab_size": 100,
    "attn_layer_period": 6, "attn_layer_offset": 4,
}  # fmt: skip


def test_zamba_params_by_hand() -> None:
    from trainplan.engine.terms.flops import block_matmul_active
    from trainplan.specs.weights import block_linears

    spec = spec_from_config(TINY_ZAMBA, "zamba")
    # Mamba layer: in_proj 64 x 256 = 16,384; conv 128 x 4 + 128 = 640; x_proj_weight (8 + 32) x 128
    # = 5,120; dt_proj_weight 8 x 128 = 1,024 and its bias 128; A_log 128 x 16 = 2,048; D 128;
    # out_proj 128 x 64 = 8,192; input norm 64                                   -> 33,728
    mamba = spec.blocks[0]
    assert mamba.ssm is not None and mamba.ssm.num_heads == 2
    assert block_params(mamba, spec) == 33_728
    # shared block once: q, k, v 128 x 128, o 128 x 64, gate, up, down 64 x 128, norms 128 + 64 = 82,112
    (shared,) = spec.extras
    assert shared.params == 3 * 128 * 128 + 128 * 64 + 3 * 64 * 128 + 192
    # 8 Mamba layers + 2 hybrid linears 64 x 64 + shared block + tied embedding 6,400 + final norm 64
    assert total_params(spec) == 8 * 33_728 + 2 * 4_096 + 82_112 + 6_400 + 64
    # the per-head projections are matmuls a token runs (6,144 MACs) but not linear layers
    assert block_matmul_active(mamba, spec) == 16_384 + 8_192 + 6_144
    assert [linear.name for linear in block_linears(mamba, 64)] == ["in_proj", "out_proj"]


def test_zamba_activations_by_hand() -> None:
    spec = spec_from_config(TINY_ZAMBA, "zamba")
    ssm = spec.blocks[0].ssm
    assert ssm is not None
    # x_dbl = 2 heads x (8 + 2 x 16) = 80
    # fused: in_proj input 128 + 2 x (6 x 128 + 80) + 4 x 128 x 32 / 2048 (scan chunks) + out_proj input
    # 256 = 2,088
    assert ssm_bytes(spec, ssm, BF16_FULL, "fused") == 2_088
    # naive: 128 + 2 x (8 x 128 + 80) + 4 x 2 x 16 + 4 x 128 + 2 x 4 x 128 x 16 + 6 x 128 x 16
    # + 4 x 128 + 256 = 32,416
    assert ssm_bytes(spec, ssm, BF16_FULL, "naive") == 32_416


def test_zamba_naive_formula_matches_saved_tensors() -> None:
    """The naive Zamba mixer derivation against what autograd saves (real CPU tensors)."""
    from test_mixers import saved_bytes_per_token

    spec = spec_from_config(TINY_ZAMBA, "zamba")
    ssm = spec.blocks[0].ssm
    assert ssm is not None
    measured = saved_bytes_per_token(
        TINY_ZAMBA, lambda model: model.model.layers[0].mamba, lambda *_: (), 128
    )
    # tolerance 1 %: the conv output's K - 1 padding rows and fp32 copies of A (per layer, not per
    # token) are left out
    assert ssm_bytes(spec, ssm, BF16_FULL, "naive") == pytest.approx(measured, rel=0.01)


def test_mlp_layer_types_decide_dense_and_moe_layers() -> None:
    cfg = {"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
           "intermediate_size": 128, "vocab_size": 10, "num_local_experts": 4, "num_experts_per_tok": 2,
           "mlp_layer_types": ["dense", "sparse", "sparse"]}  # fmt: skip
    spec = spec_from_config(cfg, "m")
    assert [(b.count, b.mlp is not None and b.mlp.is_moe) for b in spec.blocks] == [(1, False), (2, True)]
    with pytest.raises(ConfigError) as error:
        spec_from_config({**cfg, "mlp_layer_types": ["dense", "hash_moe", "sparse"]}, "m")
    assert error.value.field == "mlp_layer_types[1]"


_BERT_BASE = {
    "model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512,
    "type_vocab_size": 2,
}  # fmt: skip


def test_bert_base_params_by_hand() -> None:
    # embeddings: (30522 words + 512 positions + 2 token types) x 768 + LayerNorm 2 x 768 = 23,837,184
    # layer: q/k/v/o 4 x (768^2 + 768) = 2,362,368; up 768 x 3072 + 3072 = 2,362,368;
    #        down 3072 x 768 + 768 = 2,360,064; two LayerNorms 3,072 -> 7,087,872; x 12 = 85,054,464
    # head: transform 768^2 + 768 + LayerNorm 1,536 = 592,128; decoder tied; bias 30,522 -> 622,650
    # total 109,514,298 (BERT-base, the ~110M of Devlin et al. 2019, table 1)
    assert total_params(spec_from_config(_BERT_BASE, "bert-base")) == 109_514_298


def test_bert_cross_attention_adds_attention_and_a_norm() -> None:
    # add_cross_attention: one more biased q/k/v/o (2,362,368) and LayerNorm (1,536) per layer
    plain = total_params(spec_from_config(_BERT_BASE, "bert"))
    cross = total_params(spec_from_config({**_BERT_BASE, "add_cross_attention": True}, "bert"))
    assert cross - plain == 12 * (2_362_368 + 1_536)


def test_ernie_task_type_embeddings_are_refused() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**_BERT_BASE, "model_type": "ernie", "use_task_id": True}, "ernie")
    assert error.value.field == "use_task_id"


_BART_BASE = {
    "model_type": "bart", "vocab_size": 50265, "d_model": 768, "decoder_layers": 6,
    "decoder_attention_heads": 12, "decoder_ffn_dim": 3072, "max_position_embeddings": 1024,
    "is_encoder_decoder": True,
}  # fmt: skip


def test_bart_decoder_params_by_hand() -> None:
    # embedding 50265 x 768 = 38,603,520; positions (1024 + offset 2) x 768 = 787,968;
    # layernorm_embedding 1,536 (no LayerNorm after the last layer in BART)
    # layer: self- and cross-attention 2 x 4 x (768^2 + 768) = 4,724,736; fc1 768 x 3072 + 3072 =
    #        2,362,368; fc2 3072 x 768 + 768 = 2,360,064; three LayerNorms 4,608 -> 9,451,776; x 6
    # head tied: total 38,603,520 + 787,968 + 1,536 + 56,710,656 = 96,103,680
    spec = spec_from_config(_BART_BASE, "bart-base-decoder")
    assert total_params(spec) == 96_103_680


def test_sinusoidal_positions_are_frozen() -> None:
    # Pegasus' sinusoidal table is a parameter built frozen: counted, not trainable
    config = {**_BART_BASE, "model_type": "pegasus"}
    spec = spec_from_config(config, "pegasus")
    (table,) = spec.extras
    assert table.params == 1024 * 768 and not table.trainable
    assert spec.learned_positions == 0


def test_layer_vectors_add_their_widths_per_layer() -> None:
    # BitNet = Llama + sub-layer norms of hidden (64) and intermediate (128) per layer: 2 x 192;
    # DiffLlama = Llama + four lambda vectors of head_dim (64 / 4 heads = 16) per layer: 2 x 64
    small = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4}  # fmt: skip
    llama = total_params(spec_from_config({**small, "model_type": "llama"}, "llama"))
    assert total_params(spec_from_config({**small, "model_type": "bitnet"}, "bitnet")) - llama == 2 * 192
    assert total_params(spec_from_config({**small, "model_type": "diffllama"}, "diffllama")) - llama == 2 * 64
