"""The model catalog (data/models.yaml): one record per model, with its config and sources,
validated strictly. Turning a record, a config file or a Hub id into a ModelSpec is resolve.py.

Names match case-insensitively, with space, dash and underscore treated alike, against each
record's name and aliases (`loader.normalise`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from trainplan.catalogs.loader import load_yaml, normalise
from trainplan.catalogs.loader import require as _require
from trainplan.model import ExtraComponent


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
