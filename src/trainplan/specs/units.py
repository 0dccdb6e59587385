"""Unit constants and the edge formatters.

Everything inside the engine is in base units (bytes, FLOPs, seconds, parameters).
Conversion happens only here, at the edges. GiB (1024**3) is what nvidia-smi shows and
what every memory figure is displayed in; GB (10**9) has its own, separately named formatter.
A parameter count is a count: it uses decimal suffixes (K, M, B, T), never 1024.
"""

from __future__ import annotations

GIB = 1024**3
MIB = 1024**2
GB = 10**9


def to_gib(num_bytes: float) -> float:
    """Bytes -> GiB (2**30), the unit nvidia-smi reports."""
    return num_bytes / GIB


def format_gib(num_bytes: float, digits: int = 2) -> str:
    """'12.34 GiB' from bytes."""
    return f"{num_bytes / GIB:,.{digits}f} GiB"


def format_gb(num_bytes: float, digits: int = 2) -> str:
    """'12.34 GB' (decimal, 10**9) from bytes; for storage and bandwidth, never for GPU memory."""
    return f"{num_bytes / GB:,.{digits}f} GB"


_COUNT_SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))


def format_count(count: float, digits: int = 3) -> str:
    """A count with a decimal suffix and `digits` significant figures: 8.03B, 6.82M, 65.5K."""
    if count < 0:
        return "-" + format_count(-count, digits)
    for scale, suffix in _COUNT_SUFFIXES:
        if count >= scale * 0.9995:
            return f"{_significant(count / scale, digits)}{suffix}"
    return _significant(count, digits) if count != int(count) else f"{int(count)}"


def _significant(value: float, digits: int) -> str:
    """Format with `digits` significant figures, without scientific notation."""
    if value == 0:
        return "0"
    integer_digits = len(str(int(abs(value)))) if abs(value) >= 1 else 1
    decimals = max(digits - integer_digits, 0)
    text = f"{value:.{decimals}f}"
    return text


def format_int(value: int) -> str:
    """An integer with thousands separators: 4,096."""
    return f"{value:,}"


def format_percent(fraction: float, digits: int = 2) -> str:
    """0.0008 -> '0.08%'."""
    return f"{fraction * 100:.{digits}f}%"
