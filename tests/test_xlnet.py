"""XLNet's relative attention (transformers 5.24 models/xlnet/modeling_xlnet.py): parameters,
FLOPs and activations by hand, the activations against what autograd saves on CPU in fp32."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.per_replica import BASE_WEIGHT_BYTES
from trainplan.engine.terms.activations import (
    ActivationMode,
    attention_bytes,
    layer_activations,
    outside_layers,
)
from trainplan.engine.terms.flops import attention_core, block_matmul_active, flops_per_token
from trainplan.engine.terms.params import lora_params
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import ConfigError, InputError
from trainplan.specs.scenario import LoraSettings, Scenario
from trainplan.specs.weights import total_params

# d_model 64, 4 heads of 16 (W = 64), d_inner 96, 2 layers, vocabulary 100
TINY_XLNET: dict[str, Any] = {
    "model_type": "xlnet", "d_model": 64, "n_layer": 2, "n_head": 4, "d_head": 16, "d_inner": 96,
    "vocab_size": 100,
}  # fmt: skip
FP32_FULL = ActivationMode(4, 4, True, frozenset(), "sdpa", "none")
AMP_BF16_FULL = ActivationMode(2, 4, True, frozenset(), "sdpa", "none", dropout=True)


def tiny() -> Any:
    return spec_from_config(TINY_XLNET, "tiny-xlnet")


def test_params_by_hand() -> None:
    # rel_attn: q, k, v, o, r 5 x 64 x 64 = 20,480; r_w/r_r/r_s biases and 2 seg_embed rows
    # 5 x 4 x 16 = 320; LayerNorm 128
    # ff: LayerNorm 128, layer_1 64 x 96 + 96 = 6,240, layer_2 96 x 64 + 64 = 6,208
    #                                                         -> 33,504 per layer
    # word_embedding 100 x 64 = 6,400 (tied lm_loss) + its bias 100 + mask_emb 64
    #                                                         -> 6,564 + 2 x 33,504 = 73,572
    spec = tiny()
    assert total_params(spec) == 73_572
    untied = spec_from_config({**TINY_XLNET, "tie_word_embeddings": False}, "tiny-xlnet")
    assert total_params(untied) == 73_572 + 6_400


def test_flops_by_hand() -> None:
    spec = tiny()
    (block,) = spec.blocks
    # q, k, v, o, r 5 x 4,096 + r's second relative position per token 4,096
    # + layer_1, layer_2 2 x 6,144                             -> 36,864
    assert block_matmul_active(block, spec) == 36_864
    # over 128 keys: content scores 2 x 4 x 16 x 128 = 16,384; position scores over 256
    # relative positions 32,768; segment scores 4 x 4 x (16 + 128) = 2,304; weighted sum
    # 16,384                                                   -> 67,840
    assert attention_core(block, 128) == 67_840
    # the einsums score every key: a 128-token sequence has 128 keys for every query
    flops = flops_per_token(spec, 128, frozen_base=False, lora_params=0, checkpointing="none")
    assert flops.attention_forward == 2 * 67_840


def test_activations_by_hand() -> None:
    spec = tiny()
    (block,) = spec.blocks
    assert block.attention is not None
    # fp32, trained: the layer input 256; content query, k, v 3 x 256; k_head_r 2 x 256;
    # position and segment queries 2 x 256; o's input 256        -> 2,304
    # per key: the fp32 softmax per head 4 x 4                   -> 16
    assert attention_bytes(spec, block.attention, FP32_FULL) == (2_304, 16)
    # autocast over fp32 weights with dropout: three bf16 copies of the input 384; 5 x 128;
    # queries 2 x 128; autocast's copy of the two positions 2 x 2 x 64 = 256; o's input 128;
    # two dropout masks 128                                     -> 1,792
    # per key: per head fp32 softmax, its bf16 copy and the mask 4 x 7 = 28, seg_mat's copy 4
    assert attention_bytes(spec, block.attention, AMP_BF16_FULL) == (1_792, 32)
    # always its own einsums: the scenario's attention kernel changes nothing
    for kernel in ("flash", "eager"):
        assert attention_bytes(spec, block.attention, replace(AMP_BF16_FULL, attention=kernel)) == (1_792, 32)
    # frozen: the content query, k, v and k_head_r only (5 x 128), the masks 128
    frozen = replace(AMP_BF16_FULL, weights_trainable=False)
    assert attention_bytes(spec, block.attention, frozen) == (768, 32)
    # the feed-forward's inner dropout mask (96) on top of the plain MLP's 2 x 192 + 3 x 128
    assert layer_activations(spec, block, AMP_BF16_FULL).mlp == 384 + 96 + 128
    # outside: the embedding indices 8, the final dropout masks 2 x 64 (no final norm)
    assert outside_layers(spec, AMP_BF16_FULL, head_trainable=False) == 8 + 128
    # fp32: the fp32 relative positions all layers read, once: 2 x 4 x 64
    assert outside_layers(spec, FP32_FULL, head_trainable=False) == 8 + 512


@pytest.mark.parametrize("trainable", [True, False])
def test_layer_matches_saved_tensors(trainable: bool) -> None:
    """One XLNet layer, fp32 without dropout, against what autograd saves on CPU."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_attention_variants import saved_per_token

    spec = tiny()
    (block,) = spec.blocks
    seq = 128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_XLNET, dropout=0.0)
        model = transformers.AutoModelForCausalLM.from_config(config)
    model.train()
    model.requires_grad_(trainable)
    transformer = model.transformer
    x = torch.randn(seq, 1, 64, requires_grad=True)
    positions = transformer.relative_positional_encoding(seq, seq, bsz=1)
    segments = torch.randint(0, 2, (seq, 1))
    seg_mat = torch.nn.functional.one_hot((segments[:, None] != segments[None, :]).long(), 2).float()
    measured = saved_per_token(
        model, lambda: transformer.layer[0](x, None, None, None, positions, seg_mat), seq
    )
    mode = replace(FP32_FULL, weights_trainable=trainable)
    estimated = layer_activations(spec, block, mode).per_token(seq)
    # left out of the layer: seg_mat, one fp32 tensor for all layers (8 per key), rel_shift's
    # index (8 per position), einsum's copy of o's permuted weight (64 x 64 x 4 per layer, for
    # the input gradient) and, trained, the fp32 positions (counted outside the layers, 512)
    shared = 8 * seq + 8 + 64 * 64 * 4 / seq + (512 if trainable else 0)
    assert estimated == measured - shared


