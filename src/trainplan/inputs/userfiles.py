"""Reading what a user hands us (scenario files, config.json, request bodies) without surprises.

Every failure is an InputError naming the field and the file: a file too large or not a regular
file, not UTF-8 text, not valid JSON/YAML/TOML, nested too deeply, holding too many values once
its YAML aliases are expanded, or holding a number Python cannot read (an integer of thousands of
digits). The limits are checked while parsing, before anything walks the result: a YAML document's
events are counted as the C parser yields them (an alias counts every value it stands for, so a
"billion laughs" file stops after MAX_NODES values, in milliseconds), and a JSON or TOML document's
values are counted once, iteratively. YAML uses libyaml's C loader where it is installed, and never
constructs Python objects (safe loading only).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from trainplan.specs.errors import ConfigError, InputError, shown_number

MAX_FILE_BYTES = 8 * 1024 * 1024  # a scenario or config.json is kilobytes; 8 MiB is generous
MAX_INT_DIGITS = 400  # longer integer literals are read as floats (inf past float range)
# Values in one document, every alias expanded: a training config holds hundreds, a model's
# config.json up to some 90,000 (a classifier's id2label and label2id over 21,843 classes).
MAX_NODES = 200_000
MAX_DEPTH = 64  # nesting levels: real configs nest four or five deep
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def read_text(path: Path, field: str, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `limit` bytes. A named pipe, a device or a
    socket is refused before anything is read from it (opened without blocking, then checked),
    so a pipe with no writer cannot hang the reader."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise InputError(field, f"cannot read {path}: {error.strerror or error}") from None
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InputError(field, f"{path} is {kind}, not a regular file")
        os.set_blocking(handle, True)
        with os.fdopen(handle, "rb", closefd=False) as stream:
            raw = stream.read(limit + 1)
    except OSError as error:
        raise InputError(field, f"cannot read {path}: {error.strerror or error}") from None
    finally:
        os.close(handle)
    if len(raw) > limit:
        raise InputError(field, f"{path} is larger than {limit // (1024 * 1024)} MiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(field, f"{path} is not UTF-8 text (byte {error.start})") from None


def _too_many(where: str, field: str, aliases: bool = False) -> InputError:
    expanded = " once its aliases are expanded" if aliases else ""
    return InputError(field, f"{where} holds more than {shown_number(MAX_NODES)} values{expanded}")


def _too_deep(where: str, field: str) -> InputError:
    return InputError(field, f"{where} is nested too deeply (more than {MAX_DEPTH} levels)")


def check_shape(data: Any, where: str, field: str) -> None:
    """At most MAX_NODES values and MAX_DEPTH levels in a parsed JSON or TOML document (which
    share no values), counted with a stack of its own rather than recursion."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise _too_many(where, field)
        if isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise _too_deep(where, field)
            items = value.values() if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)
            nodes += len(value) if isinstance(value, dict) else 0  # the keys


def _json_int(text: str) -> int | float:
    """An integer literal; one too long for Python's int parser becomes a float (so, likely, inf)."""
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


def parse_json(text: str | bytes, where: str, field: str) -> Any:
    """json.loads within the limits, with every failure an InputError; `where` names the file
    or 'body'."""
    try:
        data = json.loads(text, parse_int=_json_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(field, f"{where} is not valid JSON ({error})") from None
    except RecursionError:
        raise _too_deep(where, field) from None
    check_shape(data, where, field)
    return data


def check_yaml_events(text: str, where: str, field: str, loader: Any) -> None:
    """Count a YAML document's values as the parser yields its events, before anything is built
    from them: an alias counts as every value its anchor holds (a merge key `<<: *a` too), and
    its nesting adds to the depth. Past MAX_NODES or MAX_DEPTH, or at an alias inside its own
    anchor (a structure that contains itself), the parse stops with an InputError."""
    import yaml

    sizes: dict[str, tuple[int, int]] = {}  # anchor -> (values, levels) of its finished node
    open_nodes: list[list[Any]] = []  # [anchor, values, levels below] of each open collection
    nodes = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) >= MAX_DEPTH:
                raise _too_deep(where, field)
            open_nodes.append([event.anchor, 1, 0])
            nodes += 1
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size, below = open_nodes.pop()
            if anchor is not None:
                sizes[anchor] = (size, below + 1)
            levels = below + 1
        elif isinstance(event, yaml.ScalarEvent):
            size, levels = 1, 0
            if event.anchor is not None:
                sizes[event.anchor] = (1, 0)
            nodes += 1
        elif isinstance(event, yaml.AliasEvent):
            anchor = event.anchor or ""
            if any(node[0] == anchor for node in open_nodes):
                raise InputError(field, f"{where}: the alias *{anchor[:40]} is inside its own anchor")
            size, levels = sizes.get(anchor, (1, 0))  # an unknown one: the loader's error
            nodes += size
            if len(open_nodes) + levels > MAX_DEPTH:
                raise _too_deep(where, field)
        else:
            continue
        if nodes > MAX_NODES:
            raise _too_many(where, field, aliases=bool(sizes))
        if open_nodes:
            parent = open_nodes[-1]
            parent[1] += size
            parent[2] = max(parent[2], levels)


def parse_yaml(text: str, where: str, field: str) -> Any:
    """Safe YAML loading (C loader when available) within the limits (`check_yaml_events`), with
    every failure an InputError."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        check_yaml_events(text, where, field, loader)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        raise InputError(field, f"{where} is not valid YAML: {' '.join(str(error).split())}") from None
    except RecursionError:
        raise _too_deep(where, field) from None
    except (ValueError, OverflowError) as error:  # an integer of more than 4,300 digits
        if isinstance(error, InputError):
            raise
        raise InputError(field, f"{where} holds a number too long to read (over 4,300 digits)") from None


def read_mapping(path: Path, field: str) -> dict[str, Any]:
    """A JSON (by suffix) or YAML file holding one mapping: a local scenario file. A YAML one read
    again unchanged (the same scenario re-run with other flags) comes from its kept parse, named by
    the content's SHA-256 (catalogs/loader.py `kept_parse`), which is kept only once the parse
    passed the limits; bodies sent to the server never are."""
    text = read_text(path, field)
    if path.suffix == ".json":
        data = parse_json(text, str(path), field)
    else:
        import hashlib

        from trainplan.specs.loader import kept_parse

        raw = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(raw).hexdigest()
        data = kept_parse("scenario-checked", raw, lambda: parse_yaml(text, str(path), field), digest)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(field, f"{path} must hold a mapping")
    return data


def parse_toml(text: str, where: str, field: str) -> Any:
    """TOML (stdlib tomllib, imported when needed) within the limits, with every failure an
    InputError naming the line."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InputError(field, f"{where} is not valid TOML: {error}") from None
    except RecursionError:
        raise _too_deep(where, field) from None
    except (ValueError, OverflowError):
        raise InputError(field, f"{where} holds a number too long to read (over 4,300 digits)") from None
    check_shape(data, where, field)
    return data


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
