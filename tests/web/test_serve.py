"""`trainplan serve` is registered without slowing `trainplan estimate`'s start."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from trainplan.interfaces.cli.main import app
from trainplan.interfaces.web.display import share_query
from trainplan.specs.scenario import scenario_from_mapping


def test_serve_is_a_cli_command() -> None:
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert result.exit_code == 0
    assert "--host" in result.output and "--port" in result.output


def test_cli_import_does_not_load_the_web_stack() -> None:
    code = (
        "import sys, trainplan.interfaces.cli.main; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'pydantic') if m in sys.modules))"
    )
    output = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert output.strip() == "[]"


def test_printed_link_carries_the_scenario() -> None:
    scenario = scenario_from_mapping({"model": "Qwen2.5-7B", "method": "qlora", "lora": {"rank": 8}})
    assert share_query(scenario) == "model=Qwen2.5-7B&method=qlora&lora.rank=8"
