"""Run measured mode on the calibration cases and write the ground-truth file.

Reads calibration/cases.yaml, looks each case's `model` up in src/trainplan/data/models.yaml (by
name or alias; a case's inline `config:` is used only when the catalog lacks the model), runs
`trainplan.engine.measure.measure_training_step` for each case in a fresh subprocess (fake-tensor graphs
of large models leave Python memory behind), and writes calibration/fake_trace.json: a list of
{case, config_source, measured, versions, date, runtime_s} (or {case, error, ...} for a failure).

    python scripts/calibrate.py [--only ID ...] [--out PATH] [--jobs N]

With --only, an existing output file is updated in place: the named cases are replaced, the others
kept. Needs the `measure` extra (torch, transformers, peft).
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
CASES = ROOT / "calibration" / "cases.yaml"
OUT = ROOT / "calibration" / "fake_trace.json"
CASE_KEYS = {
    "id",
    "model",
    "method",
    "lora",
    "precision",
    "optimizer",
    "micro_batch",
    "seq_len",
    "gradient_checkpointing",
    "attention",
    "config",
    "notes",
    "steps",
    "loss",
    "loss_chunks",
    "optimizer_in_backward",
    "checkpoint_policy",
    "fsdp",
}


def load_cases(path: Path, keys: set[str] = CASE_KEYS) -> list[dict[str, Any]]:
    """The case list, checked for keys outside `keys` and duplicate ids."""
    cases = yaml.safe_load(path.read_text())
    if not isinstance(cases, list):
        raise SystemExit(f"{path}: expected a list of cases")
    seen: set[str] = set()
    for case in cases:
        unknown = set(case) - keys
        if unknown:
            raise SystemExit(f"{path}: case {case.get('id')!r} has unknown keys {sorted(unknown)}")
        if case["id"] in seen:
            raise SystemExit(f"{path}: duplicate case id {case['id']!r}")
        seen.add(case["id"])
    return cases


def resolve_config(case: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(HF config, where it came from) for a case: the catalog record, else an inline config."""
    from trainplan.inputs.catalogs.models import find_model_record

    record = find_model_record(str(case["model"]))
    if record is not None:
        return dict(record.config), "catalog"
    if isinstance(case.get("config"), dict):
        return case["config"], "inline"
    raise SystemExit(f"case {case['id']!r}: model {case['model']!r} is not in the catalog and has no config")


def measure_kwargs(case: dict[str, Any]) -> dict[str, Any]:
    """measure_training_step keyword arguments for a case."""
    kwargs: dict[str, Any] = {
        key: case[key]
        for key in (
            "method",
            "precision",
            "optimizer",
            "micro_batch",
            "seq_len",
            "gradient_checkpointing",
            "attention",
            "steps",
            "loss",
            "loss_chunks",
            "optimizer_in_backward",
            "checkpoint_policy",
        )
        if key in case
    }
    if "fsdp" in case:
        from trainplan.engine.measure.fsdp import FsdpTrace

        kwargs["fsdp"] = FsdpTrace(**case["fsdp"])
    lora = case.get("lora") or {}
    if "rank" in lora:
        kwargs["lora_rank"] = lora["rank"]
    if "alpha" in lora:
        kwargs["lora_alpha"] = lora["alpha"]
    if "targets" in lora:
        kwargs["lora_targets"] = tuple(lora["targets"])
    if "dropout" in lora:
        kwargs["lora_dropout"] = lora["dropout"]
    return kwargs


def run_case(case: dict[str, Any], config: dict[str, Any], source: str) -> dict[str, Any]:
    """Measure one case (runs in a worker process)."""
    import peft
    import torch
    import transformers

    from trainplan.engine.measure import measure_training_step

    record: dict[str, Any] = {
        "case": case,
        "config_source": source,
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    start = time.perf_counter()
    try:
        measured = measure_training_step(config, **measure_kwargs(case))
        record["measured"] = measured.to_dict()
    except Exception as error:  # a failed case is recorded, not fatal
        record["error"] = f"{type(error).__name__}: {error}"
        record["traceback"] = traceback.format_exc(limit=6)
    record["runtime_s"] = round(time.perf_counter() - start, 2)
    return record


def summary_line(
    record: dict[str, Any],
    names: tuple[str, ...] = ("params", "grads", "optimizer", "activations", "temporaries"),
) -> str:
    """One line per case for the console: the peak, where it fell, and the `names` terms."""
    case_id = record["case"]["id"]
    if "error" in record:
        return f"{case_id:55s} ERROR {record['error'][:120]}"
    m = record["measured"]
    gib = 2**30
    parts = " ".join(f"{name[:4]}={m[f'{name}_bytes'] / gib:.2f}" for name in names)
    where = f"{m['peak_phase']}@{m['peak_step']}"
    return f"{case_id:55s} {m['peak_bytes'] / gib:8.2f} GiB {where:12s} {parts} ({record['runtime_s']} s)"


def run_and_write(
    jobs: list[tuple[Any, ...]],
    run: Any,
    out: Path,
    all_ids: list[str],
    *,
    update: bool,
    workers: int = 1,
    summary: Any = summary_line,
) -> int:
    """Run `run(*job)` for each job (its first element the case) in fresh spawned processes,
    print a summary line per record, and write the records to `out` in `all_ids` order; with
    `update`, an existing file keeps the cases not run. Returns the exit status (1 on a failure)."""
    records: dict[str, dict[str, Any]] = {}
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=max(1, workers), mp_context=context, max_tasks_per_child=1
    ) as pool:
        futures = {pool.submit(run, *job): job[0]["id"] for job in jobs}
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            records[futures[future]] = record
            print(summary(record), flush=True)
    kept = {r["case"]["id"]: r for r in json.loads(out.read_text())} if update and out.exists() else {}
    kept.update(records)
    ordered = [kept[i] for i in all_ids if i in kept]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(ordered, indent=1) + "\n")
    failures = sum(1 for r in records.values() if "error" in r)
    print(f"wrote {len(ordered)} records to {out} ({failures} failed in this run)")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these case ids")
    parser.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default {OUT})")
    parser.add_argument("--cases", type=Path, default=CASES, help=f"cases file (default {CASES})")
    parser.add_argument("--jobs", type=int, default=1, help="cases measured in parallel (default 1)")
    args = parser.parse_args(argv)

    cases = load_cases(args.cases)
    jobs = [(case, *resolve_config(case)) for case in selected(cases, args.only)]
    all_ids = [case["id"] for case in cases]
    return run_and_write(jobs, run_case, args.out, all_ids, update=bool(args.only), workers=args.jobs)


def selected(cases: list[dict[str, Any]], only: list[str] | None) -> list[dict[str, Any]]:
    """The cases named by --only (all without it); unknown ids are an error."""
    if not only:
        return cases
    missing = set(only) - {case["id"] for case in cases}
    if missing:
        raise SystemExit(f"unknown case ids: {sorted(missing)}")
    return [case for case in cases if case["id"] in set(only)]


if __name__ == "__main__":
    try:
        import trainplan  # noqa: F401
    except ImportError:  # running from a checkout without `pip install -e .`
        sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
