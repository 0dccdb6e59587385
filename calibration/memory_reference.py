"""Measured peak memory of real training steps (fake-tensor traces) against trainplan's estimate.

calibration/fake_trace.json holds one record per case of calibration/cases.yaml, measured with
`trainplan.engine.measure` (scripts/calibrate.py regenerates it). Each case is turned into the
equivalent scenario, with no overhead (a trace sees no CUDA context) and no gradient
accumulation, and the estimated per-GPU peak is compared with the traced peak.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.result import Estimate
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.scenario import scenario_from_mapping

TRACE = Path(__file__).resolve().parent / "fake_trace.json"
BASE_FOR_PRECISION = {"amp-bf16": "fp32", "bf16": "bf16", "fp32": "fp32"}


def load_records(path: Path = TRACE) -> list[dict[str, Any]]:
    """Every traced case that models a GPU run faithfully (flagged ones are left out)."""
    records: list[dict[str, Any]] = json.loads(path.read_text())
    return [r for r in records if "flagged" not in str(r["case"].get("notes", ""))]


def scenario_of(case: dict[str, Any]) -> dict[str, Any]:
    """The trainplan scenario equivalent to a traced case."""
    data: dict[str, Any] = {
        "model": case["model"],
        "method": "full" if case["method"] == "full" else "lora",
        "precision": case["precision"],
        "optimizer": case["optimizer"],
        "micro_batch": case["micro_batch"],
        "seq_len": case["seq_len"],
        "grad_accum": 1,
        "activation_checkpointing": (
            case.get("checkpoint_policy", "full") if case["gradient_checkpointing"] else "none"
        ),
        "attention": case["attention"],
        "overhead_gib": 0,
        "loss": case.get("loss", "standard"),
        "optimizer_in_backward": case.get("optimizer_in_backward", False),
    }
    if "loss_chunks" in case:
        data["loss_chunks"] = case["loss_chunks"]
    if "fsdp" in case:  # rank 0 of FSDP2 over a fake process group (measure/fsdp.py)
        fsdp = case["fsdp"]
        data |= {
            "gpus": fsdp["ranks"],
            "zero_stage": 3,
            "fsdp_wrap": fsdp.get("wrap", "layers"),
            "fsdp_reduce_dtype": "fp32" if fsdp.get("reduce_fp32") else "compute",
            "reshard_after_forward": fsdp.get("reshard_after_forward", True),
        }
    if case["method"] != "full":
        lora = case.get("lora") or {}
        data["lora"] = {
            "rank": lora.get("rank", 16),
            "alpha": lora.get("alpha", 32),
            "targets": lora.get("targets", "qv"),
            "dora": case["method"] == "dora",
            "dropout": lora.get("dropout", 0.0),
        }
        data["base_weights"] = BASE_FOR_PRECISION[case["precision"]]
    return data


@dataclass(frozen=True)
class MemoryRow:
    """A traced case, its measurement and our estimate."""

    id: str
    measured: dict[str, Any]
    estimate: Estimate

    @property
    def error(self) -> float:
        """estimated / measured peak - 1 (the estimate as max_memory_allocated() would see it:
        FSDP2's reserved stream pools are not allocations a trace makes)."""
        return self.estimate.allocated_peak_bytes / float(self.measured["peak_bytes"]) - 1


def evaluate(record: dict[str, Any]) -> MemoryRow:
    """Estimate one traced case (a "text-only" case traced the language model of a multimodal
    config, so its vision tower is left out of the estimate too; a case with an inline `config`
    is read from it)."""
    case = record["case"]
    inline = case.get("config")  # a case with its own config.json (calibration/cases.yaml)
    spec = (
        spec_from_config(inline, case["model"]) if isinstance(inline, dict) else resolve_model(case["model"])
    )
    if "text-only" in case["id"]:
        spec = dataclasses.replace(spec, extras=())
    result = estimate(scenario_from_mapping(scenario_of(case)), model=spec)
    return MemoryRow(record["case"]["id"], record["measured"], result)
