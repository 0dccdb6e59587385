"""POST /api/plan: the planner's JSON, plans that /api/estimate reproduces, field-named 4xx, bounds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from configs import TINY_LLAMA
from conftest import run_async
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainplan.engine.plan import plan
from trainplan.engine.plan_request import request_from_options
from trainplan.inputs import resolve
from trainplan.interfaces.text.phrasing import format_duration, format_usd, plans_heading
from trainplan.interfaces.text.plans import result_to_dict
from trainplan.interfaces.web import routes
from trainplan.interfaces.web.app import create_app
from trainplan.interfaces.web.inputs import MAX_BODY_BYTES
from trainplan.interfaces.web.planning import MAX_CANDIDATES, MAX_GPUS
from trainplan.specs.scenario import scenario_from_mapping

SMALL: dict[str, Any] = {"model": "Qwen2.5-0.5B", "method": "lora", "plan": {"max_gpus": 8}}


def post(client: TestClient, body: Any) -> Any:
    return client.post("/api/plan", content=json.dumps(body), headers={"content-type": "application/json"})


def plan_json(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = post(client, body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_plan_is_the_cli_json(client: TestClient) -> None:
    data = plan_json(client, SMALL)
    base = scenario_from_mapping({"model": "Qwen2.5-0.5B", "method": "lora"})
    expected = result_to_dict(plan(request_from_options(base, {"max_gpus": "8"})))
    # each plan with the display strings of the CLI's plan table beside the CLI's JSON
    for item in (*data["plans"], *data["pareto"]):
        shown, figures = item.pop("display"), item["estimate"]
        # the whole run's figures: training steps and the fixed time
        assert shown["duration"] == format_duration(figures["time"]["run_s"])
        assert shown["usd"] == (
            format_usd(figures["cost"]["run_usd"]) if figures["cost"]["usd"] is not None else None
        )
    # and the heading the CLI's plan table has, beside the JSON
    assert data.pop("display") == {"heading": plans_heading(len(data["plans"]), "cost")}
    assert data == json.loads(json.dumps(expected))
    assert set(data) == {
        "objective",
        "plans",
        "pareto",
        "rejected",
        "candidates_evaluated",
        "unpriced",
        "explanation",
    }
    # the default objective is the cheapest plan
    assert data["objective"] == "cost" and data["explanation"][0].startswith("Best for cost")
    assert all(plan["scenario"]["gpus"] <= 8 for plan in data["plans"])


def test_each_plan_is_what_the_estimate_endpoint_gives(client: TestClient) -> None:
    data = plan_json(client, {**SMALL, "plan": {"max_gpus": "8", "objective": "pareto", "top_k": 3}})
    for item in (data["plans"][0], data["pareto"][-1]):
        response = client.post("/api/estimate", params={"hints": "false"}, json=item["scenario"])
        assert response.status_code == 200, response.text
        estimate = response.json()
        assert (
            estimate["memory"]["per_gpu"]["total_bytes"]
            == item["estimate"]["memory"]["per_gpu"]["total_bytes"]
        )
        assert estimate["time"]["total_s"] == item["estimate"]["time"]["total_s"]
        assert estimate["time"]["run_s"] == item["estimate"]["time"]["run_s"]
        assert estimate["cost"]["usd"] == item["estimate"]["cost"]["usd"]


def test_options_as_strings_numbers_and_lists(client: TestClient) -> None:
    as_text = plan_json(
        client,
        {**SMALL, "plan": {"max_gpus": "8", "gpu_types": "L40S,A100 80GB SXM4", "objective": "cost"}},
    )
    as_json = plan_json(
        client,
        {
            **SMALL,
            "plan": {"max_gpus": 8.0, "gpu_types": ["L40S", "A100-80GB-SXM", "l40s"], "objective": "cost"},
        },
    )
    assert as_text == as_json  # aliases name the same GPU, and a repeat is searched once
    assert {plan["scenario"]["gpu"] for plan in as_text["plans"]} <= {"L40S", "A100 80GB SXM4"}
    # in a list, a catalog name with a comma in it is one name
    gb200 = "GB200 (per Blackwell GPU, NVL72)"
    listed = plan_json(client, {**SMALL, "plan": {"max_gpus": 4, "gpu_types": [gb200]}})
    assert {plan["scenario"]["gpu"] for plan in listed["plans"]} == {gb200}


def test_uploaded_config_is_planned_without_reading_paths(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve, "read_config_file", lambda path: pytest.fail(f"read {path}"))
    body = {"model": "my-tiny", "model_config": TINY_LLAMA, "plan": {"max_gpus": 2, "gpu_types": "L40S"}}
    data = plan_json(client, body)
    assert data["plans"] and data["plans"][0]["estimate"]["model"]["source"] == "uploaded config.json"
    path = post(client, {"model": "../../etc/passwd", "plan": {"max_gpus": 2}})
    assert path.status_code == 422 and path.json()["field"] == "model"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"plan": {"objective": "fastest"}}, "plan.objective"),
        ({"plan": {"max_gpus": MAX_GPUS + 1}}, "plan.max_gpus"),
        ({"plan": {"max_gpus": 0}}, "plan.max_gpus"),
        ({"plan": {"max_gpus": "lots"}}, "plan.max_gpus"),
        ({"plan": {"max_gpus": "1e400"}}, "plan.max_gpus"),
        ({"plan": {"max_gpus": True}}, "plan.max_gpus"),
        ({"plan": {"max_gpus": MAX_GPUS, "methods": "any"}}, "plan.max_gpus"),
        ({"plan": {"methods": "dpo"}}, "plan.methods"),
        ({"plan": {"methods": " , "}}, "plan.methods"),
        ({"plan": {"methods": [1]}}, "plan.methods"),
        ({"plan": {"gpu_types": "H100-SXM,RTX 9999"}}, "plan.gpu_types"),
        ({"plan": {"top_k": 1000}}, "plan.top_k"),
        ({"plan": {"budget_usd": "-1"}}, "plan.budget_usd"),
        ({"plan": {"deadline_hours": "NaN"}}, "plan.deadline_hours"),
        ({"plan": {"target_global_tokens": "inf"}}, "plan.target_global_tokens"),
        ({"plan": {"target_global_sequences": 10**12}}, "plan.target_global_sequences"),
        ({"plan": {"colour": "red"}}, "plan.colour"),
        ({"plan": [1, 2]}, "plan"),
        ({"plan": {}, "micro_batch": 0}, "micro_batch"),
        ({"plan": {}, "model": "Lama-3.1-8B"}, "model"),
        ({"plan": {}, "model_config": {"model_type": "llama"}}, "model_config.hidden_size"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(client: TestClient, body: dict[str, Any], field: str) -> None:
    response = post(client, body)
    assert response.status_code == 422, response.text
    data = response.json()
    assert data["field"] == field
    assert data["message"] and data["detail"].startswith(f"{field}: ")


def test_unknown_gpu_suggests_names(client: TestClient) -> None:
    data = post(client, {"plan": {"gpu_types": "H100 SXM 80"}}).json()
    assert data["field"] == "plan.gpu_types" and "H100 SXM 80GB" in data["suggestions"]


def test_the_search_is_bounded(client: TestClient) -> None:
    data = post(client, {"plan": {"max_gpus": MAX_GPUS, "methods": "any"}}).json()
    assert f"{MAX_CANDIDATES:,}" in data["message"]
    # the largest count is allowed where the rest of the space is small
    one_gpu_type = {"model": "GPT-2", "plan": {"max_gpus": MAX_GPUS, "gpu_types": "H100-SXM", "top_k": 1}}
    assert plan_json(client, one_gpu_type)["candidates_evaluated"] <= MAX_CANDIDATES


def test_body_size_limit(client: TestClient) -> None:
    big = {"model": "Llama-3.1-8B", "plan": {"gpu_types": "x" * MAX_BODY_BYTES}}
    response = post(client, big)
    assert response.status_code == 413 and response.json()["field"] == "body"


def test_busy_planner_is_a_503_after_a_bounded_wait() -> None:
    app = create_app()
    app.state.plan_slots = routes.Slots(running=0, waiting=4, wait_s=0.05)  # the slot never frees
    with TestClient(app, base_url="http://localhost") as busy:
        response = post(busy, SMALL)
    assert response.status_code == 503
    data = response.json()
    assert data["field"] is None and "busy" in data["message"]


def test_a_full_planner_queue_is_a_503_at_once() -> None:
    """With the slot taken and the line full, a search is refused without waiting at all."""
    app = create_app()
    app.state.plan_slots = routes.Slots(running=0, waiting=0, wait_s=60.0)
    with TestClient(app, base_url="http://localhost") as busy:
        response = post(busy, SMALL)
    assert response.status_code == 503 and "busy" in response.json()["message"]


def test_planner_slots_admit_in_turn() -> None:
    """One slot, one waiting place: the second search waits for the first, a third is refused."""

    async def scenario() -> list[str]:
        slots = routes.Slots(running=1, waiting=1, wait_s=1.0)
        await slots.acquire()
        second = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0.01)
        outcomes = []
        try:
            await slots.acquire()
        except routes.BodyError as error:
            outcomes.append(f"third {error.status}")
        slots.release()
        await second
        outcomes.append("second admitted")
        return outcomes

    assert run_async(scenario()) == ["third 503", "second admitted"]


def test_nothing_fits_is_an_answer_not_an_error(client: TestClient) -> None:
    body = {"model": "Llama-3.1-70B", "method": "full", "plan": {"max_gpus": 1, "gpu_types": "L40S"}}
    data = plan_json(client, body)
    assert data["plans"] == [] and data["rejected"]["does not fit"] > 0
    assert data["explanation"][0].startswith("No candidate fits")


def test_openapi_documents_the_plan_body(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/api/plan"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert "micro_batch" in schema["properties"] and "model_config" in schema["properties"]
    options = schema["properties"]["plan"]["properties"]
    assert set(options) == {
        "methods",
        "gpu_types",
        "max_gpus",
        "target_global_tokens",
        "target_global_sequences",
        "budget_usd",
        "deadline_hours",
        "objective",
        "top_k",
        "max_candidates",
    }
    assert options["max_candidates"]["anyOf"][0]["maximum"] == MAX_CANDIDATES
    assert options["objective"]["anyOf"][0]["enum"] == ["time", "cost", "energy", "pareto", "gpus"]
    assert options["max_gpus"]["anyOf"][0]["maximum"] == MAX_GPUS
    assert {"200", "413", "422"} <= set(operation["responses"])


# ---------- fuzz: any plan body gets a 200 or a 4xx naming a field, never a 500 ----------

FUZZ_CLIENT = TestClient(create_app(), raise_server_exceptions=True, base_url="http://localhost")
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.text(max_size=6), max_size=3),
)
GPU_NAMES = ["L40S", "A10G", "H100-SXM", "B200", "GeForce RTX 4090", "RTX 9999", "tpu"]


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Plausible values five times in six, junk otherwise."""
    return st.integers(0, 5).flatmap(lambda pick: junk if pick == 0 else good)


