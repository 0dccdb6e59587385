"""Trace the real-size diffusion, video and JEPA training steps and write their calibration data.

Reads calibration/diffusion_cases.yaml (each case an id and a trainplan scenario), traces each
with `trainplan.engine.measure.compare.sample_trace` in a fresh subprocess (the fake-tensor graph of a
12B model leaves Python memory behind), and writes calibration/diffusion_trace.json: a list of
{case, versions, date, measured, runtime_s} (or {case, error, ...} for a failure), the format of
scripts/calibrate.py's calibration/fake_trace.json, written by its `run_and_write`.

    python scripts/trace_diffusion.py [--only ID ...] [--out PATH]

With --only, an existing output file is updated in place: the named cases are replaced, the others
kept. Needs the `measure` extra (torch, transformers, diffusers, peft).
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
CASES = ROOT / "calibration" / "diffusion_cases.yaml"
OUT = ROOT / "calibration" / "diffusion_trace.json"
CASE_KEYS = {"id", "scenario", "notes"}


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The case list, checked for unknown keys, duplicate ids and valid scenarios."""
    from trainplan.specs.scenario import scenario_from_mapping

    cases = calibrate.load_cases(path, CASE_KEYS)
    for case in cases:
        scenario_from_mapping(case["scenario"])
    return cases


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Trace one case (runs in a worker process)."""
    import diffusers
    import peft
    import torch
    import transformers

    from trainplan.engine.measure.compare import sample_trace
    from trainplan.specs.scenario import scenario_from_mapping

    record: dict[str, Any] = {
        "case": case,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "diffusers": diffusers.__version__,
            "peft": peft.__version__,
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    start = time.perf_counter()
    try:
        record["measured"] = sample_trace(scenario_from_mapping(case["scenario"])).to_dict()
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
    parser.add_argument("--only", nargs="+", metavar="ID", help="trace only these case ids")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default {OUT})")
    args = parser.parse_args(argv)
    cases = load_cases()
    jobs = [(case,) for case in selected(cases, args.only)]
    all_ids = [case["id"] for case in cases]
    return run_and_write(jobs, run_case, args.out, all_ids, update=bool(args.only), summary=summary)


if __name__ == "__main__":
    try:
        import trainplan  # noqa: F401
    except ImportError:  # running from a checkout without `pip install -e .`
        sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
