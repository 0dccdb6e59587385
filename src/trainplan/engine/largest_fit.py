"""Exact answers to "what is the largest micro-batch / sequence that fits?" and "how few GPUs?".

Peak memory never decreases with micro-batch or sequence length (a tested property), so a
doubling then bisection search over `estimate()` finds the exact largest value that fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from trainplan.engine.estimate import estimate
from trainplan.engine.result import CONTEXT_WINDOW, Estimate, Largest
from trainplan.inputs.resolve import resolve_model, scenario_gpu
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.model import ModelSpec
from trainplan.specs.rollout import resolved_rollout
from trainplan.specs.scenario import Scenario, data_parallel, field_infos, field_noun
from trainplan.specs.units import format_gib

#: The fields a largest-fit search runs over, each up to the field table's own maximum.
SEARCHABLE = {name: int(field_infos()[name].maximum or 0) for name in ("micro_batch", "seq_len")}
DEFAULT_HEADROOM = (
    0.05  # share of GPU memory left free by default: fragmentation and spikes the estimate cannot see
)
# Useful multiples, largest first: (from this value up, round down to a multiple of this).
MULTIPLES = {"micro_batch": ((16, 8), (4, 2)), "seq_len": ((2048, 256), (256, 64))}


def useful_multiple(field: str, value: int) -> int:
    """The multiple to round `value` down to: 8 for micro-batches from 16, 256 for sequences
    from 2,048 (GPU kernels and data loaders favour them), 1 below the smallest step."""
    return next((multiple for start, multiple in MULTIPLES[field] if value >= start), 1)


def largest_fitting(
    scenario: Scenario,
    field: str,
    model: ModelSpec | None = None,
    headroom: float = DEFAULT_HEADROOM,
    past_context: bool = False,
) -> Largest | None:
    """The largest `field` value whose peak fits the scenario's GPU with `headroom` of its memory
    left free, rounded down to a useful multiple (headroom 0: the exact boundary, not rounded);
    None when even 1 does not fit. A sequence stops at the model's context window (`ceiling`
    says so) unless `past_context`."""
    if field not in SEARCHABLE:
        raise InputError("max", f"can search {', '.join(SEARCHABLE)}, not {shown_value(field)}")
    if not 0 <= headroom <= 0.5:
        raise InputError("headroom", f"must be between 0 and 0.5 (a share of GPU memory), got {headroom:g}")
    capacity = scenario_gpu(scenario).memory_bytes * (1 - headroom)
    window = 0  # 0: no stop short of SEARCHABLE (a config without a window, or not a language model)
    if field == "seq_len" and not past_context:
        if model is None:  # resolved once, for the window and every estimate of the search
            model = resolve_model(scenario.model, scenario.force, scenario.vae)
        window = model.context_window

    floor, step = search_grid(scenario, field)

    def run(value: int) -> Estimate:
        if field == "micro_batch":
            return estimate(dataclasses.replace(scenario, micro_batch=value), model=model)
        return estimate(dataclasses.replace(scenario, seq_len=value), model=model)

    def fits(n: int) -> bool:
        return run(floor + n * step).total_bytes <= capacity

    ceiling = window if 0 < window < SEARCHABLE[field] else SEARCHABLE[field]
    found = _largest(fits, (ceiling - floor) // step)
    if not found:
        return None
    exact = floor + found * step
    multiple = useful_multiple(field, exact) if headroom > 0 and exact < ceiling else 1
    value = exact // multiple * multiple
    if (value - floor) % step or value <= floor:  # a rounding the stage cannot run
        value = exact
    limit = CONTEXT_WINDOW if exact == ceiling and ceiling == window else ""
    return Largest(run(value), field, value, exact, headroom, multiple, limit)


def search_grid(scenario: Scenario, field: str) -> tuple[int, int]:
    """(floor, step) of the values a search may take: value = floor + n x step, n >= 1. A
    context-parallel sequence splits into 2 x context_parallel equal chunks (step); a GRPO
    sequence holds its completion and at least one prompt token (floor completion_len); its
    micro-batch x steps_per_generation x replicas must be a multiple of generations (step: the
    smallest micro-batch that makes it one). Otherwise (0, 1)."""
    rollout = resolved_rollout(scenario)
    chunks = 2 * scenario.context_parallel if scenario.context_parallel > 1 else 1
    if field == "seq_len":
        return (rollout.completion_len if rollout else 0), chunks
    if rollout is None:
        return 0, 1
    batch = rollout.steps_per_generation * data_parallel(scenario)
    return 0, rollout.generations // math.gcd(rollout.generations, batch)


def largest_that_fits(
    scenario: Scenario,
    field: str,
    model: ModelSpec | None = None,
    headroom: float = DEFAULT_HEADROOM,
    past_context: bool = False,
) -> Largest:
    """`largest_fitting`, or the nothing-fits InputError on `max` (the CLI's and the API's answer)."""
    found = largest_fitting(scenario, field, model=model, headroom=headroom, past_context=past_context)
    if found is None:
        raise nothing_fits(scenario, field, model)
    return found


def nothing_fits(scenario: Scenario, field: str, model: ModelSpec | None) -> InputError:
    """The error when even `field` = 1 does not fit: how far off it is, and what to try."""
    gpu = scenario_gpu(scenario)
    floor, step = search_grid(scenario, field)
    smallest = (
        dataclasses.replace(scenario, micro_batch=floor + step)
        if field == "micro_batch"
        else dataclasses.replace(scenario, seq_len=floor + step)
    )
    at_one = estimate(smallest, model=model)
    tips = []
    if scenario.method != "qlora":
        tips.append("QLoRA" if scenario.method == "lora" else "LoRA or QLoRA")
    if scenario.activation_checkpointing != "full":
        tips.append("full activation checkpointing")
    if field == "micro_batch" and scenario.seq_len > 1:
        tips.append("a shorter sequence length")
    tips.append("more GPUs with ZeRO-3" if scenario.zero_stage < 3 else "more GPUs")
    tips.append("a GPU with more memory")
    return InputError("max", nothing_fits_line(field, gpu.name, at_one.total_bytes, gpu.memory_bytes, tips))


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


def nothing_fits_line(field: str, gpu: str, at_one_bytes: float, gpu_bytes: float, tips: list[str]) -> str:
    """'not even a micro-batch of 1 fits on RTX 4090 (30.12 GiB per GPU; it holds 23.99 GiB):
    try QLoRA, ... or a GPU with more memory'."""
    advice = ", ".join(tips[:-1]) + f" or {tips[-1]}"
    return (
        f"not even a {field_noun(field)} of 1 fits on {gpu} ({format_gib(at_one_bytes)} per GPU; "
        f"it holds {format_gib(gpu_bytes)}): try {advice}"
    )
