"""Command-line interface: parse flags into a scenario, call estimate(), render. No formulas here.

The `estimate` flags are generated from the Scenario fields (see scenario.py), so the CLI, the
scenario file and the API accept the same names.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import typer

from trainplan.errors import InputError, TrainplanError
from trainplan.scenario import SCENARIO_FIELDS, Scenario, field_infos

app = typer.Typer(
    help="trainplan: will this training run fit, how long will it take, what will it cost?",
    no_args_is_help=True,
    add_completion=False,
)

LORA_FLAGS = {"lora_rank": "rank", "lora_alpha": "alpha", "lora_targets": "targets", "dora": "dora"}


def flag_name(field: str) -> str:
    """micro_batch -> --micro-batch."""
    return "--" + field.replace("_", "-")


def _option(flag: str, help_text: str) -> Any:
    return typer.Option(None, flag, help=help_text, show_default=False)


def _estimate_parameters() -> list[inspect.Parameter]:
    """One optional string option per scenario field (LoRA settings flattened), so that the
    scenario parser does every conversion and range check, with field-named errors."""
    options: list[tuple[str, Any]] = []
    for name, info in field_infos().items():
        if name == "lora":
            continue
        help_text = info.help + (f" [{'|'.join(info.choices)}]" if info.choices else "")
        if info.minimum is not None:
            help_text += f" (>= {info.minimum:g})"
        options.append((name, _option(flag_name(name), help_text)))
    options += [
        ("lora_rank", _option("--lora-rank", "LoRA rank r")),
        ("lora_alpha", _option("--lora-alpha", "LoRA alpha")),
        ("lora_targets", _option("--lora-targets", "qv | attention | all-linear | comma-separated modules")),
        ("dora", _option("--dora", "DoRA instead of LoRA (true/false)")),
        ("scenario", _option("--scenario", "scenario file (YAML or JSON); flags override it")),
    ]
    parameters = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=str | None)
        for name, default in options
    ]
    parameters.append(
        inspect.Parameter(
            "as_json",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, "--json", help="print the result as JSON"),
            annotation=bool,
        )
    )
    return parameters


def load_scenario_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON scenario file into a dict."""
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise InputError("scenario", f"cannot read {path}: {error.strerror}") from None
    try:
        data = yaml.safe_load(text) if not path.endswith(".json") else json.loads(text)
    except (yaml.YAMLError, json.JSONDecodeError) as error:
        raise InputError("scenario", f"{path} is not valid YAML/JSON: {error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError("scenario", f"{path} must hold a mapping of scenario fields")
    return data


def scenario_from_flags(kwargs: dict[str, Any]) -> Scenario:
    """The scenario file (if any) overridden by the flags given; raises on bad input."""
    from trainplan.scenario import scenario_from_mapping

    scenario_path = kwargs.pop("scenario")
    data = load_scenario_file(scenario_path) if scenario_path else {}
    lora = dict(data.get("lora") or {}) if isinstance(data.get("lora", {}), dict) else data.get("lora")
    for flag, key in LORA_FLAGS.items():
        value = kwargs.pop(flag)
        if value is not None and isinstance(lora, dict):
            lora[key] = value
    if lora:
        data["lora"] = lora
    data.update({name: value for name, value in kwargs.items() if value is not None})
    return scenario_from_mapping(data)


def _run_estimate(**kwargs: Any) -> None:
    from trainplan.estimate import estimate

    as_json = kwargs.pop("as_json")
    try:
        result = estimate(scenario_from_flags(kwargs))
    except TrainplanError as error:
        _fail(error)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        from trainplan.report import print_estimate

        print_estimate(result)


def _fail(error: TrainplanError) -> NoReturn:
    """Print a user error, naming the flag as well as the field, and exit 2."""
    message = str(error)
    if isinstance(error, InputError):
        field = error.field
        flag = flag_name(field.replace("lora.", "lora_")) if field.split(".")[0] in SCENARIO_FIELDS else None
        where = f"{field} ({flag})" if flag and field != "lora.dora" else field
        message = f"{where}: {error.message}"
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


@app.command("models")
def models_command(
    query: str = typer.Argument("", help="filter by name, family or Hub id"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List catalog models (searchable)."""
    from trainplan.report import print_models

    print_models(query, as_json)


@app.command("gpus")
def gpus_command(
    query: str = typer.Argument("", help="filter by name, alias, vendor or class"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List catalog GPUs (searchable)."""
    from trainplan.report import print_gpus

    print_gpus(query, as_json)


def _register_estimate() -> None:
    """Add `estimate` with a signature generated from the scenario fields."""

    def estimate_command(**kwargs: Any) -> None:
        """Estimate parameters, per-GPU training memory and which GPUs fit."""
        _run_estimate(**kwargs)

    estimate_command.__signature__ = inspect.Signature(_estimate_parameters())  # type: ignore[attr-defined]
    app.command("estimate")(estimate_command)


_register_estimate()


def _run_measure(**kwargs: Any) -> None:
    as_json = kwargs.pop("as_json")
    try:
        scenario = scenario_from_flags(kwargs)
        from trainplan.measure.compare import measure_scenario

        comparison = measure_scenario(scenario)
    except TrainplanError as error:
        _fail(error)
    if as_json:
        print(json.dumps(comparison.to_dict(), indent=2))
    else:
        from trainplan.report import print_measurement

        print_measurement(comparison)


def _register_measure() -> None:
    """Add `measure` with the same flags as `estimate`."""

    def measure_command(**kwargs: Any) -> None:
        """Trace one real training step on fake tensors (needs trainplan[measure]) and compare
        the measured peak memory with the estimate, term by term."""
        _run_measure(**kwargs)

    measure_command.__signature__ = inspect.Signature(_estimate_parameters())  # type: ignore[attr-defined]
    app.command("measure")(measure_command)


_register_measure()


def main() -> None:
    """Console entry point."""
    app(prog_name="trainplan")


import trainplan.web.cli  # noqa: E402, F401  (adds the `serve` command to `app`)
