"""The planner: brute-force agreement, plans that re-estimate identically, constraints, errors."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.engine.estimate import estimate
from trainplan.engine.plan import plan
from trainplan.engine.plan_request import PlanRequest, request_from_options
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario, scenario_from_mapping, scenario_to_mapping

BASE = Scenario(model="Qwen2.5-7B", method="lora", seq_len=2048, train_tokens=1e8, gpus_per_node=8)
SMALL = PlanRequest(
    base=BASE,
    methods=("lora", "full"),
    gpu_types=("H100 SXM 80GB", "A100 80GB SXM4"),
    max_gpus=8,
    gpu_counts=(1, 2, 4, 8),
    target_global_sequences=32,
    micro_batches=(1, 2, 4),
    tensor_parallel=(1, 2),
    pipeline_parallel=(1, 2),
    zero_stages=(0, 1, 2, 3),
    checkpointing=("none", "full"),
    offloads=("none",),
    objective="time",
    top_k=3,
)


def brute_force(request: PlanRequest) -> list[tuple[float, dict[str, Any]]]:
    """Every candidate through scenario validation and estimate(); the ones that run and fit."""
    found = []
    space = itertools.product(
        request.methods, request.gpu_types, request.counts(), request.tensor_parallel,
        request.pipeline_parallel, request.zero_stages, request.micro_batches, request.checkpointing,
    )  # fmt: skip
    for method, gpu, gpus, tp, pp, zero, micro, ckpt in space:
        if gpus % (tp * pp):
            continue
        dp = gpus // (tp * pp)
        target = request.global_sequences()
        accum = max(round(target / (micro * dp)), 1)
        if abs(micro * dp * accum - target) > 0.05 * target:
            continue
        data = {**scenario_to_mapping(request.base), "method": method, "gpu": gpu, "gpus": gpus,
                "tensor_parallel": tp, "pipeline_parallel": pp, "zero_stage": zero, "micro_batch": micro,
                "grad_accum": accum, "activation_checkpointing": ckpt}  # fmt: skip
        try:
            result = estimate(scenario_from_mapping(data))
        except InputError:
            continue
        if result.total_bytes <= find_gpu(gpu).memory_bytes:
            found.append((result.time.run_s, data))
    return sorted(found, key=lambda item: item[0])


def test_planner_equals_brute_force() -> None:
    result = plan(SMALL)
    expected = brute_force(SMALL)
    assert expected, "the small space must have feasible plans"
    best_time = expected[0][0]
    assert result.plans[0].total_s == pytest.approx(best_time, rel=1e-9)
    # every feasible candidate of the brute force is counted as valid by the planner
    valid = result.candidates_evaluated - sum(result.rejected.values())
    assert valid == len(expected)


def test_every_plan_re_estimates_identically() -> None:
    result = plan(SMALL)
    for item in (*result.plans, *result.pareto):
        again = estimate(scenario_from_mapping(scenario_to_mapping(item.scenario)))
        assert again.total_bytes == pytest.approx(item.estimate.total_bytes)
        assert again.time.run_s == pytest.approx(item.total_s, rel=1e-9)
        assert again.total_bytes <= find_gpu(item.scenario.gpu).memory_bytes


def test_objectives_and_pareto() -> None:
    by_cost = plan(PlanRequest(**{**SMALL.__dict__, "objective": "cost"}))
    by_time = plan(SMALL)
    assert by_cost.plans[0].usd <= by_time.plans[0].usd + 1e-9
    front = by_time.pareto
    assert all(a.total_s <= b.total_s and a.usd > b.usd for a, b in itertools.pairwise(front))
    fewest = plan(PlanRequest(**{**SMALL.__dict__, "objective": "gpus"}))
    assert fewest.plans[0].scenario.gpus == min(p.scenario.gpus for p in (*by_time.plans, *fewest.plans))


def test_budget_and_deadline_reject() -> None:
    loose = plan(SMALL)
    cheapest = min(p.usd for p in loose.pareto)
    tight = plan(PlanRequest(**{**SMALL.__dict__, "budget_usd": cheapest * 0.5}))
    assert not tight.plans and tight.rejected["over budget"] > 0
    late = plan(PlanRequest(**{**SMALL.__dict__, "deadline_hours": loose.plans[0].total_s / 3600 * 0.5}))
    assert not late.plans and late.rejected["over deadline"] > 0


def test_request_errors() -> None:
    with pytest.raises(InputError, match="methods"):
        request_from_options(BASE, {"methods": "prefix-tuning"})
    with pytest.raises(InputError) as error:
        request_from_options(BASE, {"max_gpus": "0"})
    assert error.value.field == "max_gpus"
    with pytest.raises(InputError):
        request_from_options(BASE, {"gpu_types": "H900"})
    with pytest.raises(InputError, match="objective"):
        request_from_options(BASE, {"objective": "vibes"})
    for raw in ("inf", "1e400", "nan"):
        with pytest.raises(InputError) as error:
            request_from_options(BASE, {"max_gpus": raw})
        assert error.value.field == "max_gpus"


def test_plan_cli_json() -> None:
    result = CliRunner().invoke(
        app,
        ["plan", "--model", "Qwen2.5-0.5B", "--methods", "lora", "--gpu-types", "L4,H100", "--max-gpus", "8",
         "--target-global-sequences", "16", "--seq-len", "1024", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["plans"] and data["candidates_evaluated"] > 0 and isinstance(data["rejected"], dict)
    first = data["plans"][0]
    again = estimate(scenario_from_mapping(first["scenario"]))
    assert again.total_bytes == pytest.approx(first["estimate"]["memory"]["per_gpu"]["total_bytes"])
    assert not math.isnan(first["estimate"]["time"]["total_s"])


def test_max_micro_batch_is_exact() -> None:
    result = CliRunner().invoke(
        app,
        [
            "estimate",
            "--model",
            "Llama-3.1-8B",
            "--gpu",
            "H100",
            "--max",
            "micro_batch",
            "--headroom",
            "0",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    value = data["max"]["value"]
    capacity = find_gpu("H100").memory_bytes  # the catalog's, as the search reads it
    fits = estimate(Scenario(model="Llama-3.1-8B", gpu="H100", micro_batch=value)).total_bytes
    over = estimate(Scenario(model="Llama-3.1-8B", gpu="H100", micro_batch=value + 1)).total_bytes
    assert fits <= capacity < over


def test_optimizer_in_backward_plans_without_accumulation() -> None:
    # optimizer_in_backward cannot accumulate: the planner keeps grad_accum 1 and agrees with
    # the brute force, which skips every layout the scenario parser refuses
    base = scenario_from_mapping(
        {**scenario_to_mapping(BASE), "optimizer_in_backward": True, "grad_accum": 1}
    )
    request = PlanRequest(**{**SMALL.__dict__, "base": base, "methods": ("full",)})
    result = plan(request)
    expected = brute_force(request)
    assert expected and all(item.scenario.grad_accum == 1 for item in result.plans)
    assert result.plans[0].total_s == pytest.approx(expected[0][0], rel=1e-9)
    assert result.candidates_evaluated - sum(result.rejected.values()) == len(expected)
    assert result.rejected["invalid: optimizer_in_backward needs grad_accum 1 and no offload"] > 0


def test_planner_carries_the_savers_and_agrees_with_brute_force() -> None:
    # the savers stay fixed from the base scenario; full:2 is searched next to the default modes
    saver_fields = {
        "loss": "chunked",
        "activation_offload": True,
        "lora": {"rank": 16, "targets": "qv", "dropout": 0.1, "dtype": "compute"},
        "activation_checkpointing": "full:2",
    }
    base = scenario_from_mapping({**scenario_to_mapping(BASE), **saver_fields})
    request = PlanRequest(
        **{**SMALL.__dict__, "base": base, "methods": ("lora",), "checkpointing": ("none", "full:2")}
    )
    result = plan(request)
    expected = brute_force(request)
    assert result.plans[0].total_s == pytest.approx(expected[0][0], rel=1e-9)
    assert result.candidates_evaluated - sum(result.rejected.values()) == len(expected)
    for item in result.plans:
        assert item.scenario.loss == "chunked" and item.scenario.activation_offload
        assert item.scenario.lora.dropout == 0.1 and item.scenario.lora.dtype == "compute"
    op_base = scenario_from_mapping({**scenario_to_mapping(BASE), "activation_checkpointing": "op"})
    from trainplan.engine.plan import searched_checkpointing

    assert searched_checkpointing(PlanRequest(base=op_base)) == ("none", "selective", "full", "op")


def test_the_pareto_objective_lists_only_the_front() -> None:
    """Ranked by 'pareto', every plan listed is on the cost/time front: no listed or front plan
    is at least as fast and as cheap and better in one of the two."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import request_from_options

    scenario = scenario_from_mapping({"model": "Qwen2.5-0.5B"})
    result = plan(request_from_options(scenario, {"max_gpus": "8", "objective": "pareto"}))
    assert result.plans
    points = [(p.total_s, p.usd) for p in (*result.plans, *result.pareto)]
    for candidate in result.plans:
        time, usd = candidate.total_s, candidate.usd
        assert not any((t <= time and u <= usd) and (t < time or u < usd) for t, u in points), (time, usd)
    times = [p.total_s for p in result.plans]
    assert times == sorted(times)  # fastest first


def test_the_least_energy_plan_uses_the_least_energy_whatever_gpus_lack_a_power_figure() -> None:
    # GPUs without a published power figure have no energy (NaN): they rank after every known
    # figure, and never break the order of the others (a sort of Python tuples with NaN in them
    # once put a 2-GPU full fine-tune at 364 GPU-hours ahead of a 32-GPU LoRA at 246)
    base = Scenario(model="Llama-3.1-8B", train_tokens=1e10)
    request = PlanRequest(
        base=base, methods=("full", "lora", "qlora"), max_gpus=32, objective="energy",
        target_global_tokens=1_048_576,
    )  # fmt: skip
    by_energy = plan(request)
    kwh = [p.kwh for p in by_energy.plans]
    assert all(k is not None for k in kwh) and kwh == sorted(kwh)  # type: ignore[type-var]
    others = [*plan(dataclasses.replace(request, objective="time")).plans, *by_energy.pareto]
    assert all(by_energy.plans[0].kwh <= p.kwh + 1e-9 for p in others if p.kwh is not None)  # type: ignore[operator]
