"""XLNet (transformers' XLNetLMHeadModel): relative-position attention in post-norm layers.

Module tree (transformers 5.24 models/xlnet/modeling_xlnet.py): `word_embedding`, a `mask_emb`
vector (the query stream's input under a target mapping); per layer `rel_attn` with the weight
tensors q, k, v, o of `d_model x n_head x d_head` and r (the projection of the sinusoidal
relative positions), the biases r_w_bias, r_r_bias and r_s_bias (`n_head x d_head` each), the
segment embedding `seg_embed` (2 x n_head x d_head) and a LayerNorm; `ff` with a LayerNorm and
biased layer_1 / layer_2 of `d_inner`; no final norm; `lm_loss` tied to the embedding with a
vocab-sized bias. The projections are einsums over `nn.Parameter` tensors, not `nn.Linear`
modules, so peft's LoRA cannot wrap them (model.py, role "einsum").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, ExtraComponent, Mlp, ModelSpec

#: Per-head vectors of each layer's rel_attn: r_w_bias, r_r_bias, r_s_bias and the two rows of
#: seg_embed (XLNetRelativeAttention.__init__).
RELATIVE_VECTORS = 3 + 2


def xlnet_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """XLNet (Yang et al. 2019, sec. 2.4-2.5): the content stream of two-stream attention with
    relative positions and segments, as XLNetLMHeadModel runs it without a target mapping."""
    hidden = get_int(cfg, *family.key("hidden_size"))
    heads = get_int(cfg, *family.key("num_heads"))
    head_dim = get_int(cfg, "d_head", default=hidden // heads)
    attn_type = cfg.get("attn_type", "bi")
    if attn_type != "bi":
        raise ConfigError(
            "attn_type", f"{shown_value(attn_type)} is not modelled; supported: 'bi' (XLNetConfig's default)"
        )
    if cfg.get("bi_data"):  # forward and backward position streams over two halves of the batch
        raise ConfigError("bi_data", f"{shown_value(cfg['bi_data'])} is not modelled; supported: false")
    clamp = cfg.get("clamp_len", -1)
    if not isinstance(clamp, int) or clamp > 0:  # clamped relative distances
        raise ConfigError(
            "clamp_len", f"{shown_value(clamp)} is not modelled; supported: -1 or 0 (no clamping)"
        )
    attention = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=head_dim,
        v_head_dim=head_dim,
        kind="xlnet",
        relative_bias_params=RELATIVE_VECTORS * heads * head_dim,
        names=("q", "k", "v", "o"),
    )
    mlp = Mlp(
        intermediate_size=get_int(cfg, *family.key("intermediate_size")),
        gated=False,
        bias=True,
        names=("layer_1", "layer_1", "layer_2"),
        activation=str(cfg.get("ff_activation", "gelu")),
        inner_dropout=True,
    )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, *family.key("vocab_size")),
        blocks=(Block(get_int(cfg, *family.key("num_layers")), attention, mlp, 2),),
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", True))),
        head_bias=True,
        norm="layernorm",
        final_norms=0,
        # mask_emb feeds the query stream only, which runs under a target mapping: no gradient here
        extras=(ExtraComponent("mask_emb", hidden, note="the query stream's input vector, unused"),),
        dropout=float(cfg.get("dropout", 0.1) or 0.0),
        source=source,
    )
