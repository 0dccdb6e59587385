"""The JSON API: catalogs, field metadata, the estimate and the planner, each a thin call into the engine."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from trainplan.catalog import find_model_record, model_records
from trainplan.estimate import estimate
from trainplan.gpus import find_gpu, gpu_catalog
from trainplan.prices import index_to_dict, parse_today
from trainplan.result import Estimate
from trainplan.tables import rates, regions
from trainplan.web.display import display
from trainplan.web.hints import hints as make_hints
from trainplan.web.inputs import BodyError, EngineInputs, engine_inputs, read_json_object
from trainplan.web.largest import MaxField, largest
from trainplan.web.planning import PLAN_KEY, plan_body_schema, plan_options, plan_payload, plan_request
from trainplan.web.schemas import (
    MODEL_CONFIG_KEY,
    ErrorBody,
    GpuItem,
    ModelItem,
    RegionItem,
    estimate_body_schema,
    field_metadata,
)

router = APIRouter(prefix="/api", tags=["calculator"])
HUB_TIMEOUT_S = 20.0
PLAN_SLOTS = 2  # searches at once; more wait for a slot, up to PLAN_QUEUE_S
PLAN_QUEUE_S = 30.0

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "the body is not a JSON object"},
    413: {"model": ErrorBody, "description": "the body is larger than 256 KiB"},
    422: {"model": ErrorBody, "description": "a field has a bad value; `field` names it"},
    504: {"model": ErrorBody, "description": "a Hub id lookup did not answer in time"},
}


def json_response(payload: Any, status: int = 200) -> Response:
    """Compact JSON; non-finite numbers are refused rather than sent as invalid JSON."""
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    return Response(text, status_code=status, media_type="application/json")


@router.get("/fields", summary="Scenario fields: kinds, defaults, allowed values, help, form sections")
def get_fields() -> dict[str, Any]:
    """The field table the page builds its controls from (the CLI flags come from the same table)."""
    return field_metadata()


@router.get("/models", summary="The model catalog", response_model=list[ModelItem])
def get_models() -> list[dict[str, Any]]:
    """Every catalog model; `model` accepts the name, an alias or the Hub id."""
    return [
        {
            "name": record.name,
            "family": record.family,
            "hub_id": record.hub_id,
            "modality": record.modality,
            "aliases": list(record.aliases),
            "published_params": record.published_params,
        }
        for record in model_records()
    ]


@router.get("/gpus", summary="The GPU catalog", response_model=list[GpuItem], response_model_by_alias=True)
def get_gpus() -> list[dict[str, Any]]:
    """Every catalog GPU with its memory (bytes) and class."""
    priced = rates()
    return [
        {
            "name": gpu.name,
            "aliases": list(gpu.aliases),
            "vendor": gpu.vendor,
            "class": gpu.gpu_class,
            "memory_bytes": gpu.memory_bytes,
            "has_price": gpu.name in priced,
        }
        for gpu in gpu_catalog()
    ]


@router.get("/prices", summary="The GPU price index: default prices, the dated quotes behind them, discounts")
def get_prices(
    gpu: str | None = Query(None, description="one GPU, by name or alias (default: every GPU)"),
    today: str | None = Query(
        None, description="judge staleness as of this date, YYYY-MM-DD (default: today)"
    ),
) -> Response:
    """The JSON of `trainplan prices [GPU] --json`: for each GPU its default price (the median of
    its on-demand quotes, an estimate), every quote with its date, source and whether it is
    stale, the GPUs without a price and why, and spot/committed discounts per provider class."""
    names = [find_gpu(gpu).name] if gpu else [g.name for g in gpu_catalog()]
    return json_response(index_to_dict(names, parse_today(today)))


@router.get("/regions", summary="Grid regions for CO2", response_model=list[RegionItem])
def get_regions() -> list[dict[str, Any]]:
    """Every grid region: cloud regions and countries with their carbon intensity."""
    return [
        {
            "id": region.id,
            "name": region.name,
            "kind": region.kind,
            "gco2e_per_kwh": region.gco2e_per_kwh,
            "year": region.year,
        }
        for region in regions().values()
    ]


def estimate_payload(
    inputs: EngineInputs, with_hints: bool, result: Estimate | None = None
) -> dict[str, Any]:
    """The CLI's `--json` result, plus `display` strings and `hints` (true numbers). `result`,
    when given, is an estimate already made for a variant of `inputs.scenario` (the search's)."""
    if result is None:
        result = estimate(inputs.scenario, model=inputs.model)
    payload = result.to_dict()
    uploaded = inputs.model_config is not None
    payload["display"] = display(result, uploaded)
    payload["hints"] = (
        [hint.to_dict() for hint in make_hints(result.scenario, result, inputs.model)] if with_hints else []
    )
    return payload


def largest_payload(inputs: EngineInputs, field: str, with_hints: bool) -> dict[str, Any]:
    """The estimate payload at the largest `field` that fits, with the CLI's `max` object."""
    result, found = largest(inputs.scenario, field, inputs.model)
    payload = estimate_payload(inputs, with_hints, result)
    payload["max"] = found
    return payload


async def resolve_inputs(body: dict[str, Any]) -> EngineInputs:
    """The body's scenario and model; a Hub lookup runs off the event loop, with a time limit."""
    model = body.get("model")
    if isinstance(model, str) and MODEL_CONFIG_KEY not in body and find_model_record(model) is None:
        # Possibly a Hub lookup, which may wait on the network: keep it off the event loop.
        try:
            return await asyncio.wait_for(run_in_threadpool(engine_inputs, body), HUB_TIMEOUT_S)
        except TimeoutError:
            raise BodyError(
                504, f"the Hub did not answer within {HUB_TIMEOUT_S:.0f} s", field="model"
            ) from None
    return engine_inputs(body)


@router.post(
    "/estimate",
    summary="Estimate memory, fit, time, cost and energy for one scenario",
    responses={
        200: {
            "description": "the same JSON as `trainplan estimate --json`, plus `display` and `hints`; "
            "with `max`, that of `trainplan estimate --max FIELD --json`: the estimate at the largest "
            "value that fits the GPU, and `max: {field, value}`"
        },
        **ERRORS,
        422: {
            "model": ErrorBody,
            "description": "a field has a bad value; `field` names it (`max`: an unknown field to "
            "maximise, or not even 1 fits)",
        },
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": estimate_body_schema()}},
        }
    },
)
async def post_estimate(
    request: Request,
    hints: bool = Query(True, description="also compute 'worth knowing' hints (each re-runs the estimate)"),
    maximise: Annotated[
        MaxField | None,
        Query(
            alias="max",
            description="answer for the largest value of this field that fits the scenario's GPU "
            "(`trainplan estimate --max`): an exact search over the estimate, at most micro_batch "
            "65536 or seq_len 10,000,000; the body's value of the field is replaced",
        ),
    ] = None,
) -> Response:
    """Body: scenario fields as in a scenario file (absent fields take their defaults), and
    optionally `model_config`, the contents of a config.json. A Hub id in `model` is fetched
    with huggingface_hub when installed; the server never reads a path named in the request.

    With `?max=micro_batch` or `?max=seq_len`, the answer is the estimate at the largest value
    of that field whose peak memory fits the GPU, plus `max: {field, value}`; when not even 1
    fits, a 422 naming `max`."""
    body = await read_json_object(request)
    inputs = await resolve_inputs(body)
    if maximise is not None:
        # about 50 estimates: keep them off the event loop, as the planner's search is
        return json_response(await run_in_threadpool(largest_payload, inputs, maximise, hints))
    return json_response(estimate_payload(inputs, hints))


