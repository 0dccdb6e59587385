"""Typed, actionable user errors. Each names the field, what was wrong, and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches
from typing import Any


class TrainplanError(ValueError):
    """Base class of every error a user can cause; the CLI and API turn these into messages."""


class InputError(TrainplanError):
    """A scenario field has a bad value."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class UnknownNameError(InputError):
    """A name (model, GPU, region, ...) that is not in its catalog; carries close matches."""

    def __init__(self, field: str, name: str, choices: Iterable[str], what: str) -> None:
        choice_list = list(choices)
        self.suggestions = suggest(name, choice_list)
        hint = (
            f" Did you mean: {', '.join(self.suggestions)}?"
            if self.suggestions
            else f" See `trainplan {what}s` for the list."
        )
        super().__init__(field, f"unknown {what} {name!r}.{hint}")


class ConfigError(InputError):
    """A model config.json that cannot be turned into a model spec."""


def suggest(name: str, choices: list[str], limit: int = 3) -> list[str]:
    """Close matches for `name` among `choices`, case-insensitively, original spelling kept."""
    lowered = {choice.lower(): choice for choice in choices}
    matches = get_close_matches(name.lower(), list(lowered), n=limit, cutoff=0.5)
    if not matches:
        matches = [key for key in lowered if name.lower() in key][:limit]
    return [lowered[match] for match in matches]


def shown_number(value: float) -> str:
    """A bound or value for a message: 10,000,000 rather than 1e+07; huge integers by digit count
    (formatting a 5,000-digit integer in full is itself an error in Python)."""
    if isinstance(value, int) and abs(value) >= 10**16:
        return f"an integer of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    if isinstance(value, int) or (abs(value) < 1e16 and float(value).is_integer()):
        return f"{int(value):,}"
    return f"{value:g}"


def shown_value(raw: Any) -> str:
    """A user's value quoted in a message, cut short (a pasted megabyte must not come back)."""
    text = shown_number(raw) if isinstance(raw, int) and not isinstance(raw, bool) else repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."
