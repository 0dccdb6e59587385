"""The CLI: JSON contract, scenario files, flag overrides, errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LLAMA_8B
from typer.testing import CliRunner

from trainplan.inputs.catalogs.cost_inputs import discounts, rates
from trainplan.interfaces.cli.main import app


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_8B))
    return folder


def test_json_contract(config_file: Path) -> None:
    result = invoke("estimate", "--model", str(config_file), "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["model"]["name"] == "my-llama"
    assert data["params"]["total"] == 8_030_261_248
    assert data["params"]["trainable"] == 6_815_744
    assert 0 < data["params"]["trainable_fraction"] < 0.001
    per_gpu = data["memory"]["per_gpu"]
    for key in ("weights", "gradients", "optimizer", "activations", "logits", "overhead"):
        assert per_gpu[f"{key}_bytes"] >= 0
        assert per_gpu["kinds"][key] in ("exact", "estimate")
    terms = sum(v for k, v in per_gpu.items() if k.endswith("_bytes") and k != "total_bytes")
    assert per_gpu["total_bytes"] == pytest.approx(terms)
    assert {"gpu", "memory_bytes", "free_bytes", "fits"} <= set(data["fit"][0])
    assert data["batch"]["global_tokens"] == 1 * 16 * 1 * 2048


def test_scenario_file_and_flag_override(config_file: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"model: {config_file}\nmethod: lora\nlora: {{rank: 8, targets: qv}}\nmicro_batch: 2\n"
    )
    data = json.loads(invoke("estimate", "--scenario", str(scenario), "--json").output)
    assert data["scenario"]["micro_batch"] == 2 and data["params"]["trainable"] == 6_815_744 // 2
    data = json.loads(
        invoke(
            "estimate",
            "--scenario",
            str(scenario),
            "--micro-batch",
            "4",
            "--lora-rank",
            "32",
            "--json",
        ).output
    )
    assert data["scenario"]["micro_batch"] == 4 and data["params"]["trainable"] == 6_815_744 * 2


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--micro-batch", "0"], "micro_batch (--micro-batch): must be between 1 and 65,536 (got 0)"),
        (["--zero-stage", "9"], "zero_stage (--zero-stage): must be between 0 and 3 (got 9)"),
        (["--precision", "int3"], "precision (--precision): 'int3' is not one of"),
        (["--gpu", "H1000"], "unknown gpu 'H1000'. Did you mean"),
        (["--model", "Llama-3.1-8X"], "unknown model 'Llama-3.1-8X'. Did you mean"),
        (["--lora-rank", "-1"], "lora.rank (--lora-rank): must be between 1 and 65,536"),
        (["--scenario", "/nonexistent.yaml"], "scenario (--scenario): cannot read"),
    ],
)
def test_errors_are_clear_and_exit_2(config_file: Path, args: list[str], text: str) -> None:
    model = [] if "--model" in args else ["--model", str(config_file)]
    result = CliRunner().invoke(app, ["estimate", *model, *args])
    assert result.exit_code == 2
    assert text in result.output
    assert "Traceback" not in result.output


def test_human_output(config_file: Path) -> None:
    result = invoke("estimate", "--model", str(config_file))
    assert "Global batch 32.8K tok = 1 micro x 16 accum x 1 replicas x 2,048 seq" in result.output
    assert "Trainable 6.82M of 8.03B params (0.08% of base)" in result.output
    assert "Can you train it?" in result.output


def test_regions_list() -> None:
    regions = json.loads(invoke("regions", "eu-", "--json").output)
    assert regions and all(r["gco2e_per_kwh"] > 0 and r["source"] for r in regions)
    assert any(r["id"] == "eu-north-1" for r in regions)


def test_lists() -> None:
    models = json.loads(invoke("models", "qwen", "--json").output)
    assert models and all("qwen" in m["name"].lower() or "qwen" in m["family"].lower() for m in models)
    gpus = json.loads(invoke("gpus", "h100", "--json").output)
    assert any(g["name"].startswith("H100 SXM") for g in gpus)


def test_json_runtime_contract(config_file: Path) -> None:
    data = json.loads(invoke("estimate", "--model", str(config_file), "--mfu", "0.4", "--json").output)
    time = data["time"]
    for key in ("flops_per_token", "tokens_per_s", "step_s", "total_s", "gpu_hours", "mfu"):
        assert time[key] > 0
    assert data["cost"]["usd"] == pytest.approx(time["gpu_hours"] * data["cost"]["usd_per_gpu_hour"])
    assert data["cost"]["pricing"] == "on-demand" and data["cost"]["usd_per_million_tokens"] > 0
    assert data["energy"]["kwh"] > 0 and data["energy"]["co2e_kg"] > 0 and data["energy"]["region"]
    assert data["load"]["seconds"] > 0 and data["load"]["source"] == "local-nvme"
    assumptions = data["assumptions"]
    assert assumptions["efficiency"] == 0.4 and assumptions["pue"] == 1.2
    assert assumptions["usd_per_gpu_hour"] == rates()["H100 SXM 80GB"].usd_per_gpu_hour


def test_human_runtime_summary(config_file: Path) -> None:
    output = invoke("estimate", "--model", str(config_file), "--pricing", "spot", "--gpus", "2").output
    assert "Time on 2x H100 SXM 80GB: " in output  # the GPUs the figures assume
    discount = discounts()["spot"].fraction_off
    assert "Cost on 2x H100 SXM 80GB: $" in output and "spot: $" in output
    assert f"on-demand less {discount:.0%}," in output
    on_demand = invoke("estimate", "--model", str(config_file)).output
    assert "on-demand at $" in on_demand and "less 0%" not in on_demand and "(-0%)" not in on_demand
    assert "Energy: " in output and "Load weights: " in output


def test_plan_table_fits_80_columns_without_cutting_figures() -> None:
    """On a narrow terminal the plan's memory, time and cost are printed whole."""
    from rich.console import Console

    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import request_from_options
    from trainplan.interfaces.cli.console import print_plan
    from trainplan.specs.scenario import scenario_from_mapping

    scenario = scenario_from_mapping({"model": "Qwen2.5-0.5B"})
    result = plan(request_from_options(scenario, {"max_gpus": "8", "objective": "cost"}))
    console = Console(width=80, record=True)
    print_plan(result, console)
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    best = result.plans[0]
    from trainplan.interfaces.text.phrasing import format_usd

    assert format_usd(best.usd) in text and f"{best.estimate.total_bytes / 2**30:,.1f}" in text


