"""diffusers transformer configs (`transformer/config.json`) -> ModelSpec.

Each reader lists the weights the diffusers class creates from the config, module by module, with
the module names diffusers gives them (so LoRA targets such as `to_q`, `attn.to_k`, `to_out.0`,
`ff.net.2` or `proj_mlp` select the same matrices peft would). Convolutions (patch embedders) are
in*k*k x out matrices. Norms without affine parameters (the LayerNorms under adaLN) count nothing.

- FLUX.1 (`FluxTransformer2DModel`, diffusers `transformer_flux.py`): MMDiT double-stream blocks
  (separate image and text weights, one joint attention) then single-stream blocks (one fused
  QKV + MLP input projection, one fused output projection). Black Forest Labs, FLUX.1 model card.
- SD3 / SD3.5 (`SD3Transformer2DModel`, `transformer_sd3.py`; Esser et al. 2024, "Scaling Rectified
  Flow Transformers", sec. 4): MMDiT joint blocks; the last block's text stream only feeds the
  attention (context_pre_only); SD3.5 Medium's MMDiT-X adds a second image self-attention in the
  `dual_attention_layers`.
- PixArt-alpha / Sigma (`PixArtTransformer2DModel`, `pixart_transformer_2d.py`): adaLN-single
  BasicTransformerBlocks with cross-attention to the T5 caption embeddings.
- Wan 2.1 (`WanTransformer3DModel`, `transformer_wan.py`; Wan Team 2025, sec. 3.2): video DiT,
  self-attention over frames x height x width tokens, cross-attention to the text, adaLN from one
  shared time projection plus a learned per-block table.
- Sana (`SanaTransformer2DModel`, `sana_transformer.py`; Xie et al. 2024, "SANA", sec. 2.2):
  adaLN-single blocks of ReLU linear self-attention, softmax cross-attention to the Gemma-2
  caption and the GLUMBConv FFN (1x1 conv, 3x3 depthwise conv, SiLU gate, 1x1 conv).
- LTX-Video (`LTXVideoTransformer3DModel`, `transformer_ltx.py`; HaCohen et al. 2024,
  "LTX-Video", sec. 2.2): video DiT over the packed latents of its 32x / 8x VAE (patch 1), with
  RMSNorms, q/k RMSNorms over all heads, 3-D RoPE, cross-attention to the T5 text, adaLN-single.
- CogVideoX (`CogVideoXTransformer3DModel`, `cogvideox_transformer_3d.py`; Yang et al. 2024,
  "CogVideoX", sec. 2.2): the text tokens join the video tokens in one sequence; each block's
  expert adaLN (`CogVideoXLayerNormZero`) modulates the two kinds of token separately around one
  full 3-D attention and one shared FFN.
- HunyuanVideo (`HunyuanVideoTransformer3DModel`, `transformer_hunyuan_video.py`; Kong et al.
  2024, "HunyuanVideo", sec. 4.1): a token refiner over the text, then FLUX-style dual-stream and
  single-stream blocks over the video and text tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, LatentGeometry, Linear, Mlp, ModelSpec

__all__ = [
    "TRANSFORMER_READERS",
    "denoiser_model",
    "flux_double_block",
    "flux_single_block",
    "linear",
    "timestep_embedding",
    "weights_block",
]


def linear(name: str, role: str, in_features: int, out_features: int, bias: bool = True) -> Linear:
    """A diffusers nn.Linear (bias on unless stated) or a convolution as its im2col matrix."""
    return Linear(name, role, in_features, out_features, bias)


def timestep_embedding(prefix: str, in_features: int, dim: int) -> list[Linear]:
    """diffusers `TimestepEmbedding` / `PixArtAlphaTextProjection`: linear_1 in -> dim, then dim -> dim."""
    return [
        linear(f"{prefix}.linear_1", "embed", in_features, dim),
        linear(f"{prefix}.linear_2", "embed", dim, dim),
    ]


def _attention(prefix: str, heads: int, head_dim: int, qk_norm: str, bias: bool = True) -> Attention:
    names = (f"{prefix}.to_q", f"{prefix}.to_k", f"{prefix}.to_v", f"{prefix}.to_out.0")
    return Attention(
        heads, heads, head_dim, head_dim, qkv_bias=bias, out_bias=True, qk_norm=qk_norm, names=names
    )


def _gelu_mlp(prefix: str, inner: int) -> Mlp:
    """diffusers `FeedForward` with a GELU (tanh) input projection: net.0.proj, net.2, both biased."""
    return Mlp(
        inner,
        gated=False,
        bias=True,
        names=(f"{prefix}.net.0.proj",) * 2 + (f"{prefix}.net.2",),
        activation="gelu_pytorch_tanh",
    )


def _qk_norm(
    cfg: Mapping[str, Any], allowed: tuple[str | None, ...], default: str | None = None
) -> str | None:
    value = cfg.get("qk_norm", default)
    if value not in allowed:
        raise ConfigError(
            "qk_norm", f"{shown_value(value)} is not modelled; modelled: {', '.join(map(str, allowed))}"
        )
    return None if value is None else str(value)


def _dims(cfg: Mapping[str, Any]) -> tuple[int, int, int]:
    heads = get_int(cfg, "num_attention_heads")
    head_dim = get_int(cfg, "attention_head_dim")
    return heads, head_dim, heads * head_dim


def flux_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """FLUX.1 [dev]/[schnell]: embedders, `num_layers` double-stream and `num_single_layers`
    single-stream blocks, adaLN-continuous output norm and projection."""
    heads, head_dim, dim = _dims(cfg)
    in_channels = get_int(cfg, "in_channels", default=64)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch = get_int(cfg, "patch_size", default=1)
    inner = 4 * dim  # FluxTransformerBlock / FluxSingleTransformerBlock: mlp_ratio 4.0
    embed = timestep_embedding("time_text_embed.timestep_embedder", 256, dim)
    if cfg.get("guidance_embeds"):
        embed += timestep_embedding("time_text_embed.guidance_embedder", 256, dim)
    embed += timestep_embedding(
        "time_text_embed.text_embedder", get_int(cfg, "pooled_projection_dim", default=768), dim
    )
    embed += [
        linear("context_embedder", "embed", get_int(cfg, "joint_attention_dim", default=4096), dim),
        linear("x_embedder", "embed", in_channels, dim),
    ]
    double = flux_double_block(get_int(cfg, "num_layers", default=19), heads, head_dim, inner)
    single = flux_single_block(get_int(cfg, "num_single_layers", default=38), head_dim, dim, inner)
    output = _output_block(dim, patch * patch * out_channels)
    return denoiser_model(
        name, source, dim, (weights_block("embed", *embed), double, single, output), "diffusion"
    )


def flux_double_block(count: int, heads: int, head_dim: int, inner: int) -> Block:
    """FLUX's double-stream block (`FluxTransformerBlock`; HunyuanVideo's dual-stream
    `HunyuanVideoTransformerBlock` is laid out the same): adaLN-Zero modulations of the image and
    the text stream, joint attention with per-head RMSNorms on q and k of both streams, a GELU
    FFN per stream."""
    dim = heads * head_dim
    return Block(
        count,
        attention=_attention("attn", heads, head_dim, "head"),
        mlp=_gelu_mlp("ff", inner),
        norms=0,
        role="double_stream",
        linears=(
            linear("norm1.linear", "modulation", dim, 6 * dim),
            linear("norm1_context.linear", "modulation", dim, 6 * dim),
            linear("attn.add_q_proj", "q", dim, dim),
            linear("attn.add_k_proj", "k", dim, dim),
            linear("attn.add_v_proj", "v", dim, dim),
            linear("attn.to_add_out", "o", dim, dim),
            linear("ff_context.net.0.proj", "up", dim, inner),
            linear("ff_context.net.2", "down", inner, dim),
        ),
        extra_params=2 * head_dim,  # attn.norm_added_q / norm_added_k (RMSNorm over a head)
    )


def flux_single_block(count: int, head_dim: int, dim: int, inner: int) -> Block:
    """FLUX's single-stream block (`FluxSingleTransformerBlock`; HunyuanVideo's
    `HunyuanVideoSingleTransformerBlock` has the same weights): adaLN-Zero-single modulation, one
    input read by to_q/k/v and proj_mlp, a fused output projection over [attention, MLP]."""
    return Block(
        count,
        attention=None,
        mlp=None,
        norms=0,
        role="single_stream",
        linears=(
            linear("norm.linear", "modulation", dim, 3 * dim),
            linear("attn.to_q", "q", dim, dim),
            linear("attn.to_k", "k", dim, dim),
            linear("attn.to_v", "v", dim, dim),
            linear("proj_mlp", "up", dim, inner),
            linear("proj_out", "fused_out", dim + inner, dim),
        ),
        extra_params=2 * head_dim,  # attn.norm_q / norm_k
    )


def sd3_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """SD3 / SD3.5 Large / SD3.5 Medium: patch embedder, joint MMDiT blocks (the last one
    context_pre_only), MMDiT-X dual attention in `dual_attention_layers`, output norm and head."""
    heads, head_dim, dim = _dims(cfg)
    layers = get_int(cfg, "num_layers")
    in_channels = get_int(cfg, "in_channels", default=16)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch = get_int(cfg, "patch_size", default=2)
    qk_norm = _qk_norm(cfg, ("rms_norm", None))
    dual = set(cfg.get("dual_attention_layers") or ())
    bad = sorted(index for index in dual if not isinstance(index, int) or not 0 <= index < layers)
    if bad:
        raise ConfigError("dual_attention_layers", f"{bad} are not layer indices 0..{layers - 1}")
    caption = get_int(cfg, "caption_projection_dim", default=dim)
    if caption != dim:
        raise ConfigError(
            "caption_projection_dim",
            f"is {caption}; the joint blocks need it to equal heads x head_dim = {dim}",
        )
    embed = [linear("pos_embed.proj", "conv", in_channels * patch * patch, dim)]
    embed += timestep_embedding("time_text_embed.timestep_embedder", 256, dim)
    embed += timestep_embedding("time_text_embed.text_embedder", get_int(cfg, "pooled_projection_dim"), dim)
    embed.append(linear("context_embedder", "embed", get_int(cfg, "joint_attention_dim"), dim))
    norm = "head" if qk_norm else "none"
    norm_weights = head_dim if qk_norm else 0
    blocks: list[Block] = [weights_block("embed", *embed)]
    for index in range(layers):
        last, has_dual = index == layers - 1, index in dual
        linears = [
            linear("norm1.linear", "modulation", dim, (9 if has_dual else 6) * dim),
            linear("norm1_context.linear", "modulation", dim, (2 if last else 6) * dim),
            linear("attn.add_q_proj", "q", dim, dim),
            linear("attn.add_k_proj", "k", dim, dim),
            linear("attn.add_v_proj", "v", dim, dim),
        ]
        if not last:
            linears.append(linear("attn.to_add_out", "o", dim, dim))
        extra = 2 * norm_weights  # attn.norm_added_q / norm_added_k
        if has_dual:
            linears += [linear(f"attn2.to_{part}", part, dim, dim) for part in ("q", "k", "v")]
            linears.append(linear("attn2.to_out.0", "o", dim, dim))
            extra += 2 * norm_weights
        if not last:
            linears += [
                linear("ff_context.net.0.proj", "up", dim, 4 * dim),
                linear("ff_context.net.2", "down", 4 * dim, dim),
            ]
        block = Block(
            1,
            _attention("attn", heads, head_dim, norm),
            _gelu_mlp("ff", 4 * dim),
            norms=0,
            role="joint",
            linears=tuple(linears),
            extra_params=extra,
        )
        previous = blocks[-1]
        if previous.role == "joint" and previous.linears == block.linears:
            blocks[-1] = Block(
                previous.count + 1,
                previous.attention,
                previous.mlp,
                norms=0,
                role="joint",
                linears=previous.linears,
                extra_params=previous.extra_params,
            )
        else:
            blocks.append(block)
    blocks.append(_output_block(dim, patch * patch * out_channels))
    # PatchEmbed's sin-cos table over pos_embed_max_size^2 positions (SD3Transformer2DModel: 96)
    table = get_int(cfg, "pos_embed_max_size", default=96) ** 2 * dim
    return replace(denoiser_model(name, source, dim, tuple(blocks), "diffusion"), buffer_elements=table)


def wan_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """Wan 2.1 text-to-video: 3-D patch embedder, condition embedder, `num_layers` blocks of
    self-attention, text cross-attention and FFN, a learned output modulation table."""
    heads, head_dim, dim = _dims(cfg)
    for key in ("image_dim", "added_kv_proj_dim", "pos_embed_seq_len"):
        if cfg.get(key) is not None:
            raise ConfigError(
                key,
                f"{shown_value(cfg[key])}: image-conditioned Wan variants are not modelled; "
                "text-to-video only",
            )
    in_channels = get_int(cfg, "in_channels", default=16)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch = cfg.get("patch_size", [1, 2, 2])
    if not (isinstance(patch, list) and len(patch) == 3 and all(isinstance(p, int) and p > 0 for p in patch)):
        raise ConfigError(
            "patch_size", f"{shown_value(patch)} must be three positive integers (frames, height, width)"
        )
    volume = patch[0] * patch[1] * patch[2]
    # WanAttention always builds its q/k RMSNorms over all heads (diffusers 0.42 reads no
    # qk_norm there); the key is still checked for a value no Wan release uses
    _qk_norm(cfg, ("rms_norm_across_heads", None))
    norm = "full"
    ffn = get_int(cfg, "ffn_dim")
    embed = [linear("patch_embedding", "conv", in_channels * volume, dim)]
    embed += timestep_embedding(
        "condition_embedder.time_embedder", get_int(cfg, "freq_dim", default=256), dim
    )
    embed.append(linear("condition_embedder.time_proj", "modulation", dim, 6 * dim))
    embed += timestep_embedding(
        "condition_embedder.text_embedder", get_int(cfg, "text_dim", default=4096), dim
    )
    cross_norm = 2 * dim if cfg.get("cross_attn_norm", True) else 0  # norm2: FP32LayerNorm with affine
    block = Block(
        get_int(cfg, "num_layers"),
        attention=_attention("attn1", heads, head_dim, norm),
        cross_attention=_attention("attn2", heads, head_dim, norm),
        mlp=_gelu_mlp("ffn", ffn),
        norms=0,
        role="video_dit",
        extra_params=6 * dim + cross_norm,  # scale_shift_table (1, 6, dim)
    )
    output = weights_block(  # scale_shift_table (1, 2, dim) and proj_out
        "output", linear("proj_out", "output", dim, out_channels * volume), extra_params=2 * dim
    )
    return denoiser_model(name, source, dim, (weights_block("embed", *embed), block, output), "video")


def pixart_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """PixArt-alpha / PixArt-Sigma (`PixArtTransformer2DModel`, `pixart_transformer_2d.py`; Chen et
    al. 2023, "PixArt-alpha", sec. 2.3; Chen et al. 2024, "PixArt-Sigma"): a patch embedder, the
    caption projection of the T5 embeddings, adaLN-single (one shared time projection to 6 x dim,
    plus a learned per-block table), `num_layers` BasicTransformerBlocks (self-attention,
    cross-attention to the text, GELU FFN; no affine norms), and a learned output modulation."""
    heads, head_dim, dim = _dims(cfg)
    for key, modelled in (("norm_type", "ada_norm_single"), ("attention_type", "default")):
        if cfg.get(key, modelled) != modelled:
            raise ConfigError(key, f"{shown_value(cfg[key])} is not modelled (modelled: {modelled})")
    if cfg.get("norm_elementwise_affine", False):
        raise ConfigError(
            "norm_elementwise_affine", "affine block norms are not modelled (PixArt's are not affine)"
        )
    in_channels = get_int(cfg, "in_channels", default=4)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch = get_int(cfg, "patch_size", default=2)
    sample = get_int(cfg, "sample_size", default=128)
    extra_conditions = cfg.get("use_additional_conditions")
    if extra_conditions is None:  # PixArtTransformer2DModel: on for the 1024 px (128-latent) models
        extra_conditions = sample == 128
    bias = bool(cfg.get("attention_bias", True))
    cross = get_int(cfg, "cross_attention_dim", default=dim)
    embed = [linear("pos_embed.proj", "conv", in_channels * patch * patch, dim)]
    embed += timestep_embedding("adaln_single.emb.timestep_embedder", 256, dim)
    if extra_conditions:
        for part in ("resolution_embedder", "aspect_ratio_embedder"):
            embed += timestep_embedding(f"adaln_single.emb.{part}", 256, dim // 3)
    embed.append(linear("adaln_single.linear", "modulation", dim, 6 * dim))
    embed += timestep_embedding("caption_projection", get_int(cfg, "caption_channels", default=4096), dim)
    block = Block(
        get_int(cfg, "num_layers", default=28),
        attention=_attention("attn1", heads, head_dim, "none", bias),
        mlp=_gelu_mlp("ff", 4 * dim),
        norms=0,
        role="pixart",
        linears=(
            linear("attn2.to_q", "q", dim, dim, bias),
            linear("attn2.to_k", "k", cross, dim, bias),
            linear("attn2.to_v", "v", cross, dim, bias),
            linear("attn2.to_out.0", "o", dim, dim),
        ),
        extra_params=6 * dim,  # scale_shift_table (6, dim)
    )
    output = weights_block(  # scale_shift_table (2, dim) and proj_out
        "output", linear("proj_out", "output", dim, patch * patch * out_channels), extra_params=2 * dim
    )
    spec = denoiser_model(name, source, dim, (weights_block("embed", *embed), block, output), "diffusion")
    # PatchEmbed's sin-cos table over the (sample_size / patch)^2 positions of the default size
    return replace(spec, buffer_elements=(sample // patch) ** 2 * dim)


def _adaln_single(prefix: str, dim: int) -> list[Linear]:
    """diffusers `AdaLayerNormSingle` without the size conditions: `emb.timestep_embedder`
    (256 -> dim -> dim) and `linear` (dim -> 6 dim), the modulation every block reads."""
    return [
        *timestep_embedding(f"{prefix}.emb.timestep_embedder", 256, dim),
        linear(f"{prefix}.linear", "modulation", dim, 6 * dim),
    ]


def _same_width(cfg: Mapping[str, Any], key: str, width: int, what: str) -> None:
    """Refuse a config width that the class's forward requires to equal `width`."""
    value = get_int(cfg, key, default=width)
    if value != width:
        raise ConfigError(key, f"is {value}; {what} needs it to equal heads x head_dim = {width}")


