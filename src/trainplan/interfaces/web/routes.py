"""The JSON API: catalogs, field metadata, the estimate and the planner, each a thin call into the engine."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from trainplan.engine.estimate import estimate
from trainplan.engine.largest_fit import DEFAULT_HEADROOM
from trainplan.engine.result import Estimate
from trainplan.inputs.catalogs.cost_inputs import regions
from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog
from trainplan.inputs.catalogs.models import model_records
from trainplan.inputs.catalogs.prices import index_to_dict, parse_today
from trainplan.interfaces.listings import gpu_listing, model_listing, region_listing
from trainplan.interfaces.text.hints import hints as make_hints
from trainplan.interfaces.text.phrasing import largest_line
from trainplan.interfaces.web.answers import Answer, json_bytes
from trainplan.interfaces.web.display import display
from trainplan.interfaces.web.hub import HubLookups
from trainplan.interfaces.web.inputs import (
    BodyError,
    EngineInputs,
    engine_inputs,
    hub_spec,
    is_hub_lookup,
    read_json_object,
)
from trainplan.interfaces.web.jobs import read_config, search_plans
from trainplan.interfaces.web.largest import MaxField, largest
from trainplan.interfaces.web.planning import PLAN_KEY, plan_body_schema, plan_options
from trainplan.interfaces.web.schemas import (
    MODEL_CONFIG_KEY,
    ErrorBody,
    GpuItem,
    ModelItem,
    RegionItem,
    estimate_body_schema,
    field_metadata,
)
from trainplan.interfaces.web.workers import Workers, WorkerStopped
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import scenario_from_mapping

router = APIRouter(prefix="/api", tags=["calculator"])
COMPUTE_BUDGET_S = 15.0  # an estimate, a config reading or a plan search past this is a 504
WORKERS = 2  # worker processes for config readings and plan searches (web/workers.py)
WORKER_QUEUE = 32  # requests waiting for a worker; one more is a 503 at once
ANSWERS_KEPT = 2048  # estimate answers kept for identical requests (about 10-30 KB each)
T = TypeVar("T")
PLAN_SLOTS = 1  # searches at once: each holds a few hundred MB of candidate arrays
PLAN_QUEUE = 4  # searches waiting for the slot; one more is a 503 at once
PLAN_WAIT_S = 10.0  # the longest a search waits for its turn before a 503

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "the body is not a JSON object"},
    408: {"model": ErrorBody, "description": "the body did not arrive in time"},
    413: {"model": ErrorBody, "description": "the body is larger than 256 KiB"},
    415: {"model": ErrorBody, "description": "the body is not sent as application/json"},
    422: {"model": ErrorBody, "description": "a field has a bad value; `field` names it"},
    503: {
        "model": ErrorBody,
        "description": "too many Hub lookups or searches in flight; retry shortly",
    },
    504: {"model": ErrorBody, "description": "a Hub lookup or the computation ran past its time budget"},
}


def json_response(payload: Any, status: int = 200) -> Response:
    """Compact JSON; non-finite numbers are refused rather than sent as invalid JSON."""
    return Response(json_bytes(payload), status_code=status, media_type="application/json")


def answer_response(answer: Answer) -> Response:
    """A worker's finished answer (status and JSON bytes) as the response."""
    status, body = answer
    return Response(body, status_code=status, media_type="application/json")


class Answers:
    """Finished estimate answers by request. An answer is a pure function of the body and the
    query, so an identical request (the page re-asking as a user toggles back, many users on the
    default scenario) is served from this bounded LRU instead of being computed again, hints
    included. Bodies naming a Hub id are not kept: the Hub's config may change."""

    def __init__(self, size: int = ANSWERS_KEPT) -> None:
        self._size = size
        self._kept: OrderedDict[bytes, bytes] = OrderedDict()

    @staticmethod
    def key(body: dict[str, Any], query: tuple[Any, ...]) -> bytes:
        """A digest of the body (keys sorted) and the query values."""
        text = json.dumps([body, query], sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).digest()

    def get(self, key: bytes) -> bytes | None:
        """The kept answer, marked as recently used."""
        answer = self._kept.get(key)
        if answer is not None:
            self._kept.move_to_end(key)
        return answer

    def put(self, key: bytes, answer: bytes) -> None:
        """Keep `answer`, dropping the least recently used past the size."""
        self._kept[key] = answer
        self._kept.move_to_end(key)
        while len(self._kept) > self._size:
            self._kept.popitem(last=False)


