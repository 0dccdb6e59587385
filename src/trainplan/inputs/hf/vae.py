"""diffusers VAE configs (`vae/config.json`) -> FrozenComponent: both halves, and the encoder
layer by layer. Exact.

- `AutoencoderKL` (SD 1.5, SDXL, SD3, FLUX; diffusers `autoencoder_kl.py`, `vae.py`): the encoder
  is conv_in, per stage `layers_per_block` ResnetBlock2D (GroupNorm, 3x3 conv, GroupNorm, 3x3
  conv, a 1x1 shortcut when channels change; no time projection) and a 3x3 stride-2 conv but in
  the last stage, a mid block (resnet, single-head attention with a GroupNorm and four biased
  C x C projections, resnet), GroupNorm and conv_out to 2 x latent channels (mean and log-variance),
  then the 1x1 quant_conv (`use_quant_conv`; SD3 and FLUX have none). The decoder mirrors it with
  `layers_per_block + 1` resnets per stage and nearest-upsampling 3x3 convs.
- `AutoencoderKLWan` (Wan 2.1; `autoencoder_kl_wan.py`; Wan Team 2025, sec. 3.1): the same shape
  with causal 3x3x3 convs, RMS norms (a gain, no bias), a strided 2-D conv per downsampling stage
  plus a (3,1,1) time conv of stride 2 where `temperal_downsample` is true; the decoder's stages
  take half the previous width and upsample to half their own.
- `AutoencoderKLHunyuanVideo` (HunyuanVideo; `autoencoder_kl_hunyuan_video.py`; Kong et al. 2024,
  sec. 3.1): AutoencoderKL's layout with causal 3x3x3 convs, a strided 3x3x3 conv in the stages
  that downsample in space or time, and a mid-block attention over the whole clip (its reader
  in `hf/vae_hunyuan.py`).
- `AutoencoderKLCogVideoX` (CogVideoX; `autoencoder_kl_cogvideox.py`): the same resnets in causal
  3x3x3 convs, 2-D stride-2 convs between stages, no mid-block attention (`hf/vae_cogvideox.py`).
- `AutoencoderKLLTXVideo` (LTX-Video; `autoencoder_kl_ltx.py`): 4x4 pixel patches in, resnets in
  causal 3x3x3 convs behind weightless RMS norms, stride-2 3x3x3 convs in time and space, no
  attention (`hf/vae_ltx.py`).
- `AutoencoderDC` (Sana's DC-AE; `autoencoder_dc.py`): ResBlock stages, then EfficientViTBlock
  stages (ReLU linear attention, GLUMBConv), stride-2 convs between them (`hf/vae_dc.py`).

Training runs only the encoder half (and quant_conv): `EncoderLayer`s in forward order (the
shared layers in `hf/vae_layers.py`), with the resolution and frames each runs at, for the FLOPs
and working set of `terms/vae_encoder.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import pairwise
from typing import Any

from trainplan.inputs.hf.vae_cogvideox import autoencoder_kl_cogvideox
from trainplan.inputs.hf.vae_dc import autoencoder_dc
from trainplan.inputs.hf.vae_hunyuan import autoencoder_kl_hunyuan_video
from trainplan.inputs.hf.vae_layers import (
    component_int,
    conv_layer,
    conv_params,
    conv_weights,
    down_layer,
    kl_decoder_weights,
    kl_resnet_norms,
    mid_layers,
    positive_widths,
    refuse_unmodelled,
    require_block_types,
    resnet_layers,
)
from trainplan.inputs.hf.vae_ltx import autoencoder_kl_ltx_video
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import FrozenComponent

__all__ = [
    "UNCOUNTED_VAES",
    "VAE_READERS",
    "autoencoder_kl",
    "autoencoder_kl_wan",
    "component_int",
    "vae_component",
]

_KL_DOWN, _KL_UP = "DownEncoderBlock2D", "UpDecoderBlock2D"


def autoencoder_kl(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderKL`: every weight of both halves; the encoder's layers and weights."""
    where = "vae"
    refuse_unmodelled(cfg, where, {"act_fn": "silu"})
    channels = positive_widths(cfg, where, "block_out_channels", [64])
    stages = len(channels)
    require_block_types(cfg, where, stages, _KL_DOWN, _KL_UP)
    per_block = component_int(cfg, where, "layers_per_block", 1)
    latent = component_int(cfg, where, "latent_channels", 4)
    pixels_in, pixels_out = (
        component_int(cfg, where, "in_channels", 3),
        component_int(cfg, where, "out_channels", 3),
    )
    mid_attention = bool(cfg.get("mid_block_add_attention", True))
    if not mid_attention:
        raise ConfigError(f"{where}.mid_block_add_attention", "false is not modelled (modelled: true)")
    quant = bool(cfg.get("use_quant_conv", True))
    last = channels[-1]

    layers = [conv_layer("encoder.conv_in", pixels_in, channels[0], 9, 0)]
    norms = 0
    width = channels[0]
    for stage, out in enumerate(channels):
        for index in range(per_block):
            layers += resnet_layers(f"encoder.down_blocks.{stage}.resnets.{index}", width, out, 9, stage)
            norms += kl_resnet_norms(width, out)
            width = out
        if stage < stages - 1:
            layers.append(down_layer(f"encoder.down_blocks.{stage}.downsamplers.0.conv", out, stage + 1))
    layers += mid_layers("encoder.mid_block", last, 9, stages - 1, 0, wan=False)
    norms += 2 * kl_resnet_norms(last, last) + 2 * last  # the mid resnets and the attention's GroupNorm
    layers.append(conv_layer("encoder.conv_out", last, 2 * latent, 9, stages - 1))
    norms += 2 * last  # conv_norm_out
    if quant:
        layers.append(conv_layer("quant_conv", 2 * latent, 2 * latent, 1, stages - 1))
    encoder = conv_weights(layers) + norms

    upsamples = [stage < stages - 1 for stage in range(stages)]
    decoder = kl_decoder_weights(channels, per_block, latent, pixels_out, 9, upsamples)
    if bool(cfg.get("use_post_quant_conv", True)):
        decoder += conv_params(conv_layer("post_quant_conv", latent, latent, 1, 0))
    return FrozenComponent(
        "vae", "vae", "AutoencoderKL", encoder + decoder, encoder, tuple(layers), source=source
    )


