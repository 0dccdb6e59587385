"""Traced peaks of the calibration sets whose cases are scenarios against trainplan's estimate.

calibration/diffusion_trace.json holds one record per case of calibration/diffusion_cases.yaml,
and calibration/preference_trace.json one per case of calibration/preference_cases.yaml
(scripts/trace_diffusion.py); each case is a scenario. The estimate runs it with no overhead (a
trace sees no CUDA context) and no gradient accumulation, and its allocated peak is compared
with the traced peak. No diffusion case was used to set a coefficient: the block formulas
(terms/denoisers.py) were derived from the diffusers, torch and V-JEPA sources. A preference
case carries its split: development cases were traced while the loss-side formulas were derived
from TRL's source, held-out ones only after.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.result import Estimate

TRACE = Path(__file__).resolve().parent / "diffusion_trace.json"
PREFERENCE_TRACE = TRACE.with_name("preference_trace.json")
GRPO_TRACE = TRACE.with_name("grpo_trace.json")
PPO_TRACE = TRACE.with_name("ppo_trace.json")


@dataclass(frozen=True)
class Row:
    """One traced case and its estimate."""

    id: str
    measured: dict[str, Any]
    estimate: Estimate
    split: str = "all"

    @property
    def error(self) -> float:
        """(estimated - measured) / measured peak."""
        measured = float(self.measured["peak_bytes"])
        return (self.estimate.allocated_peak_bytes - measured) / measured


def load_records(path: Path = TRACE) -> list[dict[str, Any]]:
    """Every traced case."""
    records: list[dict[str, Any]] = json.loads(path.read_text())
    return records


def evaluate(record: dict[str, Any]) -> Row:
    """The estimate of one traced case, as the trace ran it."""
    case = record["case"]
    scenario = {"micro_batch": 1, **case["scenario"], "grad_accum": 1, "overhead_gib": 0.0}
    return Row(case["id"], record["measured"], estimate(scenario), case.get("split", "all"))
