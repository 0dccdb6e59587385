"""The typer application: every `trainplan` command, its flags and help. No formulas here.

The `estimate`, `measure` and `plan` signatures are generated from the option table
(options.py), so the flags, the scenario file and the API accept the same names. The entry point
and the shared flag handling are cli.py.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import typer

from trainplan.engine.plan_request import PLAN_OPTIONS
from trainplan.inputs.catalogs.prices import STALE_AFTER_DAYS, parse_today
from trainplan.interfaces.cli.invocation import fail, run_estimate, scenario_and_reading, show
from trainplan.interfaces.options import (
    FROM_FLAG,
    HEADROOM_FLAG,
    HINTS_FLAG,
    JSON_FLAG,
    MAX_FLAG,
    PAST_CONTEXT_FLAG,
    estimate_options,
    flag_name,
    option_metavar,
)
from trainplan.specs.errors import InputError, TrainplanError
from trainplan.specs.model import MODEL_KINDS

app = typer.Typer(
    help="trainplan: will this training run fit, how long will it take, what will it cost?",
    no_args_is_help=True,
    add_completion=False,
)


def _option(flag: str, help_text: str, metavar: str | None = None) -> Any:
    """A string option; its help's `[a|b]` choices are escaped so that rich prints them."""
    return typer.Option(None, flag, help=help_text.replace("[", "\\["), show_default=False, metavar=metavar)


def _keyword(name: str, option: Any, annotation: Any = str | None) -> inspect.Parameter:
    """A keyword-only parameter of a generated command signature."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)


def _estimate_parameters() -> list[inspect.Parameter]:
    """The string options, then --from (repeatable) and --json."""
    parameters = [
        _keyword(name, _option(flag, help_text, option_metavar(name)))
        for name, flag, help_text in estimate_options()
    ]
    parameters.append(
        _keyword(
            "from_files",
            _option(
                FROM_FLAG,
                "a training config to read (axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL, "
                "accelerate, DeepSpeed; repeatable); the scenario file and flags override it",
                "FILE",
            ),
            list[str] | None,
        )
    )
    parameters.append(
        _keyword("as_json", typer.Option(False, JSON_FLAG, help="print the result as JSON"), bool)
    )
    return parameters


@app.command("models")
def models_command(
    query: str = typer.Argument("", help="filter by name, family or Hub id"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    kind: str | None = typer.Option(
        None, "--family", help="only models of this kind: " + " | ".join(MODEL_KINDS), show_default=False
    ),
) -> None:
    """List catalog models (searchable)."""
    from trainplan.interfaces.cli.console import print_models

    try:
        print_models(query, as_json, kind)
    except TrainplanError as error:
        fail(error)


@app.command("gpus")
def gpus_command(
    query: str = typer.Argument("", help="filter by name, alias, vendor or class"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List catalog GPUs (searchable)."""
    from trainplan.interfaces.cli.console import print_gpus

    print_gpus(query, as_json)


