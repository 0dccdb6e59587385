"""A small TOML writer for the fragments we emit: tables of scalars and lists (tomllib reads
TOML but does not write it)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dumps(data: Mapping[str, Any], prefix: str = "") -> str:
    """`data` as TOML: scalars first, then each nested mapping as a [table]."""
    lines = [f"{key} = {_value(value)}" for key, value in data.items() if not isinstance(value, Mapping)]
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in data.items():
        if isinstance(value, Mapping):
            name = f"{prefix}{key}"
            text += f"\n[{name}]\n" + dumps(value, name + ".").lstrip("\n")
    return text
