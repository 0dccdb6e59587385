"""`make bench`: speed figures, printed (not asserted).

- one in-process estimate, fit table included (model and GPU catalogs warm), median and p99 over
  many calls, against the 100 us goal; and the same where each call's coefficients are new (the
  cache of per_replica.py does not answer)
- the same first estimate as a multiple of a closed-form plain-Python estimate of the same
  scenario (bench/closed_form.py), against the 6x goal
- `trainplan estimate` cold start as a fresh process (import + catalogs + estimate + render),
  also as a multiple of a bare `python -c pass` (paired runs)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def in_process(repeats: int = 2000) -> list[float]:
    from trainplan import estimate
    from trainplan.inputs.resolve import resolve_model
    from trainplan.specs.scenario import Scenario

    scenario = Scenario(model="Llama-3.1-8B", method="full", gpus=8, zero_stage=3)
    model = resolve_model(scenario.model)
    estimate(scenario, model=model)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        estimate(scenario, model=model)
        times.append(time.perf_counter() - start)
    return times


def in_process_uncached(repeats: int = 500) -> list[float]:
    """As `in_process`, with a scenario whose coefficients are new at each call (its seq_len
    changes), so the coefficients cache never answers: the cost of a first estimate."""
    from trainplan import estimate
    from trainplan.inputs.resolve import resolve_model
    from trainplan.specs.scenario import Scenario

    model = resolve_model("Llama-3.1-8B")
    scenarios = [
        Scenario(model="Llama-3.1-8B", method="full", gpus=8, zero_stage=3, seq_len=1024 + i)
        for i in range(repeats)
    ]
    estimate(scenarios[0], model=model)
    times = []
    for scenario in scenarios[1:]:
        start = time.perf_counter()
        estimate(scenario, model=model)
        times.append(time.perf_counter() - start)
    return times


def closed_form(repeats: int = 500) -> list[float]:
    """The yardstick: bench/closed_form.py on the scenarios of `in_process_uncached`, from the
    same config and the same GPU catalog."""
    sys.path.insert(0, str(ROOT / "bench"))
    from closed_form import closed_form_estimate

    from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog
    from trainplan.inputs.resolve import model_config

    config = model_config("Llama-3.1-8B")[0]
    memories = [(gpu.name, float(gpu.memory_bytes)) for gpu in gpu_catalog()]
    peak = find_gpu("H100 SXM").dense_flops_per_s["bf16"] or 0.0
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        closed_form_estimate(
            config,
            seq_len=1024 + i,
            micro_batch=1,
            gpus=8,
            zero_stage=3,
            gpu_memories=memories,
            peak_flops=peak,
        )
        times.append(time.perf_counter() - start)
    return times


# The children run as an installed package does: with its bytecode cached (a shell that sets
# PYTHONDONTWRITEBYTECODE would make every run compile the whole package again).
_AS_INSTALLED = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def cold_start(repeats: int = 11) -> tuple[list[float], float, float]:
    """`trainplan estimate --json` as a fresh process, paired with a bare `python -c pass` run
    just before it: (its wall times, median wall ratio, median CPU-time ratio). Pairing keeps the
    ratio steady on a shared machine, where either alone drifts with the load."""
    trainplan = str(Path(sys.executable).with_name("trainplan"))
    args = [trainplan, "estimate", "--scenario", str(ROOT / "examples/default.yaml"), "--json"]
    subprocess.run(
        args, check=True, capture_output=True, env=_AS_INSTALLED
    )  # bytecode and data caches written
    times, walls, cpus = [], [], []
    for _ in range(repeats):
        bare = _timed([sys.executable, "-c", "pass"])
        run = _timed(args)
        times.append(run[0])
        walls.append(run[0] / bare[0])
        cpus.append(run[1] / bare[1])
    return times, statistics.median(walls), statistics.median(cpus)


def _timed(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one child process."""
    import resource

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    cpu_before, start = cpu(), time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=_AS_INSTALLED)
    return time.perf_counter() - start, cpu() - cpu_before


def report(name: str, times: list[float], budget_s: float) -> None:
    ordered = sorted(times)
    median = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    print(
        f"{name:<34} median {median * 1e3:8.3f} ms  p99 {p99 * 1e3:8.3f} ms  "
        f"budget {budget_s * 1e3:6.1f} ms  ratio {median / budget_s:5.2f}"
    )


def main() -> None:
    report("estimate() in process", in_process(), 1e-4)
    uncached = in_process_uncached()
    report("  new coefficients each call", uncached, 1e-4)
    yardstick = statistics.median(closed_form())
    multiple = statistics.median(uncached) / yardstick
    print(f"{'  x a closed-form estimate':<34} {multiple:5.1f}x of {yardstick * 1e6:.1f} us (goal 6x)")
    times, wall_ratio, cpu_ratio = cold_start()
    report("trainplan estimate (cold start)", times, 0.5)
    print(f"{'  x a bare python -c pass':<34} wall {wall_ratio:5.1f}x  CPU {cpu_ratio:5.1f}x  (budget 12x)")


def planner(max_gpus: int = 128) -> tuple[float, int]:
    """Seconds and candidates of one vectorised plan() over the full default space."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest
    from trainplan.specs.scenario import Scenario

    request = PlanRequest(
        base=Scenario(model="Llama-3.1-8B", train_tokens=1e10),
        methods=("full", "lora", "qlora"),
        max_gpus=max_gpus,
        target_global_tokens=4_194_304,
    )
    plan(request)  # warm: catalogs and coefficient caches
    start = time.perf_counter()
    result = plan(request)
    return time.perf_counter() - start, result.candidates_evaluated


def loop_rate(samples: int = 300) -> float:
    """Candidates per second of a plain Python loop over estimate()."""
    from trainplan import estimate
    from trainplan.inputs.resolve import resolve_model
    from trainplan.specs.scenario import Scenario

    model = resolve_model("Llama-3.1-8B")
    scenarios = [
        Scenario(model="Llama-3.1-8B", micro_batch=1 + i % 8, gpus=8, zero_stage=i % 4, grad_accum=1 + i % 4)
        for i in range(samples)
    ]
    start = time.perf_counter()
    for scenario in scenarios:
        estimate(scenario, model=model)
    return samples / (time.perf_counter() - start)


def planner_report() -> None:
    seconds, candidates = planner()
    vector_rate = candidates / seconds
    loop = loop_rate()
    ratio = seconds / 2 * 1e6 / candidates
    print(
        f"{'plan() vectorised':<34} {candidates:>10,} candidates in {seconds:6.2f} s = "
        f"{vector_rate:>12,.0f} candidates/s (budget: 1,000,000 in 2 s, ratio {ratio:5.2f})"
    )
    speedup = vector_rate / loop
    print(f"{'estimate() loop':<34} {loop:>12,.0f} candidates/s; vectorised / loop = {speedup:,.0f}x")


if __name__ == "__main__":
    main()
    planner_report()
