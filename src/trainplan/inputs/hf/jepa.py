"""JEPA configs -> ModelSpec of the context encoder and predictor: transformers `VJEPA2Config`
(model_type `vjepa2`) and `IJepaConfig` (`ijepa`), and V-JEPA 1 (`vjepa`, no transformers class:
the same keys as VJEPA2Config, for the modules of facebookresearch/jepa).

Layout of transformers' `modeling_vjepa2.py` (Assran et al. 2025, "V-JEPA 2", sec. 2.1 and app. A):
a tubelet embedding (Conv3d of `tubelet_size` x `patch_size`^2 pixels per token), `num_hidden_layers`
pre-norm ViT layers (LayerNorm, query/key/value/proj attention with 3-D RoPE, LayerNorm, fc1/fc2
GELU MLP of `mlp_ratio` x width), a final LayerNorm; then the narrow predictor: a linear from the
encoder width to `pred_hidden_size`, `pred_num_mask_tokens` learned mask tokens, its own ViT layers,
a LayerNorm and a projection back to the encoder width. The target encoder used in pretraining is an
EMA copy of the context encoder, updated without gradients: it is not part of the checkpoint, so it
is not counted here (memory counts it as a term of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.diffusers import denoiser_model, linear, weights_block
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import Attention, Block, LatentGeometry, Mlp, ModelSpec

__all__ = ["ijepa_spec", "vjepa2_spec", "vjepa_spec"]

_VJEPA2_NAMES = ("attention.query", "attention.key", "attention.value", "attention.proj")
#: The original repos' Block (facebookresearch/ijepa src/models/vision_transformer.py, jepa
#: src/models/utils/modules.py): one fused qkv linear, then proj.
_REPO_NAMES = ("attn.q", "attn.k", "attn.v", "attn.proj")


def _vit_layers(
    count: int,
    width: int,
    heads: int,
    mlp_ratio: float,
    qkv_bias: bool,
    role: str,
    names: tuple[str, str, str, str] = _VJEPA2_NAMES,
) -> Block:
    """`count` pre-norm ViT layers: two LayerNorms (weight + bias), attention, fc1/fc2 MLP
    (transformers' VJEPA2Layer, or with `_REPO_NAMES` the repos' Block and its fused qkv)."""
    attention = Attention(
        heads,
        heads,
        width // heads,
        width // heads,
        qkv_bias=qkv_bias,
        out_bias=True,
        fused_qkv="attn.qkv" if names == _REPO_NAMES else None,
        names=names,
    )
    mlp = Mlp(
        int(width * mlp_ratio),
        gated=False,
        bias=True,
        names=("mlp.fc1", "mlp.fc1", "mlp.fc2"),
        activation="gelu",
    )
    return Block(count, attention, mlp, norms=0, role=role, width=width, extra_params=2 * 2 * width)


def vjepa2_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """V-JEPA 2 ViT-L/H/g: encoder and predictor, each with its own width."""
    width = get_int(cfg, "hidden_size", default=1024)
    patch = get_int(cfg, "patch_size", default=16)
    tubelet = get_int(cfg, "tubelet_size", default=2)
    channels = get_int(cfg, "in_chans", default=3)
    predictor = get_int(cfg, "pred_hidden_size", default=384)
    qkv_bias = bool(cfg.get("qkv_bias", True))
    embed = weights_block(
        "embed", linear("embeddings.patch_embeddings.proj", "conv", channels * tubelet * patch * patch, width)
    )
    encoder = _vit_layers(
        get_int(cfg, "num_hidden_layers", default=24),
        width,
        get_int(cfg, "num_attention_heads", default=16),
        float(cfg.get("mlp_ratio", 4.0)),
        qkv_bias,
        "encoder",
    )
    encoder_out = weights_block("encoder_norm", extra_params=2 * width)
    mask_tokens = get_int(cfg, "pred_num_mask_tokens", default=10) * predictor
    predictor_in = weights_block(
        "predictor",
        linear("predictor_embeddings", "embed", width, predictor),
        extra_params=mask_tokens,
        width=predictor,
    )
    predictor_layers = _vit_layers(
        get_int(cfg, "pred_num_hidden_layers", default=12),
        predictor,
        get_int(cfg, "pred_num_attention_heads", default=12),
        float(cfg.get("pred_mlp_ratio", 4.0)),
        qkv_bias,
        "predictor",
    )
    predictor_out = weights_block(  # predictor.layernorm and predictor.proj
        "predictor",
        linear("predictor.proj", "output", predictor, width),
        extra_params=2 * predictor,
        width=predictor,
    )
    geometry = LatentGeometry(
        spatial_stride=1,
        latent_channels=channels,
        patch=patch,
        temporal_stride=tubelet,
        temporal_causal=False,
        source="VJEPA2Config: patch_size, tubelet_size, in_chans, crop_size, frames_per_clip",
        resolution=get_int(cfg, "crop_size", default=256),
        frames=get_int(cfg, "frames_per_clip", default=64),
        recipe="vjepa2",
    )
    blocks = (embed, encoder, encoder_out, predictor_in, predictor_layers, predictor_out)
    return denoiser_model(name, source, width, blocks, "jepa", geometry)


def _predictor(
    width: int, predictor: int, layers: int, heads: int, mask_tokens: int, mlp_ratio: float
) -> tuple[Block, Block, Block]:
    """The repos' VisionTransformerPredictor: predictor_embed (encoder width -> predictor width),
    `mask_tokens` learned mask tokens, `layers` Blocks, predictor_norm, predictor_proj back to the
    encoder width (its fixed sin-cos table is a buffer, counted by the caller)."""
    embed = weights_block(
        "predictor",
        linear("predictor_embeddings", "embed", width, predictor),
        extra_params=mask_tokens * predictor,
        width=predictor,
    )
    blocks = _vit_layers(layers, predictor, heads, mlp_ratio, True, "predictor", _REPO_NAMES)
    out = weights_block(
        "predictor",
        linear("predictor.proj", "output", predictor, width),
        extra_params=2 * predictor,
        width=predictor,
    )
    return embed, blocks, out


def ijepa_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """I-JEPA (Assran et al. 2023): the encoder of transformers' IJepaModel (patch Conv2d, a
    position table of one row per patch, which transformers keeps as a parameter, ViT layers, a
    final LayerNorm), counted as transformers builds it, with the original repo's module layout
    (fused qkv); then the predictor of facebookresearch/ijepa, which transformers does not ship:
    `pred_hidden_size` wide (384), `pred_num_hidden_layers` deep (12; configs/in1k_vith14_ep300.yaml
    pred_emb_dim, pred_depth), the encoder's heads (src/helper.py init_model), one mask token and
    a fixed 2-D sin-cos table (a buffer)."""
    width = get_int(cfg, "hidden_size", default=768)
    patch = get_int(cfg, "patch_size", default=16)
    image = get_int(cfg, "image_size", default=224)
    channels = get_int(cfg, "num_channels", default=3)
    heads = get_int(cfg, "num_attention_heads", default=12)
    if image % patch:
        raise ConfigError("image_size", f"{image} is not a multiple of patch_size {patch}")
    patches = (image // patch) ** 2
    intermediate = get_int(cfg, "intermediate_size", default=4 * width)
    embed = weights_block(
        "embed",
        linear("patch_embed.proj", "conv", channels * patch * patch, width),
        extra_params=patches * width,
    )
    encoder = _vit_layers(
        get_int(cfg, "num_hidden_layers", default=12),
        width,
        heads,
        intermediate / width,
        bool(cfg.get("qkv_bias", True)),
        "encoder",
        _REPO_NAMES,
    )
    predictor = get_int(cfg, "pred_hidden_size", default=384)
    head = _predictor(
        width,
        predictor,
        get_int(cfg, "pred_num_hidden_layers", default=12),
        get_int(cfg, "pred_num_attention_heads", default=heads),
        1,
        4.0,
    )
    geometry = LatentGeometry(
        spatial_stride=1,
        latent_channels=channels,
        patch=patch,
        temporal_stride=1,
        temporal_causal=False,
        source="IJepaConfig: patch_size, image_size, num_channels",
        resolution=image,
        frames=1,
        recipe="ijepa",
    )
    blocks = (embed, encoder, weights_block("encoder_norm", extra_params=2 * width), *head)
    spec = denoiser_model(name, source, width, blocks, "jepa", geometry)
    return replace(spec, modality="image", buffer_elements=patches * predictor)


def vjepa_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """V-JEPA (Bardes et al. 2024) as facebookresearch/jepa builds it: a Conv3d tubelet embedding
    (`tubelet_size` x `patch_size`^2 pixels per token), ViT Blocks (fused qkv, SDPA), a final
    LayerNorm; the predictor (app/vjepa/utils.py init_video_model: the encoder's heads,
    `pred_num_mask_tokens` mask tokens, one per mask generator). Both position tables are fixed
    3-D sin-cos tables (nn.Parameter with requires_grad=False): buffers here, not parameters.
    No transformers class exists; the keys are VJEPA2Config's, and the count is checked by hand
    against the repo's modules (tests/test_jepa.py)."""
    width = get_int(cfg, "hidden_size", default=1024)
    patch = get_int(cfg, "patch_size", default=16)
    tubelet = get_int(cfg, "tubelet_size", default=2)
    channels = get_int(cfg, "in_chans", default=3)
    crop = get_int(cfg, "crop_size", default=224)
    frames = get_int(cfg, "frames_per_clip", default=16)
    heads = get_int(cfg, "num_attention_heads", default=16)
    if crop % patch or frames % tubelet:
        field = "crop_size" if crop % patch else "frames_per_clip"
        raise ConfigError(
            field,
            f"crop_size {crop} must be a multiple of patch_size {patch} and "
            f"frames_per_clip {frames} of tubelet_size {tubelet}",
        )
    patches = (frames // tubelet) * (crop // patch) ** 2
    embed = weights_block(
        "embed", linear("patch_embed.proj", "conv", channels * tubelet * patch * patch, width)
    )
    encoder = _vit_layers(
        get_int(cfg, "num_hidden_layers", default=24),
        width,
        heads,
        float(cfg.get("mlp_ratio", 4.0)),
        bool(cfg.get("qkv_bias", True)),
        "encoder",
        _REPO_NAMES,
    )
    predictor = get_int(cfg, "pred_hidden_size", default=384)
    head = _predictor(
        width,
        predictor,
        get_int(cfg, "pred_num_hidden_layers", default=12),
        get_int(cfg, "pred_num_attention_heads", default=heads),
        get_int(cfg, "pred_num_mask_tokens", default=2),
        float(cfg.get("pred_mlp_ratio", 4.0)),
    )
    geometry = LatentGeometry(
        spatial_stride=1,
        latent_channels=channels,
        patch=patch,
        temporal_stride=tubelet,
        temporal_causal=False,
        source="V-JEPA config: patch_size, tubelet_size, in_chans, crop_size, frames_per_clip",
        resolution=crop,
        frames=frames,
        recipe="vjepa",
    )
    blocks = (embed, encoder, weights_block("encoder_norm", extra_params=2 * width), *head)
    spec = denoiser_model(name, source, width, blocks, "jepa", geometry)
    return replace(spec, buffer_elements=patches * (width + predictor))