plan_options = st.fixed_dictionaries(
    {},
    optional={
        "methods": mostly(st.sampled_from(["full", "lora", "qlora", "any", "lora,qlora", "x"])),
        "gpu_types": mostly(st.lists(st.sampled_from(GPU_NAMES), min_size=1, max_size=2).map(",".join)),
        "max_gpus": mostly(st.one_of(st.integers(-1, 16), st.sampled_from(["4", "8.5", "1e9", "-0"]))),
        "target_global_tokens": mostly(st.one_of(st.integers(0, 10**7), st.floats(0, 1e11))),
        "target_global_sequences": mostly(st.integers(0, 4096)),
        "budget_usd": mostly(st.floats(-1, 1e4)),
        "deadline_hours": mostly(st.floats(-1, 1e3)),
        "objective": mostly(st.sampled_from(["time", "cost", "energy", "pareto", "gpus", "TIME"])),
        "top_k": mostly(st.integers(-1, 25)),
    },
)
plan_bodies = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["GPT-2", "Qwen2.5-0.5B", "Llama-3.1-8B", "Qwen3-30B-A3B", "../x"]),
        "plan": mostly(plan_options),
    },
    optional={
        "method": st.sampled_from(["full", "lora", "qlora", "dpo"]),
        "precision": st.sampled_from(["bf16-mixed", "fp32", "fp8-mixed", "fp16-mixed"]),
        "optimizer": st.sampled_from(["adamw", "sgd", "adamw-8bit"]),
        "seq_len": st.one_of(st.integers(1, 10**6), st.sampled_from([0, "4k", 512, 8192])),
        "micro_batch": st.integers(1, 64),
        "grad_accum": st.integers(1, 64),
        "steps": st.one_of(st.integers(1, 10**12), st.none()),
        "gpus_per_node": st.integers(1, 16),
        "usd_per_gpu_hour": st.one_of(st.floats(0, 100), st.none()),
        "pricing": st.sampled_from(["on-demand", "spot", "committed"]),
    },
)


