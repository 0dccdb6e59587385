"""diffusers `AutoencoderKLHunyuanVideo` (HunyuanVideo's causal 3-D VAE) -> FrozenComponent. Exact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.vae_layers import (
    component_int,
    conv_layer,
    conv_params,
    conv_weights,
    kl_decoder_weights,
    kl_resnet_norms,
    mid_layers,
    positive_widths,
    refuse_unmodelled,
    require_block_types,
    resnet_layers,
)
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import EncoderLayer, FrozenComponent

__all__ = ["autoencoder_kl_hunyuan_video"]


def _hunyuan_stages(cfg: Mapping[str, Any], where: str, stages: int) -> list[tuple[bool, bool]]:
    """(spatial, temporal) downsampling of each encoder stage, as HunyuanVideoEncoder3D derives
    them from the compression ratios: spatial in the first log2(spatial) stages, temporal (4; the
    decoder takes no other) in the log2(4) = 2 stages before the last. The decoder's stage i
    upsamples where the encoder's stage i downsamples."""
    spatial = component_int(cfg, where, "spatial_compression_ratio", 8)
    temporal = component_int(cfg, where, "temporal_compression_ratio", 4)
    if spatial & (spatial - 1) or not 1 <= spatial.bit_length() - 1 <= stages:
        raise ConfigError(
            f"{where}.spatial_compression_ratio", f"{spatial}: need 2 .. 2^{stages}, a power of 2"
        )
    if temporal != 4:
        raise ConfigError(f"{where}.temporal_compression_ratio", f"{temporal} is not modelled (modelled: 4)")
    space = spatial.bit_length() - 1
    return [(i < space, stages - 3 <= i < stages - 1) for i in range(stages)]


def autoencoder_kl_hunyuan_video(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderKLHunyuanVideo` (diffusers `autoencoder_kl_hunyuan_video.py`; Kong et al.
    2024, sec. 3.1): AutoencoderKL's layout in causal 3x3x3 convs (replicate padding, no feature
    cache: a tile of frames runs at once), a strided 3x3x3 conv in each stage that downsamples in
    space or time, and a mid-block attention over every latent pixel of every frame of the tile."""
    where = "vae"
    refuse_unmodelled(cfg, where, {"act_fn": "silu", "mid_block_add_attention": True})
    channels = positive_widths(cfg, where, "block_out_channels", [128, 256, 512, 512])
    stages = len(channels)
    require_block_types(cfg, where, stages, "HunyuanVideoDownBlock3D", "HunyuanVideoUpBlock3D")
    per_block = component_int(cfg, where, "layers_per_block", 2)
    latent = component_int(cfg, where, "latent_channels", 16)
    pixels_in, pixels_out = (
        component_int(cfg, where, "in_channels", 3),
        component_int(cfg, where, "out_channels", 3),
    )
    downsampling = _hunyuan_stages(cfg, where, stages)
    last = channels[-1]

    layers = [conv_layer("encoder.conv_in", pixels_in, channels[0], 27, 0)]
    norms, width, level, time_level = 0, channels[0], 0, 0
    for stage, (out, (space, time)) in enumerate(zip(channels, downsampling, strict=True)):
        for index in range(per_block):
            layers += resnet_layers(
                f"encoder.down_blocks.{stage}.resnets.{index}", width, out, 27, level, time_level
            )
            norms += kl_resnet_norms(width, out)
            width = out
        if space or time:
            level, time_level = level + space, time_level + time
            name = f"encoder.down_blocks.{stage}.downsamplers.0.conv"
            stride = 2 if space else 1
            layers.append(EncoderLayer(name, "conv", out, out, 27, level, time_level, stride=stride))
    mid = mid_layers("encoder.mid_block", last, 27, level, time_level, wan=False)
    layers += [replace(layer, kind="clip-attention") if layer.kind == "attention" else layer for layer in mid]
    norms += 2 * kl_resnet_norms(last, last) + 2 * last  # the mid resnets and the attention's GroupNorm
    layers.append(conv_layer("encoder.conv_out", last, 2 * latent, 27, level, time_level))
    norms += 2 * last  # conv_norm_out
    layers.append(conv_layer("quant_conv", 2 * latent, 2 * latent, 1, level, time_level))
    layers = [replace(layer, cache_frames=0) for layer in layers]
    encoder = conv_weights(layers) + norms

    # the decoder's stage i upsamples where the encoder's stage i downsamples
    upsamples = [space or time for space, time in downsampling]
    decoder = kl_decoder_weights(channels, per_block, latent, pixels_out, 27, upsamples)
    decoder += conv_params(conv_layer("post_quant_conv", latent, latent, 1, 0))
    return FrozenComponent(
        "vae", "vae", "AutoencoderKLHunyuanVideo", encoder + decoder, encoder, tuple(layers), source=source
    )
