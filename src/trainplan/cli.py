"""Command-line interface: parse flags into a scenario, call estimate(), render. No formulas here.

The `estimate` flags are generated from the Scenario fields (see scenario.py), so the CLI, the
scenario file and the API accept the same names.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from trainplan.errors import InputError, TrainplanError
from trainplan.model import MODEL_KINDS
from trainplan.options import LORA_FLAGS, PLAN_OPTIONS, flag_name
from trainplan.prices import STALE_AFTER_DAYS, parse_today
from trainplan.scenario import LORA_FIELDS, SCENARIO_FIELDS, Scenario, field_infos

if TYPE_CHECKING:
    from trainplan.configs import ConfigReading

app = typer.Typer(
    help="trainplan: will this training run fit, how long will it take, what will it cost?",
    no_args_is_help=True,
    add_completion=False,
)


def _option(flag: str, help_text: str) -> Any:
    return typer.Option(None, flag, help=help_text, show_default=False)


def _estimate_options() -> list[tuple[str, str, str]]:
    """(parameter, flag, help) of each string option of `estimate`: one per scenario field (LoRA
    settings flattened), so that the scenario parser does every conversion and range check, with
    field-named errors."""
    options: list[tuple[str, str, str]] = []
    for name, info in field_infos().items():
        if name == "lora":
            continue
        help_text = info.help + (f" [{'|'.join(info.choices)}]" if info.choices else "")
        if info.minimum is not None:
            help_text += f" ({'>' if info.exclusive else '>='} {info.minimum:g})"
        options.append((name, flag_name(name), help_text))
    return [
        *options,
        ("lora_rank", "--lora-rank", LORA_FIELDS["rank"].help + " (1 .. 65536)"),
        ("lora_alpha", "--lora-alpha", LORA_FIELDS["alpha"].help),
        ("lora_targets", "--lora-targets", LORA_FIELDS["targets"].help + " (comma-separated)"),
        ("dora", "--dora", LORA_FIELDS["dora"].help + " (true/false)"),
        ("lora_dropout", "--lora-dropout", LORA_FIELDS["dropout"].help + " (0 .. 0.99)"),
        ("lora_dtype", "--lora-dtype", LORA_FIELDS["dtype"].help + " [fp32|compute]"),
        ("scenario", "--scenario", "scenario file (YAML or JSON); flags override it"),
    ]


# The flags of `estimate` beyond its string options.
FROM_FLAG, JSON_FLAG, MAX_FLAG, HEADROOM_FLAG = "--from", "--json", "--max", "--headroom"


def _estimate_parameters() -> list[inspect.Parameter]:
    """The string options, then --from (repeatable) and --json."""
    parameters = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=_option(flag, help_text), annotation=str | None
        )
        for name, flag, help_text in _estimate_options()
    ]
    parameters.append(
        inspect.Parameter(
            "from_files",
            inspect.Parameter.KEYWORD_ONLY,
            default=_option(
                FROM_FLAG,
                "a training config to read (axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL, "
                "accelerate, DeepSpeed; repeatable); the scenario file and flags override it",
            ),
            annotation=list[str] | None,
        )
    )
    parameters.append(
        inspect.Parameter(
            "as_json",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(False, JSON_FLAG, help="print the result as JSON"),
            annotation=bool,
        )
    )
    return parameters


def _json_estimate_arguments(argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of `estimate ... --json` read straight from argv, or None when argv
    is anything else or anything this reader is unsure of (help, an unknown or repeated flag, a
    missing value, `--`): then the full CLI parser runs, with its own messages. The JSON path
    thus skips building the parser and its converters, which is most of a cold start."""
    if len(argv) < 2 or argv[0] != "estimate" or JSON_FLAG not in argv:
        return None
    flags = {flag: name for name, flag, _ in _estimate_options()}
    flags.update({MAX_FLAG: "maximise", HEADROOM_FLAG: "headroom"})
    kwargs: dict[str, Any] = dict.fromkeys([*flags.values(), "from_files"])
    kwargs["as_json"] = False
    given: set[str] = set()
    tokens = iter(argv[1:])
    for token in tokens:
        flag, equals, value = token.partition("=")
        if token == JSON_FLAG and not kwargs["as_json"]:
            kwargs["as_json"] = True
            continue
        known = flag in flags or flag == FROM_FLAG
        if not known or (flag in given and flag != FROM_FLAG):
            return None
        if not equals:
            value = next(tokens, "-")
            if value.startswith("-"):
                return None  # a missing value, or one the full parser should judge
        given.add(flag)
        if flag == FROM_FLAG:
            kwargs["from_files"] = [*(kwargs["from_files"] or []), value]
        else:
            kwargs[flags[flag]] = value
    if kwargs["headroom"] is not None:
        try:
            kwargs["headroom"] = float(kwargs["headroom"])
        except ValueError:
            return None
    return kwargs


