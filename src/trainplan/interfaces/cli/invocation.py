"""What the command-line commands share: flags to a scenario (scenario files and training configs
included), running and printing one estimate, and the error exit that names the flag. cli.py (the
entry point and the `estimate --json` short path) and commands.py (the typer application) both
use it; neither imports the other's internals.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from trainplan.engine.plan_request import PLAN_OPTIONS
from trainplan.interfaces.options import LORA_FLAGS, flag_name
from trainplan.specs.errors import InputError, TrainplanError
from trainplan.specs.scenario import SCENARIO_FIELDS, Scenario

if TYPE_CHECKING:
    from trainplan.inputs.configs import ConfigReading

__all__ = [
    "fail",
    "load_scenario_file",
    "run_estimate",
    "scenario_and_reading",
    "scenario_from_flags",
    "show",
]


def load_scenario_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON scenario file into a dict (size-limited; errors name `scenario`)."""
    from trainplan.inputs.userfiles import read_mapping

    return read_mapping(Path(path), "scenario")


def scenario_from_flags(kwargs: dict[str, Any]) -> Scenario:
    """The scenario file (if any) overridden by the flags given; raises on bad input."""
    return scenario_and_reading(kwargs)[0]


def scenario_and_reading(kwargs: dict[str, Any]) -> tuple[Scenario, ConfigReading | None]:
    """The training configs of --from (if any), then the scenario file, then the flags; with
    how the configs were read (None without --from)."""
    from trainplan.specs.scenario import scenario_from_mapping

    from_files = kwargs.pop("from_files", None)
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
    if not from_files:
        return scenario_from_mapping(data), None
    from trainplan.inputs.configs import scenario_from_config

    reading = scenario_from_config(from_files, data)
    return scenario_from_mapping(reading.mapping), reading


def run_estimate(**kwargs: Any) -> None:
    """`trainplan estimate`: the scenario of the flags, its estimate (or the largest micro-batch
    or sequence that fits), printed as JSON or as tables."""
    from trainplan.engine.estimate import estimate

    as_json = kwargs.pop("as_json")
    maximise = kwargs.pop("maximise")
    headroom = kwargs.pop("headroom")
    past_context = bool(kwargs.pop("past_context", False))
    with_hints = bool(kwargs.pop("hints", False))
    found = None
    try:
        scenario, reading = scenario_and_reading(kwargs)
        if maximise is not None:
            from trainplan.engine.largest_fit import DEFAULT_HEADROOM, largest_that_fits

            found = largest_that_fits(
                scenario,
                maximise,
                headroom=DEFAULT_HEADROOM if headroom is None else headroom,
                past_context=past_context,
            )
            result = found.estimate
        else:
            result = estimate(scenario)
    except TrainplanError as error:
        fail(error)
    if found is not None and not as_json:
        from trainplan.interfaces.text.phrasing import largest_line

        print(largest_line(found))
    from_max = {"max": found.to_dict()} if found is not None else {}
    suggestions = []
    if with_hints:
        from trainplan.interfaces.text.hints import hints

        suggestions = hints(result.scenario, result)
    from_hints = {"hints": [hint.to_dict() for hint in suggestions]} if with_hints else {}

    def print_text() -> None:
        from trainplan.interfaces.cli.console import print_estimate, print_hints

        print_estimate(result)
        if with_hints:
            print_hints(suggestions)

    show(as_json, reading, lambda: {**result.to_dict(), **from_max, **from_hints}, print_text)


def show(
    as_json: bool,
    reading: ConfigReading | None,
    tree: Callable[[], dict[str, Any]],
    print_text: Callable[[], None],
) -> None:
    """A command's answer: the JSON `tree` (with the config reading under `config`), or the
    config reading and then `print_text`'s console output."""
    if as_json:
        data = tree()
        if reading is not None:
            data["config"] = reading.to_dict()
        print(json.dumps(data, indent=2))
        return
    if reading is not None:
        from trainplan.interfaces.cli.console import print_config_reading

        print_config_reading(reading)
    print_text()


def fail(error: TrainplanError) -> NoReturn:
    """Print a user error, naming the flag as well as the field, and exit 2."""
    message = str(error)
    if isinstance(error, InputError):
        field = error.field
        flag = flag_name(field.replace("lora.", "lora_")) if field.split(".")[0] in SCENARIO_FIELDS else None
        if field in PLAN_OPTIONS:
            flag = flag_name(field)
        if field == "lora.dora":
            flag = "--dora"
        if field in ("from", "emit", "scenario"):
            flag = f"--{field}"
        where = f"{field} ({flag})" if flag else field
        message = f"{where}: {error.message}"
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)
