"""Framework recipes: the defaults a framework ships, applied to the fields a scenario leaves unset.

The presets are data (data/recipes.yaml, each with its source, version and date). A preset
never overrides a field the user set; a preset value that the user's own settings rule out (for
example torchtune's optimizer-in-backward next to a user's grad_accum of 8) is left out, and the
result lists only the defaults that were applied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from trainplan.specs.errors import InputError
from trainplan.specs.loader import load_yaml

METHOD_BLOCKS = ("all", "full", "lora", "qlora")
ROW_KEYS = frozenset({"name", "version", "source", "verified", "as_of", *METHOD_BLOCKS})


@dataclass(frozen=True)
class Recipe:
    """One framework's defaults, per method."""

    name: str
    version: str
    source: str
    verified: str
    as_of: str
    blocks: dict[str, dict[str, Any]]

    def fields(self, method: str) -> dict[str, Any]:
        """The defaults for `method`: the `all` block, then the method's own on top."""
        return {**self.blocks.get("all", {}), **self.blocks.get(method, {})}


@cache
def recipes() -> dict[str, Recipe]:
    """Recipe name -> Recipe, validated for its own keys (scenario.py checks, on first use, that
    every field a recipe sets is a scenario field and that the names are its `recipe` choices)."""
    found: dict[str, Recipe] = {}
    for row in load_yaml("recipes.yaml")["recipes"]:
        unknown = sorted(set(row) - ROW_KEYS)
        missing = sorted({"name", "version", "source", "verified", "as_of"} - set(row))
        if unknown or missing:
            raise ValueError(f"recipes.yaml row {row.get('name')}: unknown {unknown}, missing {missing}")
        blocks = {key: dict(row[key]) for key in METHOD_BLOCKS if key in row}
        found[row["name"]] = Recipe(
            row["name"], row["version"], row["source"], row["verified"], str(row["as_of"]), blocks
        )
    return found


def with_recipe(
    data: Mapping[str, Any], defaults: Mapping[str, Any], build: Callable[[dict[str, Any]], Any]
) -> dict[str, Any]:
    """`data` with a recipe's `defaults` (`Recipe.fields` for the method) added where `data` does
    not set the field and `build` (the scenario validator) accepts the result. Two passes, so that
    a default that needs another one (optimizer-in-backward needs grad_accum 1) finds it in place."""
    merged = dict(data)
    raw_lora = data.get("lora")
    user_lora: Mapping[str, Any] = raw_lora if isinstance(raw_lora, Mapping) else {}
    pending = dict(defaults)
    for _ in range(2):
        for key, value in list(pending.items()):
            if key.startswith("lora."):
                part = key.split(".", 1)[1]
                # a field the user sets, or a `lora` that is not a mapping (the validator names it)
                if part in user_lora or (raw_lora is not None and not isinstance(raw_lora, Mapping)):
                    del pending[key]
                    continue
                trial = {**merged, "lora": {**dict(merged.get("lora") or {}), part: value}}
            elif key in data:
                del pending[key]
                continue
            else:
                trial = {**merged, key: value}
            try:
                build(trial)
            except InputError:
                continue
            merged = trial
            del pending[key]
    return merged


def recipe_defaults(scenario: Any) -> dict[str, Any]:
    """The recipe's defaults that the scenario carries and that differ from trainplan's own
    defaults (field -> value); {} without a recipe."""
    if scenario.recipe is None:
        return {}
    plain = type(scenario)()  # trainplan's own defaults
    used = {}
    for key, value in recipes()[scenario.recipe].fields(scenario.method).items():
        if key.startswith("lora."):
            current = getattr(scenario.lora, key.split(".", 1)[1])
            default = getattr(plain.lora, key.split(".", 1)[1])
        else:
            current, default = getattr(scenario, key), getattr(plain, key)
        if current == value != default:
            used[key] = value
    return used


def recipe_summary(scenario: Any) -> dict[str, Any] | None:
    """The recipe, its source and the defaults it set, for the result; None without one."""
    if scenario.recipe is None:
        return None
    recipe = recipes()[scenario.recipe]
    return {
        "name": recipe.name,
        "version": recipe.version,
        "source": recipe.source,
        "as_of": recipe.as_of,
        "defaults": recipe_defaults(scenario),
    }


#: The recipe whose adapter dtype a model kind follows when the scenario names neither a recipe
#: nor `lora.dtype`: the diffusers LoRA scripts (train_dreambooth_lora_flux.py and the others
#: the `diffusers` row cites) cast the frozen denoiser to weight_dtype and add the adapters with
#: diffusers' `add_adapter`, which creates them at the base layer's dtype and, unlike peft's
#: `get_peft_model` (`autocast_adapter_dtype`), does not upcast them.
KIND_ADAPTER_RECIPES = {"diffusion": "diffusers", "video": "diffusers"}

#: Where an adapter dtype came from, for the result (`adapter_dtype_summary`).
PEFT_ADAPTER_SOURCE = "peft's default: autocast_adapter_dtype keeps adapters in fp32"


def resolved_adapter_dtype(model_kind: str, scenario: Any, compute: str) -> tuple[str, str]:
    """(`lora.dtype`, where it came from): the scenario's own value (set by the user or filled by
    its recipe), else, for a diffusion or video model without a recipe, the `diffusers` recipe's
    value for the method, except fp32 under an fp16 compute dtype (the scripts' `if
    args.mixed_precision == "fp16": cast_training_params(models, dtype=torch.float32)`), else
    peft's fp32. `compute` is the precision recipe's compute dtype."""
    if scenario.lora.dtype is not None:
        if (
            scenario.recipe is not None
            and recipes()[scenario.recipe].fields(scenario.method).get("lora.dtype") == scenario.lora.dtype
        ):
            return scenario.lora.dtype, f"recipe {scenario.recipe}"
        return scenario.lora.dtype, "set in the scenario"
    name = KIND_ADAPTER_RECIPES.get(model_kind) if scenario.recipe is None else None
    value = recipes()[name].fields(scenario.method).get("lora.dtype") if name else None
    if name is None or value is None:
        return "fp32", PEFT_ADAPTER_SOURCE
    recipe = recipes()[name]
    source = f"the {name} recipe's, the default for a {model_kind} model ({recipe.version})"
    if compute == "fp16":
        return "fp32", f"{source}; fp32 under fp16: its scripts upcast the adapters (cast_training_params)"
    return str(value), source


def adapter_dtype_summary(model_kind: str, scenario: Any, compute: str) -> dict[str, Any] | None:
    """The adapters' dtype, where it came from, and the recipe the model's kind lent it (None
    unless that default applied), for the result; None for a full fine-tune."""
    if scenario.method == "full":
        return None
    value, source = resolved_adapter_dtype(model_kind, scenario, compute)
    lent = scenario.lora.dtype is None and scenario.recipe is None
    return {
        "value": value,
        "source": source,
        "recipe": KIND_ADAPTER_RECIPES.get(model_kind) if lent else None,
    }
