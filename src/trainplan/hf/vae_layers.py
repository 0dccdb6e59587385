"""The layers diffusers VAE encoders share, as `EncoderLayer`s with their weights: biased
convolutions (2-D k x k or causal 3-D kt x k x k), ResnetBlock2D-style resnets, the single-head
mid-block attention, and the config checks of their readers (`hf/vae.py`, `hf/vae_hunyuan.py`).
Exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError
from trainplan.hf.values import config_limit, get_int
from trainplan.model import EncoderLayer

__all__ = [
    "component_int",
    "conv_layer",
    "conv_params",
    "conv_weights",
    "down_layer",
    "kl_resnet_norms",
    "mid_layers",
    "positive_widths",
    "refuse_unmodelled",
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
            f"{where}.{key}", f"{value!r} must list positive integers up to {bound:,} ({meaning})"
        )
    return list(value)


def refuse_unmodelled(cfg: Mapping[str, Any], where: str, modelled: Mapping[str, Any]) -> None:
    for key, value in modelled.items():
        if cfg.get(key, value) != value:
            raise ConfigError(f"{where}.{key}", f"{cfg[key]!r} is not modelled (modelled: {value!r})")


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
