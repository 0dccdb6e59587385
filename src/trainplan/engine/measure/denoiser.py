# mypy: disable-error-code="no-untyped-call"
# (torch, diffusers and peft are only partly typed; their untyped calls are expected here.)
"""A diffusers denoiser's training step on one batch of random latents, as the diffusers scripts run it.

The denoiser is built from its config (`from_config`, random init). A batch is what the scripts
hold on the GPU with precomputed latents and text embeddings: latents of the sample's shape
(`TokenShape`), text embeddings of `text_tokens` x the config's text width, pooled embeddings,
timesteps. The step then draws the noise, noises the latents, runs the denoiser under the bf16
autocast accelerate wraps around `forward` (its outputs converted to fp32), and forms the loss in
fp32 on the latent target:

- FLUX.1 (diffusers examples/dreambooth/train_dreambooth_lora_flux.py): rectified flow, latents
  packed 2x2 into tokens (`FluxPipeline._pack_latents`), timestep sigma, guidance for the
  guidance-distilled [dev], target noise - latents.
- SD3 / SD3.5 (train_dreambooth_lora_sd3.py): rectified flow on unpacked latents,
  `precondition_outputs` (prediction x (-sigma) + noisy input), target the latents.
- Wan 2.1 (the same flow-matching objective on video latents, frames x height x width).
- CogVideoX (diffusers examples/cogvideo/train_cogvideox_lora.py): latents as (batch, frames,
  channels, height, width), DDPM v-prediction (`CogVideoXDPMScheduler.get_velocity`), the loss
  weighted by 1 / (1 - alphas_cumprod) on the latents; CogVideoX-5b's 3-D RoPE tables computed
  outside the model (`prepare_rotary_positional_embeddings`), in fp32.
- HunyuanVideo (the flow-matching objective of Wan, with its text mask, pooled CLIP embedding and
  guidance x 1000 for the guidance-distilled transformer).
- PixArt-Sigma: DDPM noise prediction as the UNets, on the first half of its output (the
  other half is the learned variance), with the caption's T5 embeddings.
- Sana (train_dreambooth_lora_sana.py): rectified flow on the DC-AE latents, target
  noise - latents, with the Gemma-2 caption embeddings.
- LTX-Video (the same flow-matching objective, as LTX-Video-Trainer runs it): the video latents
  packed into tokens (LTXPipeline `_pack_latents`, patch 1), the frames, height and width and
  the RoPE scale given to the transformer, target noise - latents.
- UNets (train_text_to_image.py, train_text_to_image_sdxl.py): DDPM epsilon prediction, integer
  timesteps, SDXL's `add_time_ids` and pooled `text_embeds`; loss F.mse_loss(pred, noise).

The flow-matching losses are `mean((weighting * (pred - target) ** 2).reshape(b, -1), 1).mean()`
with the default weighting scheme "none" (weights of one), all in fp32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainplan.engine.terms.geometry import TokenShape
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError

#: The diffusers classes a trace builds: the config key of their text-embedding width, and the
#: defaults diffusers' __init__ gives that width, the pooled text width and `in_channels`.
DENOISERS: dict[str, tuple[str, int, int, int]] = {
    "FluxTransformer2DModel": ("joint_attention_dim", 4096, 768, 64),
    "SD3Transformer2DModel": ("joint_attention_dim", 4096, 2048, 16),
    "WanTransformer3DModel": ("text_dim", 4096, 0, 16),
    "UNet2DConditionModel": ("cross_attention_dim", 1280, 0, 4),
    "PixArtTransformer2DModel": ("caption_channels", 4096, 0, 4),
    "SanaTransformer2DModel": ("caption_channels", 2304, 0, 32),
    "LTXVideoTransformer3DModel": ("caption_channels", 4096, 0, 128),
    "CogVideoXTransformer3DModel": ("text_embed_dim", 4096, 0, 16),
    "HunyuanVideoTransformer3DModel": ("text_embed_dim", 4096, 768, 16),
}

#: Video denoisers that read latents as (batch, channels, frames, height, width); CogVideoX reads
#: (batch, frames, channels, height, width).
_CHANNELS_FIRST_VIDEO = (
    "WanTransformer3DModel",
    "LTXVideoTransformer3DModel",
    "HunyuanVideoTransformer3DModel",
)

#: Config keys the tracer drops: the pipeline settings trainplan carries beside the denoiser's own.
_OWN_KEYS = ("_class_name", "_pipeline", "_diffusers_version", "_name_or_path")

Batch = dict[str, torch.Tensor]


@dataclass
class SampleStep:
    """What a traced step of a diffusion or JEPA model needs: the trainable module, a batch maker,
    the loss, the EMA tensors and their update, and notes on what was built."""

    model: torch.nn.Module
    model_type: str
    make_batch: Callable[[], Batch]
    loss_of: Callable[[torch.nn.Module, Batch], torch.Tensor]
    notes: list[str] = field(default_factory=list)
    ema: list[torch.Tensor] = field(default_factory=list)
    after_step: Callable[[], None] | None = None


def build_denoiser(config: dict[str, Any], dtype: torch.dtype) -> tuple[torch.nn.Module, str]:
    """The diffusers denoiser of `config` at `dtype`; ConfigError naming `_class_name` otherwise."""
    import diffusers

    name = str(config.get("_class_name", ""))
    if name not in DENOISERS:
        raise ConfigError("_class_name", f"{name!r} is not traced; traced denoisers: {', '.join(DENOISERS)}")
    kwargs = {key: value for key, value in config.items() if key not in _OWN_KEYS}
    verbosity = diffusers.utils.logging.get_verbosity()
    # from_config and the cast log advice for loading checkpoints, which a trace does not do
    diffusers.utils.logging.set_verbosity_error()
    try:
        return cast(getattr(diffusers, name).from_config(kwargs), dtype), name
    finally:
        diffusers.utils.logging.set_verbosity(verbosity)


def cast(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """`module` with its floating tensors at `dtype` (fake parameters take `.data` assignment)."""
    from trainplan.engine.measure.model import _data_assigning_to

    with _data_assigning_to():
        return module.to(dtype)


def denoiser_step(
    model: torch.nn.Module,
    name: str,
    config: dict[str, Any],
    shape: TokenShape,
    micro_batch: int,
    data_dtype: torch.dtype,
    amp: bool,
) -> tuple[Callable[[], Batch], Callable[[torch.nn.Module, Batch], torch.Tensor]]:
    """(make_batch, loss_of) of the diffusers training step of `name` on `shape` samples."""
    b = micro_batch
    width_key, width_default, pooled_default, channels_default = DENOISERS[name]
    width = get_int(config, width_key, default=width_default)
    text = shape.text_tokens
    lh, lw, lf = shape.latent_height, shape.latent_width, shape.latent_frames
    in_channels = get_int(config, "in_channels", default=channels_default)
    if name == "FluxTransformer2DModel":
        # tokens are side x side latents (FLUX packs 2 x 2): channels per latent = in / side^2
        side = math.isqrt(lh * lw // shape.image_tokens)
        channels = in_channels // (side * side)
    else:
        channels = in_channels
    if name in _CHANNELS_FIRST_VIDEO:
        spatial: tuple[int, ...] = (b, channels, lf, lh, lw)
    elif name == "CogVideoXTransformer3DModel":
        spatial = (b, lf, channels, lh, lw)
    else:
        spatial = (b, channels, lh, lw)
    if name == "LTXVideoTransformer3DModel" and (
        get_int(config, "patch_size", default=1) != 1 or get_int(config, "patch_size_t", default=1) != 1
    ):
        raise ConfigError("patch_size", "a trace packs LTX-Video latents with patch 1 (the released models)")

    def make_batch() -> Batch:
        batch: Batch = {
            "latents": torch.randn(spatial, dtype=data_dtype),
            "encoder_hidden_states": torch.randn(b, text, width, dtype=data_dtype),
        }
        if name in ("FluxTransformer2DModel", "SD3Transformer2DModel", "HunyuanVideoTransformer3DModel"):
            pooled = get_int(config, "pooled_projection_dim", default=pooled_default)
            batch["pooled_projections"] = torch.randn(b, pooled, dtype=data_dtype)
        if name == "UNet2DConditionModel" and config.get("addition_embed_type") == "text_time":
            # SDXL: pooled text embeddings and the six add_time_ids (sizes and crop)
            time_dim = get_int(config, "addition_time_embed_dim", default=256)
            pooled = get_int(config, "projection_class_embeddings_input_dim") - 6 * time_dim
            batch["text_embeds"] = torch.randn(b, pooled, dtype=data_dtype)
            batch["time_ids"] = torch.randn(b, 6, dtype=data_dtype)
        return batch

    def forward(model: torch.nn.Module, **inputs: Any) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out: torch.Tensor = model(**inputs, return_dict=False)[0]
        return out.float() if amp else out  # accelerate's ConvertOutputsToFp32

    def flow_loss(pred: torch.Tensor, target: torch.Tensor, sigmas: torch.Tensor) -> torch.Tensor:
        weighting = torch.ones_like(sigmas)  # compute_loss_weighting_for_sd3("none")
        squared = (weighting.float() * (pred.float() - target.float()) ** 2).reshape(b, -1)
        return torch.mean(squared, 1).mean()

    def loss_of(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
        x = batch["latents"]
        noise = torch.randn_like(x)
        text_states = batch["encoder_hidden_states"]
        if name == "CogVideoXTransformer3DModel":
            return _cogvideox_loss(model, forward, config, shape, x, noise, text_states)
        if name in ("UNet2DConditionModel", "PixArtTransformer2DModel"):
            t = torch.randint(0, 1000, (b,))
            alphas = torch.rand(1000)  # the scheduler's alphas_cumprod, on the device
            a = alphas[t].sqrt().to(x.dtype).view(b, 1, 1, 1)
            s = (1 - alphas[t]).sqrt().to(x.dtype).view(b, 1, 1, 1)
            noisy = a * x + s * noise  # DDPMScheduler.add_noise
            added = (
                {"added_cond_kwargs": {"text_embeds": batch["text_embeds"], "time_ids": batch["time_ids"]}}
                if "time_ids" in batch
                else {}
            )
            if name == "PixArtTransformer2DModel":
                # PixArt predicts noise and a learned variance: the loss reads the first half
                # (diffusers' PixArt training examples: model_pred.chunk(2, dim=1)[0])
                conditions = {"resolution": None, "aspect_ratio": None}
                pred = forward(
                    model,
                    hidden_states=noisy,
                    timestep=t,
                    encoder_hidden_states=text_states,
                    added_cond_kwargs=conditions,
                )
                if pred.shape[1] == 2 * x.shape[1]:
                    pred = pred.chunk(2, dim=1)[0]
            else:
                pred = forward(model, sample=noisy, timestep=t, encoder_hidden_states=text_states, **added)
            return torch.nn.functional.mse_loss(pred.float(), noise.float(), reduction="mean")
        sigmas = torch.rand(b, dtype=x.dtype).view(b, *([1] * (x.dim() - 1)))
        noisy = (1.0 - sigmas) * x + sigmas * noise
        timesteps = torch.rand(b) * 1000
        if name == "FluxTransformer2DModel":
            c, side = channels, math.isqrt(lh * lw // shape.image_tokens)
            h, w = lh // side, lw // side
            packed = noisy.view(b, c, h, side, w, side).permute(0, 2, 4, 1, 3, 5).reshape(b, h * w, -1)
            img_ids = torch.zeros(h * w, 3, dtype=x.dtype)
            txt_ids = torch.zeros(text, 3, dtype=x.dtype)
            guidance = torch.full((b,), 3.5) if config.get("guidance_embeds") else None
            out = forward(
                model,
                hidden_states=packed,
                timestep=timesteps / 1000,
                guidance=guidance,
                pooled_projections=batch["pooled_projections"],
                encoder_hidden_states=text_states,
                txt_ids=txt_ids,
                img_ids=img_ids,
            )
            pred = out.view(b, h, w, c, side, side).permute(0, 3, 1, 4, 2, 5).reshape(x.shape)
            return flow_loss(pred, noise - x, sigmas)
        inputs: dict[str, Any] = {"hidden_states": noisy, "timestep": timesteps}
        inputs["encoder_hidden_states"] = text_states
        if name == "SD3Transformer2DModel":
            inputs["pooled_projections"] = batch["pooled_projections"]
            pred = forward(model, **inputs) * (-sigmas) + noisy  # precondition_outputs
            return flow_loss(pred, x, sigmas)
        if name == "LTXVideoTransformer3DModel":
            # LTXPipeline._pack_latents with patch 1: (b, c, f, h, w) -> (b, f h w, c); no text
            # padding mask (every caption token valid)
            packed = noisy.permute(0, 2, 3, 4, 1).reshape(b, lf * lh * lw, in_channels)
            out = forward(
                model,
                hidden_states=packed,
                encoder_hidden_states=text_states,
                timestep=timesteps,
                encoder_attention_mask=None,
                num_frames=lf,
                height=lh,
                width=lw,
                rope_interpolation_scale=(8 / 25, 32, 32),  # temporal stride / fps, spatial strides
            )
            pred = out.reshape(b, lf, lh, lw, in_channels).permute(0, 4, 1, 2, 3)
            return flow_loss(pred, noise - x, sigmas)
        if name == "HunyuanVideoTransformer3DModel":
            inputs["pooled_projections"] = batch["pooled_projections"]
            inputs["encoder_attention_mask"] = torch.ones(b, text, dtype=torch.bool)
            if config.get("guidance_embeds", True):
                inputs["guidance"] = torch.full((b,), 6.0 * 1000, dtype=x.dtype)
        pred = forward(model, **inputs)
        return flow_loss(pred, noise - x, sigmas)

    return make_batch, loss_of


def _cogvideox_loss(
    model: torch.nn.Module,
    forward: Callable[..., torch.Tensor],
    config: dict[str, Any],
    shape: TokenShape,
    x: torch.Tensor,
    noise: torch.Tensor,
    text_states: torch.Tensor,
) -> torch.Tensor:
    """CogVideoX's v-prediction step (train_cogvideox_lora.py): DDPM noising, the velocity from the
    model output, the loss weighted by 1 / (1 - alphas_cumprod) against the latents."""
    b = x.shape[0]
    t = torch.randint(0, 1000, (b,))
    alphas = torch.rand(1000)  # the scheduler's alphas_cumprod, on the device
    view = (b, 1, 1, 1, 1)
    a = alphas[t].sqrt().to(x.dtype).view(view)
    s = (1 - alphas[t]).sqrt().to(x.dtype).view(view)
    noisy = a * x + s * noise
    rotary = None
    if config.get("use_rotary_positional_embeddings"):
        tokens, head_dim = shape.image_tokens, get_int(config, "attention_head_dim", default=64)
        rotary = (torch.randn(tokens, head_dim), torch.randn(tokens, head_dim))  # fp32 cos, sin
    output = forward(
        model, hidden_states=noisy, encoder_hidden_states=text_states, timestep=t, image_rotary_emb=rotary
    )
    pred = a * noisy - s * output  # CogVideoXDPMScheduler.get_velocity
    weights = (1 / (1 - alphas[t])).view(view)
    return torch.mean((weights * (pred - x) ** 2).reshape(b, -1), dim=1).mean()
