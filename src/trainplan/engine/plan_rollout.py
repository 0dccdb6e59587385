"""The planner for a stage that generates (GRPO, PPO): where the rollout engine runs and how
large it is, beside the trainer's layout (PPO's engine is transformers' generate, always: its
forward batches are searched instead, TRL's default first, and checkpointing stays off, as
PPOTrainer leaves it).

The search differs from the layout planner's (engine/plan.py) in what it varies and in how it
evaluates: every candidate is a complete scenario run through `estimate()` itself, since the
engine's memory depends on each GPU's own memory and its time on the placement. Axes: GPU type x
GPU count x engine placement (transformers' generate on the policy; vLLM colocated at each
memory fraction of ROLLOUT_FRACTIONS and tensor-parallel size; vLLM on rollout_gpus of its own,
at vllm-serve's default share, each tensor-parallel size dividing them) x micro-batch (grad_accum
follows from the target completions per step) x activation checkpointing x method, the trainer
data-parallel over its GPUs (ZeRO-3 for a full fine-tune on several). Candidates are ranked by
the request's objective over the whole run; the rejected are counted by reason.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator

from trainplan.engine.estimate import estimate
from trainplan.engine.plan import (
    SEARCH_REASONS,
    Plan,
    PlanResult,
    base_weights_for,
    searched_checkpointing,
    unpriced_gpus,
)
from trainplan.engine.plan_request import PlanRequest
from trainplan.engine.result import Estimate
from trainplan.inputs.catalogs.gpus import GpuSpec
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.rollout import resolved_rollout
from trainplan.specs.scenario import Scenario, data_parallel, scenario_from_mapping, scenario_to_mapping

#: The colocated engine's shares searched (TRL's default, 0.3, among them).
ROLLOUT_FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
#: The engine tensor-parallel sizes searched.
ROLLOUT_TENSOR_PARALLEL = (1, 2, 4, 8)
#: PPO's forward batches searched, the largest (TRL's default, the fastest) first: a smaller one
#: shrinks the generate call's cache and the scoring forwards.
PPO_FORWARD_BATCHES = (64, 16, 4)
_UNTIMED, _, _, _NO_PRICE, _OVER_BUDGET, _OVER_DEADLINE = SEARCH_REASONS
#: Why a candidate is dropped (the layout planner's words where the reason is the same).
ROLLOUT_REASONS = (
    "invalid: the layout's rules",
    "invalid: completions per step not a multiple of micro-batch x replicas and generations",
    _UNTIMED,
    "does not fit (the trainer, and a colocated engine's share where there is one)",
    "does not fit (the vLLM engine cannot start: no KV cache for one sequence)",
    _NO_PRICE,
    _OVER_BUDGET,
    _OVER_DEADLINE,
)

#: engine, placement, its own GPUs (separate), tensor parallel, the shares to try (smallest first)
Engine = tuple[str, str, int | None, int, tuple[float | None, ...]]


def engines(base: Scenario, gpus: int) -> Iterator[Engine]:
    """The engine placements searched on `gpus` GPUs: the base's engine if it names one, else
    both; vLLM colocated at each tensor-parallel size dividing the GPUs (its shares tried from the
    smallest), or on a power of two of them (leaving at least one to train) at each
    tensor-parallel size dividing those, at vllm-serve's share."""
    if base.stage == "ppo":  # TRL's PPOTrainer generates with transformers' generate only
        batches = (base.rollout_forward_batch,) if base.rollout_forward_batch else PPO_FORWARD_BATCHES
        yield ("hf", "colocate", None, 1, batches)
        return
    kinds = (base.rollout_engine,) if base.rollout_engine else ("hf", "vllm")
    if "hf" in kinds:
        yield ("hf", "colocate", None, 1, (None,))
    if "vllm" not in kinds:
        return
    fractions = (base.rollout_memory_fraction,) if base.rollout_memory_fraction else ROLLOUT_FRACTIONS
    placements = (base.rollout_placement,) if base.rollout_placement else ("colocate", "separate")
    if "colocate" in placements:
        for tp in ROLLOUT_TENSOR_PARALLEL:
            if gpus % tp == 0:
                yield ("vllm", "colocate", None, tp, fractions)
    if "separate" in placements:
        engine_gpus = 1
        while engine_gpus < gpus:
            for tp in ROLLOUT_TENSOR_PARALLEL:
                if engine_gpus % tp == 0:
                    yield ("vllm", "separate", engine_gpus, tp, (base.rollout_memory_fraction,))
            engine_gpus *= 2


