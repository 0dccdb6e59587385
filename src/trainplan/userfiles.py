"""Reading what a user hands us (scenario files, config.json, request bodies) without surprises.

Every failure is an InputError naming the field and the file: a file too large, not UTF-8 text,
not valid JSON/YAML, nested too deeply, or holding a number Python cannot read (an integer of
thousands of digits). YAML uses libyaml's C loader where it is installed, and never constructs
Python objects (safe loading only).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trainplan.errors import ConfigError, InputError

MAX_FILE_BYTES = 8 * 1024 * 1024  # a scenario or config.json is kilobytes; 8 MiB is generous
MAX_INT_DIGITS = 400  # longer integer literals are read as floats (inf past float range)


def read_text(path: Path, field: str, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a file of at most `limit` bytes."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as error:
        raise InputError(field, f"cannot read {path}: {error.strerror or error}") from None
    if len(raw) > limit:
        raise InputError(field, f"{path} is larger than {limit // (1024 * 1024)} MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(field, f"{path} is not UTF-8 text (byte {error.start})") from None


def _json_int(text: str) -> int | float:
    """An integer literal; one too long for Python's int parser becomes a float (so, likely, inf)."""
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


def parse_json(text: str | bytes, where: str, field: str) -> Any:
    """json.loads with every failure an InputError; `where` names the file or 'body'."""
    try:
        return json.loads(text, parse_int=_json_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(field, f"{where} is not valid JSON ({error})") from None
    except RecursionError:
        raise InputError(field, f"{where} is nested too deeply") from None


def parse_yaml(text: str, where: str, field: str) -> Any:
    """Safe YAML loading (C loader when available) with every failure an InputError."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        raise InputError(field, f"{where} is not valid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise InputError(field, f"{where} is nested too deeply") from None
    except (ValueError, OverflowError):  # an integer of more than 4,300 digits
        raise InputError(field, f"{where} holds a number too long to read (over 4,300 digits)") from None


def read_mapping(path: Path, field: str) -> dict[str, Any]:
    """A JSON (by suffix) or YAML file holding one mapping: a local scenario file. A YAML one read
    again unchanged (the same scenario re-run with other flags) comes from its kept parse, named by
    the content's SHA-256 (catalogs/loader.py `kept_parse`); bodies sent to the server never are."""
    text = read_text(path, field)
    if path.suffix == ".json":
        data = parse_json(text, str(path), field)
    else:
        import hashlib

        from trainplan.catalogs.loader import kept_parse

        raw = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()
        data = kept_parse("scenario", raw, lambda: parse_yaml(text, str(path), field), digest)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(field, f"{path} must hold a mapping")
    return data


def parse_toml(text: str, where: str, field: str) -> Any:
    """TOML (stdlib tomllib, imported when needed) with every failure an InputError naming the line."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(field, f"{where} is not valid TOML: {error}") from None
    except RecursionError:
        raise InputError(field, f"{where} is nested too deeply") from None
    except (ValueError, OverflowError):
        raise InputError(field, f"{where} holds a number too long to read (over 4,300 digits)") from None


_TOML_TABLE = re.compile(r"^\s*\[[A-Za-z0-9_.\-\" ]+\]\s*(#.*)?$", re.MULTILINE)


def parse_any(text: str, where: str, field: str) -> Any:
    """A JSON, TOML or YAML document: by the name's suffix, else by the content (a leading `{` is
    JSON, a `[table]` line is TOML, anything else YAML)."""
    suffix = Path(where).suffix.lower()
    if suffix == ".json" or (suffix not in (".toml", ".yaml", ".yml") and text.lstrip().startswith("{")):
        return parse_json(text, where, field)
    if suffix == ".toml" or (suffix not in (".yaml", ".yml") and _TOML_TABLE.search(text)):
        return parse_toml(text, where, field)
    return parse_yaml(text, where, field)


def read_config_file(path: Path) -> dict[str, Any]:
    """Parse a model's config.json, naming the file in the error (a ConfigError on `model`)."""
    try:
        data = parse_json(read_text(path, "model"), str(path), "model")
    except InputError as error:
        raise ConfigError("model", error.message) from None
    if not isinstance(data, dict):
        raise ConfigError("model", f"{path} is not a JSON object")
    return data