def plan_slots(app: Any) -> asyncio.Semaphore:
    """The app's limit on searches running at once (made on first use)."""
    slots: asyncio.Semaphore | None = getattr(app.state, "plan_slots", None)
    if slots is None:
        slots = asyncio.Semaphore(PLAN_SLOTS)
        app.state.plan_slots = slots
    return slots


@router.post(
    "/plan",
    summary="Plan: search GPU types, counts, parallelism and memory savers for the best layouts",
    responses={
        200: {
            "description": "the same JSON as `trainplan plan --json`: `objective`, `plans[]` and "
            "`pareto[]` (each `{scenario, estimate}`), `rejected`, `candidates_evaluated`, `explanation[]`"
        },
        **ERRORS,
        422: {"model": ErrorBody, "description": "a field has a bad value; `field` names it (`plan.KEY`)"},
        503: {"model": ErrorBody, "description": "every search slot stayed busy; try again shortly"},
    },
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": plan_body_schema()}},
        }
    },
)
async def post_plan(request: Request) -> Response:
    """Body: the scenario fields of `/api/estimate` (what stays fixed: model, precision, optimizer,
    LoRA, sequence length, token budget, pricing, region) plus `plan`, the options of
    `trainplan plan`. Each plan's `scenario` posted to `/api/estimate` gives its `estimate`."""
    body = await read_json_object(request)
    options = plan_options(body.pop(PLAN_KEY, None))
    inputs = await resolve_inputs(body)
    search = plan_request(inputs.scenario, options)
    slots = plan_slots(request.app)
    try:
        async with asyncio.timeout(PLAN_QUEUE_S):
            await slots.acquire()
    except TimeoutError:
        raise BodyError(503, "the planner is busy; try again in a few seconds", field=None) from None
    try:
        payload = await run_in_threadpool(plan_payload, inputs, search)
    finally:
        slots.release()
    return json_response(payload)
