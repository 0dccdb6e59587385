"""Trace the calibration sets whose cases are trainplan scenarios and write their calibration data.

`--set diffusion` (the default) reads calibration/diffusion_cases.yaml, the real-size diffusion,
video and JEPA steps, traced with `trainplan.engine.measure.compare.sample_trace`; `--set
preference` reads calibration/preference_cases.yaml, preference and reward-model steps, traced
with `compare.measure_scenario` (TRL's step, measure/preference.py); `--set grpo` reads
calibration/grpo_cases.yaml, GRPO training rounds traced the same way; `--set ppo` reads
calibration/ppo_cases.yaml, micro-steps of PPO's training round (huggingface/trl@f2cd5771's
PPOTrainer, measure/preference.py `_ppo_step`) traced the same way. Each case (an id, a split
for the preference, GRPO and PPO sets, and a scenario) is traced in a fresh subprocess (the
fake-tensor graph of a 12B model leaves Python memory behind), and the set's JSON is written: a list of {case,
versions, date, measured, runtime_s} (or {case, error, ...} for a failure), the format of
scripts/calibrate.py's calibration/fake_trace.json, written by its `run_and_write`.

    python scripts/trace_diffusion.py [--set diffusion|preference|grpo|ppo] [--only ID ...] [--out PATH]

With --only, an existing output file is updated in place: the named cases are replaced, the others
kept. Needs the `measure` extra (torch, transformers, diffusers, peft, trl).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import calibrate
from calibrate import run_and_write, selected, summary_line

ROOT = Path(__file__).resolve().parents[1]
#: Each set: its cases and its traces.
SETS = {
    "diffusion": (
        ROOT / "calibration" / "diffusion_cases.yaml",
        ROOT / "calibration" / "diffusion_trace.json",
    ),
    "preference": (
        ROOT / "calibration" / "preference_cases.yaml",
        ROOT / "calibration" / "preference_trace.json",
    ),
    "grpo": (
        ROOT / "calibration" / "grpo_cases.yaml",
        ROOT / "calibration" / "grpo_trace.json",
    ),
    "ppo": (
        ROOT / "calibration" / "ppo_cases.yaml",
        ROOT / "calibration" / "ppo_trace.json",
    ),
}
CASES, OUT = SETS["diffusion"]
CASE_KEYS = {"id", "scenario", "notes", "split"}
SPLITS = ("development", "held-out")


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The case list, checked for unknown keys, duplicate ids, splits and valid scenarios."""
    from trainplan.specs.scenario import scenario_from_mapping

    cases = calibrate.load_cases(path, CASE_KEYS)
    for case in cases:
        scenario_from_mapping(case["scenario"])
        if "split" in case and case["split"] not in SPLITS:
            raise ValueError(f"{case['id']}: split must be one of {', '.join(SPLITS)}")
    return cases


def run_case(case: dict[str, Any], which: str = "diffusion") -> dict[str, Any]:
    """Trace one case (runs in a worker process): a language-model stage with measure_scenario,
    a diffusion, video or JEPA step with sample_trace."""
    import diffusers
    import peft
    import torch
    import transformers
    import trl

    from trainplan.engine.measure.compare import measure_scenario, sample_trace
    from trainplan.specs.scenario import scenario_from_mapping

    record: dict[str, Any] = {
        "case": case,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "diffusers": diffusers.__version__,
            "peft": peft.__version__,
            "trl": trl.__version__,
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    start = time.perf_counter()
    try:
        scenario = scenario_from_mapping(case["scenario"])
        traced = (
            measure_scenario(scenario).measured if "stage" in case["scenario"] else sample_trace(scenario)
        )
        record["measured"] = traced.to_dict()
    except Exception as error:  # a failed case is recorded, not fatal
        record["error"] = f"{type(error).__name__}: {error}"
        record["traceback"] = traceback.format_exc(limit=6)
    record["runtime_s"] = round(time.perf_counter() - start, 2)
    return record


def summary(record: dict[str, Any]) -> str:
    """One line per case: the peak, where it fell, and every term (the EMA copy included)."""
    return summary_line(
        record, ("params", "buffers", "grads", "optimizer", "ema", "activations", "temporaries")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--set", choices=sorted(SETS), default="diffusion", help="which calibration set")
    parser.add_argument("--only", nargs="+", metavar="ID", help="trace only these case ids")
    parser.add_argument("--out", type=Path, help="output JSON (default: the set's)")
    args = parser.parse_args(argv)
    path, out = SETS[args.set]
    args.out = args.out or out
    cases = load_cases(path)
    jobs = [(case, args.set) for case in selected(cases, args.only)]
    all_ids = [case["id"] for case in cases]
    return run_and_write(jobs, run_case, args.out, all_ids, update=bool(args.only), summary=summary)


if __name__ == "__main__":
    try:
        import trainplan  # noqa: F401
    except ImportError:  # running from a checkout without `pip install -e .`
        sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
