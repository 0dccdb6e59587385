"""Token geometry of diffusion, video and JEPA models: pixels -> latents -> tokens. Exact.

A frame of W x H pixels becomes (W / s) x (H / s) latents (s = the VAE's spatial stride, 1 for a
JEPA) and (W / (s p)) x (H / (s p)) tokens (p = latents per token along a side: the patch size,
FLUX's 2x2 packing). In time, a causal video VAE encodes the first frame alone and every
`temporal_stride` frames after it into one latent frame (Wan 2.1: 1 + (F - 1) / 4; WanPipeline's
`num_latent_frames`), a JEPA cuts `tubelet_size` frames per token (V-JEPA 2: F / 2), and images
have one frame. The denoiser also reads the text sequence: joint-attention models (FLUX, SD3)
attend over image and text tokens together; cross-attention models (Wan, UNets) read the text
only as keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.specs.errors import InputError
from trainplan.specs.model import LatentGeometry, ModelSpec
from trainplan.specs.scenario import MAX_FRAMES, parse_resolution

__all__ = ["TokenShape", "geometry_of", "latent_frames", "token_shape"]


@dataclass(frozen=True)
class TokenShape:
    """One sample's geometry: pixels, latents and the token counts the model attends over."""

    width_px: int
    height_px: int
    frames: int
    latent_width: int
    latent_height: int
    latent_frames: int
    image_tokens: int  # tokens of the image / video stream (JEPA: patch tokens)
    text_tokens: int

    @property
    def latent_elements(self) -> int:
        """Latent values per channel of one sample (the shape of the noise and the loss target)."""
        return self.latent_width * self.latent_height * self.latent_frames


def geometry_of(model: ModelSpec, field: str = "resolution") -> LatentGeometry:
    """The model's latent geometry; for a language model, an InputError naming `field`."""
    if model.geometry is None:
        if model.kind == "llm":
            raise InputError(
                field,
                f"{model.name} is a language model: it reads seq_len tokens; {field} applies to "
                "diffusion, video and JEPA models",
            )
        raise InputError(
            field,
            f"cannot be read for the model {model.name!r}: it has no VAE config; give its pipeline "
            "folder (model_index.json with vae/config.json) or --vae",
        )
    return model.geometry


def _side(pixels: int, multiple: int, stride: int, patch: int) -> None:
    if pixels % multiple:
        lower = max(multiple, pixels - pixels % multiple)
        raise InputError(
            "resolution",
            f"{pixels} px is not a multiple of {multiple} (pixels per latent {stride} x latents per token "
            f"{patch}); valid sides are multiples of {multiple}, e.g. {lower} or {lower + multiple}",
        )


def latent_frames(model: ModelSpec, geometry: LatentGeometry, frames: int) -> int:
    """Latent frames (JEPA: tubelets) of `frames` pixel frames; InputError naming `frames`."""
    if not 1 <= frames <= MAX_FRAMES:
        raise InputError("frames", f"{frames} is outside 1..{MAX_FRAMES}")
    if model.kind == "diffusion":
        if frames != 1:
            raise InputError("frames", f"{model.name} is an image model: frames must be 1")
        return 1
    stride = geometry.temporal_stride
    if geometry.temporal_causal:
        if (frames - 1) % stride:
            low = frames - (frames - 1) % stride
            raise InputError(
                "frames",
                f"{frames} does not fit the causal VAE's temporal stride {stride}: "
                f"frames must be 1 + {stride} x k, e.g. {low} or {low + stride}",
            )
        latent = 1 + (frames - 1) // stride
    else:
        if frames % stride:
            low = max(stride, frames - frames % stride)
            raise InputError(
                "frames",
                f"{frames} is not a multiple of the tubelet size {stride}: e.g. {low} or {low + stride}",
            )
        latent = frames // stride
    if latent % geometry.patch_t:
        raise InputError(
            "frames", f"{latent} latent frames are not a multiple of the temporal patch {geometry.patch_t}"
        )
    return latent


def token_shape(
    model: ModelSpec, resolution: int | str, frames: int = 1, text_tokens: int | None = None
) -> TokenShape:
    """The latent and token geometry of one sample at `resolution` and `frames`.

    `text_tokens` defaults to the model pipeline's text length (0 for a JEPA).
    """
    geometry = geometry_of(model)
    width, height = parse_resolution(resolution)
    multiple = geometry.spatial_stride * geometry.patch
    for side in (width, height):
        _side(side, multiple, geometry.spatial_stride, geometry.patch)
    depth = latent_frames(model, geometry, frames)
    text = geometry.text_tokens if text_tokens is None else text_tokens
    if text < 0 or (model.kind == "jepa" and text):
        raise InputError("text_tokens", f"{text}: must be >= 0, and 0 for a JEPA (it reads no text)")
    latent_width, latent_height = width // geometry.spatial_stride, height // geometry.spatial_stride
    tokens = (
        (latent_width // geometry.patch) * (latent_height // geometry.patch) * (depth // geometry.patch_t)
    )
    return TokenShape(width, height, frames, latent_width, latent_height, depth, tokens, text)
