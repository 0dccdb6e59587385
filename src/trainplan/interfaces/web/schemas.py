"""What the API says about its inputs: field metadata for the page and the OpenAPI body schema.

Both are generated from the Scenario field table (`trainplan.specs.scenario.field_infos`), so a field
added to the engine appears in the form and the API documentation without a change here. The
only things this module adds are presentation: which section of the form a field sits in and
which control draws it.
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from pydantic import BaseModel, Field

from trainplan.engine.plan_request import PLAN_OPTIONS, WEB_CAPS
from trainplan.interfaces.options import LORA_FLAGS, flag_name
from trainplan.interfaces.web.largest import MAX_FIELDS
from trainplan.specs.rollout import ROLLOUT_FIELDS
from trainplan.specs.scenario import (
    BUDGET_MODES,
    LORA_FIELDS,
    LORA_TARGET_PRESETS,
    FieldInfo,
    Scenario,
    field_infos,
    field_kind,
    scenario_to_mapping,
)

# The body key for an uploaded or pasted config.json (never a path on the server).
MODEL_CONFIG_KEY = "model_config"

# LoRA settings are one nested scenario field; the form shows them as six controls, each
# described by the engine's own record of that part (scenario.LORA_FIELDS: type, range, help).
# The only addition is presentation: the targets control offers the presets as choices.
LORA_PARTS: dict[str, FieldInfo] = {
    part: dataclasses.replace(info, choices=LORA_TARGET_PRESETS, value_type="targets")
    if part == "targets"
    else info
    for part, info in LORA_FIELDS.items()
}


# Form sections, in page order. A field that none of them names lands in "advanced".
SECTIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("model", "Model", ("model", "force")),
    (
        "method",
        "What is trained",
        (
            "method",
            "stage",
            "lora.rank",
            "lora.targets",
            "lora.alpha",
            "lora.dora",
            "lora.dropout",
            "lora.dtype",
            "base_weights",
            "kbit_upcast",
            "reference",
            "reference_weights",
        ),
    ),
    ("rollout", "Rollout (GRPO, PPO)", ROLLOUT_FIELDS),
    (
        "sample",
        "Image or video sample",
        ("resolution", "frames", "text_tokens", "frozen_encoders", "ema", "mask_ratio"),
    ),
    ("precision", "Precision and optimizer", ("recipe", "precision", "optimizer")),
    (
        "batch",
        "Batch and memory savers",
        (
            "micro_batch",
            "grad_accum",
            "seq_len",
            "activation_checkpointing",
            "activation_offload",
            "attention",
            "ssm_kernel",
            "kernels",
            "loss",
            "loss_chunks",
            "compile",
            "optimizer_in_backward",
        ),
    ),
    (
        "hardware",
        "GPUs and parallelism",
        (
            "gpu",
            "gpus",
            "zero_stage",
            "tensor_parallel",
            "pipeline_parallel",
            "pipeline_schedule",
            "context_parallel",
            "expert_parallel",
            "data_parallel_replicate",
            "sequence_parallel",
            "offload",
            "zero3_master",
            "fsdp_wrap",
            "fsdp_reduce_dtype",
            "fsdp_prefetch",
            "reshard_after_forward",
        ),
    ),
    (
        "budget",
        "Training budget",
        ("train_tokens", "dataset_tokens", "train_samples", "dataset_size", "epochs", "steps"),
    ),
    ("cost", "Price and grid", ("pricing", "usd_per_gpu_hour", "region")),
    ("advanced", "More assumptions", ()),
)

# Values a field accepts beyond its listed choices (the CLI and API parse them; the form's select
# offers the choices only): `full:N` checkpoints every N-th block.
EXTRA_PATTERNS = {"activation_checkpointing": "^full:[1-9][0-9]*$"}
# `resolution` is pixels per side as an integer, or "WxH" (scenario.parse_resolution).
RESOLUTION_PATTERN = "^\\s*[0-9]+\\s*([xX]\\s*[0-9]+\\s*)?$"

# Controls that are not a plain input/select: drawn from a catalog list or as a segmented choice.
WIDGETS = {
    "model": "model",
    "gpu": "gpu",
    "region": "region",
    "method": "segmented",
    "lora.targets": "targets",
}


def _entry(name: str, flag: str, info: FieldInfo, default: Any) -> dict[str, Any]:
    """One field's metadata record."""
    kind = field_kind(info, default)
    widget = WIDGETS.get(name) or (
        "checkbox"
        if kind == "bool"
        else "select"
        if info.choices
        else "number"
        if kind in ("int", "float")
        else "text"
    )
    return {
        "name": name,
        "flag": flag,
        "label": info.label,
        "short_label": info.short_label,
        "kind": kind,
        "widget": widget,
        "default": default,
        "nullable": default is None,
        "help": info.web_help or info.help,
        "form_help": info.form_help or info.web_help or info.help,
        "placeholder": info.placeholder,
        "choice_labels": dict(info.choice_labels) or None,
        "budget": info.budget,
        "interfaces": list(info.interfaces),
        "choices": list(info.choices) if info.choices else None,
        "minimum": info.minimum,
        "maximum": info.maximum,
        "exclusive": info.exclusive,
        "families": list(info.model_kinds) if info.model_kinds else None,
        "methods": list(info.methods) if info.methods else None,
        "stages": list(info.stages) if info.stages else None,
        "kind_defaults": dict(info.kind_defaults) or None,
    }


