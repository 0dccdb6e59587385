"""The planner: search parallel layouts, GPU types and memory savers for the best way to train.

Every candidate is evaluated with the same coefficients and formulas as `estimate()`
(per_replica.py, per_gpu.py), on numpy arrays: one array element per candidate layout. The
winners are then re-run through `estimate()` for their full result, and a test checks that the
planner agrees with a brute-force loop over `estimate()`.

Search space: GPU type x GPU count x ZeRO stage x tensor parallel x pipeline parallel x
micro-batch (grad-accum then follows from the target global batch) x activation checkpointing x
optimizer offload x method. Candidates that cannot run are rejected with a counted reason.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.per_gpu import OFFLOAD_CODES, Hardware, Layout, memory
from trainplan.engine.per_replica import Coefficients, coefficients
from trainplan.engine.plan_request import DEFAULT_VENDORS, PlanRequest, default_gpu_types, plan_option
from trainplan.engine.result import Estimate
from trainplan.engine.terms.cost import cost_usd, energy_kwh, gpu_power_w
from trainplan.engine.terms.device import DeviceRates, cache_fraction, device_rates, layout_overhead
from trainplan.engine.terms.pipeline import SCHEDULE_CODES
from trainplan.engine.terms.timing import efficiency_kind
from trainplan.engine.time_cost_energy import (
    discount_for,
    fixed_seconds,
    hardware_of,
    host_and_pue,
    idle_fraction_of,
    load_path,
    precompute_seconds,
    scenario_step_seconds,
    training_tokens,
)
from trainplan.inputs.catalogs.cost_inputs import host_link_bytes_per_s, rates
from trainplan.inputs.catalogs.gpus import GpuSpec, find_gpu, gpu_catalog, scale_up_domain
from trainplan.inputs.resolve import resolve_model, scenario_gpu
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.pipeline import MULTI_CHUNK_SCHEDULES
from trainplan.specs.rollout import ROLLOUT_STAGES
from trainplan.specs.scenario import (
    DEFAULT_TRAIN_TOKENS,
    Scenario,
    data_parallel_degree,
    layout_template,
    resolved_schedule,
    scenario_from_mapping,
    scenario_to_mapping,
)
from trainplan.specs.validity import LAYOUT_REASONS, LayoutArrays, layout_problems, quantised_base

BATCH_TOLERANCE = 0.05  # a layout may miss the target global batch by this fraction
# Why a candidate is dropped beyond the layout rules (validity.py): the planner's own target,
# the time it needs to rank, and the request's limits. Neither makes a scenario invalid:
# `estimate()` accepts such a layout (a GPU without the precision is untimed, with a warning).
SEARCH_REASONS = (
    "invalid: global batch more than 5% off the target",
    "untimed: GPU lacks the precision",
    "does not fit",
    "no price for this GPU",
    "over budget",
    "over deadline",
)
REASONS = (*LAYOUT_REASONS, *SEARCH_REASONS)


@dataclass(frozen=True)
class Candidates:
    """Every evaluated candidate of one (method, checkpointing, offload) group, as arrays;
    `total_s`, `usd` and `kwh` are the whole run's (the training steps and the fixed time)."""

    method: str
    checkpointing: str
    offload: str
    gpu_index: Any
    gpus: Any
    tensor_parallel: Any
    pipeline_parallel: Any
    zero_stage: Any
    micro_batch: Any
    grad_accum: Any
    peak_bytes: Any
    step_s: Any
    total_s: Any
    usd: Any
    kwh: Any
    valid: Any
    reason: Any
    context_parallel: Any = 1
    data_parallel_replicate: Any = 1


@dataclass(frozen=True)
class Plan:
    """One recommended configuration: its complete scenario and its full estimate; `total_s`,
    `usd` and `kwh` are the whole run's (the estimate's time.run_s, cost.run_usd, energy.run_kwh)."""

    scenario: Scenario
    estimate: Estimate
    total_s: float
    usd: float | None
    kwh: float | None


@dataclass(frozen=True)
class PlanResult:
    """The ranked plans, the cost/time Pareto front and why the rest were rejected."""

    plans: tuple[Plan, ...]
    pareto: tuple[Plan, ...]
    rejected: dict[str, int]
    candidates_evaluated: int
    objective: str
    unpriced: tuple[str, ...] = ()  # GPUs with no price (no catalog rate, no user rate)
    unpriced_searched: bool = False  # True: they were named and searched; False: left out


