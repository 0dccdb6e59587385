"""The public surface is frozen: `trainplan.__all__`, every CLI command's flags and the keys of the
`estimate --json` tree. A change to any of them must be deliberate: update
tests/reference/public_surface.json in the same commit (`python tests/test_public_surface.py`
prints the current surface)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FROZEN = Path(__file__).parent / "reference" / "public_surface.json"


def current_surface() -> dict[str, Any]:
    import typer.main
    from typer.testing import CliRunner

    import trainplan
    from trainplan.interfaces.cli.main import app

    command = typer.main.get_command(app)
    flags = {
        name: sorted(option for param in sub.params for option in param.opts if option.startswith("--"))
        for name, sub in sorted(command.commands.items())  # type: ignore[attr-defined]
    }
    data = json.loads(CliRunner().invoke(app, ["estimate", "--json"]).output)
    keys = {"": sorted(data)}
    keys.update({name: sorted(value) for name, value in sorted(data.items()) if isinstance(value, dict)})
    return {"all": sorted(trainplan.__all__), "cli_flags": flags, "estimate_json_keys": keys}


def test_the_public_surface_is_unchanged() -> None:
    assert current_surface() == json.loads(FROZEN.read_text())


if __name__ == "__main__":
    print(json.dumps(current_surface(), indent=1))