@cache
def field_metadata() -> dict[str, Any]:
    """Every scenario field (LoRA parts flattened to `lora.rank` ...) and the form sections."""
    defaults = scenario_to_mapping(Scenario())
    fields: list[dict[str, Any]] = []
    for name, info in field_infos().items():
        if name == "lora":
            lora_flags = {part: flag for flag, part in LORA_FLAGS.items()}
            for part, part_info in LORA_PARTS.items():
                # each part applies where the adapters do
                scoped = dataclasses.replace(part_info, model_kinds=info.model_kinds, methods=info.methods)
                fields.append(
                    _entry(f"lora.{part}", flag_name(lora_flags[part]), scoped, defaults["lora"][part])
                )
        else:
            fields.append(_entry(name, flag_name(name), info, defaults[name]))
    known = {field["name"] for field in fields}
    placed = {name for _, _, names in SECTIONS for name in names}
    sections = []
    for key, title, names in SECTIONS:
        members = [name for name in names if name in known]
        if key == "advanced":
            members += [field["name"] for field in fields if field["name"] not in placed]
        sections.append({"id": key, "title": title, "fields": members})
    return {
        "fields": fields,
        "sections": sections,
        "budget_modes": [{"id": mode, "label": text} for mode, text in BUDGET_MODES.items()],
        "max_fields": list(MAX_FIELDS),
        "model_config_key": MODEL_CONFIG_KEY,
        "plan_options": plan_option_metadata(),
    }


def plan_option_metadata() -> list[dict[str, Any]]:
    """The planner's options as the page draws and checks them: each one's declaration
    (plan_request.PLAN_OPTIONS) with the server's cap as its maximum."""
    return [
        {
            "name": name,
            "flag": flag_name(name),
            "kind": option.value_type,
            "label": option.label,
            "help": option.help_text(),
            "default": option.default,
            "minimum": option.minimum,
            "maximum": WEB_CAPS.get(name, option.maximum),
            "choices": list(option.choices) or None,
            "choice_labels": dict(option.choice_labels) or None,
            "form_help": option.form_help,
            "placeholder": option.placeholder,
            "interfaces": list(option.interfaces),
        }
        for name, option in PLAN_OPTIONS.items()
    ]


