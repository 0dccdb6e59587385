"""`POST /api/estimate?max=FIELD`: the largest micro-batch / sequence length that fits, exactly
(`headroom=0`) or with memory left free and rounded to a useful multiple (the default)."""

from __future__ import annotations

import json
from typing import Any, get_args

import pytest
from configs import TINY_LLAMA
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from trainplan.engine.estimate import estimate
from trainplan.engine.largest_fit import SEARCHABLE
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.hf import spec_from_config
from trainplan.interfaces.cli.main import app as cli_app
from trainplan.interfaces.web.largest import MaxField
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import field_noun, scenario_from_mapping

EXTRAS = ("display", "hints", "max")


def largest(client: TestClient, body: dict[str, Any], field: str, **params: str) -> Any:
    return client.post("/api/estimate", params={"max": field, **params}, json=body)


def total_at(body: dict[str, Any], field: str, value: int, model: ModelSpec | None = None) -> float:
    fields = {key: item for key, item in body.items() if key != "model_config"}
    return estimate(scenario_from_mapping({**fields, field: value}), model=model).total_bytes


CASES: list[tuple[str, dict[str, Any]]] = [
    ("micro_batch", {}),
    ("seq_len", {}),
    ("micro_batch", {"model": "Llama-3.1-8B", "method": "qlora", "seq_len": 4096, "gpu": "RTX 4090"}),
    ("seq_len", {"model": "Qwen2.5-7B", "method": "full", "gpus": 8, "zero_stage": 3, "micro_batch": 2}),
]


@pytest.mark.parametrize(("field", "body"), CASES)
def test_the_answer_fits_and_one_more_does_not(client: TestClient, field: str, body: dict[str, Any]) -> None:
    response = largest(client, body, field, hints="false", headroom="0")
    assert response.status_code == 200, response.text
    data = response.json()
    value = data["max"]["value"]
    exact = {"field": field, "value": value, "exact": value, "headroom": 0.0, "multiple": 1, "limit": ""}
    assert data["max"] == exact and data["scenario"][field] == value
    capacity = find_gpu(data["scenario"]["gpu"]).memory_bytes
    assert data["memory"]["per_gpu"]["total_bytes"] == total_at(body, field, value) <= capacity
    assert value < SEARCHABLE[field] and total_at(body, field, value + 1) > capacity
    # the rest is exactly /api/estimate at that value
    at_value = client.post("/api/estimate", params={"hints": "false"}, json={**body, field: value}).json()
    # (with the sentence of the answer, the CLI's `--max` line, added to the display)
    assert data["display"].pop("largest").startswith(f"Largest {field_noun(field)} that fits on ")
    assert {key: item for key, item in data.items() if key != "max"} == at_value


@pytest.mark.parametrize(("field", "body"), CASES)
def test_by_default_memory_is_left_free_and_the_answer_rounded(
    client: TestClient, field: str, body: dict[str, Any]
) -> None:
    """5% of the GPU stays free: `exact` is the largest value within 95% of its memory, and
    `value` is that rounded down to the field's useful multiple (8 micro-batches from 16, 256
    tokens from 2,048)."""
    data = largest(client, body, field, hints="false").json()
    found = data["max"]
    usable = find_gpu(data["scenario"]["gpu"]).memory_bytes * 0.95
    exact, value, multiple = found["exact"], found["value"], found["multiple"]
    assert found["headroom"] == 0.05
    assert total_at(body, field, exact) <= usable < total_at(body, field, exact + 1)
    expected = (
        8 if field == "micro_batch" and exact >= 16 else 256 if field == "seq_len" and exact >= 2048 else None
    )
    if expected is not None:
        assert multiple == expected
    assert value == exact // multiple * multiple and value % multiple == 0
    assert data["scenario"][field] == value


def test_headroom_out_of_range_is_a_422(client: TestClient) -> None:
    for bad in ("-0.1", "0.9", "nan"):
        response = largest(client, {}, "micro_batch", headroom=bad)
        assert response.status_code == 422 and response.json()["field"] == "headroom"


