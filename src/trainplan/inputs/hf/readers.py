"""Families with readers of their own: GPT-2 and its kin, T5, and ViT-style vision towers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.towers import siglip_tower
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, ExtraComponent, Mlp, ModelSpec


def gpt2_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """GPT-2 and its kin: learned positions, LayerNorm with bias, fused c_attn (one key/value
    head under StarCoder's multi-query), plain GELU MLP, tied head."""
    hidden = get_int(cfg, "n_embd", "hidden_size")
    heads = get_int(cfg, "n_head", "num_attention_heads")
    inner = get_int(cfg, "n_inner", default=4 * hidden)
    attention = Attention(
        num_heads=heads,
        num_kv_heads=1 if flag(family, "multi_query", cfg) else heads,
        head_dim=hidden // heads,
        v_head_dim=hidden // heads,
        qkv_bias=True,
        out_bias=True,
        fused_qkv="c_attn",
        names=("c_attn", "c_attn", "c_attn", "c_proj"),
    )
    mlp = Mlp(
        intermediate_size=inner,
        gated=False,
        bias=True,
        names=("c_fc", "c_fc", "c_proj"),
        activation=str(cfg.get("activation_function", "gelu_new")),
    )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=(Block(get_int(cfg, "n_layer", "num_hidden_layers"), attention, mlp, 2),),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        norm="layernorm",
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=get_int(cfg, "n_positions", "max_position_embeddings"),
        dropout=float(cfg.get("attn_pdrop", 0.1) or 0.0),
        source=source,
    )


def t5_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """T5/mT5/Flan-T5/UMT5: shared embedding, relative position bias in each stack's first layer
    (UMT5: in every self-attention), RMS-style LayerNorm without bias, ReLU (2 matrices) or
    gated-GELU (3 matrices) FFN."""
    hidden = get_int(cfg, "d_model")
    heads = get_int(cfg, "num_heads")
    d_kv = get_int(cfg, "d_kv")
    buckets = get_int(cfg, "relative_attention_num_buckets", default=32)
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    names = ("wi_0", "wi_1", "wo") if gated else ("wi", "wi", "wo")
    activation = str(cfg.get("feed_forward_proj", "relu")).removeprefix("gated-")
    mlp = Mlp(intermediate_size=get_int(cfg, "d_ff"), gated=gated, names=names, activation=activation)
    t5_names = ("q", "k", "v", "o")

    def attn(bias_params: int) -> Attention:
        return Attention(heads, heads, d_kv, d_kv, relative_bias_params=bias_params, names=t5_names)

    encoder_layers = get_int(cfg, "num_layers")
    decoder_layers = get_int(cfg, "num_decoder_layers", default=encoder_layers)
    first_bias = buckets * heads
    # UMT5 gives every layer's self-attention its own bias table (transformers' UMT5LayerSelfAttention)
    later_bias = first_bias if str(cfg.get("model_type", "")).lower() == "umt5" else 0
    blocks = (
        Block(1, attn(first_bias), mlp, 2, role="encoder"),
        Block(encoder_layers - 1, attn(later_bias), mlp, 2, role="encoder"),
        Block(1, attn(first_bias), mlp, 3, cross_attention=attn(0), role="decoder"),
        Block(decoder_layers - 1, attn(later_bias), mlp, 3, cross_attention=attn(0), role="decoder"),
    )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=tuple(block for block in blocks if block.count > 0),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        final_norms=2,
        encoder_decoder=True,
        dropout=float(cfg.get("dropout_rate", 0.1) or 0.0),
        source=source,
    )


#: Vision-tower model types read as a ViT (patch embedding, pre-norm layers, post-norm).
_VISION_TYPES = {"siglip_vision_model", "janus_vision_model", "clip_vision_model"}


def vision_extras(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """A ViT-style vision tower (SigLIP/CLIP) from `vision_config`, plus Gemma 3's projector."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping) or "hidden_size" not in vision:
        return []
    vision_type = str(vision.get("model_type", "siglip_vision_model"))
    if vision_type not in _VISION_TYPES:
        raise ConfigError(
            "vision_config.model_type",
            f"{shown_value(vision_type)} is not modelled; modelled vision towers: "
            + ", ".join(sorted(_VISION_TYPES)),
        )
    hidden = get_int(vision, "hidden_size")
    layers = get_int(vision, "num_hidden_layers")
    patches = (get_int(vision, "image_size") // get_int(vision, "patch_size")) ** 2
    head = vision_type == "siglip_vision_model" and bool(vision.get("vision_use_head", True))
    tower = siglip_tower(vision, head)
    extras = [
        ExtraComponent(
            "vision_tower",
            tower,
            trainable=False,
            note=f"ViT: {layers} layers x {hidden} hidden, {patches} patches (SigLIP layout)",
        )
    ]
    model_type = str(cfg.get("model_type", ""))
    if model_type == "gemma3":
        extras.append(ExtraComponent("multi_modal_projector", hidden * text_hidden + hidden, note="Gemma 3"))
    return extras