def app_state(app: Any, name: str, make: Callable[[], T]) -> T:
    """The app's `name` object (answers kept, Hub lookups, planner slots), made on first use."""
    value: T | None = getattr(app.state, name, None)
    if value is None:
        value = make()
        setattr(app.state, name, value)
    return value


def answers(app: Any) -> Answers:
    """The app's kept answers."""
    return app_state(app, "answers", Answers)


@router.get(
    "/fields", summary="Scenario fields: labels, kinds, defaults, allowed values, help, form sections"
)
def get_fields() -> dict[str, Any]:
    """The field table the page builds its controls from (the CLI flags come from the same table)."""
    return field_metadata()


@router.get("/models", summary="The model catalog", response_model=list[ModelItem])
def get_models() -> list[dict[str, Any]]:
    """Every catalog model; `model` accepts the name, an alias or the Hub id."""
    return model_listing(model_records())


@router.get("/gpus", summary="The GPU catalog", response_model=list[GpuItem], response_model_by_alias=True)
def get_gpus() -> list[dict[str, Any]]:
    """Every catalog GPU with its memory (bytes) and class."""
    return gpu_listing(gpu_catalog())


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
    return region_listing(regions().values())


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


def largest_payload(
    inputs: EngineInputs, field: str, with_hints: bool, headroom: float, past_context: bool = False
) -> dict[str, Any]:
    """The estimate payload at the largest `field` that fits, with the CLI's `max` object."""
    found = largest(inputs.scenario, field, inputs.model, headroom, past_context)
    payload = estimate_payload(inputs, with_hints, found.estimate)
    payload["max"] = found.to_dict()
    payload["display"]["largest"] = largest_line(found)
    return payload


def hub_lookups(app: Any) -> HubLookups:
    """The app's Hub lookups."""
    return app_state(app, "hub_lookups", lambda: HubLookups(hub_spec))


def _past_budget() -> BodyError:
    return BodyError(
        504, f"the computation took longer than {COMPUTE_BUDGET_S:.0f} s; simplify the request", field=None
    )


async def compute(function: Callable[..., T], *args: Any) -> T:
    """Run an estimate off the event loop within COMPUTE_BUDGET_S (504 past it), so that
    /healthz, the page and other requests are served while it runs. An estimate's inputs are
    bounded (hf/values.py, the field table), so it takes milliseconds; the work that can grow
    with its input runs in a worker process instead (`in_worker`)."""
    try:
        return await asyncio.wait_for(run_in_threadpool(function, *args), COMPUTE_BUDGET_S)
    except TimeoutError:
        raise _past_budget() from None


def workers(app: Any) -> Workers:
    """The app's worker processes, started when first needed."""
    return app_state(app, "workers", lambda: Workers(WORKERS, COMPUTE_BUDGET_S))


def worker_slots(app: Any) -> Slots:
    """The line for the workers: WORKER_QUEUE requests wait, one more is a 503 at once."""
    return app_state(app, "worker_slots", lambda: Slots(WORKERS, WORKER_QUEUE, PLAN_WAIT_S, "the server"))


async def in_worker(request: Request, function: Callable[..., Any], *args: Any) -> Response:
    """`function(*args)` (a job of web/jobs.py) answered by a worker process within
    COMPUTE_BUDGET_S: past it the worker is killed, so the 504 leaves nothing running."""
    slots = worker_slots(request.app)
    await slots.acquire()
    try:
        return answer_response(await workers(request.app).run(function, *args))
    except TimeoutError:
        raise _past_budget() from None
    except WorkerStopped:
        stopped = "the computation stopped before answering (out of memory?); try a smaller request"
        raise BodyError(503, stopped, field=None) from None
    finally:
        slots.release()


def hub_id_of(body: dict[str, Any]) -> str | None:
    """The Hub id the body's `model` names when answering it needs a Hub lookup, else None."""
    model = body.get("model")
    if isinstance(model, str) and MODEL_CONFIG_KEY not in body and is_hub_lookup(model):
        return model.strip()
    return None


async def hub_model(request: Request, body: dict[str, Any]) -> ModelSpec | None:
    """The spec of the body's Hub id, looked up through the app's bounded, time-limited Hub
    lookups; None when the body names none."""
    hub_id = hub_id_of(body)
    if hub_id is None:
        return None
    # the force field is validated as the scenario validates it, before the lookup reads it
    force = "force" in body and scenario_from_mapping({"force": body["force"]}).force
    return await hub_lookups(request.app).spec(hub_id, force)


