"""The VAE encoder of a diffusion pipeline, run without grad each step: its FLOPs and its
working set, layer by layer from `FrozenComponent.layers` (hf/vae.py). See terms/encoders.py
for where the frozen components live (`frozen_encoders`) and what they add to a step.

Each function takes Python numbers or numpy arrays for `micro_batch` (the planner's
candidates) and returns bytes or FLOPs per sample.
"""

from __future__ import annotations

from typing import Any

from trainplan.engine.scalar_or_array import maximum
from trainplan.engine.terms.geometry import TokenShape
from trainplan.specs.model import FrozenComponent

__all__ = [
    "FRAME_BATCHES",
    "FRAME_TILES",
    "PADDED_INPUT",
    "REPEAT_PADDED",
    "VAE_PEAK_COPIES",
    "frame_tiles",
    "vae_flops",
    "vae_working_bytes",
]


def _frames(frames: int, time_level: int) -> int:
    """Frames at a temporal level of a causal VAE: 1 + (F - 1) / 2^level (the first alone)."""
    return 1 + ((frames - 1) >> time_level)


def _pixels(shape: TokenShape, level: int) -> int:
    """Pixels of one frame at 1 / 2^level of the input per side."""
    return (shape.width_px >> level) * (shape.height_px >> level)


#: VAEs whose encoder takes a clip of more than `size` frames in overlapping tiles of size + 1
#: frames, one starting every `stride` frames (AutoencoderKLHunyuanVideo's framewise encoding, on
#: by default: tile_sample_min_num_frames 16, tile_sample_stride_num_frames 12,
#: `_temporal_tiled_encode`), as (size, stride).
FRAME_TILES = {"AutoencoderKLHunyuanVideo": (16, 12)}

#: VAEs whose encoder takes a clip in batches of frames, the first `size` frames plus the
#: remainder of frames / size, then `size` at a time, its causal convs carrying their last 2
#: input frames from one batch to the next (AutoencoderKLCogVideoX._encode,
#: num_sample_frames_batch_size 8: 49 frames are 9 + 5 x 8).
FRAME_BATCHES = {"AutoencoderKLCogVideoX": 8}