@pytest.mark.parametrize("field", ["micro_batch", "seq_len"])
def test_equals_the_cli(client: TestClient, field: str) -> None:
    body = {"model": "Llama-3.1-8B", "method": "lora", "micro_batch": 3, "seq_len": 1024}
    data = largest(client, body, field).json()
    args = ["estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--micro-batch", "3"]
    result = CliRunner().invoke(cli_app, [*args, "--seq-len", "1024", "--max", field, "--json"])
    cli_text = CliRunner().invoke(cli_app, [*args, "--seq-len", "1024", "--max", field]).output
    assert result.exit_code == 0, result.output
    cli = json.loads(result.output)
    assert cli["max"] == data["max"]
    found = data["max"]
    assert cli_text.startswith(
        f"Largest {field_noun(field)} that fits on H100 SXM 80GB with 5% of its memory free: "
        f"{found['value']:,} ("
    )
    if found["value"] != found["exact"]:
        assert (
            f"; the limit is {found['exact']:,}, rounded down to a multiple of {found['multiple']}"
            in cli_text
        )
    assert {key: item for key, item in data.items() if key not in ("display", "hints")} == cli
    # the display and hints describe the answer, not the body's value
    assert f" --{field.replace('_', '-')} {data['max']['value']} " in data["display"]["cli"] + " "
    assert all(hint["change"].get(field) != 3 for hint in data["hints"])


def test_an_uploaded_config_is_searched_with_its_spec(client: TestClient) -> None:
    body = {"model": "acme/tiny", "method": "full", "gpu": "T4", "model_config": TINY_LLAMA}
    data = largest(client, body, "seq_len", hints="false", headroom="0").json()
    spec = spec_from_config(TINY_LLAMA, "acme/tiny", "uploaded config.json")
    value = data["max"]["value"]
    capacity = find_gpu("T4").memory_bytes
    assert data["model"]["name"] == "acme/tiny"
    assert total_at(body, "seq_len", value, spec) <= capacity < total_at(body, "seq_len", value + 1, spec)


def test_at_the_ceiling_the_answer_is_the_ceiling(client: TestClient) -> None:
    body = {"model": "acme/tiny", "method": "qlora", "gpu": "B200", "seq_len": 8, "model_config": TINY_LLAMA}
    data = largest(client, body, "micro_batch", hints="false", headroom="0").json()
    assert data["max"]["value"] == SEARCHABLE["micro_batch"] == 65536


def test_nothing_fits_is_a_422_on_max(client: TestClient) -> None:
    for field in ("micro_batch", "seq_len"):
        response = largest(client, {"model": "Llama-3.1-70B", "method": "full"}, field)
        assert response.status_code == 422
        data = response.json()
        assert data["field"] == "max" and data["suggestions"] == []
        assert data["message"].startswith(f"not even a {field_noun(field)} of 1 fits on H100 SXM 80GB (")
        assert "QLoRA" in data["message"] and "more GPUs" in data["message"]
        assert data["detail"] == f"max: {data['message']}"


@pytest.mark.parametrize("value", ["grad_accum", "", "MICRO_BATCH", "gpus"])
def test_unknown_max_is_a_422_on_max(client: TestClient, value: str) -> None:
    response = largest(client, {}, value)
    assert response.status_code == 422
    data = response.json()
    assert data["field"] == "max" and "micro_batch" in data["message"] and "seq_len" in data["message"]


def test_a_bad_scenario_still_names_its_field(client: TestClient) -> None:
    response = largest(client, {"gpu": "H1000"}, "micro_batch")
    assert response.status_code == 422 and response.json()["field"] == "gpu"


def test_searchable_fields_and_openapi(client: TestClient) -> None:
    assert set(get_args(MaxField)) == set(SEARCHABLE)
    operation = client.get("/openapi.json").json()["paths"]["/api/estimate"]["post"]
    (param,) = [item for item in operation["parameters"] if item["name"] == "max"]
    assert param["in"] == "query" and not param["required"]
    assert param["schema"]["anyOf"][0]["enum"] == ["micro_batch", "seq_len"]
    assert "`max`" in operation["responses"]["422"]["description"]