def load_scenario_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON scenario file into a dict (size-limited; errors name `scenario`)."""
    from trainplan.userfiles import read_mapping

    return read_mapping(Path(path), "scenario")


def scenario_from_flags(kwargs: dict[str, Any]) -> Scenario:
    """The scenario file (if any) overridden by the flags given; raises on bad input."""
    return scenario_and_reading(kwargs)[0]


def scenario_and_reading(kwargs: dict[str, Any]) -> tuple[Scenario, ConfigReading | None]:
    """The training configs of --from (if any), then the scenario file, then the flags; with
    how the configs were read (None without --from)."""
    from trainplan.scenario import scenario_from_mapping

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
    from trainplan.configs import scenario_from_config

    reading = scenario_from_config(from_files, data)
    return scenario_from_mapping(reading.mapping), reading


def _run_estimate(**kwargs: Any) -> None:
    from trainplan.estimate import estimate

    as_json = kwargs.pop("as_json")
    maximise = kwargs.pop("maximise")
    headroom = kwargs.pop("headroom")
    found = None
    try:
        scenario, reading = scenario_and_reading(kwargs)
        if maximise is not None:
            from trainplan.search import DEFAULT_HEADROOM, largest_that_fits

            found = largest_that_fits(
                scenario, maximise, headroom=DEFAULT_HEADROOM if headroom is None else headroom
            )
            result = found.estimate
        else:
            result = estimate(scenario)
    except TrainplanError as error:
        _fail(error)
    if found is not None and not as_json:
        print(found.sentence())
    if as_json:
        data = result.to_dict()
        if found is not None:
            data["max"] = found.to_dict()
        if reading is not None:
            data["config"] = reading.to_dict()
        print(json.dumps(data, indent=2))
    else:
        from trainplan.report import print_config_reading, print_estimate

        if reading is not None:
            print_config_reading(reading)
        print_estimate(result)


def _fail(error: TrainplanError) -> NoReturn:
    """Print a user error, naming the flag as well as the field, and exit 2."""
    message = str(error)
    if isinstance(error, InputError):
        field = error.field
        flag = flag_name(field.replace("lora.", "lora_")) if field.split(".")[0] in SCENARIO_FIELDS else None
        if field in PLAN_OPTIONS:
            flag = PLAN_OPTIONS[field][0]
        if field == "lora.dora":
            flag = "--dora"
        if field in ("from", "emit"):
            flag = f"--{field}"
        where = f"{field} ({flag})" if flag else field
        message = f"{where}: {error.message}"
    print(f"error: {message}", file=sys.stderr)
    raise typer.Exit(2)


@app.command("models")
def models_command(
    query: str = typer.Argument("", help="filter by name, family or Hub id"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    kind: str | None = typer.Option(
        None, "--family", help="only models of this kind: " + " | ".join(MODEL_KINDS), show_default=False
    ),
) -> None:
    """List catalog models (searchable)."""
    from trainplan.report import print_models

    try:
        print_models(query, as_json, kind)
    except TrainplanError as error:
        _fail(error)


@app.command("gpus")
def gpus_command(
    query: str = typer.Argument("", help="filter by name, alias, vendor or class"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List catalog GPUs (searchable)."""
    from trainplan.report import print_gpus

    print_gpus(query, as_json)