def autoencoder_kl_wan(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """An `AutoencoderKLWan` (Wan 2.1's causal 3-D VAE): both halves; the encoder's layers."""
    where = "vae"
    refuse_unmodelled(cfg, where, {"is_residual": False, "patch_size": None, "attn_scales": []})
    base = component_int(cfg, where, "base_dim", 96)
    decoder_base = (
        component_int(cfg, where, "decoder_base_dim", base) if cfg.get("decoder_base_dim") else base
    )
    z_dim = component_int(cfg, where, "z_dim", 16)
    mult = positive_widths(cfg, where, "dim_mult", [1, 2, 4, 4])
    per_block = component_int(cfg, where, "num_res_blocks", 2)
    down = cfg.get("temperal_downsample", [False, True, True])
    if not isinstance(down, list) or len(down) != len(mult) - 1 or not all(isinstance(d, bool) for d in down):
        raise ConfigError(
            f"{where}.temperal_downsample", f"{shown_value(down)}: need {len(mult) - 1} booleans"
        )
    pixels_in, pixels_out = (
        component_int(cfg, where, "in_channels", 3),
        component_int(cfg, where, "out_channels", 3),
    )

    dims = [base * m for m in [1, *mult]]
    layers = [conv_layer("encoder.conv_in", pixels_in, dims[0], 27, 0)]
    norms, level, time_level, index = 0, 0, 0, 0
    for stage, (width, out) in enumerate(pairwise(dims)):
        for _ in range(per_block):
            layers += resnet_layers(f"encoder.down_blocks.{index}", width, out, 27, level, time_level)
            norms += width + out  # two RMS norm gains
            width, index = out, index + 1
        if stage < len(mult) - 1:
            level += 1
            layers.append(down_layer(f"encoder.down_blocks.{index}.resample.1", out, level, time_level))
            if down[stage]:  # a (3,1,1) conv of time stride 2 over the last cached frame and the chunk
                time_level += 1
                time_conv = conv_layer(
                    f"encoder.down_blocks.{index}.time_conv", out, out, 3, level, time_level
                )
                layers.append(replace(time_conv, skips_first_frame=True, cache_frames=1))
            index += 1
    last = dims[-1]
    layers += mid_layers("encoder.mid_block", last, 27, level, time_level, wan=True)
    norms += 4 * last + last  # the mid resnets' norms and the attention's
    layers.append(conv_layer("encoder.conv_out", last, 2 * z_dim, 27, level, time_level))
    norms += last  # norm_out
    layers.append(conv_layer("quant_conv", 2 * z_dim, 2 * z_dim, 1, level, time_level))
    encoder = conv_weights(layers) + norms

    up = down[::-1]
    dims = [decoder_base * m for m in [mult[-1], *mult[::-1]]]
    decoder_layers = [conv_layer("decoder.conv_in", z_dim, dims[0], 27, 0)]
    decoder_layers += mid_layers("decoder.mid_block", dims[0], 27, 0, 0, wan=True)
    decoder_norms, index = 5 * dims[0], 0
    for stage, (width, out) in enumerate(pairwise(dims)):
        width, index = (width // 2 if stage > 0 else width), 0
        for _ in range(per_block + 1):
            decoder_layers += resnet_layers(f"decoder.up_blocks.{stage}.resnets.{index}", width, out, 27, 0)
            decoder_norms += width + out
            width, index = out, index + 1
        if stage < len(mult) - 1:
            decoder_layers.append(
                conv_layer(f"decoder.up_blocks.{stage}.upsamplers.0.resample", out, out // 2, 9, 0)
            )
            if up[stage]:
                decoder_layers.append(
                    conv_layer(f"decoder.up_blocks.{stage}.upsamplers.0.time_conv", out, 2 * out, 3, 0)
                )
    decoder_layers.append(conv_layer("decoder.conv_out", dims[-1], pixels_out, 27, 0))
    decoder_norms += dims[-1]
    decoder_layers.append(conv_layer("post_quant_conv", z_dim, z_dim, 1, 0))
    decoder = conv_weights(decoder_layers) + decoder_norms
    return FrozenComponent(
        "vae", "vae", "AutoencoderKLWan", encoder + decoder, encoder, tuple(layers), source=source
    )


#: diffusers VAE class -> its reader.
VAE_READERS = {
    "AutoencoderKL": autoencoder_kl,
    "AutoencoderKLWan": autoencoder_kl_wan,
    "AutoencoderKLHunyuanVideo": autoencoder_kl_hunyuan_video,
    "AutoencoderKLCogVideoX": autoencoder_kl_cogvideox,
    "AutoencoderKLLTXVideo": autoencoder_kl_ltx_video,
    "AutoencoderDC": autoencoder_dc,
}

#: VAE classes whose latent geometry is read (hf/pipeline.py) but whose weights are not counted,
#: their block types not laid out (none now). Such a VAE stands in the pipeline as an uncounted
#: component, so running it each step (frozen_encoders gpu / offload) is refused rather than
#: costed at zero.
UNCOUNTED_VAES: tuple[str, ...] = ()


def vae_component(cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """The VAE of a pipeline from its `vae/config.json` (`_class_name` picks the layout)."""
    class_name = str(cfg.get("_class_name", "AutoencoderKL"))
    reader = VAE_READERS.get(class_name)
    if reader is None and class_name in UNCOUNTED_VAES:
        return FrozenComponent("vae", "vae", class_name, 0, 0, source=source, counted=False)
    if reader is None:
        raise ConfigError(
            "vae._class_name",
            f"{shown_value(class_name)} is not modelled; modelled: " + ", ".join(VAE_READERS),
        )
    return reader(cfg, source)