def _json_type(entry: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema of one field value."""
    kind = entry["kind"]
    schema: dict[str, Any]
    if kind == "bool":
        schema = {"type": "boolean"}
    elif kind == "int":
        schema = {"type": "integer"}
    elif kind == "float":
        schema = {"type": "number"}
    elif entry["name"] == "resolution":
        schema = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": RESOLUTION_PATTERN}]}
    elif kind == "targets":
        schema = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    elif entry["choices"]:
        schema = {"type": "string", "enum": entry["choices"]}
        if entry["name"] in EXTRA_PATTERNS:
            schema = {"anyOf": [schema, {"type": "string", "pattern": EXTRA_PATTERNS[entry["name"]]}]}
    else:
        schema = {"type": "string"}
    bound = "exclusive" if entry["exclusive"] else ""
    if entry["minimum"] is not None:
        schema[f"{bound}Minimum" if bound else "minimum"] = entry["minimum"]
    if entry["maximum"] is not None:
        schema[f"{bound}Maximum" if bound else "maximum"] = entry["maximum"]
    if entry["nullable"]:
        schema = {"anyOf": [schema, {"type": "null"}]}
    schema["title"] = entry["label"]
    schema["description"] = entry["help"]
    if entry["default"] is not None:
        schema["default"] = entry["default"]
    return schema


@cache
def estimate_body_schema() -> dict[str, Any]:
    """OpenAPI schema of the POST /api/estimate body: scenario fields plus `model_config`."""
    properties: dict[str, Any] = {}
    lora: dict[str, Any] = {}
    for entry in field_metadata()["fields"]:
        if "api" not in entry["interfaces"]:
            continue
        if entry["name"].startswith("lora."):
            lora[entry["name"].split(".", 1)[1]] = _json_type(entry)
        else:
            properties[entry["name"]] = _json_type(entry)
    properties["lora"] = {
        "type": "object",
        "properties": lora,
        "additionalProperties": False,
        "title": field_infos()["lora"].label,
        "description": field_infos()["lora"].help,
    }
    properties[MODEL_CONFIG_KEY] = {
        "type": "object",
        "description": "the contents of a Hugging Face config.json, used instead of looking `model` up "
        "(then `model` is only the display name)",
    }
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "example": {"model": "Llama-3.1-8B", "method": "qlora", "micro_batch": 2, "seq_len": 4096},
    }


class ModelItem(BaseModel):
    """One catalog model: a record of `listings.model_listing`, as `trainplan models --json`."""

    name: str
    family: str
    hub_id: str
    modality: str
    kind: str = Field(description="llm | diffusion | video | jepa: which sample fields apply")
    aliases: list[str]
    published_params: int = Field(description="published parameter count")
    source: str = Field(description="where the published parameter count comes from")


class GpuItem(BaseModel):
    """One catalog GPU: a record of `listings.gpu_listing`, as `trainplan gpus --json`."""

    name: str
    aliases: list[str]
    vendor: str
    gpu_class: str = Field(alias="class", serialization_alias="class")
    memory_bytes: int = Field(description="capacity the driver reports, bytes (divide by 1024^3 for GiB)")
    dense_flops_per_s: dict[str, float | None] = Field(description="dense peak FLOP/s per dtype")
    tdp_w: float | None = Field(description="board power, W")
    has_price: bool = Field(description="whether the catalog has a default on-demand rate")
    planned_by_default: bool = Field(
        description="whether the planner searches it when no GPU types are named "
        "(NVIDIA and AMD GPUs with a price)"
    )
    source: str
    as_of: str


class RegionItem(BaseModel):
    """One grid region: a record of `listings.region_listing`, as `trainplan regions --json`."""

    id: str
    name: str
    kind: str
    gco2e_per_kwh: float
    year: int
    source: str


class ErrorBody(BaseModel):
    """Every 4xx: the field at fault (as in the scenario, e.g. `micro_batch` or `lora.rank`)."""

    field: str | None
    message: str
    detail: str
    suggestions: list[str] = []
