"""Reading config.json values: the first present key of several, range-checked, the error naming it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError
from trainplan.families import Family

MISSING = object()


def get(cfg: Mapping[str, Any], *keys: str, default: Any = MISSING) -> Any:
    """First present key among `keys`; ConfigError naming the first key if none is and no default."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if default is MISSING:
        raise ConfigError(
            keys[0], f"missing from config.json (also looked for: {', '.join(keys[1:]) or '-'})"
        )
    return default


def get_int(cfg: Mapping[str, Any], *keys: str, default: Any = MISSING, minimum: int = 1) -> int:
    """An integer config value, range-checked, the error naming the key."""
    value = get(cfg, *keys, default=default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ConfigError(keys[0], f"must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(keys[0], f"must be >= {minimum}, got {value}")
    return int(value)


def flag(family: Family, name: str, cfg: Mapping[str, Any], default: Any = False) -> bool:
    return bool(family.setting(name, cfg, default))


def key_tuple(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)