def sana_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """Sana (`SanaTransformer2DModel`, `sana_transformer.py`; Xie et al. 2024, "SANA: Efficient
    High-Resolution Image Synthesis with Linear Diffusion Transformers", sec. 2.2): a patch
    embedder (patch 1 on the 32x DC-AE latents), adaLN-single (`time_embed`; Sana-Sprint's
    guidance embedder instead where `guidance_embeds`), the caption projection of the Gemma-2
    embeddings and its RMSNorm (`caption_norm`, a weight), `num_layers` SanaTransformerBlocks and
    a learned output modulation. A block: linear self-attention `attn1` (q/k/v without bias
    unless `attention_bias`, ReLU kernels), cross-attention `attn2` (biased) to the caption,
    GLUMBConv (`conv_inverted` dim -> 2h with h = int(mlp_ratio x dim), the depthwise 3x3
    `conv_depth` over 2h channels, `conv_point` h -> dim without bias), a (6, dim) table; no
    affine norms. `qk_norm: rms_norm_across_heads` (Sana 1.5, Sprint) adds q/k RMSNorm weights
    over all heads in both attentions."""
    heads, head_dim, dim = _dims(cfg)
    qk_norm = _qk_norm(cfg, ("rms_norm_across_heads", None))
    if cfg.get("norm_elementwise_affine", False):
        raise ConfigError("norm_elementwise_affine", "affine block norms are not modelled (Sana's are not)")
    cross_heads = get_int(cfg, "num_cross_attention_heads", default=20)
    cross_head_dim = get_int(cfg, "cross_attention_head_dim", default=112)
    if cfg.get("cross_attention_dim", 2240) is None:
        raise ConfigError("cross_attention_dim", "null (no cross-attention) is not modelled")
    # the caption is projected to dim before attn2 reads it, and attn2's output joins the residual
    _same_width(cfg, "cross_attention_dim", dim, "attn2's keys and values read the projected caption: it")
    if cross_heads * cross_head_dim != dim:
        raise ConfigError(
            "cross_attention_head_dim",
            f"{cross_heads} x {cross_head_dim} != {dim}: cross-attention as wide as the residual is modelled",
        )
    in_channels = get_int(cfg, "in_channels", default=32)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch = get_int(cfg, "patch_size", default=1)
    ratio = cfg.get("mlp_ratio", 2.5)
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 < ratio <= 64:
        raise ConfigError("mlp_ratio", f"{shown_value(ratio)} must be a number in (0, 64]")
    hidden = int(ratio * dim)  # GLUMBConv: hidden_channels = int(expand_ratio * in_channels)
    bias = bool(cfg.get("attention_bias", False))
    norm = "full" if qk_norm else "none"
    embed = [linear("patch_embed.proj", "conv", in_channels * patch * patch, dim)]
    if cfg.get("guidance_embeds"):  # SanaCombinedTimestepGuidanceEmbeddings
        embed += timestep_embedding("time_embed.timestep_embedder", 256, dim)
        embed += timestep_embedding("time_embed.guidance_embedder", 256, dim)
        embed.append(linear("time_embed.linear", "modulation", dim, 6 * dim))
    else:
        embed += _adaln_single("time_embed", dim)
    embed += timestep_embedding("caption_projection", get_int(cfg, "caption_channels", default=2304), dim)
    block = Block(
        get_int(cfg, "num_layers", default=20),
        attention=_attention("attn1", heads, head_dim, norm, bias),
        cross_attention=_attention("attn2", cross_heads, cross_head_dim, norm),
        mlp=None,
        norms=0,
        role="sana",
        linears=(
            linear("ff.conv_inverted", "conv", dim, 2 * hidden),
            linear("ff.conv_depth", "conv", 9, 2 * hidden),  # depthwise: 9 taps per channel
            linear("ff.conv_point", "conv", hidden, dim, bias=False),
        ),
        extra_params=6 * dim,  # scale_shift_table (6, dim)
    )
    output = weights_block(  # scale_shift_table (2, dim) and proj_out
        "output", linear("proj_out", "output", dim, patch * patch * out_channels), extra_params=2 * dim
    )
    spec = denoiser_model(
        name,
        source,
        dim,
        (weights_block("embed", *embed, extra_params=dim), block, output),  # + caption_norm's weight
        "diffusion",
    )
    if cfg.get("interpolation_scale") is None:  # PatchEmbed(pos_embed_type=None): no table
        return spec
    sample = get_int(cfg, "sample_size", default=32)
    return replace(spec, buffer_elements=(sample // patch) ** 2 * dim)  # PatchEmbed's sin-cos table


def ltx_video_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """LTX-Video (`LTXVideoTransformer3DModel`, `transformer_ltx.py`; HaCohen et al. 2024,
    "LTX-Video: Realtime Video Latent Diffusion", sec. 2.2): `proj_in` over the packed latent
    channels, adaLN-single (`time_embed`), the caption projection of the T5 embeddings,
    `num_layers` LTXVideoTransformerBlocks (RMSNorm, self-attention with q/k RMSNorms over all
    heads and 3-D RoPE, cross-attention to the caption with its own q/k RMSNorms, RMSNorm, GELU
    FFN of 4 x dim, a (6, dim) table) and a learned output modulation before `proj_out`."""
    heads, head_dim, dim = _dims(cfg)
    _qk_norm(cfg, ("rms_norm_across_heads",), "rms_norm_across_heads")  # LTXAttention allows no other
    activation = cfg.get("activation_fn", "gelu-approximate")
    if activation != "gelu-approximate":
        raise ConfigError(
            "activation_fn", f"{shown_value(activation)} is not modelled (modelled: 'gelu-approximate')"
        )
    in_channels = get_int(cfg, "in_channels", default=128)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    bias = bool(cfg.get("attention_bias", True))
    out_bias = bool(cfg.get("attention_out_bias", True))
    _same_width(cfg, "cross_attention_dim", dim, "attn2's keys and values read the projected caption: it")
    embed = [linear("proj_in", "embed", in_channels, dim)]
    embed += _adaln_single("time_embed", dim)
    embed += timestep_embedding("caption_projection", get_int(cfg, "caption_channels", default=4096), dim)
    self_attention = replace(_attention("attn1", heads, head_dim, "full", bias), out_bias=out_bias)
    cross_attention = replace(_attention("attn2", heads, head_dim, "full", bias), out_bias=out_bias)
    affine = 2 * dim if cfg.get("norm_elementwise_affine", False) else 0  # norm1 / norm2 weights
    block = Block(
        get_int(cfg, "num_layers", default=28),
        attention=self_attention,
        cross_attention=cross_attention,
        mlp=_gelu_mlp("ff", 4 * dim),
        norms=0,
        role="ltx_video",
        extra_params=6 * dim + affine,  # scale_shift_table (6, dim)
    )
    output = weights_block(  # scale_shift_table (2, dim) and proj_out; norm_out has no weights
        "output", linear("proj_out", "output", dim, out_channels), extra_params=2 * dim
    )
    return denoiser_model(name, source, dim, (weights_block("embed", *embed), block, output), "video")


def cogvideox_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """CogVideoX-2b / 5b: the patch embedder (a 2-D conv per latent frame) and the text
    projection, the time embedding (dim -> time_embed_dim), `num_layers` CogVideoXBlocks (two
    expert adaLN norms `norm1`, `norm2` with affine LayerNorms and a time_embed_dim -> 6 x dim
    modulation each; self-attention over text + video with affine LayerNorms over each head of q
    and k; a GELU-tanh FFN), then norm_final, the AdaLayerNorm output modulation and proj_out."""
    heads, head_dim, dim = _dims(cfg)
    for key in ("patch_size_t", "ofs_embed_dim"):
        if cfg.get(key) is not None:
            raise ConfigError(
                key, f"{shown_value(cfg[key])}: CogVideoX 1.5 layouts are not modelled (CogVideoX 1.0 only)"
            )
    if cfg.get("activation_fn", "gelu-approximate") != "gelu-approximate":
        raise ConfigError(
            "activation_fn", f"{shown_value(cfg['activation_fn'])} is not modelled (gelu-approximate)"
        )
    in_channels = get_int(cfg, "in_channels", default=16)
    out_channels = get_int(cfg, "out_channels", default=16)
    patch = get_int(cfg, "patch_size", default=2)
    time_dim = get_int(cfg, "time_embed_dim", default=512)
    affine = 2 * dim if cfg.get("norm_elementwise_affine", True) else 0  # a LayerNorm's weight and bias
    bias = bool(cfg.get("attention_bias", True))
    embed = [
        linear(
            "patch_embed.proj", "conv", in_channels * patch * patch, dim, bool(cfg.get("patch_bias", True))
        ),
        linear("patch_embed.text_proj", "embed", get_int(cfg, "text_embed_dim", default=4096), dim),
        *timestep_embedding("time_embedding", dim, time_dim),
    ]
    attention = Attention(
        heads,
        heads,
        head_dim,
        head_dim,
        qkv_bias=bias,
        out_bias=True,
        qk_norm="head",  # nn.LayerNorm(head_dim) with weight and bias over each head of q and k
        qk_norm_bias=True,
        names=("attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0"),
    )
    block = Block(
        get_int(cfg, "num_layers", default=30),
        attention=attention,
        mlp=_gelu_mlp("ff", 4 * dim),  # CogVideoXTransformer3DModel passes its blocks no ff_inner_dim
        norms=0,
        role="cogvideox",
        linears=(
            linear("norm1.linear", "modulation", time_dim, 6 * dim),
            linear("norm2.linear", "modulation", time_dim, 6 * dim),
        ),
        extra_params=2 * affine,  # norm1.norm, norm2.norm
    )
    output = weights_block(  # norm_final and norm_out.norm (affine LayerNorms)
        "cogvideox_output",
        linear("norm_out.linear", "modulation", time_dim, 2 * dim),
        linear("proj_out", "output", dim, patch * patch * out_channels),
        extra_params=2 * affine,
    )
    spec = denoiser_model(name, source, dim, (weights_block("embed", *embed), block, output), "video")
    if cfg.get("use_rotary_positional_embeddings", False) and not cfg.get(
        "use_learned_positional_embeddings"
    ):
        return spec
    # CogVideoXPatchEmbed's joint position table: max_text_seq_length text rows (zeros) and the
    # sin-cos rows of the default sample's patches, (H / p) x (W / p) x (1 + (F - 1) / 4)
    frames = (get_int(cfg, "sample_frames", default=49) - 1) // get_int(
        cfg, "temporal_compression_ratio", default=4
    ) + 1
    patches = (get_int(cfg, "sample_height", default=60) // patch) * (
        get_int(cfg, "sample_width", default=90) // patch
    )
    rows = get_int(cfg, "max_text_seq_length", default=226) + patches * frames
    return replace(spec, buffer_elements=rows * dim)


def hunyuan_video_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """HunyuanVideo text-to-video: the 3-D patch embedder, the token refiner over the text
    (`context_embedder`: its own time + pooled-text embedding, proj_in, `num_refiner_layers`
    blocks of affine LayerNorm, self-attention, LayerNorm, SiLU FFN and adaNorm gates), the time,
    guidance and pooled CLIP embedders, `num_layers` dual-stream and `num_single_layers`
    single-stream blocks laid out as FLUX's (`flux_spec`), AdaLayerNormContinuous and proj_out."""
    heads, head_dim, dim = _dims(cfg)
    if cfg.get("image_condition_type") is not None:
        raise ConfigError(
            "image_condition_type",
            f"{shown_value(cfg['image_condition_type'])}: image-to-video is not modelled; text-to-video only",
        )
    _qk_norm(cfg, ("rms_norm",), "rms_norm")
    in_channels = get_int(cfg, "in_channels", default=16)
    out_channels = get_int(cfg, "out_channels", default=in_channels)
    patch, patch_t = get_int(cfg, "patch_size", default=2), get_int(cfg, "patch_size_t", default=1)
    ratio = cfg.get("mlp_ratio", 4.0)
    if not isinstance(ratio, int | float) or isinstance(ratio, bool) or ratio <= 0:
        raise ConfigError("mlp_ratio", f"{shown_value(ratio)} must be a positive number")
    inner = int(dim * ratio)
    text = get_int(cfg, "text_embed_dim", default=4096)
    volume = patch_t * patch * patch
    embed = [linear("x_embedder.proj", "conv", in_channels * volume, dim)]
    embed += timestep_embedding("context_embedder.time_text_embed.timestep_embedder", 256, dim)
    embed += timestep_embedding("context_embedder.time_text_embed.text_embedder", text, dim)
    embed.append(linear("context_embedder.proj_in", "embed", text, dim))
    embed += timestep_embedding("time_text_embed.timestep_embedder", 256, dim)
    embed += timestep_embedding(
        "time_text_embed.text_embedder", get_int(cfg, "pooled_projection_dim", default=768), dim
    )
    if cfg.get("guidance_embeds", True):
        embed += timestep_embedding("time_text_embed.guidance_embedder", 256, dim)
    refiner = Block(
        get_int(cfg, "num_refiner_layers", default=2),
        attention=_attention("attn", heads, head_dim, "none"),
        mlp=Mlp(
            4 * dim,  # HunyuanVideoTokenRefiner: mlp_width_ratio 4.0, FeedForward "linear-silu"
            gated=False,
            bias=True,
            names=("ff.net.0.proj",) * 2 + ("ff.net.2",),
            activation="silu",
        ),
        norms=0,
        role="text_refiner",
        linears=(linear("norm_out.linear", "modulation", dim, 2 * dim),),
        extra_params=4 * dim,  # norm1, norm2: affine LayerNorms
    )
    double = flux_double_block(get_int(cfg, "num_layers", default=20), heads, head_dim, inner)
    single = flux_single_block(get_int(cfg, "num_single_layers", default=40), head_dim, dim, inner)
    output = _output_block(dim, volume * out_channels)
    blocks = (weights_block("embed", *embed), refiner, double, single, output)
    return denoiser_model(name, source, dim, blocks, "video")


def weights_block(role: str, *linears: Linear, extra_params: int = 0, width: int = 0) -> Block:
    """One layer of listed matrices and parameters only: an embedder, a conv, an output head."""
    return Block(1, None, None, norms=0, role=role, linears=linears, extra_params=extra_params, width=width)


def _output_block(dim: int, out_features: int) -> Block:
    """AdaLayerNormContinuous (`norm_out.linear`, dim -> 2 dim) and `proj_out`."""
    return weights_block(
        "output",
        linear("norm_out.linear", "modulation", dim, 2 * dim),
        linear("proj_out", "output", dim, out_features),
    )


# Where each block role's layers sit in the diffusers module tree (the model's named_modules():
# FluxTransformer2DModel.transformer_blocks / single_transformer_blocks, WanTransformer3DModel
# .blocks, HunyuanVideo's token refiner), for regular-expression LoRA targets; tests/measure
# holds each against the real class.
BLOCK_PATHS = {
    "double_stream": "transformer_blocks.{}",
    "single_stream": "single_transformer_blocks.{}",
    "joint": "transformer_blocks.{}",
    "pixart": "transformer_blocks.{}",
    "sana": "transformer_blocks.{}",
    "ltx_video": "transformer_blocks.{}",
    "cogvideox": "transformer_blocks.{}",
    "video_dit": "blocks.{}",
    "text_refiner": "context_embedder.token_refiner.refiner_blocks.{}",
}


def denoiser_model(
    name: str,
    source: str,
    width: int,
    blocks: tuple[Block, ...],
    kind: str,
    geometry: LatentGeometry | None = None,
) -> ModelSpec:
    """A diffusion, video or JEPA model: no vocabulary or LM head, every norm counted in its block;
    a diffusion or video block's layers at their module path (`BLOCK_PATHS`)."""
    if kind in ("diffusion", "video"):
        blocks = tuple(
            replace(block, path=BLOCK_PATHS.get(block.role, "")) if not block.path else block
            for block in blocks
        )
    return ModelSpec(
        name=name,
        hidden_size=width,
        vocab_size=0,
        blocks=blocks,
        tied_embeddings=True,
        norm="parameter-free",
        final_norms=0,
        source=source,
        modality="image" if kind == "diffusion" else "video",
        kind=kind,
        geometry=geometry,
    )


#: diffusers `_class_name` -> reader of its transformer config.
TRANSFORMER_READERS = {
    "FluxTransformer2DModel": flux_spec,
    "SD3Transformer2DModel": sd3_spec,
    "WanTransformer3DModel": wan_spec,
    "PixArtTransformer2DModel": pixart_spec,
    "SanaTransformer2DModel": sana_spec,
    "LTXVideoTransformer3DModel": ltx_video_spec,
    "CogVideoXTransformer3DModel": cogvideox_spec,
    "HunyuanVideoTransformer3DModel": hunyuan_video_spec,
}