@app.command("regions")
def regions_command(
    query: str = typer.Argument("", help="filter by id, name or country"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List grid regions and their carbon intensity (searchable)."""
    from trainplan.interfaces.cli.console import print_regions

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
    from trainplan.inputs.catalogs.gpus import gpu_catalog, matching_gpus
    from trainplan.interfaces.cli.console import print_prices
    from trainplan.specs.errors import UnknownNameError

    try:
        day = parse_today(today)
        if not 1 <= stale_after_days <= 3650:
            raise InputError("stale_after_days", f"must be between 1 and 3650 (got {stale_after_days})")
        names = [gpu.name for gpu in matching_gpus(query, exact_first=True)]
        if not names:
            raise UnknownNameError("gpu", query, [gpu.name for gpu in gpu_catalog()], "gpu")
    except TrainplanError as error:
        fail(error)
    print_prices(names, as_json, day, stale_after_days)


def _register_estimate() -> None:
    """Add `estimate` with a signature generated from the scenario fields."""

    def estimate_command(**kwargs: Any) -> None:
        """Estimate parameters, per-GPU training memory and which GPUs fit."""
        run_estimate(**kwargs)

    maximise = _keyword(
        "maximise",
        typer.Option(
            None,
            MAX_FLAG,
            help="find the largest micro_batch or seq_len that fits the GPU",
            show_default=False,
            metavar="micro_batch|seq_len",
        ),
    )
    headroom = _keyword(
        "headroom",
        typer.Option(
            None,
            HEADROOM_FLAG,
            help="with --max: share of GPU memory to leave free, default 0.05 (0: the exact "
            "boundary, not rounded)",
            show_default=False,
        ),
        float | None,
    )
    past_context = _keyword(
        "past_context",
        typer.Option(
            False,
            PAST_CONTEXT_FLAG,
            help="with --max seq_len: search past the model's context window (it stops there otherwise)",
        ),
        bool,
    )
    with_hints = _keyword(
        "hints",
        typer.Option(
            False,
            HINTS_FLAG,
            help="add what changing one setting would do (each a full estimate), as the web page shows",
        ),
        bool,
    )
    estimate_command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [*_estimate_parameters(), maximise, headroom, past_context, with_hints]
    )
    app.command("estimate")(estimate_command)


_register_estimate()


def _run_measure(**kwargs: Any) -> None:
    as_json = kwargs.pop("as_json")
    try:
        scenario, reading = scenario_and_reading(kwargs)
        from trainplan.engine.measure.compare import measure_scenario

        comparison = measure_scenario(scenario)
    except TrainplanError as error:
        fail(error)

    def print_text() -> None:
        from trainplan.interfaces.cli.console import print_measurement

        print_measurement(comparison)

    show(as_json, reading, comparison.to_dict, print_text)


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
        from trainplan.engine.plan import plan
        from trainplan.engine.plan_request import request_from_options

        request = request_from_options(scenario, options)
        if emit_format is not None:
            from trainplan.inputs.configs import emit_axes

            kind = emit_format.strip().lower()
            request = request.narrowed(emit_axes(kind), f"a {kind} config")
        result = plan(request)
        if emit_format is not None:
            _emit_plan(result, emit_format)
            return
    except TrainplanError as error:
        fail(error)
    from trainplan.interfaces.text.plans import result_to_dict

    def print_text() -> None:
        from trainplan.interfaces.cli.console import print_plan

        print_plan(result)

    show(as_json, reading, lambda: result_to_dict(result), print_text)


def _emit_plan(result: Any, kind: str) -> None:
    """The winning plan as a config fragment on stdout; for JSON (no comments) the header goes
    to stderr."""
    from trainplan.inputs.configs import emit
    from trainplan.interfaces.cli.console import plan_header

    if not result.plans:
        from trainplan.inputs.configs import emit_axes

        axes = "; ".join(
            f"{name} {', '.join(map(str, values))}"
            for name, values in emit_axes(kind.strip().lower()).items()
        )
        raise InputError(
            "emit",
            f"no plan fits among the layouts a {kind} config can write ({axes}), so there is nothing to "
            "write; see `trainplan plan` without --emit",
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
        _keyword(name, _option(flag_name(name), option.help_text(), option.metavar()))
        for name, option in PLAN_OPTIONS.items()
    ]
    extra.append(
        _keyword(
            "emit",
            _option(
                "--emit",
                "write the winning plan as a config fragment: axolotl | torchtune | torchtitan | "
                "llama-factory | accelerate | deepspeed",
                "FRAMEWORK",
            ),
        )
    )
    plan_command.__signature__ = inspect.Signature([*_estimate_parameters(), *extra])  # type: ignore[attr-defined]
    app.command("plan")(plan_command)


_register_plan()


ALLOWED_HOST_OPTION = typer.Option(
    None,
    "--allowed-host",
    help="also answer requests whose Host header names this host (repeatable); by default only "
    "localhost, 127.0.0.1, [::1] and the --host address are answered",
    show_default=False,
)


@app.command("serve")
def serve_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on"),
    port: int = typer.Option(8000, "--port", help="TCP port"),
    scenario: str | None = typer.Option(
        None, "--scenario", help="scenario file (YAML or JSON) whose link to print"
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level"),
    allowed_hosts: list[str] | None = ALLOWED_HOST_OPTION,
) -> None:
    """Serve the web calculator and its JSON API (docs at /docs)."""
    from trainplan.interfaces.web.server import serve  # the web stack loads only for this command

    status = serve(host, port, scenario, log_level, tuple(allowed_hosts or ()))
    if status:
        raise typer.Exit(status)
