"""Docs that cannot go stale: every scenario field and output key is documented."""

from __future__ import annotations

import json
from pathlib import Path

from trainplan.engine.estimate import estimate
from trainplan.interfaces.cli.main import flag_name
from trainplan.specs.scenario import SCENARIO_FIELDS, Scenario

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_field_and_flag_in_cli_doc() -> None:
    text = (DOCS / "cli.md").read_text()
    for name in SCENARIO_FIELDS:
        if name != "lora":
            assert f"`{name}`" in text and f"`{flag_name(name)}`" in text, name


def test_every_json_key_in_cli_doc() -> None:
    text = (DOCS / "cli.md").read_text()
    data = json.loads(json.dumps(estimate(Scenario()).to_dict()))
    for section in ("params", "batch", "time", "cost", "energy", "load"):
        for key in data[section]:
            assert key in text, f"{section}.{key}"
    for key in data["memory"]["per_gpu"]:
        assert key in text, key


def test_readme_scenario_is_valid() -> None:
    import yaml

    from trainplan.specs.scenario import scenario_from_mapping

    readme = (DOCS.parent / "README.md").read_text()
    block = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    scenario = scenario_from_mapping(yaml.safe_load(block))
    assert estimate(scenario).total_bytes > 0


def test_field_table_is_generated() -> None:
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    from docs_fields import table

    text = (DOCS / "cli.md").read_text()
    assert table() in text, "run scripts/docs_fields.py"


def test_accuracy_page_is_current() -> None:
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    from accuracy import page

    expected = page()
    assert (DOCS / "accuracy.md").read_text() == expected, "run scripts/accuracy.py"


def test_readme_accuracy_figures_are_the_accuracy_pages() -> None:
    """The README's figures come from the same cases and evaluations as docs/accuracy.md."""
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    from accuracy import readme_block

    assert readme_block() in (DOCS.parent / "README.md").read_text(), "run scripts/accuracy.py"


def test_accuracy_plot_exists() -> None:
    png = DOCS / "accuracy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_readme_commands_run() -> None:
    """Every `trainplan ...` example in the README runs (serve and measure aside: a server and a
    traced step have their own tests)."""
    import shlex

    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    readme = (DOCS.parent / "README.md").read_text()
    block = readme.split("```sh\n", 2)[2].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if line.startswith("trainplan ")]
    assert len(commands) >= 8
    for command in commands:
        args = shlex.split(command)[1:]
        if args[0] in ("serve", "measure") or "path/to/config.json" in command:
            continue
        if args[0] == "plan":
            args += ["--max-gpus", "8"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (command, result.output)


def test_config_field_maps_are_generated() -> None:
    import sys

    sys.path.insert(0, str(DOCS.parent / "scripts"))
    from docs_configs import table

    text = (DOCS / "configs.md").read_text()
    assert table() in text, "run scripts/docs_configs.py"
