"""Typed, actionable user errors. Each names the field, what was wrong, and what is allowed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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


def shown_value(raw: Any, limit: int = 60) -> str:
    """A user's value quoted in a message, cut to `limit` characters. Only a bounded prefix is
    ever formatted: a list that an alias bomb expands to billions of items, or a pasted megabyte,
    costs no more than a short one (repr() of the whole value would walk all of it first)."""
    text = (
        shown_number(raw) if isinstance(raw, int) and not isinstance(raw, bool) else _prefix(raw, limit + 1)
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prefix(value: Any, limit: int) -> str:
    """The first `limit` characters (or a few more) of `repr(value)` for the plain data a parser
    builds (dicts, lists, tuples, strings, numbers), produced piece by piece and stopped there."""
    pieces: list[str] = []
    size = 0
    stack: list[Any] = [value]
    while stack and size < limit:
        item = stack.pop()
        if isinstance(item, _Text):
            piece = item.text
        elif isinstance(item, dict):
            entries = iter(item.items())
            stack.extend([_Text("}"), _Entries(entries, ": ", ", ")])
            piece = "{"
        elif isinstance(item, list | tuple):
            close = "]" if isinstance(item, list) else ")"
            stack.extend([_Text(close), _Entries(((element,) for element in item), "", ", ")])
            piece = "[" if isinstance(item, list) else "("
        elif isinstance(item, _Entries):
            entry = next(item.entries, None)
            if entry is None:
                continue
            stack.append(item)
            parts: list[Any] = [_Text(item.between)] if item.started else []
            item.started = True
            for index, part in enumerate(entry):
                parts.extend([_Text(item.joiner)] if index else [])
                parts.append(part)
            stack.extend(reversed(parts))
            continue
        elif isinstance(item, str):
            piece = repr(item[:limit])
        elif isinstance(item, int) and not isinstance(item, bool) and abs(item) >= 10**16:
            piece = shown_number(item)  # repr() of a 5,000-digit integer is itself an error
        else:
            piece = repr(item)[:limit]
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces)


class _Text:
    """A fixed piece of `_prefix`'s output (a bracket, a separator)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Entries:
    """The items of a container that `_prefix` has not written yet."""

    __slots__ = ("between", "entries", "joiner", "started")

    def __init__(self, entries: Iterator[tuple[Any, ...]], joiner: str, between: str) -> None:
        self.entries = entries
        self.joiner = joiner
        self.between = between
        self.started = False