@app.command("regions")
def regions_command(
    query: str = typer.Argument("", help="filter by id, name or country"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List grid regions and their carbon intensity (searchable)."""
    from trainplan.report import print_regions

    print_regions(query, as_json)


@app.command("prices")
def prices_command(
    query: str = typer.Argument("", help="a GPU name or alias, or text to filter by name, vendor or class"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    today: str = typer.Option(
        "", "--today", help="judge staleness as of this date, YYYY-MM-DD (default: today)"
    ),
    stale_after_days: int = typer.Option(
        STALE_AFTER_DAYS, "--stale-after-days", help="a quote older than this many days is stale"
    ),
) -> None:
    """Default GPU prices, the dated quotes behind them, and spot/committed discounts."""
    from trainplan.errors import UnknownNameError
    from trainplan.gpus import gpu_catalog, matching_gpus
    from trainplan.report import print_prices

    try:
        day = parse_today(today)
        if not 1 <= stale_after_days <= 3650:
            raise InputError("stale_after_days", f"must be between 1 and 3650 (got {stale_after_days})")
        names = [gpu.name for gpu in matching_gpus(query, exact_first=True)]
        if not names:
            raise UnknownNameError("gpu", query, [gpu.name for gpu in gpu_catalog()], "gpu")
    except TrainplanError as error:
        _fail(error)
    print_prices(names, as_json, day, stale_after_days)


def _register_estimate() -> None:
    """Add `estimate` with a signature generated from the scenario fields."""

    def estimate_command(**kwargs: Any) -> None:
        """Estimate parameters, per-GPU training memory and which GPUs fit."""
        _run_estimate(**kwargs)

    maximise = inspect.Parameter(
        "maximise",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(
            None,
            MAX_FLAG,
            help="find the largest micro_batch or seq_len that fits the GPU",
            show_default=False,
        ),
        annotation=str | None,
    )
    headroom = inspect.Parameter(
        "headroom",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(
            None,
            HEADROOM_FLAG,
            help="with --max: share of GPU memory to leave free, default 0.05 (0: the exact "
            "boundary, not rounded)",
            show_default=False,
        ),
        annotation=float | None,
    )
    estimate_command.__signature__ = inspect.Signature([*_estimate_parameters(), maximise, headroom])  # type: ignore[attr-defined]
    app.command("estimate")(estimate_command)


_register_estimate()


def _run_measure(**kwargs: Any) -> None:
    as_json = kwargs.pop("as_json")
    try:
        scenario, reading = scenario_and_reading(kwargs)
        from trainplan.measure.compare import measure_scenario

        comparison = measure_scenario(scenario)
    except TrainplanError as error:
        _fail(error)
    if as_json:
        data = comparison.to_dict()
        if reading is not None:
            data["config"] = reading.to_dict()
        print(json.dumps(data, indent=2))
    else:
        from trainplan.report import print_config_reading, print_measurement

        if reading is not None:
            print_config_reading(reading)
        print_measurement(comparison)


def _register_measure() -> None:
    """Add `measure` with the same flags as `estimate`."""

    def measure_command(**kwargs: Any) -> None:
        """Trace one real training step on fake tensors (needs the measure extra) and compare
        the measured peak memory with the estimate, term by term."""
        _run_measure(**kwargs)

    measure_command.__signature__ = inspect.Signature(_estimate_parameters())  # type: ignore[attr-defined]
    app.command("measure")(measure_command)


_register_measure()


def _run_plan(**kwargs: Any) -> None:
    as_json = kwargs.pop("as_json")
    emit_format = kwargs.pop("emit")
    options = {name: kwargs.pop(name) for name in PLAN_OPTIONS}
    try:
        scenario, reading = scenario_and_reading(kwargs)
        from trainplan.plan import plan, request_from_options

        result = plan(request_from_options(scenario, options))
        if emit_format is not None:
            _emit_plan(result, emit_format)
            return
    except TrainplanError as error:
        _fail(error)
    if as_json:
        from trainplan.plan import result_to_dict

        data = result_to_dict(result)
        if reading is not None:
            data["config"] = reading.to_dict()
        print(json.dumps(data, indent=2))
    else:
        from trainplan.report import print_config_reading, print_plan

        if reading is not None:
            print_config_reading(reading)
        print_plan(result)


def _emit_plan(result: Any, kind: str) -> None:
    """The winning plan as a config fragment on stdout; for JSON (no comments) the header goes
    to stderr."""
    from trainplan.configs import emit
    from trainplan.report import plan_header

    if not result.plans:
        raise InputError(
            "emit", "no plan fits, so there is nothing to write; see `trainplan plan` without --emit"
        )
    text, comments = emit(result.plans[0].scenario, kind.strip().lower(), plan_header(result.plans[0]))
    for line in comments:
        print(f"# {line}", file=sys.stderr)
    print(text, end="")


def _register_plan() -> None:
    """Add `plan`: the estimate flags for what is fixed, plus the search's own options."""

    def plan_command(**kwargs: Any) -> None:
        """Search GPU types, counts, parallelism, ZeRO, micro-batch, checkpointing and offload
        for the fastest, cheapest or greenest configurations that fit."""
        _run_plan(**kwargs)

    extra = [
        inspect.Parameter(
            name, inspect.Parameter.KEYWORD_ONLY, default=_option(flag, help_text), annotation=str | None
        )
        for name, (flag, help_text) in PLAN_OPTIONS.items()
    ]
    extra.append(
        inspect.Parameter(
            "emit",
            inspect.Parameter.KEYWORD_ONLY,
            default=_option(
                "--emit",
                "write the winning plan as a config fragment: axolotl | torchtune | torchtitan | "
                "llama-factory | accelerate | deepspeed",
            ),
            annotation=str | None,
        )
    )
    plan_command.__signature__ = inspect.Signature([*_estimate_parameters(), *extra])  # type: ignore[attr-defined]
    app.command("plan")(plan_command)


_register_plan()


def main() -> None:
    """Console entry point: `estimate --json` on its short path, everything else through typer."""
    kwargs = _json_estimate_arguments(sys.argv[1:])
    if kwargs is None:
        app(prog_name="trainplan")
        return
    try:
        _run_estimate(**kwargs)
    except typer.Exit as done:
        sys.exit(done.exit_code)


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario file (YAML or JSON) whose link to print"
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level"),
) -> None:
    """Serve the web calculator and its JSON API (docs at /docs)."""
    from trainplan.web.server import serve  # the web stack loads only for this command

    status = serve(host, port, scenario, log_level)
    if status:
        raise typer.Exit(status)
