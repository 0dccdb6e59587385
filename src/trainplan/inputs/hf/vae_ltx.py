"""diffusers `AutoencoderKLLTXVideo` (LTX-Video's causal video VAE) -> FrozenComponent. Exact."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.vae_layers import (
    component_int,
    conv_layer,
    conv_params,
    conv_weights,
    positive_widths,
    refuse_unmodelled,
    resnet_layers,
)
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import EncoderLayer, FrozenComponent

__all__ = ["autoencoder_kl_ltx_video"]

_DOWN, _DEFAULT_WIDTHS, _DEFAULT_LAYERS = "LTXVideoDownBlock3D", [128, 256, 512, 512], [4, 3, 3, 3, 4]


def _flags(cfg: Mapping[str, Any], where: str, key: str, count: int) -> list[bool]:
    value = cfg.get(key, [True, True, True, False])
    if not isinstance(value, list) or len(value) != count or not all(isinstance(v, bool) for v in value):
        raise ConfigError(f"{where}.{key}", f"{shown_value(value)}: need {count} booleans")
    return list(value)


def _layer_counts(cfg: Mapping[str, Any], where: str, key: str, stages: int) -> list[int]:
    """`layers_per_block`: a resnet count per stage and one for the mid block."""
    value = cfg.get(key, _DEFAULT_LAYERS)
    if not isinstance(value, list) or len(value) != stages + 1:
        raise ConfigError(
            f"{where}.{key}",
            f"{shown_value(value)}: need {stages + 1} resnet counts (one per stage, the mid)",
        )
    return [component_int({key: v}, where, key, 0) for v in value]


def _resnet(prefix: str, inp: int, out: int, level: int, time_level: int) -> tuple[list[EncoderLayer], int]:
    """LTXVideoResnetBlock3d: two causal 3x3x3 convs behind weightless RMS norms; when the width
    changes, a LayerNorm (weight and bias over the input) and a 1x1x1 shortcut conv. (layers,
    norm weights)."""
    return resnet_layers(prefix, inp, out, 27, level, time_level), (2 * inp if inp != out else 0)


def autoencoder_kl_ltx_video(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderKLLTXVideo` (diffusers `autoencoder_kl_ltx.py`; HaCohen et al. 2024,
    "LTX-Video"), the 0.9 layout: the encoder packs 4x4 pixel patches into 48 channels
    (`patch_size`), a causal 3x3x3 conv_in, per stage i `layers_per_block[i]` resnets at the
    stage's input width, a causal 3x3x3 conv of stride 2 in time and space where
    `spatio_temporal_scaling` says, and a resnet to the next stage's width when it differs (the
    last stage keeps its width); a mid block of `layers_per_block[-1]` resnets, a weightless RMS
    norm and conv_out to latent + 1 channels (a mean per latent channel and one shared
    log-variance). No quant convs. The decoder (`decoder_block_out_channels`,
    `decoder_layers_per_block`, `decoder_spatio_temporal_scaling`) mirrors it with upsamplers
    that convolve to 8 x the width and shuffle it into 2x2x2."""
    where = "vae"
    refuse_unmodelled(
        cfg,
        where,
        {
            "patch_size_t": 1,
            "timestep_conditioning": False,
            "encoder_causal": True,
            "downsample_type": ["conv"] * 4,
            "upsample_residual": [False] * 4,
            "upsample_factor": [1] * 4,
            "decoder_inject_noise": [False] * 5,
        },
    )
    channels = positive_widths(cfg, where, "block_out_channels", _DEFAULT_WIDTHS)
    stages = len(channels)
    types = cfg.get("down_block_types", [_DOWN] * 4)
    if types != [_DOWN] * stages:
        raise ConfigError(f"{where}.down_block_types", f"{shown_value(types)}: need {stages} x {_DOWN!r}")
    per_stage = _layer_counts(cfg, where, "layers_per_block", stages)
    scaling = _flags(cfg, where, "spatio_temporal_scaling", stages)
    latent = component_int(cfg, where, "latent_channels", 128)
    pixels_in, pixels_out = (
        component_int(cfg, where, "in_channels", 3),
        component_int(cfg, where, "out_channels", 3),
    )
    patch = component_int(cfg, where, "patch_size", 4)
    if patch & (patch - 1):
        raise ConfigError(f"{where}.patch_size", f"{patch}: need a power of 2")

    for key, derived in (("spatial", patch << sum(scaling)), ("temporal", 1 << sum(scaling))):
        stated = cfg.get(f"{key}_compression_ratio")
        if (
            stated is not None and stated != derived
        ):  # the pipeline's geometry would differ from the encoder's
            raise ConfigError(
                f"{where}.{key}_compression_ratio",
                f"{shown_value(stated)} is not modelled (modelled: {derived}, the encoder's)",
            )

    level, time_level = patch.bit_length() - 1, 0
    layers = [conv_layer("encoder.conv_in", pixels_in * patch * patch, channels[0], 27, level)]
    norms, width = 0, channels[0]
    for stage in range(stages):
        out = channels[stage + 1] if stage + 1 < stages else channels[stage]
        for index in range(per_stage[stage]):
            block, _ = _resnet(
                f"encoder.down_blocks.{stage}.resnets.{index}", width, width, level, time_level
            )
            layers += block
        if scaling[stage]:
            level, time_level = level + 1, time_level + 1
            name = f"encoder.down_blocks.{stage}.downsamplers.0.conv"
            layers.append(EncoderLayer(name, "conv", width, width, 27, level, time_level, stride=2))
        if out != width:
            block, weights = _resnet(f"encoder.down_blocks.{stage}.conv_out", width, out, level, time_level)
            layers, norms, width = layers + block, norms + weights, out
    for index in range(per_stage[-1]):
        layers += _resnet(f"encoder.mid_block.resnets.{index}", width, width, level, time_level)[0]
    layers.append(conv_layer("encoder.conv_out", width, latent + 1, 27, level, time_level))
    layers = [replace(layer, cache_frames=0) for layer in layers]  # no feature cache: the clip runs whole
    encoder = conv_weights(layers) + norms

    decoder = _decoder_weights(cfg, where, latent, pixels_out * patch * patch)
    return FrozenComponent(
        "vae", "vae", "AutoencoderKLLTXVideo", encoder + decoder, encoder, tuple(layers), source=source
    )


