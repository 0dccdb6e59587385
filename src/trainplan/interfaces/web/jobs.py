"""The jobs the server hands its worker processes (web/workers.py), and how a job's outcome
becomes an answer: a payload's JSON, a user error's 4xx body, or a logged 500.

Each job is a module-level function of plain data (the request body, checked planner options,
a model spec the server looked up on the Hub), so it crosses the process boundary by reference.
The fork server imports this module once, so what it imports here (the engine, the config
readers, the planner) every worker starts with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trainplan.inputs.configs.accelerate
import trainplan.inputs.configs.axolotl
import trainplan.inputs.configs.deepspeed
import trainplan.inputs.configs.hf_trainer
import trainplan.inputs.configs.llama_factory
import trainplan.inputs.configs.torchtitan
import trainplan.inputs.configs.torchtune  # noqa: F401  (the readers, imported once in the fork server)
from trainplan.interfaces.web.answers import ERROR_500, Answer, error_answer, json_bytes
from trainplan.interfaces.web.configs import config_payload
from trainplan.interfaces.web.inputs import engine_inputs
from trainplan.interfaces.web.planning import plan_payload, plan_request
from trainplan.specs.errors import TrainplanError
from trainplan.specs.model import ModelSpec

log = logging.getLogger("trainplan.interfaces.web")


def run_job(function: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> Answer:
    """`function(*args)` as an answer: 200 and its JSON, the 4xx of a user error, a 500 (logged)
    for anything else, out-of-memory included."""
    try:
        return 200, json_bytes(function(*args))
    except TrainplanError as error:
        return error_answer(error)
    except MemoryError:
        log.error("a job ran out of memory: %s", getattr(function, "__name__", function))
        return 500, ERROR_500
    except Exception:
        log.exception("unexpected error in %s", getattr(function, "__name__", function))
        return 500, ERROR_500


def read_config(body: dict[str, Any]) -> dict[str, Any]:
    """POST /api/config: the scenario of the posted training config files."""
    return config_payload(body)


def search_plans(body: dict[str, Any], options: dict[str, Any], hub: ModelSpec | None) -> dict[str, Any]:
    """POST /api/plan: the scenario of `body` (its model `hub` when the server looked it up),
    the bounded search of `options`, the ranked plans."""
    inputs = engine_inputs(body, hub)
    return plan_payload(inputs, plan_request(inputs.scenario, options))
