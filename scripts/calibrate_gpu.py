"""Real-GPU peaks against trainplan's three memory figures (`make calibrate-gpu`).

Runs each step of calibration/gpu_cases.yaml on the CUDA GPU at hand, in a fresh process (its
own CUDA context): the model built from the catalog's config with random weights (no download),
three training steps (forward with the causal-LM loss, backward, optimizer step, zero_grad), and
records

- `allocated_bytes`: torch.cuda.max_memory_allocated() (live tensors);
- `reserved_bytes`: torch.cuda.max_memory_reserved() (the caching allocator's pool);
- `device_bytes`: the device's used memory after the steps (total - free from cudaMemGetInfo,
  what nvidia-smi shows for this process alone; the pool is never given back, so it holds the
  peak);
- `context_bytes`: the used memory once CUDA is initialised, before any tensor (the context).

Each record is compared with `trainplan.estimate` of the same scenario on the matching catalog GPU
(its derived overhead) and written to calibration/gpu_runs.json with the library versions, the
GPU and the date; scripts/accuracy.py shows them. Without a CUDA GPU it says so and exits 0.

    python scripts/calibrate_gpu.py [--only ID ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "calibration"))

from calibrate import load_cases, measure_kwargs, resolve_config  # noqa: E402
from memory_reference import scenario_of  # noqa: E402

CASES = ROOT / "calibration" / "gpu_cases.yaml"
OUT = ROOT / "calibration" / "gpu_runs.json"
STEPS = 3
#: The three figures: (the record's key, the estimate's attribute, what reports it).
FIGURES = (
    ("allocated_bytes", "allocated_peak_bytes", "max_memory_allocated"),
    ("reserved_bytes", "reserved_peak_bytes", "max_memory_reserved"),
    ("device_bytes", "total_bytes", "device used (nvidia-smi)"),
)


def estimate_of(case: dict[str, Any], gpu: str) -> Any:
    """trainplan's estimate of a case's scenario on `gpu`, with the derived overhead."""
    from trainplan import estimate

    fields = {key: value for key, value in scenario_of(case).items() if key != "overhead_gib"}
    return estimate({**fields, "gpu": gpu, "gpus": 1})


def compare(record: dict[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """(case id, figure, measured bytes, estimated bytes, estimated / measured - 1) for the three
    figures of one record."""
    result = estimate_of(record["case"], record["gpu_catalog"])
    rows = []
    for key, attribute, label in FIGURES:
        measured = float(record["measured"][key])
        estimated = float(getattr(result, attribute))
        rows.append((str(record["case"]["id"]), label, measured, estimated, estimated / measured - 1))
    return rows


def catalog_gpu(device_name: str) -> str:
    """The catalog GPU whose name or alias matches the device's name (torch.cuda.get_device_name),
    or the first one whose name shares its model number."""
    from trainplan.inputs.catalogs.gpus import gpu_catalog, matching_gpus

    name = device_name.removeprefix("NVIDIA ").strip()
    found = matching_gpus(name, exact_first=True)
    if found:
        return found[0].name
    words = [word for word in name.split() if any(ch.isdigit() for ch in word)]
    for gpu in gpu_catalog():
        if words and words[0] in gpu.name:
            return gpu.name
    raise SystemExit(f"no catalog GPU matches {device_name!r}; add it to a GPU file")


def run_case(case: dict[str, Any]) -> dict[str, Any]:
    """Three real training steps of one case on the CUDA device (called in a fresh process)."""
    import peft
    import torch
    import transformers

    from trainplan.engine.measure.model import build_model, make_optimizer

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    free, total = torch.cuda.mem_get_info()
    context = total - free - torch.cuda.memory_reserved()
    config, source = resolve_config(case)
    kwargs = measure_kwargs(case)
    amp = kwargs["precision"] == "amp-bf16"
    with torch.device("cuda"):
        built = build_model(
            config,
            method=kwargs["method"],
            lora_rank=kwargs.get("lora_rank", 16),
            lora_alpha=kwargs.get("lora_alpha", 32),
            lora_targets=tuple(kwargs.get("lora_targets", ("q_proj", "v_proj"))),
            lora_dropout=kwargs.get("lora_dropout", 0.0),
            dtype=torch.bfloat16 if kwargs["precision"] == "bf16" else torch.float32,
            attention=kwargs.get("attention", "sdpa"),
            gradient_checkpointing=kwargs.get("gradient_checkpointing", False),
            checkpoint_policy=kwargs.get("checkpoint_policy", "full"),
        )
        model = built.model
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer, _ = make_optimizer(kwargs["optimizer"], trainable)
        torch.cuda.reset_peak_memory_stats()
        for _ in range(STEPS):
            batch = built.make_batch(kwargs["micro_batch"], kwargs["seq_len"])
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                loss = model(**batch).loss
            loss.backward()
            del batch, loss
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return {
        "case": case,
        "config_source": source,
        "gpu": torch.cuda.get_device_name(),
        "gpu_catalog": catalog_gpu(torch.cuda.get_device_name()),
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
        },
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "measured": {
            "allocated_bytes": torch.cuda.max_memory_allocated(),
            "reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_bytes": total - free,
            "context_bytes": context,
            "steps": STEPS,
        },
    }


def fits_here(case: dict[str, Any], gpu: str, total_bytes: int) -> bool:
    """Whether the estimate says the case fits the device's memory (with 10% to spare)."""
    return float(estimate_of(case, gpu).total_bytes) <= 0.9 * total_bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # run one case, print its record
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("calibrate-gpu: no CUDA GPU here; skipped")
        return 0
    cases = load_cases(CASES)
    if args.case is not None:
        print(json.dumps(run_case(next(c for c in cases if c["id"] == args.case))))
        return 0
    gpu = catalog_gpu(torch.cuda.get_device_name())
    total = torch.cuda.mem_get_info()[1]
    records: list[dict[str, Any]] = json.loads(args.out.read_text()) if args.out.exists() else []
    for case in cases:
        if args.only is not None and case["id"] not in args.only:
            continue
        if not fits_here(case, gpu, total):
            print(f"{case['id']}: the estimate does not fit {gpu}; skipped")
            continue
        ran = subprocess.run(
            [sys.executable, __file__, "--case", case["id"]], capture_output=True, text=True, check=False
        )
        if ran.returncode != 0:
            print(f"{case['id']}: failed\n{ran.stderr[-2000:]}")
            continue
        record = json.loads(ran.stdout.strip().splitlines()[-1])
        records = [r for r in records if not (r["case"]["id"] == case["id"] and r["gpu"] == record["gpu"])]
        records.append(record)
        for case_id, label, measured, estimated, error in compare(record):
            print(f"{case_id:45s} {label:26s} {measured / 2**30:8.2f} {estimated / 2**30:8.2f} {error:+.1%}")
        print(f"{'':45s} {'CUDA context':26s} {record['measured']['context_bytes'] / 2**30:8.2f}")
    args.out.write_text(json.dumps(records, indent=1) + "\n")
    print(f"wrote {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
