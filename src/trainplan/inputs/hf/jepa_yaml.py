"""The pretraining YAML of facebookresearch/ijepa and facebookresearch/jepa (V-JEPA) -> a model
config (`ijepa` or `vjepa`, the keys hf/jepa.py reads).

The repos name a ViT size (`vit_large`, ...) instead of giving its width; the sizes are those of
their `src/models/vision_transformer.py` factories (`vit_tiny` ... `vit_giant`), which both
repos define alike. The mask section must be the family's published generators
(data/jepa_recipes.yaml), which the estimate models; other masks are refused, naming the field,
with `mask_ratio` as the way to model one generator of another share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.loader import load_yaml

__all__ = ["is_jepa_yaml", "jepa_yaml_config"]

#: name -> (width, depth, heads, MLP ratio) of the repos' ViT factories.
VIT_SIZES: dict[str, tuple[int, int, int, float]] = {
    "vit_tiny": (192, 12, 3, 4.0),
    "vit_small": (384, 12, 6, 4.0),
    "vit_base": (768, 12, 12, 4.0),
    "vit_large": (1024, 24, 16, 4.0),
    "vit_huge": (1280, 32, 16, 4.0),
    "vit_giant": (1408, 40, 16, 48 / 11),
}


def jepa_recipe_rows() -> dict[str, Any]:
    """The rows of data/jepa_recipes.yaml by name, as written (a config reader compares a
    training config's mask section with them)."""
    return {row["name"]: row for row in load_yaml("jepa_recipes.yaml")}


def is_jepa_yaml(data: Any) -> bool:
    """An I-JEPA config (`meta.model_name` and `mask.num_pred_masks`) or a V-JEPA one (`app: vjepa`)."""
    if not isinstance(data, Mapping):
        return False
    if data.get("app") == "vjepa":
        return True
    meta, mask = data.get("meta"), data.get("mask")
    return isinstance(meta, Mapping) and isinstance(mask, Mapping) and "num_pred_masks" in mask


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"the JEPA config needs a `{key}:` section")
    return value


def _size(name: Any, field: str) -> tuple[int, int, int, float]:
    if name not in VIT_SIZES:
        raise ConfigError(
            field, f"{shown_value(name)} is not one of the repos' ViT sizes: {', '.join(VIT_SIZES)}"
        )
    return VIT_SIZES[name]


def _check_masks(given: list[dict[str, Any]], recipe: str, field: str) -> None:
    """The mask section, as (blocks, spatial, temporal, aspect) per generator, against the recipe's."""
    published = jepa_recipe_rows()[recipe]["generators"]
    keys = ("blocks", "spatial_scale", "temporal_scale", "aspect_ratio")

    def shape(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            tuple(tuple(map(float, r[k])) if isinstance(r[k], list) else r[k] for k in keys) for r in rows
        ]

    if shape(given) != shape(published):
        raise ConfigError(
            field,
            f"these mask generators differ from the published {recipe} ones, which are the only ones "
            "modelled (data/jepa_recipes.yaml); drop the section, or give mask_ratio for one "
            "generator of another share",
        )


def _ijepa(data: Mapping[str, Any]) -> dict[str, Any]:
    meta, mask, loaded = _section(data, "meta"), _section(data, "mask"), _section(data, "data")
    width, depth, heads, ratio = _size(meta.get("model_name"), "meta.model_name")
    given = [
        {
            "blocks": mask.get("num_pred_masks"),
            "spatial_scale": list(mask.get("pred_mask_scale") or []),
            "temporal_scale": [1.0, 1.0],
            "aspect_ratio": list(mask.get("aspect_ratio") or []),
        }
    ]
    if mask.get("num_enc_masks", 1) != 1 or list(mask.get("enc_mask_scale") or []) != [0.85, 1.0]:
        raise ConfigError(
            "mask.enc_mask_scale", "only the published context block (one, at 0.85-1.0) is modelled"
        )
    _check_masks(given, "ijepa", "mask")
    return {
        "model_type": "ijepa",
        "hidden_size": width,
        "num_hidden_layers": depth,
        "num_attention_heads": heads,
        "intermediate_size": int(width * ratio),
        "image_size": loaded.get("crop_size", 224),
        "patch_size": mask.get("patch_size", 16),
        "pred_hidden_size": meta.get("pred_emb_dim", 384),
        "pred_num_hidden_layers": meta.get("pred_depth", 12),
    }


def _vjepa(data: Mapping[str, Any]) -> dict[str, Any]:
    model, loaded = _section(data, "model"), _section(data, "data")
    width, depth, heads, ratio = _size(model.get("model_name"), "model.model_name")
    masks = data.get("mask")
    if not isinstance(masks, list) or not all(isinstance(m, Mapping) for m in masks):
        raise ConfigError("mask", "the V-JEPA config needs a `mask:` list of generators")
    given = [{key: m.get(key) for key in ("spatial_scale", "temporal_scale", "aspect_ratio")} for m in masks]
    for row, m in zip(given, masks, strict=True):
        row["blocks"] = m.get("num_blocks")
    _check_masks(given, "vjepa", "mask")
    if not model.get("use_mask_tokens", False):
        raise ConfigError(
            "model.use_mask_tokens", "false: the predictor then embeds noised targets, which is not modelled"
        )
    return {
        "model_type": "vjepa",
        "hidden_size": width,
        "num_hidden_layers": depth,
        "num_attention_heads": heads,
        "mlp_ratio": ratio,
        "patch_size": loaded.get("patch_size", 16),
        "tubelet_size": loaded.get("tubelet_size", 2),
        "crop_size": loaded.get("crop_size", 224),
        "frames_per_clip": loaded.get("num_frames", 16),
        "pred_hidden_size": model.get("pred_embed_dim", 384),
        "pred_num_hidden_layers": model.get("pred_depth", 12),
        # app/vjepa/train.py: one mask token per generator (num_mask_tokens=len(cfgs_mask))
        "pred_num_mask_tokens": len(masks),
    }


def jepa_yaml_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """The model config of an I-JEPA or V-JEPA pretraining YAML (`is_jepa_yaml`)."""
    return _vjepa(data) if data.get("app") == "vjepa" else _ijepa(data)
