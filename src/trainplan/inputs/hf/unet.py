"""diffusers `UNet2DConditionModel` configs (`unet/config.json`: SD 1.5, SDXL) -> ModelSpec.

The layout follows diffusers' `unet_2d_condition.py`, `unet_2d_blocks.py`, `resnet.py` and
`transformer_2d.py` (Rombach et al. 2022, "High-Resolution Image Synthesis with Latent Diffusion
Models", app. E; Podell et al. 2023, "SDXL", sec. 2.1):

- ResnetBlock2D(in, out): GroupNorm(in), conv1 3x3 in -> out, time_emb_proj temb -> out,
  GroupNorm(out), conv2 3x3 out -> out, a 1x1 conv_shortcut when in != out.
- Transformer2DModel(C, depth): GroupNorm(C), proj_in C -> C (1x1 conv or linear), `depth`
  BasicTransformerBlocks (LayerNorm + self-attention, LayerNorm + cross-attention whose keys and
  values come from `cross_attention_dim`, LayerNorm + GEGLU FFN of 4C), proj_out C -> C.
- Down stages: `layers_per_block` resnets (+ transformers), a 3x3 stride-2 conv but in the last;
  the mid block: resnet, transformer, resnet; up stages: `layers_per_block + 1` resnets fed the
  skip connection concatenated (+ transformers), a 3x3 conv after nearest upsampling but in the last.
- `attention_head_dim` is, as diffusers reads it, the number of heads per stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.diffusers import denoiser_model, linear, timestep_embedding, weights_block
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, Linear, Mlp, ModelSpec

__all__ = ["unet_spec"]

_DOWN = {"DownBlock2D": False, "CrossAttnDownBlock2D": True}
_UP = {"UpBlock2D": False, "CrossAttnUpBlock2D": True}
_UNMODELLED = {  # config key -> the only value modelled
    "class_embed_type": None,
    "encoder_hid_dim_type": None,
    "dual_cross_attention": False,
    "only_cross_attention": False,
    "time_cond_proj_dim": None,
    "num_class_embeds": None,
    "resnet_time_scale_shift": "default",
    "time_embedding_type": "positional",
    "time_embedding_dim": None,
    "mid_block_type": "UNetMidBlock2DCrossAttn",
    "class_embeddings_concat": False,
    "reverse_transformer_layers_per_block": None,
    "cross_attention_norm": None,
    "attention_type": "default",
    "encoder_hid_dim": None,
}


def unet_spec(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """Every weight of a UNet2DConditionModel, stage by stage, as blocks of the model spec."""
    for key, value in _UNMODELLED.items():
        if cfg.get(key, value) != value:
            raise ConfigError(key, f"{shown_value(cfg[key])} is not modelled (modelled: {value!r})")
    channels = [int(c) for c in cfg.get("block_out_channels", [320, 640, 1280, 1280])]
    stages = len(channels)
    down_types, up_types = list(cfg["down_block_types"]), list(cfg["up_block_types"])
    for key, types, known in (("down_block_types", down_types, _DOWN), ("up_block_types", up_types, _UP)):
        unknown = [t for t in types if t not in known]
        if unknown or len(types) != stages:
            raise ConfigError(key, f"{shown_value(types)}: need {stages} of {', '.join(known)}")
    heads = (
        _per_stage(cfg, "num_attention_heads", stages)
        if cfg.get("num_attention_heads")
        else _per_stage(cfg, "attention_head_dim", stages)
    )
    depth = _per_stage(cfg, "transformer_layers_per_block", stages, default=1)
    per_block = get_int(cfg, "layers_per_block", default=2)
    cross = get_int(cfg, "cross_attention_dim", default=1280)
    linear_proj = bool(cfg.get("use_linear_projection", False))
    temb = 4 * channels[0]
    in_kernel, out_kernel = (
        get_int(cfg, "conv_in_kernel", default=3),
        get_int(cfg, "conv_out_kernel", default=3),
    )

    embed = [linear("conv_in", "conv", get_int(cfg, "in_channels", default=4) * in_kernel**2, channels[0])]
    embed += timestep_embedding("time_embedding", channels[0], temb)
    if cfg.get("addition_embed_type") == "text_time":  # SDXL: pooled text + size/crop conditioning
        embed += timestep_embedding(
            "add_embedding", get_int(cfg, "projection_class_embeddings_input_dim"), temb
        )
    elif cfg.get("addition_embed_type") is not None:
        raise ConfigError(
            "addition_embed_type",
            f"{shown_value(cfg['addition_embed_type'])} is not modelled (text_time or null)",
        )
    blocks = [weights_block("embed", *embed)]

    out = channels[0]
    for stage, kind in enumerate(down_types):
        prefix, inp, out = f"down_blocks.{stage}", out, channels[stage]
        for index in range(per_block):
            blocks.append(_resnet(f"{prefix}.resnets.{index}", inp if index == 0 else out, out, temb, stage))
            if _DOWN[kind]:
                blocks += _transformer(
                    f"{prefix}.attentions.{index}", out, heads[stage], depth[stage], cross, linear_proj, stage
                )
        if stage < stages - 1:
            blocks.append(_conv(f"{prefix}.downsamplers.0.conv", out, out, stage, "downsample"))
    mid, bottom = channels[-1], stages - 1
    blocks.append(_resnet("mid_block.resnets.0", mid, mid, temb, bottom))
    blocks += _transformer("mid_block.attentions.0", mid, heads[-1], depth[-1], cross, linear_proj, bottom)
    blocks.append(_resnet("mid_block.resnets.1", mid, mid, temb, bottom))

    reversed_channels, reversed_heads, reversed_depth = channels[::-1], heads[::-1], depth[::-1]
    out = reversed_channels[0]
    for stage, kind in enumerate(up_types):
        prefix, previous, out = f"up_blocks.{stage}", out, reversed_channels[stage]
        skip_in = reversed_channels[min(stage + 1, stages - 1)]
        level = stages - 1 - stage
        for index in range(per_block + 1):
            skip = skip_in if index == per_block else out
            inp = (previous if index == 0 else out) + skip
            blocks.append(_resnet(f"{prefix}.resnets.{index}", inp, out, temb, level))
            if _UP[kind]:
                blocks += _transformer(
                    f"{prefix}.attentions.{index}",
                    out,
                    reversed_heads[stage],
                    reversed_depth[stage],
                    cross,
                    linear_proj,
                    level,
                )
        if stage < stages - 1:  # nearest upsampling, then the conv at the next level up
            blocks.append(_conv(f"{prefix}.upsamplers.0.conv", out, out, level - 1, "upsample"))
    out_linear = linear(
        "conv_out", "conv", channels[0] * out_kernel**2, get_int(cfg, "out_channels", default=4)
    )
    blocks.append(
        weights_block("output", out_linear, extra_params=2 * channels[0])
    )  # conv_norm_out, conv_out
    return denoiser_model(name, source, channels[-1], tuple(blocks), "diffusion")


def _per_stage(cfg: Mapping[str, Any], key: str, stages: int, default: int = 0) -> list[int]:
    value = cfg.get(key, default) if cfg.get(key) is not None else default
    values = [value] * stages if isinstance(value, int) else list(value)
    if len(values) != stages or not all(isinstance(v, int) and v > 0 for v in values):
        raise ConfigError(key, f"{shown_value(value)}: one positive integer, or one per stage ({stages})")
    return values


def _conv(name: str, inp: int, out: int, level: int, role: str, kernel: int = 3) -> Block:
    block = weights_block(role, linear(name, "conv", inp * kernel**2, out), width=out)
    return replace(block, level=level)


def _resnet(prefix: str, inp: int, out: int, temb: int, level: int) -> Block:
    """ResnetBlock2D: two 3x3 convs, the time projection, two GroupNorms (weight + bias)."""
    linears: list[Linear] = [
        linear(f"{prefix}.conv1", "conv", inp * 9, out),
        linear(f"{prefix}.time_emb_proj", "modulation", temb, out),
        linear(f"{prefix}.conv2", "conv", out * 9, out),
    ]
    if inp != out:
        linears.append(linear(f"{prefix}.conv_shortcut", "conv", inp, out))
    return replace(weights_block("resnet", *linears, extra_params=2 * (inp + out), width=out), level=level)


def _transformer(
    prefix: str, width: int, heads: int, depth: int, cross: int, linear_proj: bool, level: int
) -> list[Block]:
    """Transformer2DModel: GroupNorm and proj_in, `depth` BasicTransformerBlocks, proj_out."""
    if width % heads:
        raise ConfigError("attention_head_dim", f"{heads} heads do not divide {width} channels")
    head_dim = width // heads
    names = ("attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0")
    self_attention = Attention(heads, heads, head_dim, head_dim, out_bias=True, names=names)
    ffn = Mlp(
        4 * width,
        gated=True,
        fused_gate_up=True,
        bias=True,
        names=("ff.net.0.proj", "ff.net.0.proj", "ff.net.2"),
        activation="gelu",
    )
    cross_linears = (
        linear("attn2.to_q", "q", width, width, bias=False),
        linear("attn2.to_k", "k", cross, width, bias=False),
        linear("attn2.to_v", "v", cross, width, bias=False),
        linear("attn2.to_out.0", "o", width, width),
    )
    layers = Block(
        depth,
        self_attention,
        ffn,
        norms=0,
        role="transformer",
        width=width,
        linears=cross_linears,
        extra_params=3 * 2 * width,
        level=level,
        path=f"{prefix}.transformer_blocks.{{}}",
    )
    # proj_in / proj_out are a linear (SDXL's use_linear_projection) or a 1x1 conv: the same C x C + C
    proj_role = "embed" if linear_proj else "conv"
    return [  # the GroupNorm (weight + bias) is counted with proj_in
        replace(
            weights_block(
                "proj",
                linear(f"{prefix}.proj_in", proj_role, width, width),
                extra_params=2 * width,
                width=width,
            ),
            level=level,
        ),
        layers,
        replace(
            weights_block("proj", linear(f"{prefix}.proj_out", proj_role, width, width), width=width),
            level=level,
        ),
    ]
