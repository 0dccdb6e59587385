"""diffusers `AutoencoderDC` (Sana's deep-compression autoencoder) -> FrozenComponent. Exact."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.hf.vae_layers import component_int, conv_layer, positive_widths, refuse_unmodelled
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import EncoderLayer, FrozenComponent

__all__ = ["autoencoder_dc"]

_BLOCKS = ("ResBlock", "EfficientViTBlock")
_WIDTHS = [128, 256, 512, 512, 1024, 1024]


def _per_stage(cfg: Mapping[str, Any], where: str, key: str, default: Any, stages: int) -> list[Any]:
    """A per-stage list, or one value for every stage (diffusers takes either)."""
    value = cfg.get(key, default)
    if not isinstance(value, list):
        value = [value] * stages
    if len(value) != stages:
        raise ConfigError(f"{where}.{key}", f"{shown_value(value)}: need {stages} entries, one per stage")
    return list(value)


def _stages(
    cfg: Mapping[str, Any], where: str, half: str, layers: list[int]
) -> list[tuple[int, str, list[int]]]:
    """(width, block type, qkv multiscale kernels) of each stage of one half; `layers` its block counts."""
    widths = positive_widths(cfg, where, f"{half}_block_out_channels", _WIDTHS)
    stages = len(widths)
    types = _per_stage(cfg, where, f"{half}_block_types", "ResBlock", stages)
    if not all(kind in _BLOCKS for kind in types):
        raise ConfigError(
            f"{where}.{half}_block_types", f"{shown_value(types)}: modelled blocks are " + ", ".join(_BLOCKS)
        )
    scales = cfg.get(f"{half}_qkv_multiscales", [[], [], [], [5], [5], [5]])
    if (
        not isinstance(scales, list)
        or len(scales) != stages
        or not all(
            isinstance(s, list) and all(type(k) is int and 0 < k <= 31 and k % 2 for k in s) for s in scales
        )
    ):
        raise ConfigError(
            f"{where}.{half}_qkv_multiscales", f"{shown_value(scales)}: need {stages} lists of odd kernels"
        )
    if len(layers) != stages:
        raise ConfigError(
            f"{where}.{half}_layers_per_block", f"{shown_value(layers)}: need {stages} block counts"
        )
    return list(zip(widths, types, scales, strict=True))


def _layer_counts(cfg: Mapping[str, Any], where: str, key: str, default: list[int]) -> list[int]:
    value = cfg.get(key, default)
    if not isinstance(value, list):
        raise ConfigError(f"{where}.{key}", f"{shown_value(value)} must list a block count per stage")
    return [component_int({key: v}, where, key, 1) for v in value]


def _res_block(prefix: str, width: int, level: int) -> tuple[list[EncoderLayer], int]:
    """ResBlock: a biased 3x3 conv, a 3x3 conv without bias, an RMS norm with weight and bias."""
    layers = [
        conv_layer(f"{prefix}.conv1", width, width, 9, level),
        conv_layer(f"{prefix}.conv2", width, width, 9, level),
    ]
    return layers, 2 * (9 * width * width) + width + 2 * width


def _vit_block(
    prefix: str, width: int, head_dim: int, scales: list[int], level: int
) -> tuple[list[EncoderLayer], int]:
    """EfficientViTBlock (diffusers `SanaMultiscaleLinearAttention` and `GLUMBConv`): bias-free
    q/k/v projections to width // head_dim heads, per multiscale kernel k a depthwise k x k conv
    over q, k and v and a grouped 1x1 conv (a head's head_dim channels per group), the ReLU
    linear attention over every head of every scale, to_out and an RMS norm (weight and bias);
    then GLUMBConv: a biased 1x1 conv to 2 x 4 x width, a biased depthwise 3x3, the gate, a
    bias-free 1x1 back and an RMS norm. (layers for the FLOPs, weights)"""
    inner = width // head_dim * head_dim
    qkv = 3 * inner
    branches = 1 + len(scales)
    hidden = 4 * width
    layers = [conv_layer(f"{prefix}.attn.to_{name}", width, inner, 1, level) for name in ("q", "k", "v")]
    weights = 3 * width * inner
    for index, kernel in enumerate(scales):
        name = f"{prefix}.attn.to_qkv_multiscale.{index}"
        layers += [
            EncoderLayer(f"{name}.proj_in", "conv", 1, qkv, kernel * kernel, level),  # depthwise
            EncoderLayer(f"{name}.proj_out", "conv", head_dim, qkv, 1, level),  # groups of head_dim
        ]
        weights += qkv * kernel * kernel + qkv * head_dim
    layers += [
        EncoderLayer(f"{prefix}.attn", "linear-attention", branches * inner, head_dim, 1, level),
        conv_layer(f"{prefix}.attn.to_out", branches * inner, width, 1, level),
        conv_layer(f"{prefix}.conv_out.conv_inverted", width, 2 * hidden, 1, level),
        EncoderLayer(f"{prefix}.conv_out.conv_depth", "conv", 1, 2 * hidden, 9, level),  # depthwise
        conv_layer(f"{prefix}.conv_out.conv_point", hidden, width, 1, level),
    ]
    weights += branches * inner * width + 2 * width  # to_out, norm_out
    weights += width * 2 * hidden + 2 * hidden + 2 * hidden * 9 + 2 * hidden + hidden * width + 2 * width
    return layers, weights


def _block(
    kind: str, prefix: str, width: int, head_dim: int, scales: list[int], level: int
) -> tuple[list[EncoderLayer], int]:
    if kind == "ResBlock":
        return _res_block(prefix, width, level)
    return _vit_block(prefix, width, head_dim, scales, level)


def autoencoder_dc(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderDC` (diffusers `autoencoder_dc.py`; Chen et al. 2024, "Deep Compression
    Autoencoder"), with stride-2 conv downsampling and interpolating upsampling (the Sana
    release: `downsample_block_type` conv, `upsample_block_type` interpolate): the encoder is a
    biased 3x3 conv_in, per stage `encoder_layers_per_block` ResBlocks or EfficientViTBlocks
    and, but in the last stage, a biased 3x3 stride-2 conv to the next width (its weightless
    shortcut averages the pixel-unshuffled input), and a 3x3 conv_out to the latents (plus a
    weightless channel-averaged shortcut). The decoder mirrors it: conv_in, per stage (widest
    first) a nearest-upsampling biased 3x3 conv from the wider stage and its blocks, an RMS norm
    (weight and bias) and conv_out. The output is the latents themselves (no log-variance)."""
    where = "vae"
    # diffusers' defaults are pixel_unshuffle / pixel_shuffle; it downsamples by a strided conv
    # for any other name ("conv", "Conv") and interpolates only for "interpolate"
    resampling = (("downsample_block_type", "pixel_unshuffle"), ("upsample_block_type", "pixel_shuffle"))
    for key, default in resampling:
        value = cfg.get(key, default)
        if value in ("pixel_unshuffle", "pixel_shuffle") or (key[0] == "u" and value != "interpolate"):
            modelled = "conv" if key[0] == "d" else "interpolate"
            raise ConfigError(
                f"{where}.{key}", f"{shown_value(value)} is not modelled (modelled: {modelled!r})"
            )
    refuse_unmodelled(cfg, where, {"decoder_norm_types": "rms_norm"})
    head_dim = component_int(cfg, where, "attention_head_dim", 32)
    latent = component_int(cfg, where, "latent_channels", 32)
    pixels = component_int(cfg, where, "in_channels", 3)
    encoder_layers = _layer_counts(cfg, where, "encoder_layers_per_block", [2, 2, 2, 3, 3, 3])
    decoder_layers = _layer_counts(cfg, where, "decoder_layers_per_block", [3, 3, 3, 3, 3, 3])
    stages = _stages(cfg, where, "encoder", encoder_layers)
    count = len(stages)

    layers = [conv_layer("encoder.conv_in", pixels, stages[0][0], 9, 0)]
    encoder = 9 * pixels * stages[0][0] + stages[0][0]
    for index, ((width, kind, scales), blocks) in enumerate(zip(stages, encoder_layers, strict=True)):
        for block in range(blocks):
            new, weights = _block(
                kind, f"encoder.down_blocks.{index}.{block}", width, head_dim, scales, index
            )
            layers, encoder = layers + new, encoder + weights
        if index < count - 1:
            out = stages[index + 1][0]
            name = f"encoder.down_blocks.{index}.{blocks}.conv"
            layers.append(EncoderLayer(name, "conv", width, out, 9, index + 1, stride=2))
            encoder += 9 * width * out + out
    last = stages[-1][0]
    layers.append(conv_layer("encoder.conv_out", last, latent, 9, count - 1))
    encoder += 9 * last * latent + latent

    up = _stages(cfg, where, "decoder", decoder_layers)
    decoder = 9 * latent * up[-1][0] + up[-1][0]
    for index, ((width, kind, scales), blocks) in enumerate(zip(up, decoder_layers, strict=True)):
        if index < len(up) - 1:
            decoder += 9 * up[index + 1][0] * width + width
        for _ in range(blocks):
            decoder += _block(kind, "decoder", width, head_dim, scales, 0)[1]
    decoder += 2 * up[0][0] + 9 * up[0][0] * pixels + pixels  # norm_out, conv_out
    return FrozenComponent(
        "vae", "vae", "AutoencoderDC", encoder + decoder, encoder, tuple(layers), source=source
    )
