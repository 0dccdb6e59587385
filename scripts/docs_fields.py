"""Regenerate the scenario-field table of docs/cli.md from the Scenario field metadata."""

from __future__ import annotations

from pathlib import Path

from trainplan.interfaces.cli.main import flag_name
from trainplan.specs.scenario import Scenario, field_infos

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def table() -> str:
    """The markdown table rows, one per scalar field, with the label the web form and OpenAPI show."""
    defaults = Scenario()
    rows = ["| field | label | flag | default | allowed | meaning |", "|---|---|---|---|---|---|"]
    for name, info in field_infos().items():
        if name == "lora":
            continue
        if info.choices:
            allowed = ", ".join(info.choices)
        elif info.minimum is not None and info.exclusive:
            allowed = f"strictly between {info.minimum:g} and {info.maximum:g}"
        elif info.minimum is not None:
            allowed = f"{info.minimum:g} .. {info.maximum:g}"
        else:
            allowed = ""
        default = getattr(defaults, name)
        rows.append(
            f"| `{name}` | {info.label} | `{flag_name(name)}` | `{default}` | {allowed} | {info.help} |"
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    text = DOC.read_text()
    head, rest = text.split("<!-- fields:start -->\n", 1)
    _, tail = rest.split("<!-- fields:end -->\n", 1)
    DOC.write_text(head + "<!-- fields:start -->\n" + table() + "<!-- fields:end -->\n" + tail)


if __name__ == "__main__":
    main()
