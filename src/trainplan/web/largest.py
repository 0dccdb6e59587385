"""`POST /api/estimate?max=FIELD`: the largest micro-batch or sequence length that fits.

The search is `trainplan.search.largest_fitting`, the same one as `trainplan estimate --max`:
exact (doubling, then bisection over `estimate()`), and bounded by the field's range
(micro_batch <= 65536, seq_len <= 10,000,000: at most about 50 estimates).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

from trainplan.errors import InputError
from trainplan.estimate import estimate
from trainplan.gpus import find_gpu
from trainplan.model import ModelSpec
from trainplan.result import Estimate
from trainplan.scenario import Scenario
from trainplan.search import largest_fitting
from trainplan.units import format_gib

MaxField = Literal["micro_batch", "seq_len"]
MAX_FIELDS: tuple[str, ...] = get_args(MaxField)  # the keys of search.SEARCHABLE (a test checks)


def largest(scenario: Scenario, field: str, model: ModelSpec | None) -> tuple[Estimate, dict[str, Any]]:
    """The estimate at the largest `field` value that fits, and the `max` object of the CLI's
    `--json` (`{"field", "value"}`); an InputError on `max` when not even 1 fits."""
    found = largest_fitting(scenario, field, model=model)
    if found is None:
        raise nothing_fits(scenario, field, model)
    return found, {"field": field, "value": getattr(found.scenario, field)}


def nothing_fits(scenario: Scenario, field: str, model: ModelSpec | None) -> InputError:
    """The error when even `field` = 1 does not fit: how far off it is, and what to try."""
    gpu = find_gpu(scenario.gpu)
    smallest = (
        dataclasses.replace(scenario, micro_batch=1)
        if field == "micro_batch"
        else dataclasses.replace(scenario, seq_len=1)
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
    advice = ", ".join(tips[:-1]) + f" or {tips[-1]}"
    return InputError(
        "max",
        f"not even {field} = 1 fits on {gpu.name} ({format_gib(at_one.total_bytes)} per GPU; "
        f"it holds {format_gib(gpu.memory_bytes)}): try {advice}",
    )