def bounded(body: dict[str, Any]) -> dict[str, Any]:
    """At most 8 GPUs and two GPU types, so that each example searches a small space."""
    options = body["plan"]
    if isinstance(options, dict):
        options = {**options, "max_gpus": options.get("max_gpus", 4)}
        if isinstance(options["max_gpus"], int | float) and not isinstance(options["max_gpus"], bool):
            options["max_gpus"] = min(options["max_gpus"], 8)
        options.setdefault("gpu_types", "L40S,H100-SXM")
        return {**body, "plan": options}
    return body


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan_bodies)
def test_fuzz_plan_bodies(body: dict[str, Any]) -> None:
    body = bounded(body)
    response = FUZZ_CLIENT.post(
        "/api/plan", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200 or 400 <= response.status_code < 500, (body, response.text)
    data = response.json()
    if response.status_code == 200:
        assert set(data) >= {"plans", "pareto", "rejected", "explanation"}
    else:
        assert isinstance(data["field"], str) and data["field"], data
        assert isinstance(data["message"], str) and data["message"]


def test_a_grpo_plan_names_its_engine(client: TestClient) -> None:
    """The rollout search over the web: each plan's engine in words beside its figures, the same
    words the CLI's plan table writes (rollout_words over the plan's memory.rollout)."""
    from trainplan.interfaces.text.phrasing import rollout_words

    body = {
        "model": "Qwen2.5-0.5B",
        "stage": "grpo",
        "micro_batch": 8,
        "grad_accum": 1,
        "seq_len": 1024,
        "plan": {"max_gpus": 2, "gpu_types": ["H100 SXM"], "objective": "time"},
    }
    data = plan_json(client, body)
    assert data["plans"]
    for item in data["plans"]:
        rollout = item["estimate"]["memory"]["rollout"]
        assert item["display"]["rollout_summary"] == rollout_words(rollout)
        assert item["estimate"]["batch"]["global_sequences"] == 8