def _checkpointing(request: PlanRequest, spec: ModelSpec) -> tuple[str, ...]:
    """The checkpointing searched: TRL checkpoints through transformers' gradient checkpointing,
    whole layers or none (no selective mode), unless the base scenario names its own."""
    own = request.base.activation_checkpointing
    if request.base.stage == "ppo":  # TRL's PPOTrainer never checkpoints
        return ("none",)
    return tuple(
        mode for mode in searched_checkpointing(request, spec) if mode in ("none", "full") or mode == own
    )


def _candidate(
    base: Scenario,
    method: str,
    checkpointing: str,
    gpu: GpuSpec,
    gpus: int,
    engine: Engine,
    fraction: float | None,
    micro_batch: int,
    completions: int,
) -> Scenario | str:
    """The candidate scenario, or the reason it cannot run."""
    kind, placement, engine_gpus, tp, _ = engine
    replicas = gpus - (engine_gpus or 0)  # data parallel over the trainer's GPUs
    per_step = micro_batch * replicas
    if completions % per_step:
        return ROLLOUT_REASONS[1]
    fields = {
        **scenario_to_mapping(base),
        "method": method,
        "base_weights": base_weights_for(base, method),
        "activation_checkpointing": checkpointing,
        "gpu": gpu.name,
        "gpus": gpus,
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "zero_stage": 3 if method == "full" and replicas > 1 else 0,
        "micro_batch": micro_batch,
        "grad_accum": completions // per_step,
    }
    if base.stage == "ppo":  # PPO's one engine setting: its forward batch (the fifth slot)
        fields["rollout_forward_batch"] = fraction
    else:  # the engine's own fields (GRPO's)
        fields |= {
            "rollout_engine": kind,
            "rollout_placement": placement if kind == "vllm" else None,
            "rollout_gpus": engine_gpus,
            "rollout_tensor_parallel": tp if kind == "vllm" else None,
            "rollout_memory_fraction": fraction,
            "rollout_sleep": base.rollout_sleep if kind == "vllm" and placement == "colocate" else None,
        }
    try:
        return scenario_from_mapping(fields)
    except InputError as error:
        if error.field == "generations":
            return ROLLOUT_REASONS[1]
        return ROLLOUT_REASONS[0]


def _reason(result: Estimate, request: PlanRequest) -> str | None:
    """Why an evaluated candidate is dropped, or None."""
    if result.time is None:
        return ROLLOUT_REASONS[2]
    if not result.fits:
        rollout = result.rollout
        if rollout is not None and rollout.engine.problem is not None:
            return ROLLOUT_REASONS[4]
        return ROLLOUT_REASONS[3]
    usd = result.cost.run_usd if result.cost else None
    if request.objective == "cost" and usd is None:
        return ROLLOUT_REASONS[5]
    if request.budget_usd is not None and (usd is None or usd > request.budget_usd):
        return ROLLOUT_REASONS[6]
    if request.deadline_hours is not None and result.time.run_s > request.deadline_hours * 3600:
        return ROLLOUT_REASONS[7]
    return None


def _plan(result: Estimate) -> Plan:
    assert result.time is not None
    usd = result.cost.run_usd if result.cost else None
    kwh = result.energy.run_kwh if result.energy else None
    return Plan(result.scenario, result, result.time.run_s, usd, kwh)


