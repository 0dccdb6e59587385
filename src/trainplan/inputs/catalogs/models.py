"""The model catalog (data/models.yaml): one record per model, with its config and sources,
validated strictly. Turning a record, a config file or a Hub id into a ModelSpec is resolve.py.

Names match case-insensitively, with space, dash and underscore treated alike, against each
record's name and aliases (`loader.normalise`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from trainplan.specs.loader import load_yaml, normalise
from trainplan.specs.loader import require as _require
from trainplan.specs.model import ExtraComponent


@dataclass(frozen=True)
class ModelRecord:
    """One catalog model: its HF config plus provenance and the published parameter count."""

    name: str
    aliases: tuple[str, ...]
    hub_id: str
    family: str
    modality: str
    published_params: int
    published_params_source: str
    meta_device_params: int | None
    config_source: str
    as_of: str
    notes: str
    config: Mapping[str, Any]
    extra_components: tuple[ExtraComponent, ...]
    published_params_excludes: tuple[str, ...] = ()
    pipeline: Mapping[str, Any] | None = None
    same_shapes: tuple[str, ...] = ()  # Hub ids of variants whose config.json has these shapes


_MODEL_KEYS = (
    "name", "hub_id", "family", "modality", "published_params", "published_params_source",
    "config_source", "as_of", "config",
)  # fmt: skip
_MODEL_OPTIONAL = {
    "aliases",
    "meta_device_params",
    "notes",
    "extra_components",
    "published_params_excludes",
    "pipeline",
    "same_shapes",
}


@cache
def model_records() -> tuple[ModelRecord, ...]:
    """All catalog models, validated."""
    records = []
    for index, raw in enumerate(load_yaml("models.yaml")):
        _require(raw, _MODEL_KEYS, set(_MODEL_KEYS) | _MODEL_OPTIONAL, f"models.yaml[{index}]")
        extras = tuple(
            ExtraComponent(
                str(item["name"]),
                int(item["params"]),
                bool(item.get("trainable", False)),
                str(item.get("source", "")),
            )
            for item in raw.get("extra_components") or []
        )
        records.append(
            ModelRecord(
                name=str(raw["name"]),
                aliases=tuple(str(a) for a in raw.get("aliases") or []),
                hub_id=str(raw["hub_id"]),
                family=str(raw["family"]),
                modality=str(raw["modality"]),
                published_params=int(raw["published_params"]),
                published_params_source=str(raw["published_params_source"]),
                meta_device_params=(
                    int(raw["meta_device_params"]) if raw.get("meta_device_params") else None
                ),
                config_source=str(raw["config_source"]),
                as_of=str(raw["as_of"]),
                notes=str(raw.get("notes") or ""),
                config=raw["config"],
                extra_components=extras,
                published_params_excludes=tuple(raw.get("published_params_excludes") or ()),
                pipeline=raw.get("pipeline"),
                same_shapes=tuple(str(hub_id) for hub_id in raw.get("same_shapes") or ()),
            )
        )
    return tuple(records)


@cache
def _model_index() -> dict[str, ModelRecord]:
    index: dict[str, ModelRecord] = {}
    for record in model_records():
        for key in (record.name, record.hub_id, *record.aliases):
            index.setdefault(normalise(key), record)
    return index


def find_model_record(name: str) -> ModelRecord | None:
    """The catalog record called `name` (or with that alias / Hub id), or None."""
    return _model_index().get(normalise(name))


# What a copy of a model on the Hub adds to its repository name: a "Meta-" prefix (NousResearch's
# Meta-Llama-3.1-8B), the "-hf" suffix of Meta's converted Llama 2, a pre-quantised
# bitsandbytes copy (unsloth's "-bnb-4bit", "-unsloth-bnb-4bit").
_COPY_AFFIXES = re.compile(r"^meta-|-hf$|(-unsloth)?-bnb-4bit$", re.IGNORECASE)


def repo_name(hub_id: str) -> str:
    """A Hub id's repository name without what a copy adds to it, normalised."""
    name = hub_id.rsplit("/", 1)[-1]
    previous = None
    while previous != name:
        previous, name = name, _COPY_AFFIXES.sub("", name)
    return normalise(name)


@cache
def _copy_index() -> dict[str, tuple[ModelRecord, str]]:
    """Repository name -> (record, how it relates): its own names, then its same-shape variants."""
    index: dict[str, tuple[ModelRecord, str]] = {}
    for record in model_records():
        for key in (record.name, record.hub_id, *record.aliases):
            index.setdefault(repo_name(key), (record, "copy"))
    for record in model_records():
        for variant in record.same_shapes:
            index.setdefault(repo_name(variant), (record, variant))
    return index


def catalog_match(name: str) -> tuple[ModelRecord, str] | None:
    """The catalog record for `name`, and a sentence when it was matched offline rather than by
    name: a Hub id whose repository is a copy of a catalog model (another owner's mirror of the
    same name; a "Meta-" prefix, a "-hf" suffix, a pre-quantised "-bnb-4bit" copy aside), or a
    variant the record lists as having its shapes (`same_shapes`: an "-Instruct", a "-2507").
    A fine-tune it does not list never matches: its shapes are not known here."""
    record = find_model_record(name)
    if record is not None:
        return record, ""
    if "/" not in name.strip():
        return None
    found = _copy_index().get(repo_name(name.strip()))
    if found is None:
        return None
    record, how = found
    if how == "copy":
        return record, f"read {name.strip()} as the catalog's {record.name}: a copy of {record.hub_id}"
    return record, f"read {name.strip()} as the catalog's {record.name}: {how} has its shapes"
