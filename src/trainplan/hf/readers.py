"""Families with readers of their own: GPT-2 and its kin, T5, and ViT-style vision towers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError
from trainplan.families import Family
from trainplan.hf.values import flag, get_int
from trainplan.model import Attention, Block, ExtraComponent, Mlp, ModelSpec


def gpt2_spec(cfg: Mapping[str, Any], name: str, source: str, family: Family) -> ModelSpec:
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
            f"{vision_type!r} is not modelled; modelled vision towers: " + ", ".join(sorted(_VISION_TYPES)),
        )
    hidden = get_int(vision, "hidden_size")
    if "intermediate_size" not in vision and "mlp_ratio" in vision:
        inner = round(float(vision["mlp_ratio"]) * hidden)  # Janus' SigLIP config
    else:
        inner = get_int(vision, "intermediate_size")
    layers = get_int(vision, "num_hidden_layers")
    patch = get_int(vision, "patch_size")
    image = get_int(vision, "image_size")
    channels = get_int(vision, "num_channels", default=3)
    patches = (image // patch) ** 2
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 2 * 2 * hidden
    tower = channels * patch * patch * hidden + hidden + patches * hidden + layers * per_layer + 2 * hidden
    if vision_type == "siglip_vision_model" and vision.get("vision_use_head", True):
        # SigLIP's attention-pooling head: probe, in/out projections, LayerNorm, MLP
        tower += hidden + 4 * (hidden * hidden + hidden) + 2 * hidden + 2 * hidden * inner + inner + hidden
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


def clip_image_encoder(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """GIT's CLIP image encoder and its projection (transformers 5.24 models/git/modeling_git.py,
    GitVisionModel / GitProjection): a bias-free patch convolution, a class embedding, positions
    for the patches and the class token, pre- and post-LayerNorms, pre-norm layers of biased
    q/k/v/o and fc1/fc2 with two LayerNorms; then Linear(vision -> text hidden) + LayerNorm, and
    one temporal embedding of the vision width per frame when num_image_with_embedding is set."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping):
        raise ConfigError("vision_config", "must give the image encoder's sizes")
    hidden = get_int(vision, "hidden_size")
    inner = get_int(vision, "intermediate_size")
    layers = get_int(vision, "num_hidden_layers")
    patch = get_int(vision, "patch_size")
    channels = get_int(vision, "num_channels", default=3)
    image = get_int(vision, "image_size")
    patches = (image // patch) ** 2
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 2 * 2 * hidden
    embeddings = channels * patch * patch * hidden + hidden + (patches + 1) * hidden
    tower = embeddings + 2 * hidden + layers * per_layer + 2 * hidden
    frames = get_int(cfg, "num_image_with_embedding", default=0, minimum=0)
    projection = hidden * text_hidden + text_hidden + 2 * text_hidden + frames * hidden
    return [
        ExtraComponent(
            "image_encoder",
            tower,
            note=f"CLIP ViT: {layers} layers x {hidden} hidden, {patches} patches and a class token",
        ),
        ExtraComponent(
            "visual_projection",
            projection,
            note="Linear vision -> hidden + LayerNorm"
            + (f", {frames} temporal embeddings" if frames else ""),
        ),
    ]


#: GotOcr2VisionConfig's global_attn_indexes, which a saved config.json leaves out when unchanged.
_SAM_GLOBAL_LAYERS = [2, 5, 8, 11]


def sam_image_encoder(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """GOT-OCR 2.0's SAM ViT image encoder and its projector (transformers 5.24
    models/got_ocr2/modeling_got_ocr2.py, GotOcr2VisionEncoder / GotOcr2MultiModalProjector): a
    biased patch convolution, an absolute position table over the patch grid (use_abs_pos);
    layers of two LayerNorms, a fused qkv (bias: qkv_bias), a biased proj, a biased lin1/lin2 MLP
    of mlp_dim and, with use_rel_pos, relative position tables rel_pos_h and rel_pos_w of
    2 s - 1 rows of head_dim, s the window (window_size) or the whole grid side in the
    global_attn_indexes layers; a neck of a bias-free 1x1 and 3x3 conv to output_channels, each
    followed by a LayerNorm; then two bias-free stride-2 3x3 convs to 2 x output_channels and the
    text width, and a biased Linear over the text width."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping):
        raise ConfigError("vision_config", "must give the image encoder's sizes")
    hidden = get_int(vision, "hidden_size")
    heads = get_int(vision, "num_attention_heads")
    inner = get_int(vision, "mlp_dim")
    layers = get_int(vision, "num_hidden_layers")
    patch = get_int(vision, "patch_size")
    channels = get_int(vision, "num_channels", default=3)
    grid = get_int(vision, "image_size") // patch
    window = get_int(vision, "window_size", minimum=0)
    out = get_int(vision, "output_channels")
    global_layers = vision.get("global_attn_indexes", _SAM_GLOBAL_LAYERS)
    if not isinstance(global_layers, list | tuple) or not all(isinstance(i, int) for i in global_layers):
        raise ConfigError("vision_config.global_attn_indexes", "must list layer indices")
    qkv_bias = 3 * hidden if vision.get("qkv_bias", True) else 0
    per_layer = 2 * 2 * hidden + 3 * hidden * hidden + qkv_bias + hidden * hidden + hidden
    per_layer += 2 * hidden * inner + inner + hidden
    relative = 0
    if vision.get("use_rel_pos", True):
        for index in range(layers):
            side = grid if index in global_layers or window == 0 else window
            relative += 2 * (2 * side - 1) * (hidden // heads)
    positions = grid * grid * hidden if vision.get("use_abs_pos", True) else 0
    neck = hidden * out + 2 * out + out * out * 9 + 2 * out
    tower = positions + channels * patch * patch * hidden + hidden + layers * per_layer + relative + neck
    projector = out * 2 * out * 9 + 2 * out * text_hidden * 9 + text_hidden * text_hidden + text_hidden
    return [
        ExtraComponent(
            "image_encoder",
            tower,
            note=f"SAM ViT: {layers} layers x {hidden} hidden over a {grid} x {grid} patch grid, a neck",
        ),
        ExtraComponent("multi_modal_projector", projector, note="two stride-2 3x3 convs and a Linear"),
    ]


#: `image_encoder` values of the architecture table -> the reader of that encoder's weights.
IMAGE_ENCODERS = {"clip": clip_image_encoder, "sam": sam_image_encoder}
