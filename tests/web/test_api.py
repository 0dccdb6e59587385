"""The JSON API: the same numbers as estimate(), field-named 4xx, no paths, size limit."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from configs import LLAMA_8B, TINY_LLAMA
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from trainplan.engine.estimate import estimate
from trainplan.inputs import resolve
from trainplan.inputs.catalogs.cost_inputs import regions
from trainplan.inputs.catalogs.gpus import gpu_catalog
from trainplan.inputs.catalogs.models import model_records
from trainplan.inputs.hf import spec_from_config
from trainplan.interfaces.cli.main import app as cli_app
from trainplan.interfaces.web import inputs
from trainplan.interfaces.web.inputs import MAX_BODY_BYTES
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import SCENARIO_FIELDS, scenario_from_mapping

EXTRAS = ("display", "hints")


def engine_json(body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """What the CLI's --json prints for `body`, through a JSON round trip."""
    result: dict[str, Any] = json.loads(json.dumps(estimate(body, **kwargs).to_dict()))
    return result


def post(client: TestClient, body: Any, **kwargs: Any) -> Any:
    return client.post("/api/estimate", json=body, **kwargs)


SCENARIOS: list[dict[str, Any]] = [
    {},
    {"model": "Llama-3.1-8B", "method": "qlora", "micro_batch": 2, "seq_len": 4096},
    {"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3},
    {"model": "Qwen3-30B-A3B", "method": "lora", "lora": {"rank": 64, "targets": "all-linear"}},
    {"model": "Mixtral-8x7B-v0.1", "method": "full", "gpus": 16, "tensor_parallel": 2, "zero_stage": 1},
    {"model": "GPT-2", "method": "full", "precision": "fp32", "optimizer": "sgd", "gpu": "RTX 4090"},
    {"model": "Gemma-3-4B", "pricing": "spot", "region": "DE", "dataset_tokens": 5e8, "epochs": 3},
    {"model": "T5-Base", "method": "full", "usd_per_gpu_hour": 1.25, "steps": 1000},
]


@pytest.mark.parametrize("body", SCENARIOS)
def test_estimate_equals_engine(client: TestClient, body: dict[str, Any]) -> None:
    response = post(client, body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert {key: value for key, value in data.items() if key not in EXTRAS} == engine_json(body)


def test_string_values_are_coerced_as_in_a_scenario_file(client: TestClient) -> None:
    body = {"micro_batch": "2", "sequence_parallel": "false", "lora": {"rank": "32"}, "train_tokens": "2e9"}
    data = post(client, body).json()
    assert data["batch"]["micro_batch"] == 2
    assert data["scenario"]["lora"]["rank"] == 32
    assert data["memory"] == engine_json(body)["memory"]


def test_display_strings_come_from_the_renderers(client: TestClient) -> None:
    data = post(client, {"model": "Llama-3.1-8B", "micro_batch": 1, "grad_accum": 16}).json()
    assert data["display"]["batch_line"] == (
        "Global batch 32.8K tok = 1 micro x 16 accum x 1 replicas x 2,048 seq"
    )
    assert data["display"]["total"] == f"{data['memory']['per_gpu']['total_bytes'] / 2**30:,.2f} GiB"


def test_hints_are_true_numbers(client: TestClient) -> None:
    for body in ({"model": "Llama-3.1-70B", "method": "full"}, {"model": "Llama-3.1-8B"}):
        data = post(client, body).json()
        assert data["hints"], body
        for hint in data["hints"]:
            changed = {**data["scenario"], **hint["change"]}
            direct = estimate(scenario_from_mapping(changed))
            assert hint["total_bytes"] == direct.total_bytes, hint["id"]
            if hint["usd"] is not None:
                assert direct.cost is not None and hint["usd"] == direct.cost.run_usd


def test_hints_say_what_makes_a_70b_full_fine_tune_fit(client: TestClient) -> None:
    data = post(client, {"model": "Llama-3.1-70B", "method": "full", "gpu": "H100-SXM"}).json()
    by_id = {hint["id"]: hint for hint in data["hints"]}
    assert by_id["qlora"]["fits"] and by_id["qlora"]["change"]["method"] == "qlora"
    assert by_id["more_gpus"]["fits"] and by_id["more_gpus"]["change"]["zero_stage"] == 3
    assert by_id["qlora"]["total_bytes"] < data["memory"]["per_gpu"]["total_bytes"]


def test_hints_can_be_skipped(client: TestClient) -> None:
    assert post(client, {}, params={"hints": "false"}).json()["hints"] == []


def test_cli_command_reproduces_the_result(client: TestClient) -> None:
    body = {
        "model": "Qwen2.5-7B",
        "method": "qlora",
        "lora": {"rank": 32, "targets": "all-linear", "dora": True},
        "micro_batch": 2,
        "sequence_parallel": False,
        "gpu": "RTX 4090",
        "train_tokens": 3e8,
    }
    data = post(client, body).json()
    command = data["display"]["cli"]
    assert command.startswith("trainplan estimate --model Qwen2.5-7B")
    args = [*shlex.split(command)[1:], "--json"]
    result = CliRunner().invoke(cli_app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["memory"] == data["memory"]


def test_catalog_endpoints(client: TestClient) -> None:
    models = client.get("/api/models").json()
    assert [m["name"] for m in models] == [r.name for r in model_records()]
    gpus = client.get("/api/gpus").json()
    assert [(g["name"], g["class"], g["memory_bytes"]) for g in gpus] == [
        (g.name, g.gpu_class, g.memory_bytes) for g in gpu_catalog()
    ]
    assert [r["id"] for r in client.get("/api/regions").json()] == list(regions())


def test_fields_cover_every_scenario_field(client: TestClient) -> None:
    meta = client.get("/api/fields").json()
    names = {field["name"] for field in meta["fields"]}
    assert {name for name in SCENARIO_FIELDS if name != "lora"} <= names
    assert {"lora.rank", "lora.alpha", "lora.targets", "lora.dora"} <= names
    placed = [name for section in meta["sections"] for name in section["fields"]]
    assert sorted(placed) == sorted(names), "every field sits in exactly one form section"
    micro = next(field for field in meta["fields"] if field["name"] == "micro_batch")
    assert micro["flag"] == "--micro-batch" and micro["kind"] == "int" and micro["minimum"] == 1
    method = next(field for field in meta["fields"] if field["name"] == "method")
    assert method["choices"] == ["full", "lora", "qlora"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"micro_batch": 0}, "micro_batch"),
        ({"micro_batch": "many"}, "micro_batch"),
        ({"method": "dpo"}, "method"),
        ({"lora": {"rank": -1}}, "lora.rank"),
        ({"lora": {"colour": 1}}, "lora.colour"),
        ({"lora": 3}, "lora"),
        ({"gpus": 3, "tensor_parallel": 2}, "gpus"),
        ({"gpu": "RTX 9999"}, "gpu"),
        ({"region": "atlantis"}, "region"),
        ({"model": "Lama-3.1-8B"}, "model"),
        ({"model": ""}, "model"),
        ({"model": 7}, "model"),
        ({"colour": "red"}, "colour"),
        ({"steps": 10, "train_tokens": 1e9}, "train_tokens"),
        ({"seq_len": 1e300}, "seq_len"),
        ({"epochs": float("nan")}, "epochs"),
        ({"model_config": [1, 2]}, "model_config"),
        ({"model_config": {"model_type": "llama"}}, "model_config.hidden_size"),
        ({"load_source": "tape"}, "load_source"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field(client: TestClient, body: dict[str, Any], field: str) -> None:
    response = client.post(
        "/api/estimate", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    data = response.json()
    assert data["field"] == field
    assert data["message"] and data["detail"].startswith(f"{field}: ")


def test_unknown_model_suggests_names(client: TestClient) -> None:
    data = post(client, {"model": "Lama-3.1-8B"}).json()
    assert "Llama-3.1-8B" in data["suggestions"]


@pytest.mark.parametrize(
    "name",
    [
        "/etc/passwd",
        "../../etc/passwd",
        "examples/../pyproject.toml",
        "~/config.json",
        "./config.json",
        "C:\\models\\config.json",
        "a/b/c",
        "src/trainplan/data/../../../README.md",
        ".hidden/config",
        "file:///etc/passwd",
    ],
)
def test_path_like_model_names_are_rejected(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    def forbidden(*args: Any) -> Any:
        raise AssertionError("the server must not resolve a client-named path or call the Hub")

    monkeypatch.setattr(resolve, "resolve_model", forbidden)
    monkeypatch.setattr(resolve, "fetch_hub_config", forbidden)
    monkeypatch.setattr(resolve, "read_config_file", forbidden)
    response = post(client, {"model": name})
    assert response.status_code == 422
    assert response.json()["field"] == "model"


def test_an_existing_relative_path_is_not_read(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """`examples/default.yaml` exists here and has the Hub-id shape: it goes to the Hub, not the disk."""
    asked: list[str] = []

    def offline(hub_id: str) -> dict[str, Any]:
        asked.append(hub_id)
        raise InputError("model", "offline")

    monkeypatch.setattr(resolve, "fetch_hub_config", offline)
    monkeypatch.setattr(resolve, "read_config_file", lambda path: pytest.fail(f"read {path}"))
    response = post(client, {"model": "examples/default.yaml"})
    assert response.status_code == 422 and asked == ["examples/default.yaml"]


def test_hub_id_uses_the_fetched_config(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs.hub_spec.cache_clear()
    monkeypatch.setattr(resolve, "fetch_hub_config", lambda hub_id: dict(TINY_LLAMA))
    data = post(client, {"model": "someone/tiny-llama", "method": "full"}).json()
    assert data["model"] == {"name": "someone/tiny-llama", "source": "hub:someone/tiny-llama"}
    expected = engine_json(
        {"model": "someone/tiny-llama", "method": "full"},
        model=spec_from_config(TINY_LLAMA, "someone/tiny-llama", "hub:someone/tiny-llama"),
    )
    assert data["memory"] == expected["memory"]
    inputs.hub_spec.cache_clear()


def test_hub_offline_is_a_clear_4xx(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """With huggingface_hub missing, or offline, the engine's own error comes back as a 422."""
    inputs.hub_spec.cache_clear()
    try:
        import huggingface_hub.constants as hub_constants

        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    except ImportError:
        pass
    response = post(client, {"model": "nobody-here/no-such-model-xyz"})
    assert response.status_code == 422
    data = response.json()
    assert data["field"] == "model"
    assert "huggingface_hub" in data["message"] or "Hub" in data["message"]


def test_uploaded_config_equals_estimate_with_its_spec(client: TestClient) -> None:
    body = {"model": "my-llama", "method": "qlora", "model_config": LLAMA_8B}
    data = post(client, body).json()
    spec = spec_from_config(LLAMA_8B, "my-llama", "uploaded config.json")
    expected = engine_json({"model": "my-llama", "method": "qlora"}, model=spec)
    assert {key: value for key, value in data.items() if key not in EXTRAS} == expected
    assert data["display"]["cli"].startswith("trainplan estimate --model config.json")
    # the same numbers as the catalog model with this config
    catalog_data = post(client, {"model": "Llama-3.1-8B", "method": "qlora"}).json()
    assert data["memory"]["per_gpu"]["total_bytes"] == catalog_data["memory"]["per_gpu"]["total_bytes"]


def test_uploaded_config_without_a_name(client: TestClient) -> None:
    data = post(client, {"model_config": {**TINY_LLAMA, "_name_or_path": "org/tiny"}}).json()
    assert data["model"]["name"] == "org/tiny"


def test_body_size_limit(client: TestClient) -> None:
    big = {"model": "Llama-3.1-8B", "model_config": {"padding": "x" * MAX_BODY_BYTES}}
    response = post(client, big)
    assert response.status_code == 413
    assert response.json()["field"] == "body"


def test_body_size_limit_without_content_length(client: TestClient) -> None:
    def chunks() -> Any:
        for _ in range(64):
            yield b" " * 8192

    response = client.post("/api/estimate", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413


@pytest.mark.parametrize(
    ("raw", "status"),
    [(b"{not json", 400), (b"[1, 2]", 400), (b'"text"', 400), (b"\xff\xfe", 400), (b"[" * 50000, 400)],
)
def test_malformed_bodies(client: TestClient, raw: bytes, status: int) -> None:
    response = client.post("/api/estimate", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert response.json()["field"] == "body"


def test_empty_body_is_the_default_scenario(client: TestClient) -> None:
    response = client.post("/api/estimate")
    assert response.status_code == 200
    assert response.json()["memory"] == engine_json({})["memory"]


def test_bad_query_parameter(client: TestClient) -> None:
    response = post(client, {}, params={"hints": "maybe"})
    assert response.status_code == 422 and response.json()["field"] == "hints"


def test_openapi_and_docs_page_are_local(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/api/estimate", "/api/models", "/api/gpus", "/api/regions", "/api/fields"} <= set(spec["paths"])
    body = spec["paths"]["/api/estimate"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert "micro_batch" in body["properties"] and "model_config" in body["properties"]
    page = client.get("/docs").text
    assert "/static/vendor/swagger-ui-bundle.js" in page
    assert "cdn." not in page and "https://" not in page.replace("https://fastapi", "")


def test_page_and_assets_are_served_without_a_cdn(client: TestClient) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    html = response.text
    assert "http://" not in html and "https://" not in html
    for asset in (
        "/static/app.js",
        "/static/app.css",
        "/static/favicon.svg",
        "/static/vendor/chart.umd.min.js",
    ):
        assert client.get(asset).status_code == 200, f"{asset} (run `make assets`)"


def test_server_never_returns_500_on_odd_content(client: TestClient) -> None:
    for body in ({"model_config": {"hidden_size": "big"}}, {"model_config": {"model_type": 5}}):
        response = post(client, body)
        assert 400 <= response.status_code < 500, response.text


def test_prices_endpoint_is_the_cli_json(client: TestClient) -> None:
    response = client.get("/api/prices", params={"gpu": "h100", "today": "2026-12-01"})
    assert response.status_code == 200, response.text
    cli = CliRunner().invoke(cli_app, ["prices", "H100 SXM 80GB", "--today", "2026-12-01", "--json"])
    assert response.json() == json.loads(cli.output)
    price = response.json()["prices"][0]
    assert price["gpu"] == "H100 SXM 80GB" and price["quotes_in_median"] == len(
        [q for q in price["quotes"] if q["in_median"]]
    )
    everything = client.get("/api/prices", params={"today": "2026-12-01"}).json()
    gpus = client.get("/api/gpus").json()
    assert {row["gpu"] for row in everything["prices"]} == {g["name"] for g in gpus if g["has_price"]}
    assert {row["gpu"] for row in everything["no_price"]} == {g["name"] for g in gpus if not g["has_price"]}


@pytest.mark.parametrize(("params", "field"), [({"gpu": "H900"}, "gpu"), ({"today": "yesterday"}, "today")])
def test_prices_endpoint_names_a_bad_parameter(
    client: TestClient, params: dict[str, str], field: str
) -> None:
    response = client.get("/api/prices", params=params)
    assert response.status_code == 422 and response.json()["field"] == field


def test_sample_fields_through_the_api(client: TestClient) -> None:
    response = post(client, {"model": "FLUX.1-dev", "resolution": 1000})
    assert response.status_code == 422 and response.json()["field"] == "resolution"
    response = post(client, {"resolution": 1024})  # the default model is a language model
    assert response.status_code == 422 and response.json()["field"] == "resolution"
    response = post(client, {"mask_ratio": 1})
    assert response.status_code == 422 and "strictly between 0 and 1" in response.json()["message"]
    body = client.get("/openapi.json").json()["paths"]["/api/estimate"]["post"]["requestBody"]
    properties = body["content"]["application/json"]["schema"]["properties"]
    ratio = properties["mask_ratio"]["anyOf"][0]
    assert (ratio["exclusiveMinimum"], ratio["exclusiveMaximum"]) == (0.0, 1.0)
    assert {"type": "integer"} in properties["resolution"]["anyOf"][0]["anyOf"]
    assert properties["ema"]["anyOf"][0]["enum"] == ["none", "fp32", "bf16"]


@pytest.mark.parametrize(
    "body",
    [
        # torchtune's LoRA recipe fills adamw-fused, lora.dtype compute and chunked loss: a value
        # set back to trainplan's default must still be stated, or the recipe would fill it
        {"model": "Llama-3.1-8B", "recipe": "torchtune", "method": "lora", "optimizer": "adamw",
         "loss": "standard", "lora": {"dtype": "fp32"}},
        {"model": "Llama-3.1-8B", "recipe": "axolotl", "method": "full", "optimizer": "adamw",
         "activation_checkpointing": "none"},
    ],
)  # fmt: skip
def test_a_recipe_command_and_link_state_what_the_recipe_would_fill(
    client: TestClient, body: dict[str, Any]
) -> None:
    data = post(client, body).json()
    args = shlex.split(data["display"]["cli"])[1:]
    for name in body:
        if name not in ("model", "lora", "method"):  # method lora is the default either way
            assert f"--{name.replace('_', '-')}" in args, (name, args)
    result = CliRunner().invoke(cli_app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    ran = json.loads(result.output)
    assert ran["memory"]["per_gpu"]["total_bytes"] == data["memory"]["per_gpu"]["total_bytes"]
    assert ran["scenario"] == data["scenario"]


def test_the_largest_sequence_stops_at_the_context_window_unless_asked(client: TestClient) -> None:
    body = {"model": "Llama-2-7B", "method": "qlora"}
    capped = client.post("/api/estimate", params={"max": "seq_len"}, json=body).json()
    assert capped["max"]["value"] == 4096 and capped["max"]["limit"] == "context window"
    assert "context window" in capped["display"]["largest"]
    past = client.post("/api/estimate", params={"max": "seq_len", "past_context": "true"}, json=body).json()
    assert past["max"]["value"] > 4096 and past["max"]["limit"] == ""
    assert any("context window" in note for note in past["warnings"])


def test_the_server_reads_no_gpu_file_but_takes_a_gpu_memory(client: TestClient) -> None:
    refused = client.post("/api/estimate", json={"model": "Llama-3.1-8B", "gpu_file": "/etc/hostname"})
    assert refused.status_code == 422 and refused.json()["field"] == "gpu_file"
    assert "reads no paths" in refused.json()["message"]
    small = client.post("/api/estimate", json={"model": "Llama-3.1-8B", "gpu_memory_gib": 16})
    assert small.status_code == 200
    data = small.json()
    row = next(row for row in data["fit"] if row["gpu"] == data["gpu"])
    assert row["memory_bytes"] == 16 * 2**30 and not row["fits"]
    assert (
        data["display"]["fit_summary"].startswith("Fits ") and "listed GPUs" in data["display"]["fit_summary"]
    )
    # the hint to a bigger GPU takes it as it is, without the memory given for this one
    bigger = next(hint for hint in data["hints"] if hint["id"] == "gpu")
    assert bigger["change"]["gpu_memory_gib"] is None


def test_the_cli_shows_the_pages_hints(client: TestClient) -> None:
    """`trainplan estimate --hints` gives the hints the page gets for the same scenario: the same
    ids, changes and figures (one policy, interfaces/text/hints.py), in its JSON and as lines."""
    from trainplan.interfaces.cli.main import app

    page = post(client, {"model": "Llama-3.1-70B", "method": "full", "gpu": "H100-SXM"}).json()["hints"]
    flags = ["estimate", "--model", "Llama-3.1-70B", "--method", "full", "--gpu", "H100-SXM", "--hints"]
    done = CliRunner().invoke(app, [*flags, "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["hints"] == page
    text = CliRunner().invoke(app, flags, catch_exceptions=False, env={"COLUMNS": "400"}).output
    assert "Worth knowing" in text
    for hint in page:
        assert f"- {hint['title']} (" in text
    # without the flag the JSON contract is unchanged: no hints key
    plain = CliRunner().invoke(app, [*flags[:-1], "--json"], catch_exceptions=False)
    assert "hints" not in json.loads(plain.output)


@pytest.mark.parametrize("field", ["critic_model", "reward_model"])
def test_the_server_takes_ppos_models_by_catalog_name_only(client: TestClient, field: str) -> None:
    body = {"model": "Qwen2.5-1.5B", "stage": "ppo", "micro_batch": 2, "grad_accum": 1, "seq_len": 512}
    refused = client.post("/api/estimate", json={**body, field: "/etc/hostname"})
    assert refused.status_code == 422 and refused.json()["field"] == field
    assert "reads no paths" in refused.json()["message"]
    named = client.post("/api/estimate", json={**body, field: "Qwen2.5-0.5B"})
    assert named.status_code == 200
    assert named.json()["assumptions"]["value_model" if field == "critic_model" else field] == (
        "Qwen2.5-0.5B, one-score head"
    )
