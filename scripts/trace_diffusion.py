"""Trace the real-size diffusion, video and JEPA training steps and write their calibration data.

Reads calibration/diffusion_cases.yaml (each case an id and a trainplan scenario), traces each
with `trainplan.measure.compare.sample_trace` in a fresh subprocess (the fake-tensor graph of a
12B model leaves Python memory behind), and writes calibration/diffusion_trace.json: a list of
{case, versions, date, measured, runtime_s} (or {case, error, ...} for a failure), the format of
scripts/calibrate.py's calibration/fake_trace.json.

    python scripts/trace_diffusion.py [--only ID ...] [--out PATH]

With --only, an existing output file is updated in place: the named cases are replaced, the others
kept. Needs the `measure` extra (torch, transformers, diffusers, peft).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "calibration" / "diffusion_cases.yaml"
OUT = ROOT / "calibration" / "diffusion_trace.json"
CASE_KEYS = {"id", "scenario", "notes"}


def load_cases(path: Path = CASES) -> list[dict[str, Any]]:
    """The case list, checked for unknown keys, duplicate ids and valid scenarios."""
    from trainplan.scenario import scenario_from_mapping

    cases = yaml.safe_load(path.read_text())
    if not isinstance(cases, list):
        raise SystemExit(f"{path}: expected a list of cases")
    seen: set[str] = set()
    for case in cases:
        unknown = set(case) - CASE_KEYS
        if unknown:
            raise SystemExit(f"{path}: case {case.get('id')!r} has unknown keys {sorted(unknown)}")
        if case["id"] in seen:
            raise SystemExit(f"{path}: duplicate case id {case['id']!r}")
        seen.add(case["id"])
        scenario_from_mapping(case["scenario"])
    return cases


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Trace one case (runs in a worker process)."""
    import diffusers
    import peft
    import torch
    import transformers

    from trainplan.measure.compare import sample_trace
    from trainplan.scenario import scenario_from_mapping

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


def summary_line(record: dict[str, Any]) -> str:
    """One line per case for the console."""
    case_id = record["case"]["id"]
    if "error" in record:
        return f"{case_id:45s} ERROR {record['error'][:120]}"
    m = record["measured"]
    gib = 2**30
    parts = " ".join(
        f"{name[:4]}={m[f'{name}_bytes'] / gib:.2f}"
        for name in ("params", "buffers", "grads", "optimizer", "ema", "activations", "temporaries")
    )
    where = f"{m['peak_phase']}@{m['peak_step']}"
    return f"{case_id:45s} {m['peak_bytes'] / gib:8.2f} GiB {where:12s} {parts} ({record['runtime_s']} s)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", nargs="+", metavar="ID", help="trace only these case ids")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default {OUT})")
    args = parser.parse_args(argv)

    cases = load_cases()
    if args.only:
        missing = set(args.only) - {case["id"] for case in cases}
        if missing:
            raise SystemExit(f"unknown case ids: {sorted(missing)}")
        cases = [case for case in cases if case["id"] in set(args.only)]
    records: dict[str, dict[str, Any]] = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=context, max_tasks_per_child=1
    ) as pool:
        futures = {pool.submit(run_case, case): case["id"] for case in cases}
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            records[futures[future]] = record
            print(summary_line(record), flush=True)
    ordered = [records[case["id"]] for case in cases]
    if args.only and args.out.exists():
        kept = {r["case"]["id"]: r for r in json.loads(args.out.read_text())}
        kept.update(records)
        ordered = [kept[case["id"]] for case in load_cases() if case["id"] in kept]
    args.out.write_text(json.dumps(ordered, indent=1) + "\n")
    failures = sum(1 for r in records.values() if "error" in r)
    print(f"wrote {len(ordered)} records to {args.out} ({failures} failed in this run)")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        import trainplan  # noqa: F401
    except ImportError:  # running from a checkout without `pip install -e .`
        sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
