"""Ready-to-show strings for the page, made with the same renderers as the terminal output."""

from __future__ import annotations

import shlex
from functools import cache
from typing import Any
from urllib.parse import urlencode

from trainplan.engine.result import Estimate
from trainplan.interfaces.options import LORA_FLAGS, flag_name
from trainplan.interfaces.text.phrasing import (
    batch_line,
    cost_detail,
    fit_group_lines,
    fit_summary,
    fit_verdict,
    fixed_text,
    format_duration,
    format_kwh,
    format_usd,
    free_text,
    load_mode,
    no_time_text,
    note_lines,
    params_line,
    rollout_lines,
    rollout_summary,
    rollout_words,
    runtime_lines,
    samples_word,
    stage_line,
    trainable_detail,
    weights_detail,
)
from trainplan.specs.scenario import Scenario, scenario_from_mapping, scenario_to_mapping
from trainplan.specs.units import format_count, format_gib, format_percent


def _flag_value(value: Any) -> str:
    """A scenario value as the CLI takes it: true/false, integers without '.0', lists comma-joined."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


@cache
def _defaults() -> dict[str, Any]:
    return scenario_to_mapping(Scenario())


def changed_fields(scenario: Scenario) -> list[tuple[str, Any]]:
    """(field, value) for every field that differs from the default; LoRA parts as `lora.rank`.
    Under a recipe, a field at the default that the recipe would fill otherwise is listed too, so
    that the fields read back give `scenario` itself (the command's and the link's rule)."""
    data = scenario_to_mapping(scenario)
    changed = _differing(data, _defaults())
    if scenario.recipe is not None:
        rebuilt = scenario_to_mapping(scenario_from_mapping(_as_mapping(data["model"], changed)))
        listed = {name for name, _ in changed}
        changed += [pair for pair in _differing(data, rebuilt) if pair[0] not in listed]
    return changed


def _differing(data: dict[str, Any], other: dict[str, Any]) -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for name, value in data.items():
        if name == "lora":
            found += [(f"lora.{part}", v) for part, v in value.items() if v != other["lora"][part]]
        elif name != "model" and value is not None and value != other[name]:
            found.append((name, value))
    return found


def _as_mapping(model: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {"model": model}
    for name, value in fields:
        if name.startswith("lora."):
            mapping.setdefault("lora", {})[name[5:]] = value
        else:
            mapping[name] = value
    return mapping


def cli_command(scenario: Scenario, uploaded: bool = False) -> str:
    """`trainplan estimate ...` giving the same result: the model plus every non-default field."""
    lora_flags = {f"lora.{part}": flag for flag, part in LORA_FLAGS.items()}
    args = ["trainplan", "estimate", "--model", "config.json" if uploaded else scenario.model]
    for name, value in changed_fields(scenario):
        args += [flag_name(lora_flags.get(name, name)), _flag_value(value)]
    return shlex.join(args)


def share_query(scenario: Scenario) -> str:
    """The page's query string for `scenario` (the same one the page writes into its URL)."""
    pairs = [("model", scenario.model)] + [
        (name, _flag_value(value)) for name, value in changed_fields(scenario)
    ]
    return urlencode(pairs, safe="/")


def display(result: Estimate, uploaded: bool = False) -> dict[str, Any]:
    """Headline strings: totals in GiB, counts with decimal suffixes, the batch and runtime lines."""
    params = result.params
    time = result.time
    return {
        "total": format_gib(result.total_bytes),
        "weights": format_gib(result.peak.term("weights").value),
        "trainable": format_count(params.trainable),
        "total_params": format_count(params.total),
        "trainable_percent": format_percent(params.trainable_fraction),
        "trainable_detail": trainable_detail(result),
        "weights_detail": weights_detail(result),
        "params_line": params_line(result),
        "batch_line": batch_line(result.batch, result.sample),
        "fit_summary": fit_summary(result),
        "fit_verdict": fit_verdict(result),
        "fit_groups": fit_group_lines(result),
        "fit_free": {row.gpu: free_text(row.free_bytes) for row in result.fit},
        "notes": [f"{label.capitalize()}: {text}" for label, text in note_lines(result)],
        "runtime_lines": runtime_lines(result),
        "rollout_lines": rollout_lines(result),
        "stage_line": stage_line(result),
        "rollout_summary": rollout_summary(result),
        "duration": format_duration(time.run_s) if time else None,
        "no_time": no_time_text(result) if time is None else None,
        "cost_detail": cost_detail(result),
        "load_mode": load_mode(result),
        "usd": format_usd(result.cost.run_usd) if result.cost and result.cost.run_usd is not None else None,
        "budget": _budget(result),
        "load_duration": format_duration(result.load.seconds) if result.load else None,
        "fixed": fixed_text(result) if time else None,
        "fixed_usd": format_usd(result.cost.fixed_usd)
        if result.cost and result.cost.fixed_usd is not None
        else None,
        "cli": cli_command(result.scenario, uploaded),
    }


def _budget(result: Estimate) -> str | None:
    """'2.00B tokens', or '10.0K images' / '10.0K clips' for an image or clip model."""
    time = result.time
    if time is None:
        return None
    if time.train_samples is None:
        return f"{format_count(time.train_tokens)} tokens"
    return f"{format_count(time.train_samples)} {samples_word(result.sample)}"


def plan_display(plan: dict[str, Any]) -> dict[str, str | None]:
    """A plan row's figures as the CLI's plan table writes them (from the plan's estimate JSON)."""
    estimate = plan["estimate"]
    time, cost, energy = estimate["time"], estimate.get("cost"), estimate.get("energy")
    return {
        "duration": format_duration(time["run_s"]) if time else None,
        "usd": format_usd(cost["run_usd"]) if cost and cost["run_usd"] is not None else None,
        "kwh": format_kwh(energy["run_kwh"]) if energy and energy["run_kwh"] else None,
        "rollout_summary": rollout_words(rollout) if (rollout := estimate["memory"]["rollout"]) else None,
    }