def _key(objective: str, plan: Plan) -> tuple[float, ...]:
    """Sort key, smaller first: the objective, then time, cost, GPUs and memory per GPU."""
    usd = plan.usd if plan.usd is not None else math.inf
    kwh = plan.kwh if plan.kwh is not None else math.inf
    gpus = float(plan.scenario.gpus)
    first = {"cost": usd, "energy": kwh, "gpus": gpus}.get(objective, plan.total_s)
    return (first, plan.total_s, usd, gpus, plan.estimate.total_bytes)


def _pareto(plans: list[Plan]) -> list[Plan]:
    """The priced plans no other beats on both time and cost, fastest first."""
    front: list[Plan] = []
    for plan in sorted((p for p in plans if p.usd is not None), key=lambda p: (p.total_s, p.usd)):
        if not front or (plan.usd or 0.0) < (front[-1].usd or 0.0):
            front.append(plan)
    return front


def completions_target(request: PlanRequest) -> int:
    """Completions per optimizer step the plans must generate and train: the request's
    target_global_sequences (which counts completions for GRPO), else its token target over
    seq_len, else the base scenario's own step."""
    if request.target_global_sequences or request.target_global_tokens:
        return request.global_sequences()
    return request.base.micro_batch * request.base.grad_accum * data_parallel(request.base)


def plan_rollout(request: PlanRequest, spec: ModelSpec, gpus: list[GpuSpec]) -> PlanResult:
    """Search the rollout layouts of a GRPO or PPO request (see the module docstring)."""
    rollout = resolved_rollout(request.base)
    assert rollout is not None
    completions = completions_target(request)
    if completions % rollout.generations:
        raise InputError(
            "target_global_sequences",
            f"{completions} completions per step is not a multiple of generations ({rollout.generations})",
        )
    rejected: Counter[str] = Counter()
    kept: list[Plan] = []
    evaluated = 0
    for gpu in gpus:
        for count in request.counts():
            for method in request.methods:
                for checkpointing in _checkpointing(request, spec):
                    for engine in engines(request.base, count):
                        trainer = count - (engine[2] or 0)
                        if completions % trainer:  # no micro-batch divides the step evenly
                            evaluated += len(request.micro_batches)
                            rejected[ROLLOUT_REASONS[1]] += len(request.micro_batches)
                            continue
                        for micro_batch in request.micro_batches:
                            # a colocated engine's shares from the smallest: a larger one cannot
                            # make the trainer fit, and once every sequence runs at once it buys
                            # no time
                            for fraction in engine[4]:
                                evaluated += 1
                                if evaluated > request.max_candidates:
                                    raise InputError(
                                        "max_gpus",
                                        f"this search has more than the {request.max_candidates:,} "
                                        "candidate layouts allowed (max_candidates): lower max_gpus, or "
                                        "plan over fewer GPU types or methods",
                                    )
                                scenario = _candidate(
                                    request.base,
                                    method,
                                    checkpointing,
                                    gpu,
                                    count,
                                    engine,
                                    fraction,
                                    micro_batch,
                                    completions,
                                )
                                if isinstance(scenario, str):
                                    rejected[scenario] += 1
                                    break
                                result = estimate(scenario, model=spec)
                                reason = _reason(result, request)
                                ppo = request.base.stage == "ppo"
                                if reason is not None:
                                    rejected[reason] += 1
                                    if reason == ROLLOUT_REASONS[4] or (ppo and reason == ROLLOUT_REASONS[3]):
                                        # a larger share may give the engine its cache; a smaller
                                        # PPO forward batch may make the step fit
                                        continue
                                    break
                                kept.append(_plan(result))
                                if ppo or result.rollout is None or result.rollout.engine.waves == 1:
                                    break
    ranked = sorted(kept, key=lambda plan: _key(request.objective, plan))
    front = _pareto(kept)
    plans = front[: request.top_k] if request.objective == "pareto" else ranked[: request.top_k]
    return PlanResult(
        tuple(plans),
        tuple(front[:20]),
        dict(rejected),
        evaluated,
        request.objective,
        unpriced_gpus(request),
        bool(request.gpu_types),
    )