def test_einsum_weights_take_no_lora_preset() -> None:
    spec = tiny()
    # q, k, v, o are nn.Parameter tensors: peft's presets find no module there
    with pytest.raises(InputError) as error:
        lora_params(spec, LoraSettings(targets="qv"))
    assert error.value.field == "lora.targets"
    # all-linear: layer_1 and layer_2, rank 16 x (64 + 96) each, in 2 layers
    assert lora_params(spec, LoraSettings(targets="all-linear")) == 2 * 2 * 16 * 160


@pytest.mark.parametrize(("key", "value"), [("attn_type", "uni"), ("bi_data", True), ("clamp_len", 100)])
def test_unmodelled_position_settings_are_refused(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_XLNET, key: value}, "tiny-xlnet")
    assert error.value.field == key


def test_explicit_names_do_not_select_einsum_weights() -> None:
    # peft's target_modules=["q", "v"] finds no module in XLNet: refused, naming the modules there
    with pytest.raises(InputError) as error:
        lora_params(tiny(), LoraSettings(targets=("q", "v")))
    assert error.value.message.endswith("module names here: layer_1, layer_2")


def test_qlora_leaves_einsum_weights_unquantised() -> None:
    # bitsandbytes replaces nn.Linear only: layer_1 and layer_2 (2 x 2 x 6,144 = 24,576) are nf4,
    # the other 48,996 parameters (q/k/v/o/r among them) stay bf16; adapters 10,240 in fp32
    scenario = Scenario(
        model="x", method="qlora", seq_len=128, lora=LoraSettings(targets="all-linear"), kbit_upcast=False
    )
    weights = next(term for term in estimate(scenario, model=tiny()).states if term.name == "weights")
    assert weights.value == 24_576 * BASE_WEIGHT_BYTES["nf4"] + 48_996 * 2 + 10_240 * 4


def test_estimate_runs_on_the_default_config() -> None:
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model("xlnet").to_dict()
    scenario = Scenario(model="x", method="full", seq_len=512, micro_batch=1, grad_accum=1)
    result = estimate(scenario, model=spec_from_config(config, "xlnet-large"))
    assert result.params.total == 360_300_800
    assert result.allocated_peak_bytes > 360_300_800 * 16  # weights, grads, AdamW states and more
