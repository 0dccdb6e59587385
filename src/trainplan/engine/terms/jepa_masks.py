"""JEPA pretraining recipes (data/jepa_recipes.yaml): the mask generators, as token shares, and
how each family's code runs its ViT layers.

A generator of `blocks` blocks, each covering a share s = spatial x temporal scale of the patch
grid (the midpoints of the published ranges), placed independently, hides the union of its
blocks: 1 - (1 - s) ** blocks of the tokens in expectation (an estimate: overlap with the grid's
edges and the collators' trimming of every mask to the batch's shortest are not modelled).

- `union` (V-JEPA, V-JEPA 2; app/vjepa/train.py): per generator the context encoder sees the
  tokens outside the union and the predictor runs once over those plus one mask token per
  hidden token.
- `per_block` (I-JEPA; src/train.py, src/masks/multiblock.py): one context block covering a
  share c of the grid (its scale's midpoint), from which every target block is removed, so the
  context encoder sees c x (1 - s) ** blocks of the tokens, once; the predictor runs once per
  target block (`x.repeat(len(masks), 1, 1)`), over the context and that block's s tokens.

All shares are estimates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from trainplan.specs.errors import InputError
from trainplan.specs.loader import load_yaml, require
from trainplan.specs.model import ModelSpec

__all__ = ["JepaRecipe", "MaskGenerator", "jepa_masks", "jepa_recipe", "model_recipe"]


@dataclass(frozen=True)
class MaskGenerator:
    """One JEPA mask generator as token shares of the patch grid: `context` the share the
    context encoder sees, `target` the share one predictor pass predicts, `passes` how many
    predictor passes it runs on that context (1, or I-JEPA's one per target block)."""

    context: float
    target: float
    passes: int
    note: str


@dataclass(frozen=True)
class JepaRecipe:
    """How one JEPA family's training code runs (a row of data/jepa_recipes.yaml)."""

    name: str
    source: str
    attention: str  # eager | sdpa
    positions: str  # sincos | rope-3d
    merge_copy: bool  # the head-merged attention output is copied before the output projection
    generators: tuple[MaskGenerator, ...]


_KEYS = (
    "name",
    "source",
    "as_of",
    "attention",
    "positions",
    "merge_copy",
    "context_scale",
    "predictor",
    "generators",
)
_GENERATOR_KEYS = ("blocks", "spatial_scale", "temporal_scale", "aspect_ratio")
_CHOICES = {
    "attention": ("eager", "sdpa"),
    "positions": ("sincos", "rope-3d"),
    "predictor": ("union", "per_block"),
}


def _midpoint(row: Mapping[str, Any], key: str, where: str) -> float:
    low, high = (float(value) for value in row[key])
    if not 0 < low <= high <= 1:
        raise RuntimeError(f"{where}: {key} {row[key]} is not a range within (0, 1]")
    return (low + high) / 2


def _generator(raw: Mapping[str, Any], context_share: float, per_block: bool, where: str) -> MaskGenerator:
    require(raw, _GENERATOR_KEYS, set(_GENERATOR_KEYS), where)
    blocks = int(raw["blocks"])
    share = _midpoint(raw, "spatial_scale", where) * _midpoint(raw, "temporal_scale", where)
    low, high = (float(value) for value in raw["aspect_ratio"])
    if not 0 < low <= high:  # block shapes: they do not change a block's share of the grid
        raise RuntimeError(f"{where}: aspect_ratio {raw['aspect_ratio']} is not a positive range")
    free = (1 - share) ** blocks  # share of the grid outside every block
    if per_block:
        note = f"{blocks} target blocks at {share:.0%} each, predicted one at a time"
        return MaskGenerator(context_share * free, share, blocks, note)
    note = f"{blocks} blocks at {share:.0%} spatial scale"
    return MaskGenerator(context_share * free, 1 - free, 1, note)


def _recipe(raw: Mapping[str, Any], index: int) -> JepaRecipe:
    where = f"jepa_recipes.yaml[{index}]"
    require(raw, _KEYS, set(_KEYS), where)
    for key, choices in _CHOICES.items():
        if raw[key] not in choices:
            raise RuntimeError(f"{where}: {key} {raw[key]!r} is not one of {', '.join(choices)}")
    context = _midpoint(raw, "context_scale", where)
    per_block = raw["predictor"] == "per_block"
    generators = tuple(
        _generator(g, context, per_block, f"{where}.generators[{i}]") for i, g in enumerate(raw["generators"])
    )
    return JepaRecipe(
        str(raw["name"]),
        str(raw["source"]),
        raw["attention"],
        raw["positions"],
        bool(raw["merge_copy"]),
        generators,
    )


@cache
def _recipes() -> dict[str, JepaRecipe]:
    rows = [_recipe(raw, index) for index, raw in enumerate(load_yaml("jepa_recipes.yaml"))]
    return {row.name: row for row in rows}


def jepa_recipe(name: str) -> JepaRecipe:
    """The recipe `name` (a model reader names it; an unknown one is a bug, not a user error)."""
    return _recipes()[name]


def model_recipe(model: ModelSpec) -> JepaRecipe:
    """The recipe a JEPA model's reader named (`LatentGeometry.recipe`)."""
    return jepa_recipe(model.geometry.recipe if model.geometry else "")


def jepa_masks(model: ModelSpec, mask_ratio: float | None) -> tuple[MaskGenerator, ...]:
    """The published generators of the model's recipe, or one generator hiding `mask_ratio` of
    the tokens (the context encoder sees the rest, the predictor runs once over all of them)."""
    if mask_ratio is None:
        return model_recipe(model).generators
    if not 0 < mask_ratio < 1:
        raise InputError("mask_ratio", f"{mask_ratio} is outside (0, 1)")
    return (
        MaskGenerator(1 - mask_ratio, mask_ratio, 1, f"one generator hiding {mask_ratio:.0%} of the tokens"),
    )
