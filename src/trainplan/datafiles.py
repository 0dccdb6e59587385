"""The bundled data files (src/trainplan/data/*.yaml): parsed once, checked strictly.

Every catalog (models, GPUs, prices, regions, energy, architectures, recipes) is read through
`load_yaml`, and every record is checked with `require`: a missing or unknown key is an error at
load time, never a silent fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any


@cache
def load_yaml(filename: str) -> Any:
    """Parse a bundled data file once (libyaml's C loader where installed, safe loading only)."""
    import yaml

    text = resources.files("trainplan").joinpath("data").joinpath(filename).read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def require(record: Mapping[str, Any], keys: tuple[str, ...], allowed: set[str], where: str) -> None:
    """Strict schema check: every required key present, no unknown key."""
    missing = [key for key in keys if key not in record]
    unknown = sorted(set(record) - allowed)
    if missing or unknown:
        raise RuntimeError(f"{where}: missing keys {missing}, unknown keys {unknown}")
