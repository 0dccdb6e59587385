"""What the server answers, as bytes: a payload's compact JSON and a user error's 4xx body.

Shared by the app (its exception handlers), the routes and the worker processes (which hand back
finished answers, so nothing but bytes crosses the process boundary). Imports no web framework.
"""

from __future__ import annotations

import json
from typing import Any

from trainplan.specs.errors import TrainplanError

Answer = tuple[int, bytes]  # (HTTP status, JSON body)
ERROR_500 = json.dumps(
    {"field": None, "message": "internal error", "detail": "internal error", "suggestions": []}
).encode()


def json_bytes(payload: Any) -> bytes:
    """Compact JSON; non-finite numbers are refused rather than sent as invalid JSON."""
    return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode()


def error_answer(error: TrainplanError) -> Answer:
    """The 4xx answer to a user error: `{field, message, detail, suggestions}`. An error with a
    `status` of its own (the body's 400, 408, 413, 415; a 503 or 504) keeps it, others are 422."""
    status = getattr(error, "status", 422)  # a BodyError's
    field = getattr(error, "field", None)  # an InputError's or a BodyError's
    message = getattr(error, "message", None) or str(error)
    body = {
        "field": field,
        "message": message,
        "detail": str(error),
        "suggestions": list(getattr(error, "suggestions", None) or []),
    }
    return status, json_bytes(body)
