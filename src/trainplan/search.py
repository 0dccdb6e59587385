"""Exact answers to "what is the largest micro-batch / sequence that fits?" and "how few GPUs?".

Peak memory never decreases with micro-batch or sequence length (a tested property), so a
doubling then bisection search over `estimate()` finds the exact largest value that fits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from trainplan.errors import InputError
from trainplan.estimate import estimate
from trainplan.gpus import find_gpu
from trainplan.model import ModelSpec
from trainplan.result import Estimate
from trainplan.scenario import Scenario

SEARCHABLE = {"micro_batch": 65536, "seq_len": 10_000_000}


def largest_fitting(scenario: Scenario, field: str, model: ModelSpec | None = None) -> Estimate | None:
    """The estimate at the largest `field` value whose peak fits the scenario's GPU (None when
    even 1 does not fit)."""
    if field not in SEARCHABLE:
        raise InputError("max", f"can search {', '.join(SEARCHABLE)}, not {field!r}")
    capacity = find_gpu(scenario.gpu).memory_bytes

    def run(value: int) -> Estimate:
        if field == "micro_batch":
            return estimate(dataclasses.replace(scenario, micro_batch=value), model=model)
        return estimate(dataclasses.replace(scenario, seq_len=value), model=model)

    def fits(value: int) -> bool:
        return run(value).total_bytes <= capacity

    best = _largest(fits, SEARCHABLE[field])
    return run(best) if best else None


def _largest(fits: Callable[[int], bool], ceiling: int) -> int:
    """Largest n in [1, ceiling] with fits(n), for a monotone `fits`; 0 if none."""
    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= ceiling and fits(high):
        low, high = high, high * 2
    high = min(high, ceiling + 1)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low