def unpriced_gpus(request: PlanRequest) -> tuple[str, ...]:
    """GPUs without a price for this request: the named ones without a catalog rate, or (when
    none are named) the catalog GPUs the default search leaves out. None when a rate is given."""
    if request.base.usd_per_gpu_hour is not None:
        return ()
    priced = rates()
    names = tuple(find_gpu(name).name for name in request.gpu_types) or tuple(
        g.name for g in gpu_catalog() if g.vendor in DEFAULT_VENDORS
    )
    return tuple(name for name in names if name not in priced)


def _hardware_arrays(
    np: Any, gpus: list[GpuSpec], scenario: Scenario, coeffs: Coefficients
) -> dict[str, Any]:
    """Per-GPU-type figures as arrays (NaN where the GPU cannot run the precision)."""
    nan = float("nan")
    kind = efficiency_kind(coeffs.model)
    # each type's scale-up domain in the scenario's nodes (its own figure for the scenario's GPU)
    own = find_gpu(scenario.gpu).name if scenario.scale_up_domain is not None else None
    hardware = [
        hardware_of(
            gpu,
            coeffs.precision,
            scenario.mfu,
            kind,
            scale_up_domain(
                gpu, scenario.gpus_per_node, scenario.scale_up_domain if gpu.name == own else None
            ),
        )
        for gpu in gpus
    ]
    price = rates()

    def column(values: list[float | None]) -> Any:
        return np.array([nan if v is None else v for v in values], dtype=float)

    def from_hw(name: str) -> Any:
        return column([getattr(h, name) if h is not None else None for h in hardware])

    usd = [
        scenario.usd_per_gpu_hour
        if scenario.usd_per_gpu_hour is not None
        else (price[g.name].usd_per_gpu_hour if g.name in price else None)
        for g in gpus
    ]
    return {
        "memory": column([float(g.memory_bytes) for g in gpus]),
        "usd": column(usd),
        "tdp": column([g.tdp_w for g in gpus]),
        "idle": column([idle_fraction_of(scenario, g) for g in gpus]),
        "pcie": column([host_link_bytes_per_s(g) for g in gpus]),
        **{name: from_hw(name) for name in Hardware.__dataclass_fields__},
        **_device_columns(np, gpus),
    }


def _device_columns(np: Any, gpus: list[GpuSpec]) -> dict[str, Any]:
    """Each GPU type's figures for the memory outside the caching allocator, as columns."""
    rates = [device_rates(gpu) for gpu in gpus]
    return {
        f"device_{name}": np.array([float(getattr(r, name)) for r in rates])
        for name in DeviceRates.__dataclass_fields__
    }


def hw_rates(hw: dict[str, Any], g: Any) -> DeviceRates:
    """The device-memory figures of the candidates' GPU types (`g` indexes the columns)."""
    return DeviceRates(**{name: hw[f"device_{name}"][g] for name in DeviceRates.__dataclass_fields__})


