"""The form and OpenAPI read the one option table: LoRA parts and planner options."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from trainplan.engine.plan_request import PLAN_OPTIONS, WEB_CAPS
from trainplan.specs.scenario import LORA_FIELDS


def _body_schema(client: TestClient, path: str) -> Any:
    operation = client.get("/openapi.json").json()["paths"][path]["post"]
    return operation["requestBody"]["content"]["application/json"]["schema"]


def test_lora_parts_carry_the_engine_ranges(client: TestClient) -> None:
    """lora.alpha's 0.001 .. 1e6 was missing from OpenAPI and the form; every part now carries
    the engine's own range and help."""
    fields = {field["name"]: field for field in client.get("/api/fields").json()["fields"]}
    body = _body_schema(client, "/api/estimate")
    lora = body["properties"]["lora"]["properties"]
    for part, info in LORA_FIELDS.items():
        entry = fields[f"lora.{part}"]
        assert (entry["minimum"], entry["maximum"], entry["help"]) == (info.minimum, info.maximum, info.help)
        if info.minimum is not None:
            assert lora[part]["minimum"] == info.minimum and lora[part]["maximum"] == info.maximum
    assert lora["alpha"]["minimum"] == 0.001 and lora["alpha"]["maximum"] == 1e6


def test_plan_options_come_from_the_table(client: TestClient) -> None:
    listed = client.get("/api/fields").json()["plan_options"]
    assert [option["name"] for option in listed] == list(PLAN_OPTIONS)
    for option in listed:
        declared = PLAN_OPTIONS[option["name"]]
        assert option["label"] == declared.label and option["default"] == declared.default
        assert option["maximum"] == WEB_CAPS.get(option["name"], declared.maximum)
    plan_schema = _body_schema(client, "/api/plan")["properties"]["plan"]["properties"]
    assert plan_schema["max_gpus"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 4096}
    assert plan_schema["top_k"]["default"] == 5 and plan_schema["objective"]["default"] == "cost"
    # the server refuses past its cap with the validator's own message
    response = client.post("/api/plan", json={"model": "Qwen2.5-0.5B", "plan": {"max_gpus": 5000}})
    assert response.status_code == 422, response.text
    error = response.json()
    assert error["field"] == "plan.max_gpus" and error["message"] == "must be between 1 and 4,096 (got 5000)"
