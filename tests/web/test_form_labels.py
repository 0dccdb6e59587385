"""The page's words come from the field table: every field served by /api/fields has its label
(and OpenAPI its `title`), the page's script keeps no table of its own, and the CLI and the web
list the catalogs with one function each."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from trainplan.engine.plan_request import PLAN_OPTIONS
from trainplan.interfaces.cli.main import app as cli_app
from trainplan.interfaces.web.largest import MAX_FIELDS
from trainplan.specs.scenario import BUDGET_MODES, LORA_FIELDS, field_infos

STATIC = Path(__file__).resolve().parents[2] / "src" / "trainplan" / "interfaces" / "web" / "static"


def _script() -> str:
    """The page's own script: the entry module and the modules it imports (js/)."""
    files = [STATIC / "app.js", *sorted((STATIC / "js").glob("*.js"))]
    assert len(files) > 2
    return "\n".join(path.read_text() for path in files)


def _served(client: TestClient) -> dict[str, dict[str, Any]]:
    return {field["name"]: field for field in client.get("/api/fields").json()["fields"]}


def test_every_served_field_has_its_label_and_openapi_title(client: TestClient) -> None:
    served = _served(client)
    for name, field in served.items():
        part = name.split(".", 1)[1] if name.startswith("lora.") else None
        info = LORA_FIELDS[part] if part else field_infos()[name]
        assert field["label"] == info.label and field["label"].strip(), name
        assert field["short_label"] == info.short_label and field["placeholder"] == info.placeholder
        assert field["budget"] == info.budget and field["interfaces"] == list(info.interfaces)
    assert served["method"]["choice_labels"] == {"full": "Full", "lora": "LoRA", "qlora": "QLoRA"}
    assert served["model"]["form_help"].startswith("Search the catalog")
    assert served["micro_batch"]["form_help"] == served["micro_batch"]["help"]
    operation = client.get("/openapi.json").json()["paths"]["/api/estimate"]["post"]
    properties = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    for name, field in served.items():
        if name.startswith("lora."):
            assert properties["lora"]["properties"][name[5:]]["title"] == field["label"]
        else:
            assert properties[name]["title"] == field["label"], name
    assert properties["lora"]["title"] == field_infos()["lora"].label


def test_budget_modes_and_searchable_fields_are_served(client: TestClient) -> None:
    meta = client.get("/api/fields").json()
    assert meta["budget_modes"] == [{"id": mode, "label": text} for mode, text in BUDGET_MODES.items()]
    assert meta["max_fields"] == list(MAX_FIELDS) == ["micro_batch", "seq_len"]
    served = _served(client)
    assert [served[name]["short_label"] for name in MAX_FIELDS] == ["micro-batch", "sequence length"]


def test_the_script_keeps_no_field_table_of_its_own() -> None:
    script = _script()
    for table in (
        "LABELS",
        "CHOICE_LABELS",
        "PLACEHOLDERS",
        "HELP",
        "BUDGET_FIELDS",
        "LARGEST",
        "PLAN_SETTINGS",
    ):
        assert not re.search(rf"\bconst {table}\b", script), table
    assert "METHOD_NAMES" not in script and "function label(" not in script
    # no field's words are written in the script: they come from /api/fields
    for name, info in [*field_infos().items(), *((f"lora.{p}", i) for p, i in LORA_FIELDS.items())]:
        words = [info.label, info.placeholder, *(text for _, text in info.choice_labels)]
        if info.short_label and not re.fullmatch(r"[a-z]+", info.short_label):
            words.append(info.short_label)  # a one-word short label is also a name ("method")
        for text in filter(None, words):
            assert f'"{text}"' not in script, (name, text)
    for mode, text in BUDGET_MODES.items():
        assert f'"{text}"' not in script, mode


def test_the_planner_form_holds_no_words_of_its_own() -> None:
    """The planner's controls are drawn from /api/fields `plan_options` (test_page.py checks them
    in a browser): the page holds none of them, the script none of their words."""
    page = (STATIC / "index.html").read_text()
    assert "data-plan-field" not in page and '<label for="plan-' not in page
    script = _script()
    for option in PLAN_OPTIONS.values():
        assert f">{option.label}<" not in page and f'"{option.label}"' not in script, option.label
        for text in filter(
            None, (option.form_help, option.placeholder, *(t for _, t in option.choice_labels))
        ):
            assert f">{text}<" not in page and f'"{text}"' not in page and f'"{text}"' not in script, text
    objective = PLAN_OPTIONS["objective"]
    assert [value for value, _ in objective.choice_labels] == list(objective.choices)
    assert "fastest first" not in script  # the plans' heading comes with the answer


def test_the_plans_heading_is_one_phrase_for_the_cli_and_the_page(client: TestClient) -> None:
    from trainplan.interfaces.text.phrasing import plans_heading

    assert plans_heading(5, "cost") == "5 best plans, cheapest first"
    assert plans_heading(1, "gpus") == "1 best plan, fewest GPUs first"
    assert plans_heading(0, "time") == "No plan meets the constraints"
    body = {"model": "Qwen2.5-0.5B", "plan": {"max_gpus": 2, "objective": "cost", "gpu_types": ["L4"]}}
    data = client.post("/api/plan", json=body).json()
    assert data["display"]["heading"] == plans_heading(len(data["plans"]), "cost")
    served = {option["name"]: option for option in client.get("/api/fields").json()["plan_options"]}
    assert served["objective"]["choice_labels"]["pareto"] == "Cost vs time (Pareto front)"
    assert served["budget_usd"]["placeholder"] == "no limit"


def _cli_json(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(cli_app, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    listed: list[dict[str, Any]] = json.loads(result.output)
    return listed


def test_the_cli_and_the_web_list_the_catalogs_alike(client: TestClient) -> None:
    """One listing function per catalog (listings.py): the CLI's `--json` records and the
    API's are the same records, keys included."""
    for command, path, key in (("models", "/api/models", "name"), ("gpus", "/api/gpus", "name"),
                               ("regions", "/api/regions", "id")):  # fmt: skip
        cli = {row[key]: row for row in _cli_json(command, "")}
        web = {row[key]: row for row in client.get(path).json()}
        assert cli == web, command
    gpu = next(row for row in client.get("/api/gpus").json() if row["name"] == "H100 SXM 80GB")
    assert gpu["class"] == "datacenter" and gpu["has_price"] is True and gpu["source"] and gpu["as_of"]
    assert gpu["memory_bytes"] == 81559 * 1024**2  # the 81,559 MiB nvidia-smi reports (gpus.yaml)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def test_no_help_text_only_repeats_its_label(client: TestClient) -> None:
    """Each control's help says something its label does not: at least three words beyond the
    label's ("Optimizer: optimizer", "Pricing: pricing plan", "Training precision: training
    precision recipe" said nothing), on the form and in the planner."""
    served = _served(client)
    helps = [(field["label"], field["form_help"]) for field in served.values()]
    helps += [(option.label, option.form_help or option.help) for option in PLAN_OPTIONS.values()]
    for label, help_text in helps:
        label_words = set(_words(label))
        beyond = [word for word in _words(help_text) if word not in label_words]
        assert len(beyond) >= 3, (label, help_text)