def _grid(np: Any, request: PlanRequest, gpu_types: int) -> tuple[Any, ...]:
    """The searched axes as flat arrays, one element per candidate: (GPU type index, GPU count,
    tensor parallel, pipeline parallel, ZeRO stage, micro-batch, context parallel, HSDP
    replicas), part by part (PlanRequest.grid_parts): an HSDP candidate's replicas are its
    nodes, its shard group one node's GPUs; every other's are the scenario's."""
    parts = []
    for cps, zeros, hsdp in request.grid_parts():
        grid = np.meshgrid(
            np.arange(gpu_types),
            np.array(request.part_counts(hsdp)),
            np.array(request.tensor_parallel),
            np.array(request.pipeline_parallel),
            np.array(zeros),
            np.array(request.micro_batches),
            np.array(cps),
            indexing="ij",
        )
        axes = [axis.ravel() for axis in grid]
        nodes = np.maximum(axes[1] // request.base.gpus_per_node, 1)
        replicas = nodes if hsdp else np.full(axes[1].shape, request.base.data_parallel_replicate)
        parts.append([*axes, replicas])
    return tuple(np.concatenate(axis) for axis in zip(*parts, strict=True))


def evaluate_group(
    request: PlanRequest, model: ModelSpec, method: str, checkpointing: str, offload: str, gpus: list[GpuSpec]
) -> Candidates:
    """Evaluate every layout of one (method, checkpointing, offload) group with numpy."""
    import numpy as np

    scenario = with_method(
        layout_template(
            request.base,
            activation_checkpointing=checkpointing,
            offload=offload,
            pipeline_schedule=planned_schedule(request.base),
        ),
        method,
    )
    coeffs = coefficients(model, scenario)
    hw = _hardware_arrays(np, gpus, scenario, coeffs)
    g, n, tp, pp, zero, mb, cp, replicas = _grid(np, request, len(gpus))
    dp = np.maximum(data_parallel_degree(n, tp, pp, cp), 1)
    sequences = request.global_sequences()
    # grad-accum to hit the target global batch; within 5% counts as hitting it
    grad_accum = np.maximum(np.rint(sequences / np.maximum(mb * dp, 1)).astype(int), 1)
    fractions = {
        int(p): coeffs.stage_fraction(int(p)) if p <= model.num_layers else 1.0
        for p in request.pipeline_parallel
    }
    stage_fraction = np.vectorize(fractions.__getitem__, otypes=[float])(pp)
    # the first and last ranks' fractions, which the memory compares (one chunk a rank)
    ranks = {
        int(p): coeffs.rank_fractions(int(p)) if p <= model.num_layers else (1.0,)
        for p in request.pipeline_parallel
    }
    first_fraction = np.vectorize(lambda p: ranks[p][0], otypes=[float])(pp)
    last_fraction = np.vectorize(lambda p: ranks[p][-1], otypes=[float])(pp)
    offload_code = OFFLOAD_CODES[offload]
    sequence_parallel = scenario.sequence_parallel & (tp > 1)
    reason = np.full(g.shape, -1)

    def reject(label: str, mask: Any) -> None:
        reason[(reason < 0) & mask] = REASONS.index(label)

    # the group's scenario with the searched fields as arrays: the rules estimate() raises from
    choice = LayoutArrays(
        scenario,
        gpus=n,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        zero_stage=zero,
        grad_accum=grad_accum,
        sequence_parallel=sequence_parallel,
        virtual_stages=1,
        context_parallel=cp,
        data_parallel_replicate=replicas,
        scale_up_domain=hw["scale_up_domain_gpus"][g],
    )
    for rule, broken in layout_problems(choice, model):
        reject(rule.reason, broken)
    reject(SEARCH_REASONS[0], np.abs(mb * dp * grad_accum - sequences) > BATCH_TOLERANCE * sequences)
    reject(SEARCH_REASONS[1], np.isnan(hw["peak_flops_per_s"][g]))
    layout = Layout(
        tensor_parallel=tp,
        pipeline_parallel=pp,
        data_parallel=dp,
        zero_stage=zero,
        micro_batch=mb,
        grad_accum=grad_accum,
        stage_fraction=stage_fraction,
        first_fraction=first_fraction,
        last_fraction=last_fraction,
        offload=offload_code,
        sequence_parallel=sequence_parallel,
        context_parallel=cp,
        data_parallel_replicate=replicas,
        pipeline_schedule=SCHEDULE_CODES[resolved_schedule(scenario)],
        expert_parallel=scenario.expert_parallel,
        expert_imbalance=scenario.expert_imbalance,
        overhead_bytes=layout_overhead(
            scenario.overhead_gib, hw_rates(hw, g), tp, pp, dp, cp, replicas, scenario.expert_parallel
        ).total,
        cache_fraction=cache_fraction(scenario.expandable_segments, scenario.cache_fraction),
    )
    peak = memory(coeffs, layout).peak()
    reject("does not fit", peak > hw["memory"][g])
    hardware = Hardware(**{name: hw[name][g] for name in Hardware.__dataclass_fields__})
    with np.errstate(invalid="ignore", divide="ignore"):
        step = scenario_step_seconds(coeffs, hardware, layout, layout_template(scenario, virtual_stages=1))
        total_step = step.total
        global_tokens = mb * coeffs.seq_len * grad_accum * dp
        tokens = _train_tokens(scenario, global_tokens, coeffs.seq_len if model.kind != "llm" else 0)
        steps = np.maximum(np.ceil(tokens / global_tokens), 1)
        training_s = steps * total_step
        # the run's fixed time (launch, load, checkpoint writes), as estimate() times it
        path = load_path(scenario, coeffs.counts, coeffs.precision, hw["pcie"][g], n, zero)
        precompute_s = precompute_seconds(coeffs, scenario, tokens, n, hardware)
        fixed_s = fixed_seconds(
            coeffs, scenario, steps, layout, path.seconds, path.bandwidth, path.share, precompute_s
        ).total
        total_s = training_s + fixed_s
        usd = cost_usd(total_s * n / 3600, hw["usd"][g], discount_for(scenario))
        host, pue = host_and_pue(scenario)
        power = gpu_power_w(hw["tdp"][g], hw["idle"][g], step.busy / total_step)
        idle_power = gpu_power_w(hw["tdp"][g], hw["idle"][g], 0.0)
        kwh = energy_kwh(power, n, training_s, host, pue) + energy_kwh(idle_power, n, fixed_s, host, pue)
    reject(
        "no price for this GPU",
        np.isnan(usd) & (request.objective in ("cost", "pareto") or request.budget_usd is not None),
    )
    if request.budget_usd is not None:
        reject("over budget", usd > request.budget_usd)
    if request.deadline_hours is not None:
        reject("over deadline", total_s > request.deadline_hours * 3600)
    return Candidates(
        method,
        checkpointing,
        offload,
        g,
        n,
        tp,
        pp,
        zero,
        mb,
        grad_accum,
        peak,
        total_step,
        total_s,
        usd,
        kwh,
        reason < 0,
        reason,
        context_parallel=cp,
        data_parallel_replicate=replicas,
    )


def planned_schedule(base: Scenario) -> str | None:
    """The schedule the planner's candidates run: one model chunk a GPU each, so the
    scenario's own unless it runs several chunks a GPU (then 1F1B: None)."""
    return None if resolved_schedule(base) in MULTI_CHUNK_SCHEDULES else base.pipeline_schedule


def with_method(base: Scenario, method: str) -> Scenario:
    """`base` switched to `method`: its base-weight format where that method can use it, and
    kbit upcasting only over a quantised base."""
    scenario = layout_template(base, method=method, base_weights=base_weights_for(base, method))
    return layout_template(scenario, kbit_upcast=base.kbit_upcast and quantised_base(scenario))


def base_weights_for(base: Scenario, method: str) -> str | None:
    """The base-weight format to keep when switching method: none for a full fine-tune, a
    quantised one only for QLoRA, a 16/32-bit one only for LoRA (else each method's default)."""
    quantised = base.base_weights in ("nf4", "int8")
    if method == "full" or (method == "qlora") != quantised:
        return None
    return base.base_weights


def _train_tokens(scenario: Scenario, global_tokens: Any, sample_tokens: int = 0) -> Any:
    """The token budget (steps x global batch when the budget is given in steps); for a model
    that counts images or clips, their budget (time_cost_energy.training_tokens) times tokens per sample."""
    if scenario.steps:
        return scenario.steps * global_tokens
    if sample_tokens:
        return training_tokens(scenario, 1, sample_tokens)[0] + 0 * global_tokens
    if scenario.dataset_tokens:
        return scenario.dataset_tokens * scenario.epochs + 0 * global_tokens
    return (scenario.train_tokens or DEFAULT_TRAIN_TOKENS) + 0 * global_tokens


def _score(objective: str, c: Candidates) -> Any:
    """Sort key (smaller is better) for an objective."""
    if objective == "cost":
        return c.usd
    if objective == "energy":
        return c.kwh
    if objective == "gpus":
        return c.gpus * 1e12 + c.total_s
    return c.total_s


def plan(request: PlanRequest, *, model: ModelSpec | None = None) -> PlanResult:
    """Search the space and return the best plans, the Pareto front and the rejections."""
    import numpy as np

    # a request built in code is held to the same declarations as one read from options
    plan_option("objective", request.objective)
    plan_option("max_gpus", str(request.max_gpus))
    if request.base.gpu_file is not None:
        raise InputError(
            "gpu_file", "the planner searches the catalog's GPUs; estimate your own GPU with `estimate`"
        )
    rollout = request.base.stage in ROLLOUT_STAGES
    if not rollout:
        request.check_size()
    spec = (
        model
        if model is not None
        else resolve_model(request.base.model, request.base.force, request.base.vae)
    )
    # the sample fields are checked where every estimate checks them: coefficients(), the first
    # thing evaluate_group runs
    if spec.kind != "llm" and request.target_global_tokens:
        raise InputError(
            "target_global_tokens",
            f"{spec.name} is a {spec.kind} model: give target_global_sequences (images or clips per step)",
        )
    gpus = [find_gpu(name) for name in (request.gpu_types or default_gpu_types())]
    # a usable memory and a network given for the scenario's GPU hold for that type only
    own = scenario_gpu(request.base)
    gpus = [own if gpu.name == own.name else gpu for gpu in gpus]
    if not gpus:
        raise InputError("gpu_types", "no GPU type to plan on")
    if rollout:  # where the engine runs: every candidate through estimate() (plan_rollout.py)
        from trainplan.engine.plan_rollout import plan_rollout

        return plan_rollout(request, spec, gpus)
    groups = [
        evaluate_group(request, spec, method, ckpt, offload, gpus)
        for method in request.methods
        for ckpt in searched_checkpointing(request, spec)
        for offload in request.offloads
    ]
    evaluated = sum(int(group.valid.size) for group in groups)
    rejected: Counter[str] = Counter()
    for group in groups:
        codes, counts = np.unique(group.reason[group.reason >= 0], return_counts=True)
        for code, count in zip(codes, counts, strict=True):
            rejected[REASONS[int(code)]] += int(count)
    ranked = _ranking(request.objective, groups)
    front = _pareto(ranked)
    # ranked by the Pareto objective, the plans are the front itself (fastest first), nothing else
    chosen = (
        front[: request.top_k] if request.objective == "pareto" else _distinct(ranked, groups, request.top_k)
    )
    plans = tuple(_plan_of(request, spec, gpus, groups[g], p) for g, p in chosen)
    pareto = tuple(_plan_of(request, spec, gpus, groups[g], p) for g, p in front[:20])
    unpriced = unpriced_gpus(request)
    return PlanResult(
        plans, pareto, dict(rejected), evaluated, request.objective, unpriced, bool(request.gpu_types)
    )


def searched_checkpointing(request: PlanRequest, model: ModelSpec | None = None) -> tuple[str, ...]:
    """The checkpointing modes searched: the request's, plus the base scenario's own when it is
    one the default search does not try (op-level SAC, full:N). A diffusion, video or JEPA model
    checkpoints whole blocks only (selective and op-level are left out)."""
    modes = request.checkpointing
    own = request.base.activation_checkpointing
    searched = modes if own in modes else (*modes, own)
    if model is not None and model.kind != "llm":
        searched = tuple(mode for mode in searched if mode not in ("selective", "op"))
    return searched


@dataclass(frozen=True)
class _Ranked:
    """Every valid candidate of every group, as columns, and their order (best first): the score,
    then ties to less time, less cost, fewer GPUs, less model parallelism, a lower ZeRO stage and
    less memory; an unpriced candidate's cost sorts after every price."""

    total_s: Any
    usd: Any
    gpus: Any
    group: Any
    position: Any
    keys: tuple[Any, ...]  # the tie-breaking columns after the score, as np.lexsort reads them
    order: Any


def _ranking(objective: str, groups: list[Candidates]) -> _Ranked:
    """The valid candidates of all groups, ranked by the objective (one sort over arrays)."""
    import numpy as np

    def column(read: Callable[[int, Candidates], Any], dtype: type = float) -> Any:
        parts = [np.asarray(read(i, g), dtype=dtype)[g.valid] for i, g in enumerate(groups)]
        return np.concatenate(parts or [np.zeros(0, dtype)])

    score = column(lambda i, g: _score(objective, g))
    total_s, usd, gpus = (
        column(lambda i, g: g.total_s),
        column(lambda i, g: g.usd),
        column(lambda i, g: g.gpus),
    )
    # ties go to less model parallelism, then to fewer HSDP replicas (the smaller states)
    parallel = column(
        lambda i, g: (
            g.tensor_parallel * g.pipeline_parallel * g.context_parallel * 1024 + g.data_parallel_replicate
        )
    )
    zero, peak = column(lambda i, g: g.zero_stage), column(lambda i, g: g.peak_bytes)
    group = column(lambda i, g: np.full(g.valid.size, i), int)
    position = column(lambda i, g: np.arange(g.valid.size), int)
    cost = np.where(np.isnan(usd), np.inf, usd)
    keys = (position, group, peak, zero, parallel, gpus)
    order = np.lexsort((*keys, cost, total_s, score))
    return _Ranked(total_s, usd, gpus, group, position, keys, order)


def _distinct(ranked: _Ranked, groups: list[Candidates], k: int) -> list[tuple[int, int]]:
    """The (group, position) of the first k candidates, skipping a layout that differs from a
    kept one only by a ZeRO stage that changes neither its time nor its cost (the lower stage
    is kept)."""
    kept: list[tuple[int, int]] = []
    seen: set[tuple[Any, ...]] = set()
    for row in ranked.order:
        index, position = int(ranked.group[row]), int(ranked.position[row])
        group = groups[index]
        usd = float(ranked.usd[row])
        key = (
            index,
            int(group.gpu_index[position]),
            float(ranked.gpus[row]),
            int(group.tensor_parallel[position]),
            int(group.pipeline_parallel[position]),
            int(group.context_parallel[position]),
            int(group.data_parallel_replicate[position]),
            int(group.micro_batch[position]),
            float(ranked.total_s[row]),
            usd,  # an unpriced one (NaN) equals no other: never skipped
        )
        if key in seen:
            continue
        seen.add(key)
        kept.append((index, position))
        if len(kept) == k:
            break
    return kept


def _pareto(ranked: _Ranked) -> list[tuple[int, int]]:
    """The (group, position) of the candidates no other beats on both time and cost (priced
    ones only), fastest first: ordered by time, then cost and the ranking's ties, each kept when
    it costs less than every faster one."""
    import numpy as np

    priced = np.flatnonzero(~np.isnan(ranked.usd))
    keys = tuple(key[priced] for key in ranked.keys)
    by_time = priced[np.lexsort((*keys, ranked.usd[priced], ranked.total_s[priced]))]
    cost = ranked.usd[by_time]
    cheapest_before = np.minimum.accumulate(np.concatenate(([np.inf], cost[:-1])))
    front = by_time[cost < cheapest_before]
    return [(int(ranked.group[row]), int(ranked.position[row])) for row in front]


def scenario_of(request: PlanRequest, gpus: list[GpuSpec], group: Candidates, position: int) -> Scenario:
    """The complete scenario of one candidate (what `trainplan estimate --scenario` accepts); a
    usable memory and links given for the scenario's GPU stay with that GPU type only."""
    gpu = gpus[int(group.gpu_index[position])].name
    own = gpu == find_gpu(request.base.gpu).name
    memory = request.base.gpu_memory_gib if own else None
    return dataclasses.replace(
        with_method(request.base, group.method),
        scale_up_domain=request.base.scale_up_domain if own else None,
        scale_out_bytes_per_s=request.base.scale_out_bytes_per_s if own else None,
        activation_checkpointing=group.checkpointing,
        offload=group.offload,
        gpu=gpu,
        gpu_memory_gib=memory,
        gpus=int(group.gpus[position]),
        tensor_parallel=int(group.tensor_parallel[position]),
        pipeline_parallel=int(group.pipeline_parallel[position]),
        context_parallel=int(group.context_parallel[position]),
        data_parallel_replicate=int(group.data_parallel_replicate[position]),
        zero_stage=int(group.zero_stage[position]),
        micro_batch=int(group.micro_batch[position]),
        grad_accum=int(group.grad_accum[position]),
        sequence_parallel=request.base.sequence_parallel and int(group.tensor_parallel[position]) > 1,
        virtual_stages=1,
        pipeline_schedule=planned_schedule(request.base),
    )


def _plan_of(
    request: PlanRequest, model: ModelSpec, gpus: list[GpuSpec], group: Candidates, position: int
) -> Plan:
    # through the validating parser: a plan's scenario is one `trainplan estimate` accepts
    scenario = scenario_from_mapping(scenario_to_mapping(scenario_of(request, gpus, group, position)))
    result = estimate(scenario, model=model)
    usd = float(group.usd[position])
    return Plan(
        scenario,
        result,
        float(group.total_s[position]),
        None if math.isnan(usd) else usd,
        float(group.kwh[position]),
    )
