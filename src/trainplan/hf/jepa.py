"""transformers `VJEPA2Config` (model_type `vjepa2`) -> ModelSpec of the context encoder and predictor.

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
from typing import Any

from trainplan.hf.diffusers import denoiser_model, linear, weights_block
from trainplan.hf.values import get_int
from trainplan.model import Attention, Block, LatentGeometry, Mlp, ModelSpec

__all__ = ["vjepa2_spec"]


def _vit_layers(count: int, width: int, heads: int, mlp_ratio: float, qkv_bias: bool, role: str) -> Block:
    """`count` VJEPA2Layer: two LayerNorms (weight + bias), attention, fc1/fc2 MLP."""
    attention = Attention(
        heads,
        heads,
        width // heads,
        width // heads,
        qkv_bias=qkv_bias,
        out_bias=True,
        names=("attention.query", "attention.key", "attention.value", "attention.proj"),
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
    )
    blocks = (embed, encoder, encoder_out, predictor_in, predictor_layers, predictor_out)
    return denoiser_model(name, source, width, blocks, "jepa", geometry)
