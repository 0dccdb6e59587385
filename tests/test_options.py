"""Every option set declared once: the planner options and the LoRA parts, read by the CLI, the
validator and (tests/web/test_option_table.py) the web form and OpenAPI."""

from __future__ import annotations

import dataclasses

import pytest

from trainplan.engine.plan_request import (
    PLAN_OPTIONS,
    WEB_CAPS,
    PlanRequest,
    plan_option,
    request_from_options,
)
from trainplan.interfaces.options import LORA_FLAGS, estimate_options, option_help
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import LORA_FIELDS, Scenario

BASE = Scenario(model="Qwen2.5-0.5B")


def test_plan_request_defaults_are_the_declared_ones() -> None:
    request = PlanRequest(base=BASE)
    for name, option in PLAN_OPTIONS.items():
        if option.value_type != "list":
            assert getattr(request, name) == option.default, name
    # options not given fall back to the same declarations
    assert dataclasses.replace(request_from_options(BASE, {}), methods=request.methods) == request


def test_one_validator_with_the_web_cap_as_a_parameter() -> None:
    """max_gpus is declared 1 .. 100,000 with a 4,096 web cap: 5,000 passes the CLI's check and
    fails the server's, with the same message naming the option and the range."""
    assert request_from_options(BASE, {"max_gpus": "5000"}).max_gpus == 5000
    with pytest.raises(InputError) as error:
        request_from_options(BASE, {"max_gpus": "5000"}, WEB_CAPS)
    assert error.value.field == "max_gpus"
    assert error.value.message == "must be between 1 and 4,096 (got 5000)"
    with pytest.raises(InputError, match="between 1 and 100,000"):
        request_from_options(BASE, {"max_gpus": "100001"})
    assert WEB_CAPS == {
        "max_gpus": 4096,
        "target_global_tokens": 10**10,
        "target_global_sequences": 10**8,
        "top_k": 20,
        "max_candidates": 2_500_000,
    }


@pytest.mark.parametrize(
    ("name", "raw", "value"),
    [
        ("top_k", "3", 3),
        ("top_k", " 3.0 ", 3),
        ("budget_usd", "0", 0.0),
        ("deadline_hours", "1.5", 1.5),
        ("objective", "COST", "cost"),
        ("target_global_tokens", "", None),
    ],
)
def test_plan_option_reads_each_kind(name: str, raw: str, value: object) -> None:
    assert plan_option(name, raw) == value


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("top_k", "0", "must be between 1 and 100 (got 0)"),
        ("budget_usd", "-1", "must be >= 0 (got -1)"),
        ("deadline_hours", "nan", "'nan' is not a finite number"),
        ("max_gpus", "lots", "'lots' is not a number"),
        ("objective", "vibes", "'vibes' is not one of time, cost, energy, pareto, gpus"),
        ("top_k", "2.5", "must be a whole number (got 2.5)"),
    ],
)
def test_plan_option_refuses_by_name(name: str, raw: str, message: str) -> None:
    with pytest.raises(InputError) as error:
        plan_option(name, raw)
    assert (error.value.field, error.value.message) == (name, message)


def test_any_is_a_word_for_every_method_not_a_method() -> None:
    assert request_from_options(BASE, {"methods": "any"}).methods == ("full", "lora", "qlora")
    with pytest.raises(InputError, match="'any' is not one of"):
        request_from_options(BASE, {"methods": "lora,any"})


def test_the_lora_flags_show_the_declared_ranges() -> None:
    help_of = {name: text for name, _, text in estimate_options()}
    assert set(LORA_FLAGS) <= set(help_of)
    assert help_of["lora_rank"] == LORA_FIELDS["rank"].help + " (1 .. 65536)"
    assert help_of["lora_alpha"] == LORA_FIELDS["alpha"].help + " (0.001 .. 1e+06)"
    assert help_of["lora_dtype"] == LORA_FIELDS["dtype"].help + " [fp32|compute]"
    assert help_of["dora"] == LORA_FIELDS["dora"].help + " (true/false)"
    assert help_of["lora_targets"] == option_help(LORA_FIELDS["targets"]) + " (comma-separated)"


def test_help_shows_each_option_s_allowed_values() -> None:
    """rich reads `[a|b]` as markup and drops it: the choices must survive into the printed help,
    and each option's value is named by its choices or its kind, never typer's `<str>`."""
    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    runner = CliRunner()
    text = runner.invoke(app, ["estimate", "--help"], env={"COLUMNS": "250"}).output
    assert "<str>" not in text
    method = next(line for line in text.splitlines() if "--method " in line)
    assert "full|lora|qlora" in method and "what is trained [full|lora|qlora]" in method
    micro = next(line for line in text.splitlines() if "--micro-batch " in line)
    assert " INT " in micro and "(1 .. 65536)" in micro
    # a long help wraps: the option's block runs to the next option's line
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "--optimizer " in line)
    end = next(i for i in range(start + 1, len(lines)) if "│ --" in lines[i])
    optimizer = "".join(line.strip("│ ").strip() for line in lines[start:end])
    assert "[adamw|adamw-fused|adamw-8bit|" in optimizer
    plan = runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "250"}).output
    assert "<str>" not in plan
    assert "time|cost|energy|pareto|gpus" in next(row for row in plan.splitlines() if "--objective " in row)
