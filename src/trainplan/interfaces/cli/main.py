"""Command-line interface: parse flags into a scenario, call estimate(), render. No formulas here.

The `estimate` flags are generated from the Scenario fields (see scenario.py and options.py), so
the CLI, the scenario file and the API accept the same names. This module is the entry point and
the `estimate --json` short path; what every command shares (flags to a scenario, the error exit)
is invocation.py; the typer application with its commands is commands.py, imported only when a
command needs it, so `trainplan estimate --json` starts without typer or rich.
"""

from __future__ import annotations

import sys
from typing import Any

from trainplan.interfaces.cli.invocation import fail, run_estimate, scenario_and_reading, scenario_from_flags
from trainplan.interfaces.options import (
    FROM_FLAG,
    HEADROOM_FLAG,
    JSON_FLAG,
    MAX_FLAG,
    estimate_options,
    flag_name,
)
from trainplan.specs.errors import TrainplanError, shown_value

__all__ = ["fail", "flag_name", "main", "run_estimate", "scenario_and_reading", "scenario_from_flags"]


def json_estimate_arguments(argv: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of `estimate ... --json` read straight from argv, or None when argv
    is anything else or anything this reader is unsure of (help, an unknown or repeated flag, a
    missing value, `--`): then the full CLI parser runs, with its own messages. The JSON path
    thus skips building the parser and its converters, which is most of a cold start."""
    if len(argv) < 2 or argv[0] != "estimate" or JSON_FLAG not in argv:
        return None
    flags = {flag: name for name, flag, _ in estimate_options()}
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


def main() -> None:
    """Console entry point: `estimate --json` on its short path (no typer, no rich: most of a
    cold start was building the parser), everything else through the typer app. Whatever goes
    wrong ends in one `error:` line and exit status 2, never a traceback: a user error names its
    flag (`fail`), running out of memory says what to lower, and anything else is reported as an
    internal error with its type and message (Ctrl-C exits 130)."""
    try:
        kwargs = json_estimate_arguments(sys.argv[1:])
        if kwargs is None:
            from trainplan.interfaces.cli.commands import app

            app(prog_name="trainplan")
        else:
            run_estimate(**kwargs)
    except TrainplanError as error:
        fail(error)
    except MemoryError:
        print(
            "error: out of memory: lower --max-gpus or --max-candidates (a search), or the model's size",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as error:  # a bug of ours: one line, with what to report
        print(f"error: internal error ({type(error).__name__}: {shown_value(str(error))})", file=sys.stderr)
        raise SystemExit(2) from None


def __getattr__(name: str) -> Any:
    """`app`, the typer application (commands.py), imported when first asked for."""
    if name != "app":
        raise AttributeError(f"module 'trainplan.interfaces.cli.main' has no attribute {name!r}")
    from trainplan.interfaces.cli.commands import app

    return app
