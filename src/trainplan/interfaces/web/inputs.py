"""Turning an HTTP request into engine inputs, safely.

- The body is read with a size limit (413 past it) and must be one JSON object.
- The server never reads a path the client names: `model` is a catalog name, a Hub id in the
  Hub's `owner/name` syntax, or a display name for an uploaded `model_config` object.
- Every problem is a TrainplanError naming the field, which the app answers with a 4xx.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from starlette.requests import Request

from trainplan.inputs import resolve
from trainplan.inputs.catalogs import models as catalog
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.userfiles import parse_json
from trainplan.interfaces.web.schemas import MODEL_CONFIG_KEY
from trainplan.specs.errors import InputError, TrainplanError, UnknownNameError, shown_value
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import Scenario, scenario_from_mapping

MAX_BODY_BYTES = 256 * 1024
BODY_READ_TIMEOUT_S = 10.0  # a client that declares a body and stops sending gets a 408

_PATH_HINT = re.compile(r"[\\/~]|^\.|\.\.|\x00|:")


class BodyError(TrainplanError):
    """A request that cannot be answered as asked: a body too large (413), too slow (408), of the
    wrong media type (415) or not a JSON object (400); a Hub lookup or computation that ran past
    its time budget (504), or a server with no free slot for it (503)."""

    def __init__(self, status: int, message: str, field: str | None = "body") -> None:
        self.status = status
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


async def read_json_object(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """The body as a dict: `application/json` only (415 otherwise: a cross-site form cannot post
    here), at most `limit` bytes read (413), within BODY_READ_TIMEOUT_S (408)."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BodyError(413, f"request body larger than {limit // 1024} KiB")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_READ_TIMEOUT_S):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyError(413, f"request body larger than {limit // 1024} KiB")
                chunks.append(chunk)
    except TimeoutError:
        raise BodyError(408, f"the request body did not arrive within {BODY_READ_TIMEOUT_S:.0f} s") from None
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        raise BodyError(
            415, f"send the body as application/json (got {shown_value(media_type or 'no content type')})"
        )
    try:
        data = parse_json(raw, "the body", "body")
    except InputError as error:
        raise BodyError(400, error.message.removeprefix("the body is ")) from None
    if not isinstance(data, dict):
        raise BodyError(400, "must be a JSON object of scenario fields")
    return data


@dataclass(frozen=True)
class EngineInputs:
    """A validated scenario and, when not a catalog name, the model spec to use."""

    scenario: Scenario
    model: ModelSpec | None
    model_config: dict[str, Any] | None


def engine_inputs(body: Mapping[str, Any], hub: ModelSpec | None = None) -> EngineInputs:
    """Split `model_config` off the body, validate the scenario, resolve the model safely.
    `hub` is the spec of the body's Hub id when the server has already looked it up."""
    fields = dict(body)
    config = fields.pop(MODEL_CONFIG_KEY, None)
    if config is not None and not isinstance(config, dict):
        raise InputError(MODEL_CONFIG_KEY, "must be a JSON object: the contents of a config.json")
    if config is not None and not fields.get("model"):
        fields["model"] = str(config.get("_name_or_path") or "custom model")[:200] or "custom model"
    scenario = scenario_from_mapping(fields)
    if scenario.gpu_file is not None:
        raise InputError("gpu_file", "the server reads no paths: give the GPU by name (or gpu_memory_gib)")
    if scenario.vae is not None and catalog.find_model_record(scenario.vae) is None:
        raise InputError("vae", "must be a catalog diffusion model here (the server reads no paths)")
    for role in ("critic_model", "reward_model"):  # PPO's models: catalog names on the server
        name = getattr(scenario, role)
        if name is not None and catalog.find_model_record(name) is None:
            raise InputError(role, "must be a catalog language model here (the server reads no paths)")
    if config is not None:
        spec = spec_from_upload(config, scenario.model, scenario.force, scenario.vae)
        return EngineInputs(scenario, spec, config)
    model = hub if hub is not None else model_spec(scenario.model, scenario.force)
    return EngineInputs(scenario, model, None)


def spec_from_upload(
    config: Mapping[str, Any], name: str, force: bool = False, vae: str | None = None
) -> ModelSpec:
    """The spec of an uploaded config.json (a denoiser's alone with the closest catalog pipeline,
    or `vae`'s: resolve.with_pipeline); errors name `model_config` (and the config key)."""
    return _spec(config, name, "uploaded config.json", MODEL_CONFIG_KEY, force, vae)


def _spec(
    config: Mapping[str, Any], name: str, source: str, field: str, force: bool = False, vae: str | None = None
) -> ModelSpec:
    """spec_from_config, with every failure an InputError naming `field` (and the config key)."""
    from dataclasses import replace

    try:
        full, note = resolve.with_pipeline(dict(config), vae)
        spec = spec_from_config(full, name, source=source, force=force)
        return replace(spec, notes=(*spec.notes, note)) if note else spec
    except TrainplanError as error:
        key = getattr(error, "field", "")
        where = field if key in ("", "model") else f"{field}.{key}"
        raise InputError(where, getattr(error, "message", str(error))) from None
    except (ArithmeticError, LookupError, TypeError, ValueError, AttributeError) as error:
        raise InputError(
            field, f"cannot be read as a model config ({type(error).__name__}: {error})"
        ) from None


def is_hub_lookup(name: str) -> bool:
    """A name that is not in the catalog and has the Hub id syntax: answering it needs the network."""
    name = name.strip()
    return catalog.find_model_record(name) is None and resolve.looks_like_hub_id(name)


def model_spec(name: str, force: bool = False) -> ModelSpec | None:
    """None for a catalog name (the engine resolves it as the CLI does); a Hub id's spec;
    an error for anything else. Never touches the server's file system."""
    if catalog.find_model_record(name) is not None:
        return None
    if resolve.looks_like_hub_id(name):
        return hub_spec(name, force)
    names = [record.name for record in catalog.model_records()]
    if _PATH_HINT.search(name):
        raise InputError(
            "model",
            f"{shown_value(name)} is neither a catalog model nor a Hub id (owner/name). The server reads no "
            f"files: upload or paste the config.json instead",
        )
    raise UnknownNameError("model", name, names, "model")


@lru_cache(maxsize=64)
def hub_spec(hub_id: str, force: bool = False) -> ModelSpec:
    """The spec of a Hub model's config.json (cached; failures are not cached)."""
    config = resolve.fetch_hub_config(hub_id)
    return _spec(config, hub_id, f"hub:{hub_id}", "model", force)
