"""The memory savers and recipes through the JSON API and the field metadata of the form."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from trainplan.engine.estimate import estimate


def test_savers_and_recipe_through_the_api(client: TestClient) -> None:
    body: dict[str, Any] = {
        "model": "Qwen2.5-0.5B",
        "recipe": "torchtune",
        "method": "full",
        "activation_checkpointing": "full:2",
        "activation_offload": True,
    }
    response = client.post("/api/estimate", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    direct = json.loads(json.dumps(estimate(body).to_dict()))
    assert data["memory"]["per_gpu"] == direct["memory"]["per_gpu"]
    assert data["scenario"]["optimizer_in_backward"] is True and data["scenario"]["loss"] == "chunked"
    assert data["assumptions"]["recipe"]["defaults"]["optimizer"] == "paged-adamw-8bit"
    assert data["memory"]["paged_bytes"] > 0
    assert any(w.startswith("paged: ") and "unified memory" in w for w in data["warnings"])


def test_bad_combinations_name_the_field(client: TestClient) -> None:
    for body, field in (
        ({"method": "full", "optimizer_in_backward": True, "grad_accum": 4}, "optimizer_in_backward"),
        ({"activation_checkpointing": "full:0"}, "activation_checkpointing"),
        ({"method": "lora", "kbit_upcast": True}, "kbit_upcast"),
        ({"lora": {"dropout": 2}}, "lora.dropout"),
    ):
        response = client.post("/api/estimate", json=body)
        assert response.status_code == 422 and response.json()["field"] == field, body


def test_savers_sit_in_the_batch_and_memory_group(client: TestClient) -> None:
    meta = client.get("/api/fields").json()
    batch = next(section for section in meta["sections"] if section["id"] == "batch")
    for name in (
        "activation_checkpointing",
        "activation_offload",
        "loss",
        "loss_chunks",
        "optimizer_in_backward",
    ):
        assert name in batch["fields"], name
    names = {field["name"] for field in meta["fields"]}
    assert {"lora.dropout", "lora.dtype", "kbit_upcast", "recipe", "compile"} <= names


def test_liger_kernels_are_suggested_where_they_save_memory(client: TestClient) -> None:
    body: dict[str, Any] = {
        "model": "Llama-3.1-8B",
        "method": "lora",
        "gpu": "RTX 4090",
        "seq_len": 8192,
        "micro_batch": 4,
        "activation_checkpointing": "none",
    }
    data = client.post("/api/estimate", json=body).json()
    hint = next(hint for hint in data["hints"] if hint["id"] == "kernels")
    assert hint["change"] == {"kernels": "liger"}
    direct = estimate({**body, "kernels": "liger"})
    assert hint["total_bytes"] == direct.total_bytes < data["memory"]["per_gpu"]["total_bytes"]


def test_a_pricing_hint_names_cents_under_100_usd() -> None:
    """A run under $100 is priced to the cent everywhere (phrasing.format_usd): the spot hint of
    a $1.75 run said "$1 instead of $2" beside a cost card of $1.75."""
    from trainplan.engine.estimate import estimate
    from trainplan.interfaces.text.hints import hints
    from trainplan.interfaces.text.phrasing import format_usd
    from trainplan.specs.scenario import scenario_from_mapping

    scenario = scenario_from_mapping({"model": "Llama-3.2-1B", "train_tokens": 1e8})
    base = estimate(scenario)
    assert base.cost is not None and base.cost.usd is not None and base.cost.usd < 100
    spot = next(hint for hint in hints(scenario, base) if hint.id == "spot")
    assert spot.usd is not None
    # the whole run's cost, as the cost card shows it
    assert base.cost.run_usd is not None
    assert spot.text.startswith(f"{format_usd(spot.usd)} instead of {format_usd(base.cost.run_usd)} (")
    assert format_usd(base.cost.run_usd).count(".") == 1  # cents shown
