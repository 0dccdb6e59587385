"""The planner over HTTP: the `plan` object of a request body, checked and bounded.

The body of POST /api/plan is an estimate body (the scenario that fixes the model, precision,
optimizer, LoRA settings, sequence length, token budget, pricing and region) plus a `plan`
object with the options of `trainplan plan` (`trainplan.engine.plan_request.PLAN_OPTIONS`). This module turns
that object into a `PlanRequest` with every error naming `plan.KEY`, and bounds the search so
that one request cannot run away: at most MAX_GPUS GPUs and MAX_CANDIDATES candidate layouts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import cache
from typing import Any

from trainplan.engine.plan import plan
from trainplan.engine.plan_request import PLAN_OPTIONS, WEB_CAPS, PlanRequest, request_from_options
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.interfaces.text.phrasing import plans_heading
from trainplan.interfaces.text.plans import result_to_dict
from trainplan.interfaces.web.display import plan_display
from trainplan.interfaces.web.inputs import EngineInputs
from trainplan.interfaces.web.schemas import estimate_body_schema
from trainplan.specs.errors import InputError, UnknownNameError
from trainplan.specs.scenario import Scenario

PLAN_KEY = "plan"
# The server's caps on the planner options are declared with them (plan_request.PLAN_OPTIONS,
# `web_maximum`) and passed to the one validator; these names are for the messages below.
MAX_GPUS = int(WEB_CAPS["max_gpus"])
MAX_GLOBAL_TOKENS = int(WEB_CAPS["target_global_tokens"])  # tokens per optimizer step a plan may target
MAX_CANDIDATES = int(WEB_CAPS["max_candidates"])  # about 3.5 s and 340 MiB of arrays on one core
MAX_RUN_TOKENS = 10**18  # steps x global batch: the search counts tokens in 64-bit integers
LIST_OPTIONS = tuple(name for name, option in PLAN_OPTIONS.items() if option.value_type == "list")


class PlanInputError(InputError):
    """A bad `plan` option: the field is `plan.KEY`; close matches travel along for a GPU name."""

    def __init__(self, field: str, message: str, suggestions: list[str] | None = None) -> None:
        super().__init__(field, message)
        self.suggestions = suggestions or []


def _text(key: str, raw: Any) -> str | list[str] | None:
    """One option as the string the CLI would pass (numbers as written, methods comma-joined);
    a list of GPU names stays a list, since a catalog name may hold a comma."""
    field = f"{PLAN_KEY}.{key}"
    if raw is None:
        return None
    if isinstance(raw, bool):
        raise PlanInputError(field, "must be a string or a number, not true/false")
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return repr(raw)
    if isinstance(raw, str):
        return raw
    if key in LIST_OPTIONS and isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        names = [item.strip() for item in raw if item.strip()]
        return names if key == "gpu_types" else ",".join(names)
    allowed = "a string or a list of strings" if key in LIST_OPTIONS else "a string or a number"
    raise PlanInputError(field, f"must be {allowed}")


PlanOptions = dict[str, str | list[str] | None]


def plan_options(raw: Any) -> PlanOptions:
    """The body's `plan` object as string options, every key known (their values are checked by
    the planner's own validator, with the server's caps: `plan_request`)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise PlanInputError(PLAN_KEY, f"must be an object of planner options: {', '.join(PLAN_OPTIONS)}")
    unknown = sorted(str(key) for key in raw if key not in PLAN_OPTIONS)
    if unknown:
        raise PlanInputError(
            f"{PLAN_KEY}.{unknown[0]}", f"unknown planner option. Allowed: {', '.join(PLAN_OPTIONS)}"
        )
    options: PlanOptions = {}
    for key in PLAN_OPTIONS:
        text = _text(key, raw.get(key))
        if isinstance(text, str):
            text = text.strip() or None
        options[key] = text or None
    return options


def _check_batch(request: PlanRequest) -> None:
    """The target global batch, and the run it makes, within what the search can count."""
    base = request.base
    tokens = request.global_sequences() * base.seq_len
    if tokens > MAX_GLOBAL_TOKENS:
        key = "target_global_sequences" if request.target_global_sequences else "target_global_tokens"
        where = (
            "the target"
            if request.target_global_sequences or request.target_global_tokens
            else "the scenario's own global batch (micro x accum x replicas x seq_len)"
        )
        raise PlanInputError(
            f"{PLAN_KEY}.{key}",
            f"{where} is {tokens:,} tokens per step, more than the {MAX_GLOBAL_TOKENS:,} a plan may target",
        )
    if base.steps and base.steps * tokens * 2 > MAX_RUN_TOKENS:
        raise PlanInputError(
            "steps",
            f"{base.steps:,} steps of {tokens:,} tokens is more than a plan can count; use fewer steps",
        )