def frame_tiles(component: FrozenComponent, frames: int) -> list[int]:
    """Frames of each encoder pass over a clip: the whole clip, its FRAME_TILES tiles (the last
    one shorter) or its FRAME_BATCHES batches. Exact."""
    batch = FRAME_BATCHES.get(component.architecture)
    if batch is not None:
        passes = max(frames // batch, 1)
        return [frames - (passes - 1) * batch] + [batch] * (passes - 1)
    tiling = FRAME_TILES.get(component.architecture)
    if tiling is None or frames <= tiling[0]:
        return [frames]
    size, stride = tiling
    return [min(size + 1, frames - start) for start in range(0, frames, stride)]


def _linear_attention_flops(channels: int, head_dim: int, pixels: int) -> int:
    """AutoencoderDC's ReLU linear attention over `channels` = heads x head_dim query channels
    (diffusers SanaMultiscaleAttnProcessor2_0): per head, (d + 1) x N values (a row of ones
    padded) by N x d keys, then that (d + 1) x d by the d x N queries, 4 x d x (d + 1) x N; at
    N <= d pixels the quadratic form instead, N x N scores and values by them, 4 x d x N^2."""
    if pixels > head_dim:
        return 4 * (head_dim + 1) * channels * pixels
    return 4 * channels * pixels * pixels


def vae_flops(component: FrozenComponent, shape: TokenShape) -> float:
    """Forward FLOPs per sample of the VAE encoder, layer by layer at its resolution: a conv
    costs 2 x in x out x taps per output value (pixels at its level x its frames; a Wan time conv
    skips the first frame); a mid-block attention 4 x N^2 x C per frame (QK^T and AV over the
    N latent pixels), or over the N latent pixels of every frame at once ("clip-attention",
    HunyuanVideo's causal mid-block attention); AutoencoderDC's linear attention as
    `_linear_attention_flops` says. Summed over the encoder's passes (`frame_tiles`).
    Exact arithmetic; norms, activations and biases left out."""
    flops = 0.0
    for tile in frame_tiles(component, shape.frames):
        for layer in component.layers:
            frames = _frames(tile, layer.time_level) - (1 if layer.skips_first_frame else 0)
            pixels = _pixels(shape, layer.level)
            if layer.kind == "attention":
                flops += 4 * pixels * pixels * layer.in_channels * frames
            elif layer.kind == "clip-attention":
                flops += 4 * (pixels * frames) ** 2 * layer.in_channels
            elif layer.kind == "linear-attention":
                flops += _linear_attention_flops(layer.in_channels, layer.out_channels, pixels) * frames
            else:
                flops += 2 * layer.in_channels * layer.out_channels * layer.kernel * pixels * frames
    return flops


def _chunk_frames(component: FrozenComponent, frames: int, time_level: int) -> int:
    """Frames of one encoder chunk at a temporal level. A causal video VAE with a feature cache
    encodes the first frame alone, then 2^T frames at a time (T its temporal downsamplings:
    AutoencoderKLWan._encode's chunks of 4), halved at each level; one without (HunyuanVideo's)
    runs its first tile whole; images are one frame."""
    if frames == 1:
        return 1
    if component.architecture in FRAME_BATCHES or not any(layer.cache_frames for layer in component.layers):
        return _frames(frame_tiles(component, frames)[0], time_level)
    levels = max(layer.time_level for layer in component.layers)
    return max(1, (1 << levels) >> time_level)


#: Copies of the widest activation a VAE encoder's no-grad forward holds at its peak, read off
#: the modules' code (and matched by a fake-tensor trace, tests/test_encoders.py):
#: - AutoencoderKL (diffusers resnet.py, ResnetBlock2D, in a stage of 2 resnets): the stage input
#:   (held by Encoder.forward while the down block runs), the second resnet's input (held by the
#:   down block's loop), conv2's output, the residual sum and its division by
#:   output_scale_factor: 5.
#: - AutoencoderKLWan (WanResidualBlock): the block input (its identity shortcut, held by the
#:   encoder's loop), conv1's output and, inside WanRMS_norm, its fp32 copy and the fp32
#:   normalised result (2 copies' worth each): 6.
#: - AutoencoderKLHunyuanVideo (HunyuanVideoResnetBlockCausal3D, the second resnet of stage 0):
#:   the stage input, the resnet's input, its activated norm2 output and conv2's output: 4, with
#:   the replicate-padded copy conv2 reads (PADDED_INPUT).
#: - AutoencoderKLCogVideoX (CogVideoXResnetBlock3D, the last resnet of stage 0): the same 4,
#:   with the time-padded copy conv2 reads and the convs' caches (FRAME_BATCHES).
#: - AutoencoderKLLTXVideo (LTXVideoResnetBlock3d, the second resnet of stage 0, and diffusers
#:   normalization.py RMSNorm): the stage input, the resnet's input, conv1's output and, inside
#:   norm2, its fp32 copy and its fp32 square (2 copies' worth each): 7, or the moment of its
#:   conv2 (REPEAT_PADDED) where that is larger.
#: - AutoencoderDC (ResBlock, the second of stage 0): the stage input, the block's input (its
#:   residual), conv2's output and, inside its RMS norm, the fp32 copy and fp32 square: 7.
VAE_PEAK_COPIES = {
    "AutoencoderKL": 5,
    "AutoencoderKLWan": 6,
    "AutoencoderKLHunyuanVideo": 4,
    "AutoencoderKLCogVideoX": 4,
    "AutoencoderKLLTXVideo": 7,
    "AutoencoderDC": 7,
}

#: VAEs whose causal convs read their input with kt - 1 = 2 repeats of its first frame
#: prepended, the repeats a tensor of their own held through the conv (LTXVideoCausalConv3d:
#: C x 2 x H x W and the concatenated C x (F + 2) x H x W), by the copies of the widest
#: activation beside them at the widest conv2: the stage input, the resnet's input, the activated
#: norm2 output and conv2's output, 4. On one frame this outweighs VAE_PEAK_COPIES (4 + 2 + 3 = 9
#: frames' worth against 7).
REPEAT_PADDED = {"AutoencoderKLLTXVideo": 4}

#: VAEs whose causal convs read a padded copy of their input at the peak, by the pixels padded
#: on each side: kt - 1 = 2 frames ahead in time for both, k // 2 = 1 pixel each side in space
#: for HunyuanVideoCausalConv3d's F.pad (C x (F + 2) x (H + 2) x (W + 2) for the widest 3x3x3
#: conv), none for CogVideoXCausalConv3d, which concatenates 2 cached (or first) frames and
#: leaves the spatial padding to the conv (C x (F + 2) x H x W). HunyuanVideo's mid-block
#: attention is causal over the whole clip, with a dense N x N mask built as a bool comparison
#: and an additive mask in the compute dtype, one for the micro-batch
#: (prepare_causal_attention_mask).
PADDED_INPUT = {"AutoencoderKLHunyuanVideo": 1, "AutoencoderKLCogVideoX": 0}


def _padded_moment(component: FrozenComponent, shape: TokenShape, widest: int, frames: int) -> int:
    """Elements per sample a PADDED_INPUT VAE holds in its widest conv on a pass of `frames`:
    VAE_PEAK_COPIES x the activation and the padded copy the conv reads."""
    layer = component.layers[widest]
    side = PADDED_INPUT[component.architecture]
    at_level = _frames(frames, layer.time_level)
    width = layer.out_channels * _pixels(shape, layer.level) * at_level
    padded = (
        layer.out_channels
        * (at_level + 2)
        * ((shape.width_px >> layer.level) + 2 * side)
        * ((shape.height_px >> layer.level) + 2 * side)
    )
    return VAE_PEAK_COPIES[component.architecture] * width + padded


def _batched_moment(component: FrozenComponent, shape: TokenShape) -> int:
    """Elements per sample a FRAME_BATCHES VAE holds at its peak, the largest over its causal
    convs of `_padded_moment` there with the caches the convs up to it have cloned (2 input frames
    each, the first frame repeated when there is no earlier batch), in the first batch and in a
    later one, which also holds every conv's cache from the batch before (kept by the caller
    until the pass returns). With one frame the caches outweigh the activations and the peak
    moves past stage 0, where 4 copies of the widest overcount the stage input's narrower width."""
    batches = frame_tiles(component, shape.frames)
    caches = [
        layer.cache_frames * layer.in_channels * _pixels(shape, layer.level) for layer in component.layers
    ]
    old, new, peak = sum(caches), 0, 0
    for index, layer in enumerate(component.layers):
        new += caches[index]
        if not layer.cache_frames:
            continue
        for later, frames in enumerate(batches[:2]):
            moment = _padded_moment(component, shape, index, frames) + new + (old if later else 0)
            peak = max(peak, moment)
    return peak


def _attention_moment(
    component: FrozenComponent, shape: TokenShape, activation_bytes: int
) -> tuple[int, int]:
    """(bytes per sample, bytes shared by the micro-batch) while a PADDED_INPUT VAE builds its
    clip-attention mask: the mid block's input and its first resnet's output (2 x C x N) with the
    N x N masks (1 byte + activation_bytes each entry); (0, 0) without such an attention."""
    for layer in component.layers:
        if layer.kind == "clip-attention":
            tokens = _pixels(shape, layer.level) * _chunk_frames(component, shape.frames, layer.time_level)
            return 2 * layer.in_channels * tokens * activation_bytes, tokens * tokens * (1 + activation_bytes)
    return 0, 0


def vae_working_bytes(
    component: FrozenComponent, shape: TokenShape, micro_batch: Any = 1, activation_bytes: int = 2
) -> Any:
    """Bytes the VAE encoder's no-grad forward holds at its peak for a micro-batch:
    VAE_PEAK_COPIES x its widest activation (a conv's output width x pixels x the frames of one
    chunk or tile) x micro_batch, plus the causal feature cache that persists through a video
    encode (each cached conv's `cache_frames` of its input, Wan's CACHE_T = 2; a one-frame clip
    caches one frame, counted for every conv though only those before the peak hold one), the
    padded copy of the widest activation (PADDED_INPUT) and the micro-batch's pixels (the batch's
    pixel_values, on the GPU for the encode); for REPEAT_PADDED VAEs (no cache: the clip runs
    whole) the larger of the norm moment and the widest conv's. For PADDED_INPUT VAEs the larger
    of that and the moment their mid-block attention builds its mask. An estimate: it assumes SDPA's
    memory-efficient kernel in the mid-block attention (no N x N scores) and that the allocator
    reuses each intermediate as soon as it is dropped."""
    width, widest = max(
        (
            layer.out_channels
            * _pixels(shape, layer.level)
            * _chunk_frames(component, shape.frames, layer.time_level),
            index,
        )
        for index, layer in enumerate(component.layers)
        if layer.kind == "conv"
    )
    first = component.layers[0]  # conv_in, over the pixels or (LTX-Video) their packed patches
    pixels = first.in_channels * _pixels(shape, first.level) * shape.frames
    if component.architecture in FRAME_BATCHES:
        per_sample = _batched_moment(component, shape) + pixels
    elif component.architecture in REPEAT_PADDED:
        layer = component.layers[widest]
        frame, at_level = (
            layer.out_channels * _pixels(shape, layer.level),
            _frames(shape.frames, layer.time_level),
        )
        conv = (REPEAT_PADDED[component.architecture] * at_level + at_level + 4) * frame
        per_sample = max(VAE_PEAK_COPIES[component.architecture] * width, conv) + pixels
    elif component.architecture in PADDED_INPUT:
        tile = frame_tiles(component, shape.frames)[0]
        per_sample = _padded_moment(component, shape, widest, tile) + pixels
    else:
        cache = sum(
            min(layer.cache_frames, shape.frames) * layer.in_channels * _pixels(shape, layer.level)
            for layer in component.layers
        )
        per_sample = VAE_PEAK_COPIES[component.architecture] * width + cache + pixels
    in_convs = micro_batch * per_sample * activation_bytes
    attention, mask = _attention_moment(component, shape, activation_bytes)
    if not mask:
        return in_convs
    return maximum(in_convs, micro_batch * (attention + pixels * activation_bytes) + mask)
