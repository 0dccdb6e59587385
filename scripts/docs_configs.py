"""Regenerate the field maps of docs/configs.md from the readers' tables (trainplan/inputs/configs/*)."""

from __future__ import annotations

from pathlib import Path

from trainplan.inputs.configs import READERS, reader

DOC = Path(__file__).resolve().parents[1] / "docs" / "configs.md"


def table() -> str:
    """One section per framework: every setting its table names, what it sets, and its note."""
    parts = []
    for name in READERS:
        module = reader(name)
        rows = [
            f"### {module.TITLE} (`{module.FORMAT}`)",
            "",
            "| setting | sets | meaning, or why it is ignored |",
            "|---|---|---|",
        ]
        for setting, rule in module.RULES.items():
            sets = ", ".join(
                f"`{field}`" for field in rule.sets.split(", ") if field and not field.startswith("_")
            )
            if rule.sets == "_reference":
                sets = "(another file, read in turn)"
            elif rule.sets == "_global_batch":
                sets = "`grad_accum` (global / (micro_batch x data-parallel GPUs))"
            shown = "ignored: " + rule.note if rule.convert is None else rule.note
            rows.append(f"| `{setting}` | {sets or '-'} | {shown.replace('|', '/')} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def main() -> None:
    text = DOC.read_text()
    head, rest = text.split("<!-- maps:start -->\n", 1)
    _, tail = rest.split("<!-- maps:end -->\n", 1)
    DOC.write_text(head + "<!-- maps:start -->\n" + table() + "<!-- maps:end -->\n" + tail)


if __name__ == "__main__":
    main()
