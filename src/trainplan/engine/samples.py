"""The sample fields of a diffusion, video or JEPA scenario: checked against the model, and
turned into one sample's token geometry (terms/geometry.py)."""

from __future__ import annotations

from trainplan.engine.terms.geometry import TokenShape, geometry_of, latent_frames, token_shape
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import Scenario, default_scenario

__all__ = ["SAMPLE_FIELDS", "resolved_ema", "sample_assumptions", "sample_shape"]

# Scenario fields that describe an image, video or JEPA sample (null unless given).
SAMPLE_FIELDS = ("resolution", "frames", "text_tokens", "ema", "mask_ratio")


def sample_shape(model: ModelSpec, scenario: Scenario) -> TokenShape | None:
    """Check the sample fields against the model and return one sample's token geometry.

    A language model takes none of them (each given one is refused, naming it). A diffusion,
    video or JEPA model's resolution and frames must fit its strides (`terms/geometry.py`);
    frames default to 1 for image models (I-JEPA's too) and must be given for video and
    video-JEPA clips;
    text_tokens default to the pipeline's. `mask_ratio` is JEPA masking; a JEPA has no frozen
    VAE or text encoders, and its EMA target encoder is always there (`ema` gives its dtype).
    Without a resolution the pipeline's default sample size is used (and its default frames
    when frames are not given either). None for a language model.
    """
    defaults = default_scenario()
    _check_budget_fields(model, scenario, defaults)
    given = [name for name in SAMPLE_FIELDS if getattr(scenario, name) is not None]
    if scenario.frozen_encoders != defaults.frozen_encoders:
        given.append("frozen_encoders")
    if model.kind == "llm":
        for name in given:
            geometry_of(model, name)
        return None
    geometry = geometry_of(model, given[0] if given else "resolution")
    if scenario.stage != defaults.stage:
        raise InputError(
            "stage",
            f"{scenario.stage}: {model.name} is a {model.kind} model; the preference and reward "
            "stages train language models (use sft)",
        )
    if scenario.kernels != defaults.kernels:
        raise InputError(
            "kernels",
            f"{model.name} is a {model.kind} model: Liger's and Unsloth's kernels patch language "
            "models' layers; use eager",
        )
    if scenario.mask_ratio is not None and model.kind != "jepa":
        raise InputError("mask_ratio", f"{model.name} is a {model.kind} model: mask_ratio applies to JEPA")
    if model.kind == "jepa" and scenario.ema == "none":
        raise InputError(
            "ema",
            f"{model.name} is a JEPA: its EMA target encoder is always there; ema gives its dtype "
            "(fp32 or bf16)",
        )
    if model.kind == "jepa" and scenario.frozen_encoders != defaults.frozen_encoders:
        raise InputError(
            "frozen_encoders",
            f"{model.name} is a JEPA: it reads pixels, with no VAE or text encoder to precompute",
        )
    uncounted = [component.architecture for component in model.frozen if not component.counted]
    if uncounted and scenario.frozen_encoders != "precomputed":
        raise InputError(
            "frozen_encoders",
            f"{scenario.frozen_encoders}: {model.name}'s {' and '.join(uncounted)} "
            f"{'is' if len(uncounted) == 1 else 'are'} read for the latent geometry and widths only, "
            "their weights not counted; give precomputed (latents and text embeddings cached beforehand)",
        )
    frames = scenario.frames
    if frames is None and model.modality != "image" and scenario.resolution is not None:
        rule = (
            f"1 + {geometry.temporal_stride} x k"
            if geometry.temporal_causal
            else f"a multiple of {geometry.temporal_stride}"
        )
        raise InputError("frames", f"{model.name} is a {model.kind} model: give frames per clip ({rule})")
    if scenario.resolution is None:
        if frames is not None:
            latent_frames(model, geometry, frames)
        return token_shape(model, geometry.resolution, frames or geometry.frames, scenario.text_tokens)
    return token_shape(model, scenario.resolution, frames or 1, scenario.text_tokens)


def resolved_ema(model: ModelSpec, scenario: Scenario) -> str:
    """The EMA copy's dtype: given, else none, or fp32 for a JEPA's target encoder (the V-JEPA
    and V-JEPA 2 training code, app/vjepa/train.py, deep-copies the fp32 encoder as its target
    and runs the step under bf16 autocast)."""
    if scenario.ema is not None:
        return scenario.ema
    return "fp32" if model.kind == "jepa" else "none"


def _check_budget_fields(model: ModelSpec, scenario: Scenario, defaults: Scenario) -> None:
    """A language model counts tokens (seq_len, dataset_tokens, train_tokens); the other kinds
    count images or clips (dataset_size, train_samples) and derive their tokens per sample."""
    if model.kind == "llm":
        for name in ("dataset_size", "train_samples"):
            if getattr(scenario, name) is not None:
                raise InputError(
                    name, f"{model.name} is a language model: give dataset_tokens or train_tokens"
                )
        return
    if scenario.seq_len != defaults.seq_len:
        raise InputError(
            "seq_len",
            f"{model.name} is a {model.kind} model: its tokens per sample follow from resolution "
            "and frames (and text_tokens); seq_len does not apply",
        )
    for name, instead in (("dataset_tokens", "dataset_size"), ("train_tokens", "train_samples")):
        if getattr(scenario, name) is not None:
            raise InputError(
                name, f"{model.name} is a {model.kind} model: give {instead} (images or clips) instead"
            )


def sample_assumptions(model: ModelSpec, scenario: Scenario) -> dict[str, object]:
    """What a diffusion, video or JEPA estimate assumed about the sample (empty for a language
    model): the EMA copy, the frozen encoders, and a JEPA's mask generators."""
    if model.kind == "llm":
        return {}
    out: dict[str, object] = {
        "ema": resolved_ema(model, scenario),
        "frozen_encoders": scenario.frozen_encoders,
    }
    if model.kind == "jepa":
        out["jepa_masks"] = [
            {
                "context_fraction": mask.context,
                "target_fraction": mask.target,
                "predictor_passes": mask.passes,
                "note": mask.note,
            }
            for mask in jepa_masks(model, scenario.mask_ratio)
        ]
    return out