async def resolve_inputs(request: Request, body: dict[str, Any]) -> EngineInputs:
    """The body's scenario and model: a Hub id looked up first, the rest off the event loop."""
    hub = await hub_model(request, body)
    return await compute(engine_inputs, body, hub)


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
            "(`trainplan estimate --max`): a search over the estimate, at most micro_batch "
            "65,536 or seq_len 10,000,000, leaving `headroom` free; the body's value of the field is "
            "replaced",
        ),
    ] = None,
    headroom: float = Query(
        DEFAULT_HEADROOM,
        ge=0,
        le=0.5,
        description="with `max`: the share of GPU memory to leave free; the answer is then rounded "
        "down to a useful multiple (0: the exact boundary, not rounded)",
    ),
    past_context: bool = Query(
        False,
        description="with `max=seq_len`: search past the model's context window (the search stops "
        "there otherwise, and `max.limit` says so)",
    ),
) -> Response:
    """Body: scenario fields as in a scenario file (absent fields take their defaults), and
    optionally `model_config`, the contents of a config.json. A Hub id in `model` is fetched
    with huggingface_hub when installed; the server never reads a path named in the request.

    With `?max=micro_batch` or `?max=seq_len`, the answer is the estimate at the largest value
    of that field whose peak memory fits the GPU, plus `max: {field, value}`; when not even 1
    fits, a 422 naming `max`."""
    body = await read_json_object(request)
    kept = answers(request.app)
    key = Answers.key(body, (hints, maximise, headroom, past_context))
    answer = kept.get(key)
    if answer is not None:
        return Response(answer, media_type="application/json")
    inputs = await resolve_inputs(request, body)
    if maximise is not None:
        response = json_response(
            await compute(largest_payload, inputs, maximise, hints, headroom, past_context)
        )
    else:
        response = json_response(await compute(estimate_payload, inputs, hints))
    if hub_id_of(body) is None:  # a Hub config may change: its answers are not kept
        kept.put(key, bytes(response.body))
    return response


class Slots:
    """At most `running` jobs at once and at most `waiting` in line; one more is a 503 at
    once, and a job that waits longer than `wait_s` for its turn is a 503 too."""

    def __init__(self, running: int, waiting: int, wait_s: float, what: str = "the planner") -> None:
        self._semaphore = asyncio.Semaphore(running)
        self._waiting = 0
        self._max_waiting = waiting
        self._wait_s = wait_s
        self._what = what

    async def acquire(self) -> None:
        """Take a slot, or raise the 503."""
        busy = BodyError(503, f"{self._what} is busy; try again in a few seconds", field=None)
        if self._semaphore.locked() and self._waiting >= self._max_waiting:
            raise busy
        self._waiting += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await self._semaphore.acquire()
        except TimeoutError:
            raise busy from None
        finally:
            self._waiting -= 1

    def release(self) -> None:
        """Give the slot back."""
        self._semaphore.release()


def plan_slots(app: Any) -> Slots:
    """The app's planner slots."""
    return app_state(app, "plan_slots", lambda: Slots(PLAN_SLOTS, PLAN_QUEUE, PLAN_WAIT_S))


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
        503: {"model": ErrorBody, "description": "the planner's queue is full; try again shortly"},
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
    hub = await hub_model(request, body)
    slots = plan_slots(request.app)
    await slots.acquire()
    try:
        return await in_worker(request, search_plans, body, options, hub)
    finally:
        slots.release()


@router.post(
    "/config",
    summary="Read training configs (axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL, accelerate, ...)",
    responses={
        200: {
            "description": "`scenario` (every field, the shape `/api/estimate` takes), `files[]` (each "
            "`{file, format}`), `provenance[]` (each `{field, value, setting, file, note, text}`: where the "
            "value came from) and `ignored[]` (each `{setting, file, reason, text}`)"
        },
        **ERRORS,
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "files": {
                                "type": "array",
                                "maxItems": 8,
                                "items": {
                                    "type": "object",
                                    "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
                                    "required": ["name", "text"],
                                },
                            }
                        },
                        "required": ["files"],
                    }
                }
            },
        }
    },
)
async def post_config(request: Request) -> Response:
    """Body: `{"files": [{"name", "text"}]}`, the config files' text (256 KiB in all). The format
    is detected from the content; a file that names another (a DeepSpeed JSON) finds it among the
    files posted with it. The server reads no paths and runs nothing in the files."""
    body = await read_json_object(request)
    return await in_worker(request, read_config, body)