def _gpu(name: str) -> str:
    """The catalog name of a GPU; an unknown one is an error naming `plan.gpu_types`."""
    try:
        return find_gpu(name).name
    except UnknownNameError as error:
        raise PlanInputError(f"{PLAN_KEY}.gpu_types", error.message, error.suggestions) from None


def plan_request(base: Scenario, options: PlanOptions) -> PlanRequest:
    """A bounded PlanRequest from checked options (`plan_options`); errors name `plan.KEY`."""
    texts = {key: value if isinstance(value, str) else None for key, value in options.items()}
    listed = options.get("gpu_types")
    names = tuple(_gpu(name) for name in listed) if isinstance(listed, list) else ()
    try:
        request = request_from_options(base, texts, WEB_CAPS)
    except UnknownNameError as error:
        raise PlanInputError(f"{PLAN_KEY}.gpu_types", error.message, error.suggestions) from None
    except InputError as error:
        raise PlanInputError(f"{PLAN_KEY}.{error.field}", error.message) from None
    # the same GPU or method named twice is searched once
    gpu_types = tuple(dict.fromkeys(names + tuple(_gpu(name) for name in request.gpu_types)))
    request = dataclasses.replace(request, methods=tuple(dict.fromkeys(request.methods)), gpu_types=gpu_types)
    if not request.methods:
        raise PlanInputError(f"{PLAN_KEY}.methods", "name at least one of full, lora, qlora, or any")
    _check_batch(request)
    try:
        request.check_size(can_raise=request.max_candidates < MAX_CANDIDATES)
    except InputError as error:
        raise PlanInputError(f"{PLAN_KEY}.{error.field}", error.message) from None
    return request


def plan_payload(inputs: EngineInputs, request: PlanRequest) -> dict[str, Any]:
    """The JSON of `trainplan plan --json` for a checked request, each plan with the `display`
    strings of its figures."""
    payload = result_to_dict(plan(request, model=inputs.model))
    for item in (*payload["plans"], *payload["pareto"]):
        item["display"] = plan_display(item)
    payload["display"] = {"heading": plans_heading(len(payload["plans"]), payload["objective"])}
    return payload


def _option_schema(key: str) -> dict[str, Any]:
    """JSON Schema of one planner option, from its declaration (the server's cap as maximum)."""
    option = PLAN_OPTIONS[key]
    words: dict[str, Any] = {"description": option.help_text(), "title": option.label}
    cap = WEB_CAPS.get(key, option.maximum)
    if cap is not None and option.value_type in ("int", "float"):
        words["description"] += f"; at most {cap:,g}"
    if option.value_type == "list":
        kinds: list[dict[str, Any]] = [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
        ]
    elif option.value_type == "choice":
        kinds = [{"type": "string", "enum": list(option.choices)}]
    else:
        number: dict[str, Any] = {"type": "integer" if option.value_type == "int" else "number"}
        if option.minimum is not None:
            number["minimum"] = option.minimum
        if cap is not None:
            number["maximum"] = cap
        kinds = [number, {"type": "string", "description": "the same number as text"}]
    if option.default is not None:
        words["default"] = option.default
    return {"anyOf": [*kinds, {"type": "null"}], **words}


@cache
def plan_body_schema() -> dict[str, Any]:
    """OpenAPI schema of the POST /api/plan body: the estimate body plus the `plan` object."""
    base = estimate_body_schema()
    options = {key: _option_schema(key) for key in PLAN_OPTIONS}
    plan_schema = {
        "type": "object",
        "properties": options,
        "additionalProperties": False,
        "description": "the options of `trainplan plan`. The search is bounded: at most "
        f"{MAX_CANDIDATES:,} candidate layouts (GPU counts x GPU types x methods x ...) per request",
    }
    return {
        **base,
        "properties": {**base["properties"], PLAN_KEY: plan_schema},
        "example": {
            "model": "Qwen2.5-7B",
            "method": "lora",
            "seq_len": 4096,
            PLAN_KEY: {"methods": "any", "max_gpus": 16, "objective": "cost", "deadline_hours": 24},
        },
    }