def _decoder_weights(cfg: Mapping[str, Any], where: str, latent: int, pixels_out: int) -> int:
    """LTXVideoDecoder3d (widest first): conv_in from the latents, a mid block of resnets, per
    stage a resnet to the stage's width when it differs, an upsampler (a causal 3x3x3 conv to 8 x
    the width) where scaled, the stage's resnets, and conv_out to the packed output patches."""
    channels = positive_widths(cfg, where, "decoder_block_out_channels", _DEFAULT_WIDTHS)[::-1]
    stages = len(channels)
    per_stage = _layer_counts(cfg, where, "decoder_layers_per_block", stages)[::-1]
    scaling = _flags(cfg, where, "decoder_spatio_temporal_scaling", stages)[::-1]
    width = channels[0]
    layers = [conv_layer("decoder.conv_in", latent, width, 27, 0)]
    norms = 0
    for index in range(per_stage[0]):
        layers += _resnet(f"decoder.mid_block.resnets.{index}", width, width, 0, 0)[0]
    for stage, out in enumerate(channels):
        if out != width:
            block, weights = _resnet(f"decoder.up_blocks.{stage}.conv_in", width, out, 0, 0)
            layers, norms, width = layers + block, norms + weights, out
        if scaling[stage]:
            layers.append(conv_layer(f"decoder.up_blocks.{stage}.upsamplers.0.conv", out, 8 * out, 27, 0))
        for index in range(per_stage[stage + 1]):
            layers += _resnet(f"decoder.up_blocks.{stage}.resnets.{index}", out, out, 0, 0)[0]
    return (
        conv_weights(layers) + norms + conv_params(conv_layer("decoder.conv_out", width, pixels_out, 27, 0))
    )
