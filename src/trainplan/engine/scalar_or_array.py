"""Arithmetic that works on Python numbers and on numpy arrays alike.

The planner evaluates a million candidate layouts with the very functions `estimate()` uses;
those functions branch only through these helpers, so a scalar stays a Python number (numpy is
never imported for a single estimate) and an array is handled element-wise.
"""

from __future__ import annotations

from typing import Any

_SCALARS = frozenset({int, float, bool})


def _is_array(*values: Any) -> bool:
    # Python numbers are the common case: checked by type first, in C
    return not _SCALARS.issuperset(map(type, values)) and any(hasattr(value, "shape") for value in values)


def where(condition: Any, if_true: Any, if_false: Any) -> Any:
    """`if_true` where `condition` holds, else `if_false`."""
    scalars = _SCALARS  # one estimate calls this some fifty times: Python numbers first, inline
    if condition.__class__ in scalars and if_true.__class__ in scalars and if_false.__class__ in scalars:
        return if_true if condition else if_false
    if _is_array(condition, if_true, if_false):
        import numpy as np

        return np.where(condition, if_true, if_false)
    return if_true if condition else if_false


def maximum(first: Any, second: Any) -> Any:
    """Element-wise maximum (of two Python numbers, the one `max(first, second)` returns: the
    first unless the second is larger, written out to spare the builtin's argument handling)."""
    scalars = first.__class__ in _SCALARS and second.__class__ in _SCALARS  # the common case, inline
    if not scalars and _is_array(first, second):
        import numpy as np

        return np.maximum(first, second)
    return second if second > first else first


def minimum(first: Any, second: Any) -> Any:
    """Element-wise minimum (of two Python numbers, the one `min(first, second)` returns: the
    first unless the second is smaller)."""
    scalars = first.__class__ in _SCALARS and second.__class__ in _SCALARS  # the common case, inline
    if not scalars and _is_array(first, second):
        import numpy as np

        return np.minimum(first, second)
    return second if second < first else first
