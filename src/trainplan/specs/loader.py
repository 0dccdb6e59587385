"""The bundled data files (src/trainplan/data/*.yaml): parsed once, checked strictly.

Every catalog (models, GPUs, prices, regions, energy, architectures, recipes) is read through
`load_yaml`, and every record is checked with `require`: a missing or unknown key is an error at
load time, never a silent fallback.
"""

from __future__ import annotations

import marshal
import math
import os
import re
import sys
import zlib
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

DATA_FOLDER = Path(__file__).parent.parent / "data"  # the package's own files (a plain folder, never zipped)


@cache
def load_yaml(filename: str) -> Any:
    """Parse a bundled data file once (libyaml's C loader where installed, safe loading only).

    The parsed data is also kept in the user's cache folder, under the file's content checksum, and
    read from there by the next process: unmarshalling is many times faster than parsing YAML,
    which was most of a cold start. The copy is marshal data, as trustworthy as the bytecode
    caches beside the sources. A changed data file has a new checksum, so a stale copy is not read;
    a copy that cannot be written or read is skipped, and the YAML is parsed as usual.
    """
    raw = (DATA_FOLDER / filename).read_bytes()

    def parse() -> Any:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(raw.decode("utf-8"), Loader=loader)

    return kept_parse(filename, raw, parse)


def kept_parse(name: str, raw: bytes, parse: Callable[[], Any], digest: str | None = None) -> Any:
    """`parse()` of the bytes `raw`, kept in the user's cache folder under `name` and the
    content's digest, and read back from there the next time the same bytes come (a bundled data
    file, or a user's YAML scenario or config): unmarshalling skips loading and running the YAML
    parser. `digest` names the content where the CRC-32 is not enough (a user's file); a parse
    that fails raises and keeps nothing."""
    cached = _cache_path(name, raw, digest)
    try:
        return marshal.loads(cached.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        pass
    data = parse()
    _keep(cached, data)
    return data


def _cache_path(filename: str, raw: bytes, digest: str | None = None) -> Path:
    """Where the parsed copy of content `raw` lives: named by its length and CRC-32 (an edit
    changes them) or the given digest, and the Python version (the marshal format's)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    digest = digest or f"{len(raw)}-{zlib.crc32(raw):08x}"
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return Path(root) / "trainplan" / f"{filename}.{digest}.{python}.marshal"


def _keep(path: Path, data: Any) -> None:
    """Write the parsed copy atomically; not at all when it holds what marshal cannot (YAML
    dates) or the folder cannot be written."""
    try:
        blob = marshal.dumps(data)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(blob)
        os.replace(partial, path)
    except (OSError, ValueError):
        return


def require(record: Mapping[str, Any], keys: tuple[str, ...], allowed: set[str], where: str) -> None:
    """Strict schema check: every required key present, no unknown key."""
    missing = [key for key in keys if key not in record]
    unknown = sorted(set(record) - allowed)
    if missing or unknown:
        raise RuntimeError(f"{where}: missing keys {missing}, unknown keys {unknown}")


#: The keys of a sourced figure in a data file (load_sources.yaml `run_fixed` and `host_memory`,
#: device_memory.yaml): its value, how it was come by, where from, and when.
SOURCED_ROW = ("value", "basis", "source", "as_of")
#: How a sourced figure was come by.
BASES = ("sourced", "derived", "fitted", "judgement")


def sourced_value(row: Any, where: str, upper: float = math.inf) -> float:
    """A sourced row's value, checked: the row's keys, a known basis, a number from 0 to `upper`."""
    if not isinstance(row, dict):
        raise RuntimeError(f"{where}: expected a mapping")
    require(row, SOURCED_ROW, set(SOURCED_ROW), where)
    if row["basis"] not in BASES:
        raise RuntimeError(f"{where}: basis {row['basis']!r} is not one of {', '.join(BASES)}")
    value = row["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= upper:
        raise RuntimeError(f"{where}: value {value!r} is not a number in [0, {upper:g}]")
    return float(value)


def sourced_section(raw: Any, keys: tuple[str, ...], where: str) -> dict[str, float]:
    """A section of sourced rows with exactly `keys`: each row's checked value by key."""
    require(raw, keys, set(keys), where)
    return {key: sourced_value(raw[key], f"{where} {key}") for key in keys}


_SEPARATORS = re.compile(r"[\s_\-/]+")
#: The same separators among ASCII characters (`\s` there is what `str.isspace` accepts), as a
#: deletion table: an ASCII name (every catalog name, most input) is normalised without the regex.
_ASCII_SEPARATORS = str.maketrans("", "", "".join(c for c in map(chr, range(128)) if c.isspace()) + "_-/")


def normalise(name: str) -> str:
    """A catalog name as it is matched: lower-case, with runs of space/dash/underscore/slash
    removed, so 'RTX-4090' == 'rtx 4090'."""
    text = name.strip().lower()
    if text.isascii():
        return text.translate(_ASCII_SEPARATORS)
    return _SEPARATORS.sub("", text)
