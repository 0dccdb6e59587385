"""The layout rules: one table that estimate() raises from and the planner masks with."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.plan import evaluate_group, plan, scenario_of
from trainplan.engine.plan_request import PlanRequest
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import METHODS, OFFLOAD, Scenario, scenario_from_mapping, scenario_to_mapping
from trainplan.specs.validity import LAYOUT_REASONS, LayoutArrays, check_layout, layout_problems

# Qwen2.5-0.5B: 14 attention heads, 2 key/value heads, 24 layers. tp 4 does not divide 14 heads,
# 32 stages exceed 24 layers, tp 8 exceeds a 4-GPU node.
BASE = Scenario(model="Qwen2.5-0.5B", seq_len=512, train_tokens=1e7, gpus_per_node=4)
SPACE = {
    "gpu_types": ("H100 SXM 80GB",),
    "gpu_counts": (1, 2, 8, 32),
    "max_gpus": 32,
    "target_global_sequences": 8,
    "micro_batches": (1,),
    "tensor_parallel": (1, 2, 4, 8),
    "pipeline_parallel": (1, 32),
    "zero_stages": (0, 1, 2, 3),
    "checkpointing": ("full",),
}


def _groups() -> list[tuple[PlanRequest, str, str]]:
    """Every method and offload mode over BASE; full fine-tunes also with optimizer_in_backward."""
    oib = dataclasses.replace(BASE, method="full", optimizer_in_backward=True, grad_accum=1)
    groups = [(PlanRequest(base=BASE, **SPACE), method, offload) for method in METHODS for offload in OFFLOAD]
    groups += [(PlanRequest(base=oib, **SPACE), "full", offload) for offload in OFFLOAD]
    return groups


def test_planner_keeps_what_estimate_accepts_and_drops_what_it_refuses() -> None:
    """Brute force over every candidate of every (method, offload) group: a candidate the planner
    counts under a layout rule is refused by the scenario parser or estimate(), every other one
    is accepted (and its per-GPU peak is the planner's own)."""
    model = resolve_model(BASE.model)
    gpus = [find_gpu("H100 SXM 80GB")]
    seen: set[str] = set()
    for request, method, offload in _groups():
        group = evaluate_group(request, model, method, "full", offload, gpus)
        for position in range(group.valid.size):
            code = int(group.reason[position])
            label = None if code < 0 else ("layout" if code < len(LAYOUT_REASONS) else "search")
            try:  # a candidate a layout rule refuses cannot even be built as a Scenario
                scenario = scenario_of(request, gpus, group, position)
                result = estimate(scenario_from_mapping(scenario_to_mapping(scenario)), model=model)
            except InputError:
                assert label == "layout", (request, position, code)
                seen.add(LAYOUT_REASONS[code])
                continue
            assert label != "layout", (scenario, LAYOUT_REASONS[code])
            assert result.total_bytes == pytest.approx(float(group.peak_bytes[position]), rel=1e-12)
    # every rule a searched axis can break was hit; the rest (base weights, virtual stages,
    # sequence parallel, kbit upcast) the planner keeps consistent by construction
    assert seen == {
        "invalid: gpus not a multiple of tensor x pipeline parallel",
        "invalid: CPU offload without ZeRO on several GPUs",
        "invalid: tensor parallel beyond one node",
        "invalid: parameter offload needs ZeRO-3",
        "invalid: optimizer_in_backward needs grad_accum 1 and no offload",
        "invalid: tensor parallel does not divide the attention heads",
        "invalid: more pipeline stages than layers",
        # the HSDP candidates (one shard group a node) whose nodes do not divide the replicas
        "invalid: HSDP replicas do not divide the data-parallel replicas",
    }


def test_zero_with_one_replica_is_a_warning_in_both() -> None:
    """ZeRO over one data-parallel rank shards nothing: estimate() accepts it with a warning,
    and the planner keeps it (its peak equals ZeRO 0's: every shard is the whole)."""
    result = estimate(dataclasses.replace(BASE, zero_stage=2))
    assert "zero_stage has no effect with a single data-parallel replica" in result.warnings
    assert result.total_bytes == pytest.approx(estimate(BASE).total_bytes)
    request = PlanRequest(
        base=BASE, methods=("lora",), gpu_types=("H100 SXM 80GB",), gpu_counts=(1,), max_gpus=1,
        micro_batches=(1,), tensor_parallel=(1,), pipeline_parallel=(1,), zero_stages=(0, 2),
        checkpointing=(BASE.activation_checkpointing,), offloads=("none",), target_global_sequences=1,
    )  # fmt: skip
    found = plan(request)
    assert found.candidates_evaluated == 2 and not found.rejected
    # the same time and cost: the lower stage is listed, the other one left out as its twin
    assert [item.scenario.zero_stage for item in found.plans] == [0]


def test_the_rules_on_arrays_equal_the_rules_on_each_scenario() -> None:
    """layout_problems on arrays marks exactly the elements check_layout refuses one by one."""
    model = resolve_model("Qwen2.5-0.5B")
    tp = np.array([1, 2, 4, 1, 2, 1])
    pp = np.array([1, 1, 1, 32, 2, 1])
    gpus = np.array([1, 2, 4, 32, 2, 3])
    zero = np.array([0, 1, 0, 0, 3, 0])
    accum = np.ones(6, dtype=int)
    arrays = LayoutArrays(BASE, gpus, tp, pp, zero, accum, np.zeros(6, dtype=bool), 1)
    broken = np.zeros(6, dtype=bool)
    for _, mask in layout_problems(arrays, model):
        broken |= mask
    for i in range(6):
        layout = {"gpus": int(gpus[i]), "tensor_parallel": int(tp[i]), "pipeline_parallel": int(pp[i]),
                  "zero_stage": int(zero[i])}  # fmt: skip
        refused = False
        try:  # a model-free rule refuses the Scenario itself, a model rule its check
            check_layout(dataclasses.replace(BASE, **layout), model)
        except InputError:
            refused = True
        assert refused == bool(broken[i]), layout
    # by hand: tp 4 does not divide 14 heads; 32 stages > 24 layers; 2 GPUs are not a multiple
    # of tp 2 x pp 2; 3 GPUs at tp 1 x pp 1 are
    assert broken.tolist() == [False, False, True, True, True, False]


def test_model_rules_name_the_field() -> None:
    model = resolve_model("Qwen2.5-0.5B")
    with pytest.raises(InputError, match="does not divide the 14 attention heads") as error:
        check_layout(dataclasses.replace(BASE, gpus=4, tensor_parallel=4, gpus_per_node=8), model)
    assert error.value.field == "tensor_parallel"
    with pytest.raises(InputError, match="must be <= the 24 layers") as error:
        estimate(dataclasses.replace(BASE, gpus=32, pipeline_parallel=32))
    assert error.value.field == "pipeline_parallel"