def test_wide_plan_table_shows_the_three_memory_figures() -> None:
    """On a wide terminal each plan's row holds the device figure, then the allocator's reserved
    and allocated figures; on 80 columns the last two are left out."""
    from rich.console import Console

    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import request_from_options
    from trainplan.interfaces.cli.console import print_plan
    from trainplan.specs.scenario import scenario_from_mapping

    result = plan(request_from_options(scenario_from_mapping({"model": "Qwen2.5-0.5B"}), {"max_gpus": "8"}))
    for width, shown in ((120, True), (80, False)):
        console = Console(width=width, record=True)
        print_plan(result, console)
        text = console.export_text()
        best = result.plans[0].estimate
        figures = f"{best.reserved_peak_bytes / 2**30:,.1f}/{best.allocated_peak_bytes / 2**30:,.1f}"
        row = next(line for line in text.splitlines() if line.strip().startswith("1 "))
        assert (figures in row) is shown and f"{best.total_bytes / 2**30:,.1f}" in row
        assert ("res/alloc" in text) is shown


def test_gpu_short_names_are_unambiguous() -> None:
    from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog

    for gpu in gpu_catalog():
        assert find_gpu(gpu.short_name).name == gpu.name
        assert len(gpu.short_name) <= len(gpu.name)
    assert find_gpu("H100 SXM 80GB").short_name == "H100"


def test_listings_say_when_nothing_matches() -> None:
    models = invoke("models", "lama3").output
    assert models.startswith("no model matches 'lama3'; did you mean: Llama-")
    assert "┃" not in models  # no empty table
    assert (
        invoke("models", "zzzz").output.strip()
        == "no model matches 'zzzz'; run `trainplan models` for the list"
    )
    assert invoke("gpus", "h1000").output.startswith("no GPU matches 'h1000'; did you mean: H100")
    assert "did you mean: Germany" in invoke("regions", "Germny").output


def test_regions_eu_finds_member_countries_by_name() -> None:
    data = json.loads(invoke("regions", "eu", "--json").output)
    names = {row["name"] for row in data}
    assert {"Germany", "France", "Poland", "Ireland"} <= names  # countries, by EU membership
    assert "United Kingdom" not in names and "Norway" not in names  # not EU members
    assert any(row["id"] == "eu-west-1" for row in data)  # cloud regions by id, as before
    europe = {row["name"] for row in json.loads(invoke("regions", "europe", "--json").output)}
    assert {"United Kingdom", "Germany"} <= europe


def test_headroom_help_states_the_engine_default() -> None:
    """The flag's help spells the default out (the CLI does not import the search to start fast),
    so it must equal the search's own default."""
    import typer.main

    from trainplan.engine.largest_fit import DEFAULT_HEADROOM

    command = typer.main.get_command(app).commands["estimate"]  # type: ignore[attr-defined]
    (option,) = [param for param in command.params if "--headroom" in param.opts]
    assert f"default {DEFAULT_HEADROOM}" in option.help


def test_the_memory_table_shows_the_three_figures() -> None:
    """The terminal shows the three figures: the device total the fit is decided on, the
    allocator's reserved pool and the live tensors max_memory_allocated() would report, and the
    parts outside the allocator (on one H100: the CUDA context and the cuBLAS workspace)."""
    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    args = ["estimate", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM"]
    ran = CliRunner().invoke(app, args, env={"COLUMNS": "120"})
    data = json.loads(CliRunner().invoke(app, [*args, "--json"]).output)
    memory = data["memory"]
    total, reserved = memory["per_gpu"]["total_bytes"], memory["reserved_peak_bytes"]
    allocated, device = memory["allocated_peak_bytes"], memory["device_overhead"]
    assert total == reserved + device["total_bytes"]
    assert device["total_bytes"] == 426 * 2**20 + 32 * 2**20
    lines = ran.output.splitlines()
    for label, value in (
        ("total on the device", total),
        ("of it reserved (allocator)", reserved),
        ("live tensors (allocated)", allocated),
        ("CUDA context", device["context_bytes"]),
        ("cuBLAS workspace", device["workspace_bytes"]),
    ):
        line = next(row for row in lines if label in row)
        assert f"{value / 2**30:,.2f}" in line, label
