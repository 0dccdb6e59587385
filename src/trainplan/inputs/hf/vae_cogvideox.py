"""diffusers `AutoencoderKLCogVideoX` (CogVideoX's causal 3-D VAE) -> FrozenComponent. Exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.hf.vae_layers import (
    component_int,
    conv_layer,
    conv_params,
    conv_weights,
    down_layer,
    kl_resnet_norms,
    positive_widths,
    refuse_unmodelled,
    require_block_types,
    resnet_layers,
)
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import EncoderLayer, FrozenComponent

__all__ = ["autoencoder_kl_cogvideox"]


def _spatial_norm(width: int, latent: int) -> int:
    """CogVideoXSpatialNorm3D: a GroupNorm's weight and bias and two biased 1x1x1 convs (conv_y,
    conv_b) from the latents to the width."""
    return 2 * width + 2 * (latent * width + width)


def autoencoder_kl_cogvideox(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderKLCogVideoX` (diffusers `autoencoder_kl_cogvideox.py`; Yang et al. 2024,
    sec. 2.1): the encoder is a causal 3x3x3 conv_in, per stage `layers_per_block` resnets
    (GroupNorm, causal 3x3x3 conv, GroupNorm, causal 3x3x3 conv, a 1x1x1 shortcut when the width
    changes; no time projection) and, but in the last stage, a 3x3 stride-2 2-D conv per frame
    (after an average pool of stride 2 in time in the first log2(temporal) stages, weightless),
    a mid block of two resnets (no attention), a GroupNorm and conv_out to 2 x latent channels.
    The decoder mirrors it with `layers_per_block + 1` resnets per stage whose norms are
    CogVideoXSpatialNorm3D, conditioned on the latents."""
    where = "vae"
    refuse_unmodelled(cfg, where, {"act_fn": "silu", "temporal_compression_ratio": 4})
    channels = positive_widths(cfg, where, "block_out_channels", [128, 256, 256, 512])
    stages = len(channels)
    require_block_types(cfg, where, stages, "CogVideoXDownBlock3D", "CogVideoXUpBlock3D")
    per_block = component_int(cfg, where, "layers_per_block", 3)
    latent = component_int(cfg, where, "latent_channels", 16)
    pixels_in, pixels_out = (
        component_int(cfg, where, "in_channels", 3),
        component_int(cfg, where, "out_channels", 3),
    )
    if stages < 3:
        raise ConfigError(
            f"{where}.block_out_channels", f"{shown_value(channels)}: need 3 stages or more (2 compress time)"
        )
    last = channels[-1]

    layers: list[EncoderLayer] = [conv_layer("encoder.conv_in", pixels_in, channels[0], 27, 0)]
    norms, width, time_level = 0, channels[0], 0
    for stage, out in enumerate(channels):
        for index in range(per_block):
            prefix = f"encoder.down_blocks.{stage}.resnets.{index}"
            layers += resnet_layers(prefix, width, out, 27, stage, time_level)
            norms += kl_resnet_norms(width, out)
            width = out
        if stage < stages - 1:
            time_level += 1 if stage < 2 else 0  # log2(4) = 2 stages pool in time before the conv
            name = f"encoder.down_blocks.{stage}.downsamplers.0.conv"
            layers.append(down_layer(name, out, stage + 1, time_level))
    for index in range(2):
        layers += resnet_layers(f"encoder.mid_block.resnets.{index}", last, last, 27, stages - 1, time_level)
        norms += kl_resnet_norms(last, last)
    layers.append(conv_layer("encoder.conv_out", last, 2 * latent, 27, stages - 1, time_level))
    norms += 2 * last  # norm_out
    if bool(cfg.get("use_quant_conv", False)):
        layers.append(conv_layer("quant_conv", 2 * latent, 2 * latent, 1, stages - 1, time_level))
    encoder = conv_weights(layers) + norms

    decoder = conv_params(conv_layer("decoder.conv_in", latent, last, 27, 0))
    decoder += 2 * (
        conv_weights(resnet_layers("decoder.mid_block", last, last, 27, 0)) + 2 * _spatial_norm(last, latent)
    )
    width = last
    for stage, out in enumerate(reversed(channels)):
        for index in range(per_block + 1):
            prefix = f"decoder.up_blocks.{stage}.resnets.{index}"
            decoder += conv_weights(resnet_layers(prefix, width, out, 27, 0))
            decoder += _spatial_norm(width, latent) + _spatial_norm(out, latent)
            width = out
        if stage < stages - 1:
            decoder += conv_params(conv_layer(f"decoder.up_blocks.{stage}.upsamplers.0.conv", out, out, 9, 0))
    decoder += _spatial_norm(channels[0], latent)
    decoder += conv_params(conv_layer("decoder.conv_out", channels[0], pixels_out, 27, 0))
    if bool(cfg.get("use_post_quant_conv", False)):
        decoder += conv_params(conv_layer("post_quant_conv", latent, latent, 1, 0))
    return FrozenComponent(
        "vae", "vae", "AutoencoderKLCogVideoX", encoder + decoder, encoder, tuple(layers), source=source
    )
