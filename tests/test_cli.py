"""The CLI: JSON contract, scenario files, flag overrides, errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import LLAMA_8B
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.tables import rates


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
        (["--scenario", "/nonexistent.yaml"], "scenario: cannot read"),
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
    output = invoke("estimate", "--model", str(config_file), "--pricing", "spot").output
    assert "Time: " in output and "Cost: $" in output and "spot" in output
    assert "Energy: " in output and "Load weights: " in output
