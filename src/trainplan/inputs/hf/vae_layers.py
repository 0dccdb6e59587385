"""The layers diffusers VAE encoders share, as `EncoderLayer`s with their weights: biased
convolutions (2-D k x k or causal 3-D kt x k x k), ResnetBlock2D-style resnets, the single-head
mid-block attention, and the config checks of their readers (`hf/vae.py`, `hf/vae_hunyuan.py`).
Exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.hf.values import config_limit, get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import EncoderLayer

__all__ = [
    "component_int",
    "conv_layer",
    "conv_params",
    "conv_weights",
    "down_layer",
    "kl_decoder_weights",
    "kl_resnet_norms",
    "mid_layers",
    "positive_widths",
    "refuse_unmodelled",
    "require_block_types",
    "resnet_layers",
]


def component_int(cfg: Mapping[str, Any], where: str, key: str, default: Any) -> int:
    """get_int, the error naming the key inside its component (`vae.layers_per_block`)."""
    try:
        return get_int(cfg, key, default=default)
    except ConfigError as error:
        raise ConfigError(f"{where}.{key}", error.message) from None


def positive_widths(cfg: Mapping[str, Any], where: str, key: str, default: list[int]) -> list[int]:
    """A non-empty list of positive widths, each within the config bound on a width."""
    meaning, bound = config_limit("hidden_size")
    value = cfg.get(key, default)
    if not isinstance(value, list) or not value or not all(type(v) is int and 0 < v <= bound for v in value):
        raise ConfigError(
            f"{where}.{key}", f"{shown_value(value)} must list positive integers up to {bound:,} ({meaning})"
        )
    return list(value)


def refuse_unmodelled(cfg: Mapping[str, Any], where: str, modelled: Mapping[str, Any]) -> None:
    for key, value in modelled.items():
        if cfg.get(key, value) != value:
            raise ConfigError(
                f"{where}.{key}", f"{shown_value(cfg[key])} is not modelled (modelled: {value!r})"
            )


def require_block_types(cfg: Mapping[str, Any], where: str, stages: int, down: str, up: str) -> None:
    """`down_block_types` and `up_block_types` must name `stages` blocks of the modelled kinds."""
    for key, kind in (("down_block_types", down), ("up_block_types", up)):
        types = cfg.get(key, [kind] * stages)
        if types != [kind] * stages:
            raise ConfigError(f"{where}.{key}", f"{shown_value(types)}: need {stages} x {shown_value(kind)}")


def conv_layer(name: str, inp: int, out: int, kernel: int, level: int, time_level: int = 0) -> EncoderLayer:
    """A stride-1 convolution; a causal 3x3x3 one (27 taps) caches 2 input frames per chunk."""
    return EncoderLayer(
        name, "conv", inp, out, kernel, level, time_level, cache_frames=2 if kernel == 27 else 0
    )


def down_layer(name: str, width: int, level: int, time_level: int = 0) -> EncoderLayer:
    """A 3x3 stride-2 downsampling conv whose output is at `level`."""
    return EncoderLayer(name, "conv", width, width, 9, level, time_level, stride=2)


def conv_params(layer: EncoderLayer) -> int:
    """A biased convolution: in x out x taps + out."""
    return layer.in_channels * layer.out_channels * layer.kernel + layer.out_channels


def resnet_layers(
    prefix: str, inp: int, out: int, taps: int, level: int, time_level: int = 0
) -> list[EncoderLayer]:
    """ResnetBlock2D (taps 9) / WanResidualBlock (taps 27): two convs and a 1x1 shortcut when
    the width changes; its norms are counted by the caller."""
    layers = [
        conv_layer(f"{prefix}.conv1", inp, out, taps, level, time_level),
        conv_layer(f"{prefix}.conv2", out, out, taps, level, time_level),
    ]
    if inp != out:
        layers.append(conv_layer(f"{prefix}.conv_shortcut", inp, out, 1, level, time_level))
    return layers


def mid_layers(
    prefix: str, width: int, taps: int, level: int, time_level: int, wan: bool
) -> list[EncoderLayer]:
    """The mid block: resnet, single-head attention over the latent pixels, resnet. Its
    projections are 1x1 layers: Wan's fused to_qkv and proj, AutoencoderKL's to_q/k/v/out.0."""
    if wan:
        projections = [
            conv_layer(f"{prefix}.attentions.0.to_qkv", width, 3 * width, 1, level, time_level),
            conv_layer(f"{prefix}.attentions.0.proj", width, width, 1, level, time_level),
        ]
    else:
        projections = [
            conv_layer(f"{prefix}.attentions.0.{name}", width, width, 1, level, time_level)
            for name in ("to_q", "to_k", "to_v", "to_out.0")
        ]
    attention = EncoderLayer(f"{prefix}.attentions.0", "attention", width, width, 1, level, time_level)
    return [
        *resnet_layers(f"{prefix}.resnets.0", width, width, taps, level, time_level),
        *projections,
        attention,
        *resnet_layers(f"{prefix}.resnets.1", width, width, taps, level, time_level),
    ]


def conv_weights(layers: list[EncoderLayer]) -> int:
    return sum(conv_params(layer) for layer in layers if layer.kind == "conv")


def kl_resnet_norms(inp: int, out: int) -> int:
    """Two affine GroupNorms: weight and bias over the input, then over the output width."""
    return 2 * inp + 2 * out


def kl_decoder_weights(
    channels: list[int], per_block: int, latent: int, pixels_out: int, taps: int, upsamples: list[bool]
) -> int:
    """The weights of an AutoencoderKL-style decoder (AutoencoderKL, HunyuanVideo's): conv_in
    from the latents, the mid block, per stage (widest first) `per_block + 1` resnets with
    GroupNorms and an upsampling conv where `upsamples` says, the output GroupNorm and conv_out;
    `taps` per conv (9: 3x3, 27: 3x3x3). The post_quant_conv is the caller's."""
    last = channels[-1]
    layers = [conv_layer("decoder.conv_in", latent, last, taps, 0)]
    layers += mid_layers("decoder.mid_block", last, taps, 0, 0, wan=False)
    norms = 2 * kl_resnet_norms(last, last) + 2 * last
    width = last
    for stage, out in enumerate(reversed(channels)):
        for index in range(per_block + 1):
            layers += resnet_layers(f"decoder.up_blocks.{stage}.resnets.{index}", width, out, taps, 0)
            norms += kl_resnet_norms(width, out)
            width = out
        if upsamples[stage]:
            layers.append(conv_layer(f"decoder.up_blocks.{stage}.upsamplers.0.conv", out, out, taps, 0))
    layers.append(conv_layer("decoder.conv_out", channels[0], pixels_out, taps, 0))
    return conv_weights(layers) + norms + 2 * channels[0]
