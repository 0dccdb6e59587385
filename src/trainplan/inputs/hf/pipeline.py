"""diffusers pipeline folders and latent geometry: `model_index.json`, the denoiser's and the VAE's configs.

A pipeline folder holds `model_index.json` (component name -> [library, class]) and one folder per
component. The denoiser is `transformer/` or `unet/`; the VAE and the text encoders
(`text_encoder/`, `text_encoder_2/`, `text_encoder_3/`) are counted by `hf/encoders.py`; the
VAE's config gives the latent geometry:
- `AutoencoderKL` (SD 1.5, SDXL, SD3, FLUX): one 2x downsampling per encoder stage but the last,
  so the spatial stride is 2 ** (len(block_out_channels) - 1) (8 for the released VAEs), with
  `latent_channels` channels (diffusers `AutoencoderKL`; `VaeImageProcessor`'s vae_scale_factor).
- `AutoencoderKLWan` (Wan 2.1): the spatial stride is 2 ** len(temperal_downsample) and the
  temporal stride 2 ** (number of true entries); the first frame is encoded alone (a causal 3-D
  VAE: 1 + (frames - 1) / 4 latent frames), `z_dim` channels (WanPipeline's vae_scale_factor_*).
- `AutoencoderDC` (Sana's deep-compression autoencoder; Chen et al. 2024, "Deep Compression
  Autoencoder"): 2 ** (len(encoder_block_out_channels) - 1) (32 for DC-AE f32c32), with
  `latent_channels` (SanaPipeline's vae_scale_factor).
- `AutoencoderKLLTXVideo` (LTX-Video's causal video VAE): `patch_size` x 2 ** (number of true
  `spatio_temporal_scaling` entries) spatially (4 x 8 = 32) and `patch_size_t` x the same in time
  (8), the first frame alone (1 + (frames - 1) / 8 latent frames), unless the config states
  `spatial_compression_ratio` / `temporal_compression_ratio` (AutoencoderKLLTXVideo.__init__,
  LTXPipeline's vae_*_compression_ratio).
- `AutoencoderKLCogVideoX` (CogVideoX): spatial stride 2 ** (len(block_out_channels) - 1), temporal
  stride `temporal_compression_ratio`, causal (CogVideoXPipeline's vae_scale_factor_spatial and
  _temporal; Yang et al. 2024, sec. 2.1: "4 x 8 x 8 compression"), `latent_channels` channels.
- `AutoencoderKLHunyuanVideo` (HunyuanVideo): `spatial_compression_ratio` and
  `temporal_compression_ratio` (8 and 4), causal, `latent_channels` channels
  (HunyuanVideoPipeline's vae_scale_factor_spatial and _temporal).
Tokens per latent frame come from the denoiser: FLUX packs 2x2 latents into one 64-channel token
(FluxPipeline `_pack_latents`: in_channels = 4 x latent channels), SD3 and Wan patchify with
`patch_size`, a UNet attends over every latent pixel at its first stage; Sana patchifies with
`patch_size` (1), LTX-Video packs `patch_size` x `patch_size` x `patch_size_t` latents per token
(LTXPipeline `_pack_latents`; 1 x 1 x 1 in the released model); CogVideoX and HunyuanVideo
patchify each latent frame 2 x 2 (`patch_size`; `patch_size_t` 1).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainplan.inputs.hf.encoders import TEXT_ENCODER_FOLDERS, frozen_components
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import LatentGeometry, ModelSpec

__all__ = [
    "DEFAULT_TEXT_TOKENS",
    "DENOISER_FOLDERS",
    "JOINED_CLIP_TOKENS",
    "PIPELINE_KEY",
    "PROMPT_TEMPLATE_TOKENS",
    "VAE_STRIDES",
    "latent_geometry",
    "pipeline_config",
    "with_geometry",
]

#: Component folders of a diffusers pipeline that hold the denoiser, in the order looked for.
DENOISER_FOLDERS = ("transformer", "unet")

#: Text positions the CLIP embeddings take ahead of the T5 tokens in the denoiser's text, per
#: denoiser class: StableDiffusion3Pipeline.encode_prompt pads the joined CLIP-L/G embeddings to
#: the T5 width and concatenates them with the T5 tokens along the sequence (77 + 256). FLUX
#: reads CLIP's pooled output only; the UNets read CLIP alone.
JOINED_CLIP_TOKENS = {"SD3Transformer2DModel": 77}

#: Prompt-template tokens the variable-length text encoder reads ahead of the prompt, per
#: denoiser class, which the pipeline crops off the encoder's output before the denoiser:
#: HunyuanVideoPipeline's DEFAULT_PROMPT_TEMPLATE has `crop_start` 95, and the tokenizer pads to
#: max_sequence_length + crop_start (256 + 95 = 351 LLaMA tokens).
PROMPT_TEMPLATE_TOKENS = {"HunyuanVideoTransformer3DModel": 95}

#: Text tokens the denoiser sees by default, per denoiser class: FluxPipeline and WanPipeline's
#: `max_sequence_length` (512), StableDiffusion3Pipeline's 77 CLIP tokens concatenated with its
#: 256 T5 tokens, the 77-token CLIP context of the UNet pipelines, and PixArtSigmaPipeline's
#: 300 T5 tokens (its `max_sequence_length`; PixArt-alpha's pipeline uses 120), SanaPipeline's
#: 300 Gemma-2 tokens (`max_sequence_length`; its complex-human-instruction prefix is cut off
#: before the denoiser) and LTXPipeline's 128 T5 tokens.
DEFAULT_TEXT_TOKENS = {
    "FluxTransformer2DModel": 512,
    "SD3Transformer2DModel": JOINED_CLIP_TOKENS["SD3Transformer2DModel"] + 256,
    "WanTransformer3DModel": 512,
    "UNet2DConditionModel": 77,
    "PixArtTransformer2DModel": 300,
    "SanaTransformer2DModel": 300,
    "LTXVideoTransformer3DModel": 128,
    # CogVideoXPipeline's max_sequence_length (226 T5 tokens, the transformer's
    # max_text_seq_length); HunyuanVideoPipeline's max_sequence_length 256 (LLaMA tokens after
    # the prompt template's first 95 are cropped; CLIP-L gives the pooled embedding only)
    "CogVideoXTransformer3DModel": 226,
    "HunyuanVideoTransformer3DModel": 256,
}

#: The pipelines' default sample size, where the denoiser config does not give it as
#: `sample_size` latents: FluxPipeline's default_sample_size 128 x its VAE stride 8, and
#: WanPipeline's __call__ defaults (height 480, width 832, num_frames 81), and LTXPipeline's
#: (height 512, width 704, num_frames 161).
DEFAULT_SAMPLES: dict[str, tuple[int | str, int]] = {
    "FluxTransformer2DModel": (1024, 1),
    "WanTransformer3DModel": ("832x480", 81),
    "LTXVideoTransformer3DModel": ("704x512", 161),
    # CogVideoXPipeline: 480 x 720, 49 frames; HunyuanVideoPipeline: 720 x 1280, 129 frames
    "CogVideoXTransformer3DModel": ("720x480", 49),
    "HunyuanVideoTransformer3DModel": ("1280x720", 129),
}

#: The key under which a denoiser config carries its pipeline's settings (`vae`, `text_tokens`).
PIPELINE_KEY = "_pipeline"


def _cogvideox_strides(vae: Mapping[str, Any]) -> tuple[int, int, int]:
    """AutoencoderKLCogVideoX: 2 ** (stages - 1) spatially, `temporal_compression_ratio` in time."""
    stages = vae.get("block_out_channels", [128, 256, 256, 512])
    if not isinstance(stages, list) or not stages:
        raise ConfigError("vae.block_out_channels", f"{shown_value(stages)} must list the encoder stages")
    temporal = get_int(vae, "temporal_compression_ratio", default=4)
    return 2 ** (len(stages) - 1), temporal, get_int(vae, "latent_channels", default=16)


def _hunyuan_video_strides(vae: Mapping[str, Any]) -> tuple[int, int, int]:
    """AutoencoderKLHunyuanVideo: the compression ratios its config states (8 and 4)."""
    return (
        get_int(vae, "spatial_compression_ratio", default=8),
        get_int(vae, "temporal_compression_ratio", default=4),
        get_int(vae, "latent_channels", default=16),
    )


def _dc_ae_strides(vae: Mapping[str, Any]) -> tuple[int, int, int]:
    """AutoencoderDC: (spatial, temporal, latent channels) = (2 ** (stages - 1), 1, latent_channels)."""
    stages = vae.get("encoder_block_out_channels", [128, 256, 512, 512, 1024, 1024])
    if not isinstance(stages, list) or not stages:
        raise ConfigError(
            "vae.encoder_block_out_channels", f"{shown_value(stages)} must list the encoder stages"
        )
    return 2 ** (len(stages) - 1), 1, get_int(vae, "latent_channels", default=32)


def _ltx_vae_strides(vae: Mapping[str, Any]) -> tuple[int, int, int]:
    """AutoencoderKLLTXVideo: patch_size x 2 ** scalings spatially, patch_size_t x 2 ** scalings
    in time, or the ratios the config states; `latent_channels` (default 128)."""
    scaling = vae.get("spatio_temporal_scaling", [True, True, True, False])
    if not isinstance(scaling, list) or not all(isinstance(value, bool) for value in scaling):
        raise ConfigError("vae.spatio_temporal_scaling", f"{shown_value(scaling)} must be a list of booleans")
    steps = 2 ** sum(scaling)
    spatial = get_int(vae, "spatial_compression_ratio", default=get_int(vae, "patch_size", default=4) * steps)
    temporal = get_int(
        vae, "temporal_compression_ratio", default=get_int(vae, "patch_size_t", default=1) * steps
    )
    return spatial, temporal, get_int(vae, "latent_channels", default=128)


#: VAE classes read for their geometry alone, -> (spatial stride, temporal stride, latent channels).
VAE_STRIDES: dict[str, Callable[[Mapping[str, Any]], tuple[int, int, int]]] = {
    "AutoencoderDC": _dc_ae_strides,
    "AutoencoderKLLTXVideo": _ltx_vae_strides,
    "AutoencoderKLCogVideoX": _cogvideox_strides,
    "AutoencoderKLHunyuanVideo": _hunyuan_video_strides,
}


def latent_geometry(cfg: Mapping[str, Any], vae: Mapping[str, Any], text_tokens: int) -> LatentGeometry:
    """The pixel -> latent -> token geometry of a denoiser config and its VAE config."""
    vae_class = str(vae.get("_class_name", "AutoencoderKL"))
    if vae_class == "AutoencoderKL":
        stages = vae.get("block_out_channels", [64])
        if not isinstance(stages, list) or not stages:
            raise ConfigError("vae.block_out_channels", f"{shown_value(stages)} must list the encoder stages")
        spatial, temporal, latent = 2 ** (len(stages) - 1), 1, get_int(vae, "latent_channels", default=4)
    elif vae_class == "AutoencoderKLWan":
        downsample = vae.get("temperal_downsample", [False, True, True])
        if not isinstance(downsample, list):
            raise ConfigError(
                "vae.temperal_downsample", f"{shown_value(downsample)} must be a list of booleans"
            )
        spatial, temporal = 2 ** len(downsample), 2 ** sum(bool(d) for d in downsample)
        latent = get_int(vae, "z_dim", default=16)
    elif vae_class in VAE_STRIDES:
        spatial, temporal, latent = VAE_STRIDES[vae_class](vae)
    else:
        raise ConfigError(
            "vae._class_name",
            f"{shown_value(vae_class)} is not modelled; modelled: AutoencoderKL, AutoencoderKLWan, "
            + ", ".join(VAE_STRIDES),
        )
    class_name = str(cfg.get("_class_name", ""))
    patch, patch_t = 1, 1
    if class_name == "FluxTransformer2DModel":
        packed = get_int(cfg, "in_channels", default=64)
        side = math.isqrt(packed // latent) if packed % latent == 0 else 0
        if side * side * latent != packed:
            raise ConfigError(
                "in_channels", f"{packed} is not a square number of {latent}-channel latents (FLUX packing)"
            )
        patch = side * get_int(cfg, "patch_size", default=1)
    elif class_name in ("SD3Transformer2DModel", "PixArtTransformer2DModel"):
        patch = get_int(cfg, "patch_size", default=2)
    elif class_name in ("SanaTransformer2DModel", "LTXVideoTransformer3DModel"):
        patch = get_int(cfg, "patch_size", default=1)
        ltx = class_name == "LTXVideoTransformer3DModel"
        patch_t = get_int(cfg, "patch_size_t", default=1) if ltx else 1
        # LTXPipeline packs patch x patch x patch_t latents into each token's channels; Sana's
        # PatchEmbed convolves the latents themselves
        packed = latent * patch * patch * patch_t if ltx else latent
        channels = get_int(cfg, "in_channels", default=128 if ltx else 32)
        if channels != packed:
            raise ConfigError(
                "in_channels", f"{channels} does not match the VAE's {latent} latent channels (need {packed})"
            )
    elif class_name == "WanTransformer3DModel":
        patch_t, patch, _ = (int(p) for p in cfg.get("patch_size", [1, 2, 2]))
    elif class_name in ("CogVideoXTransformer3DModel", "HunyuanVideoTransformer3DModel"):
        patch = get_int(cfg, "patch_size", default=2)
        patch_t = get_int(cfg, "patch_size_t", default=1)
    resolution, frames = DEFAULT_SAMPLES.get(class_name, (0, 1))
    if not resolution:  # SD3 and UNet pipelines: the config's sample_size latents per side
        resolution = get_int(cfg, "sample_size", default=128) * spatial
    return LatentGeometry(
        spatial_stride=spatial,
        latent_channels=latent,
        patch=patch,
        temporal_stride=temporal,
        patch_t=patch_t,
        text_tokens=text_tokens,
        source=f"{vae_class} config and the {class_name or 'denoiser'} config",
        resolution=resolution,
        frames=frames,
    )


def pipeline_config_from(read: Callable[[str], dict[str, Any] | None], where: str) -> dict[str, Any]:
    """The denoiser config of a diffusers pipeline, carrying its VAE config under PIPELINE_KEY.

    `read(path)` gives the parsed JSON file at `path` inside the pipeline (`model_index.json`,
    `transformer/config.json`...), or None when the pipeline has no such file.
    """
    index = read("model_index.json")
    if index is None:
        raise ConfigError("model", f"{where} has no model_index.json")
    for component in DENOISER_FOLDERS:
        denoiser = read(f"{component}/config.json") if component in index else None
        if denoiser is not None:
            break
    else:
        raise ConfigError(
            "model",
            f"{where}: model_index.json names no {' or '.join(DENOISER_FOLDERS)} folder with a config.json",
        )
    vae = read("vae/config.json") if "vae" in index else None
    if vae is not None:
        denoiser[PIPELINE_KEY] = {"vae": vae}
        encoders = {}
        for folder in TEXT_ENCODER_FOLDERS:
            text = read(f"{folder}/config.json") if folder in index else None
            if text is not None:
                declared = index[folder]  # [library, class]: the class when the config names none
                if "architectures" not in text and isinstance(declared, list) and len(declared) == 2:
                    text = {**text, "architectures": [declared[1]]}
                encoders[folder] = text
        if encoders:
            denoiser[PIPELINE_KEY]["text_encoders"] = encoders
    return denoiser


def pipeline_config(folder: Path) -> dict[str, Any]:
    """The denoiser config (with its VAE config) of a diffusers pipeline folder."""
    from trainplan.inputs.userfiles import read_config_file

    def read(name: str) -> dict[str, Any] | None:
        return read_config_file(folder / name) if os.path.lexists(folder / name) else None

    return pipeline_config_from(read, str(folder))


def with_geometry(spec: ModelSpec, cfg: Mapping[str, Any]) -> ModelSpec:
    """`spec` with the latent geometry its pipeline settings give and its frozen components (the
    VAE and text encoders, `hf/encoders.py`); unchanged without a VAE config."""
    pipeline = cfg.get(PIPELINE_KEY)
    if not isinstance(pipeline, Mapping) or not isinstance(pipeline.get("vae"), Mapping):
        return spec
    default = DEFAULT_TEXT_TOKENS.get(str(cfg.get("_class_name")), 0)
    tokens = get_int(pipeline, "text_tokens", default=default)
    return replace(
        spec,
        geometry=latent_geometry(cfg, pipeline["vae"], tokens),
        frozen=frozen_components(
            pipeline,
            spec.source,
            JOINED_CLIP_TOKENS.get(str(cfg.get("_class_name")), 0),
            PROMPT_TEMPLATE_TOKENS.get(str(cfg.get("_class_name")), 0),
        ),
    )
