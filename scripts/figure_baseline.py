"""Write tests/reference/figure_baseline.json: a digest of every figure trainplan gives for each
catalog model under a set of scenarios, so that a change meant to move no figure (a move, a
rename, a reshape) can show that it moved none, and a change that moves figures shows which.

Each case is a catalog model with one scenario of SCENARIOS (those that do not apply to the
model's kind are left out, and a refusal is recorded as its message); its entry is the SHA-256
of the estimate's JSON (every memory term, time, cost and energy figure, the notes) and, to read
a difference at a glance, the peak bytes per GPU and the step seconds. Floats are hashed to 12
significant digits.

    python scripts/figure_baseline.py            # rewrite the file (after a change meant to move figures)
    python scripts/figure_baseline.py --check    # list the cases whose figures differ, exit 1 if any
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.inputs.catalogs.models import model_records
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "reference" / "figure_baseline.json"
TEXT_KINDS = ("text", "text+vision", "visual-autoregressive")
# name -> (the modalities it applies to, the scenario fields)
SCENARIOS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "default": (("text", "text+vision", "visual-autoregressive", "image", "video"), {}),
    "full-zero3-8": (
        TEXT_KINDS,
        {
            "method": "full",
            "gpus": 8,
            "zero_stage": 3,
            "micro_batch": 2,
            "seq_len": 4096,
            "activation_checkpointing": "full",
        },
    ),
    "qlora-one": (
        TEXT_KINDS,
        {
            "method": "qlora",
            "lora": {"targets": "all-linear", "dropout": 0.05},
            "gpu": "RTX-4090",
            "micro_batch": 1,
        },
    ),
    "lora-torchtune": (TEXT_KINDS, {"recipe": "torchtune", "method": "lora", "micro_batch": 4}),
    "tp-pp-64": (
        TEXT_KINDS,
        {
            "method": "full",
            "gpus": 64,
            "tensor_parallel": 8,
            "pipeline_parallel": 2,
            "zero_stage": 1,
            "micro_batch": 1,
            "grad_accum": 32,
            "offload": "none",
            "activation_checkpointing": "selective",
            "precision": "bf16-mixed",
        },
    ),
    "image-lora-512": (("image",), {"method": "lora", "resolution": "512x512", "micro_batch": 2}),
    "video-lora-17": (
        ("video",),
        {"method": "lora", "resolution": "512x512", "frames": 17, "micro_batch": 1},
    ),
}


def canonical(value: Any) -> Any:
    """`value` with every float to 12 significant digits: a real change shows, the last bits of
    a libm function on another machine do not."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {str(key): canonical(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [canonical(item) for item in value]
    return value


def figures() -> dict[str, dict[str, Any]]:
    """case -> {digest, peak_bytes, step_seconds} or {refused}."""
    found: dict[str, dict[str, Any]] = {}
    for record in model_records():
        for name, (modalities, fields) in SCENARIOS.items():
            if record.modality not in modalities:
                continue
            case = f"{record.name} / {name}"
            try:
                result = estimate(scenario_from_mapping({"model": record.name, **fields}))
            except InputError as error:
                found[case] = {"refused": str(error)}
                continue
            text = json.dumps(canonical(result.to_dict()), sort_keys=True, default=str)
            found[case] = {
                "digest": hashlib.sha256(text.encode()).hexdigest(),
                "peak_bytes": result.total_bytes,
                "step_seconds": result.to_dict()["time"]["step_s"],
            }
    return found


def differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The cases added, gone or changed, one line each."""
    lines = [f"gone: {case}" for case in sorted(set(old) - set(new))]
    lines += [f"new: {case}" for case in sorted(set(new) - set(old))]
    for case in sorted(set(old) & set(new)):
        if old[case] != new[case]:
            before, after = old[case], new[case]
            lines.append(
                f"changed: {case}: peak {before.get('peak_bytes')} -> {after.get('peak_bytes')}, "
                f"step {before.get('step_seconds')} -> {after.get('step_seconds')}"
                + (f", {after['refused']}" if "refused" in after else "")
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    args = parser.parse_args(argv)
    new = figures()
    if args.check:
        lines = differences(json.loads(OUT.read_text()), new)
        print("\n".join(lines) or f"{len(new)} cases: every figure as in {OUT.name}")
        return 1 if lines else 0
    OUT.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(new)} cases to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
