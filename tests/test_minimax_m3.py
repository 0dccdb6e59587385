"""MiniMax-M3's text model (transformers 5.24 models/minimax_m3_vl/modeling_minimax_m3_vl.py):
parameters by hand and its clamped SwiGLU's activations against what autograd saves on CPU."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import pytest

from trainplan.engine.terms.activations import ActivationMode, mlp_bytes
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import ConfigError
from trainplan.specs.weights import total_params

# h 64; 4 heads of 16 (2 key/value heads); a dense layer of 96, then an MoE layer of 4 experts of 32
# (top-2) and a shared expert of 48; vocabulary 100
TINY_M3: dict[str, Any] = {
    "model_type": "minimax_m3_vl_text", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32, "dense_intermediate_size": 96,
    "shared_intermediate_size": 48, "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 100,
    "mlp_layer_types": ["dense", "sparse"], "layer_types": ["full_attention", "full_attention"],
    "rotary_dim": 8, "bos_token_id": 0, "eos_token_id": 1,
}  # fmt: skip
BF16_FULL = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")


def test_params_by_hand() -> None:
    # attention: q 64 x 64 + k, v 2 x 64 x 32 + o 64 x 64 = 12,288, q/k norms 2 x 16 -> 12,320;
    # two norms 128
    # dense MLP: gate_up 64 x 192 = 12,288 + down 96 x 64 = 6,144        -> 18,432
    # MoE: router 4 x 64 = 256 (its score-correction bias is a buffer); experts 4 x 64 x 64
    # = 16,384 + 4 x 32 x 64 = 8,192; shared gate_up 64 x 96 + down 48 x 64 = 9,216 -> 34,048
    # layers 30,880 + 46,496; untied embedding and head 2 x 6,400; final norm 64 -> 90,240
    spec = spec_from_config(TINY_M3, "tiny-m3")
    assert total_params(spec) == 90_240
    dense, moe = (block.mlp for block in spec.blocks)
    assert dense is not None and moe is not None
    assert (dense.intermediate_size, moe.intermediate_size, moe.shared_intermediate_size) == (96, 32, 48)


def test_clamped_swiglu_activations_by_hand() -> None:
    spec = spec_from_config(TINY_M3, "tiny-m3")
    dense = spec.blocks[0].mlp
    assert dense is not None and dense.activation == "clamped_swiglu"
    # input 128; gate_up 2 x 2 x 96 = 384; clamped gate, sigmoid, up + 1, glu 4 x 192 = 768;
    # the product, down's input, 192                                     -> 1,472
    assert mlp_bytes(spec, dense, BF16_FULL) == 1_472
    # compiled: gate_up and the product only (the chain is recomputed)   -> 128 + 384 + 192
    assert mlp_bytes(spec, dense, replace(BF16_FULL, compiled=True)) == 704


def test_mlp_matches_saved_tensors() -> None:
    """The dense MLP and the MoE block of one layer each, bf16, against what autograd saves."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from test_attention_variants import saved_per_token

    spec = spec_from_config(TINY_M3, "tiny-m3")
    seq = 256
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = transformers.AutoConfig.for_model(**TINY_M3)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert total_params(spec) == sum(p.numel() for p in model.parameters())
    x = torch.randn(1, seq, 64, dtype=torch.bfloat16, requires_grad=True)
    dense, moe = (block.mlp for block in spec.blocks)
    assert dense is not None and moe is not None
    measured = [saved_per_token(model, lambda i=i: model.model.layers[i].mlp(x), seq) for i in (0, 1)]
    assert measured[0] == mlp_bytes(spec, dense, BF16_FULL)
    # the MoE block's experts and shared expert are exact; the routing keeps more than the common
    # router term (fp32 sigmoid 4 E, top-k indices 8 k): the normalising sum 4, the cloned weights
    # 4 k, their unsqueezed copy 4 k, the grouped-mm path's three int64 sort indices 3 x 8 k and
    # the per-expert counts (4 int32 per sequence)
    routing = 4 + 8 + 8 + 48 + 16 / seq
    assert measured[1] == mlp_bytes(spec, moe, BF16_FULL) + routing


def test_lightning_indexer_layers_are_refused() -> None:
    config = {**TINY_M3, "layer_types": ["full_attention", "minimax_m3_sparse"]}
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "tiny-m3")
    assert error.value.field == "layer_types[1]"
