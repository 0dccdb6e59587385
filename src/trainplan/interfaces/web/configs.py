"""The page's "drop your config" zone: training config files posted as text, read into a scenario.

The server never reads a path: the files come in the body, and a setting that points at another
file (axolotl's `deepspeed: ds.json`) is looked up among the files posted with it, by base name.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from trainplan.specs.errors import InputError, shown_value

MAX_FILES = 8
MAX_NAME_CHARS = 200


def uploaded_files(body: dict[str, Any]) -> list[tuple[str, str]]:
    """`{"files": [{"name": ..., "text": ...}, ...]}` -> (base name, text) pairs, checked."""
    unknown = sorted(set(body) - {"files"})
    if unknown:
        raise InputError(unknown[0], 'unknown field; send {"files": [{"name": ..., "text": ...}]}')
    files = body.get("files")
    if not isinstance(files, list) or not files:
        raise InputError("files", "must be a non-empty list of {name, text}")
    if len(files) > MAX_FILES:
        raise InputError("files", f"at most {MAX_FILES} files (got {len(files)})")
    found: list[tuple[str, str]] = []
    for index, item in enumerate(files):
        where = f"files[{index}]"
        if not isinstance(item, dict) or set(item) - {"name", "text"}:
            raise InputError(where, "must be an object with name and text")
        name, text = item.get("name"), item.get("text")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
            raise InputError(f"{where}.name", f"must be a file name of 1 to {MAX_NAME_CHARS} characters")
        if not isinstance(text, str):
            raise InputError(f"{where}.text", "must be the file's text")
        base = PurePosixPath(name.replace("\\", "/")).name or "config"
        if any(base == seen for seen, _ in found):
            raise InputError(f"{where}.name", f"{shown_value(base)} is posted twice")
        found.append((base, text))
    return found


def config_payload(body: dict[str, Any]) -> dict[str, Any]:
    """The scenario of the posted files, with where each field came from and what was ignored."""
    from trainplan.inputs.configs import read_configs, upload_resolver
    from trainplan.specs.scenario import scenario_from_mapping, scenario_to_mapping

    files = uploaded_files(body)
    reading = read_configs(files, upload_resolver(dict(files)))
    scenario = scenario_from_mapping(reading.mapping)
    return {"scenario": scenario_to_mapping(scenario), **reading.to_dict()}
