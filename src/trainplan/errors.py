"""Typed, actionable user errors. Each names the field, what was wrong, and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches


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
