"""The planner's answer as the interfaces give it: why the winner wins, in sentences, and the
planner's JSON contract."""

from __future__ import annotations

from typing import Any

from trainplan.engine.plan import Plan, PlanResult
from trainplan.interfaces.text.phrasing import format_duration, format_usd, rollout_summary
from trainplan.specs.scenario import scenario_to_mapping


def explain(result: PlanResult) -> list[str]:
    """Why the winner wins: its figures against the best alternative on other hardware or
    method, and what was rejected."""
    if not result.plans:
        reasons = ", ".join(f"{reason}: {count:,}" for reason, count in sorted(result.rejected.items()))
        return [f"No candidate fits the constraints ({reasons}).", *unpriced_lines(result)]
    best = result.plans[0]
    lines = [f"Best for {result.objective}: {describe(best)}."]
    time = best.estimate.time
    gpu = next(row for row in best.estimate.fit if row.gpu == best.scenario.gpu)
    if time is not None:
        overhead = time.step.dominant_overhead()
        tail = (
            "only compute is on its critical path"
            if overhead == "none"
            else f"its largest overhead is {overhead.replace('_', ' ')}"
        )
        lines.append(
            f"It uses {best.estimate.total_bytes / gpu.memory_bytes:.0%} of each GPU's memory, "
            f"runs at {time.mfu:.0%} MFU, and {tail}."
        )
    rivals = [
        p
        for p in result.plans[1:]
        if (p.scenario.gpu, p.scenario.method) != (best.scenario.gpu, best.scenario.method)
    ]
    for rival in rivals[:1]:
        lines.append(f"Next best on other hardware or method: {describe(rival)}.")
    total = sum(result.rejected.values())
    lines.append(
        f"{result.candidates_evaluated:,} candidates evaluated, {total:,} rejected"
        + (
            ": " + ", ".join(f"{k} {v:,}" for k, v in sorted(result.rejected.items(), key=lambda i: -i[1]))
            if total
            else ""
        )
    )
    return lines + unpriced_lines(result)


def unpriced_lines(result: PlanResult) -> list[str]:
    """Which GPUs had no price, and what that did to the search."""
    if not result.unpriced:
        return []
    names = ", ".join(result.unpriced)
    if result.unpriced_searched:
        return [
            f"No price for {names}: searched, but not compared on cost; set usd_per_gpu_hour to price them."
        ]
    return [
        f"Left out for lack of a price: {names}; name them in gpu_types to search them "
        "(and set usd_per_gpu_hour to compare their cost)."
    ]


def describe(plan: Plan) -> str:
    """'lora on 8 x B200 (tp 1, pp 1, ZeRO 0, micro 1 x accum 61, no checkpointing): 2.2 h, $105'
    (the whole run's time and cost, written as everywhere else; a rollout stage's engine after
    the layout)."""
    s = plan.scenario
    usd = f", {format_usd(plan.usd)}" if plan.usd is not None else ""
    rollout = rollout_summary(plan.estimate)
    return (
        f"{s.method} on {s.gpus} x {s.gpu} (tp {s.tensor_parallel}, pp {s.pipeline_parallel}, "
        + (f"cp {s.context_parallel}, " if s.context_parallel > 1 else "")
        + (f"HSDP x{s.data_parallel_replicate}, " if s.data_parallel_replicate > 1 else "")
        + f"ZeRO {s.zero_stage}, micro {s.micro_batch} x accum {s.grad_accum}, "
        f"checkpointing {s.activation_checkpointing}, offload {s.offload}"
        + (f"; rollout: {rollout}" if rollout else "")
        + f"): {format_duration(plan.total_s)}{usd}, {plan.estimate.total_bytes / 2**30:,.1f} GiB per GPU"
    )


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """One plan in the JSON contract: a complete scenario and its estimate JSON."""
    return {"scenario": scenario_to_mapping(plan.scenario), "estimate": plan.estimate.to_dict()}


def result_to_dict(result: PlanResult) -> dict[str, Any]:
    """The planner's JSON contract."""
    return {
        "objective": result.objective,
        "plans": [plan_to_dict(p) for p in result.plans],
        "pareto": [plan_to_dict(p) for p in result.pareto],
        "rejected": result.rejected,
        "candidates_evaluated": result.candidates_evaluated,
        "unpriced": list(result.unpriced),
        "explanation": explain(result),
    }
