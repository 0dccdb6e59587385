"""Context parallelism and HSDP replicas: what each changes, against hand-worked figures.

The model is Llama-3.1-8B as its config.json states it (meta-llama/Llama-3.1-8B: 32 layers, 32
query heads and 8 KV heads of head_dim 4096 / 32 = 128). The exchange follows torch 2.13's
context parallelism (distributed/tensor/experimental/_context_parallel/_attention.py: one
all-gather of the local keys and values per layer in forward and again in backward, cp - 1
all-to-all rotations of the fp32 key/value gradients); the load balance is its head-tail one
(_load_balancer.py: seq_len % (2 x cp) == 0).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from trainplan import Scenario, estimate
from trainplan.engine.terms.context import context_exchange
from trainplan.engine.terms.timing import INTRA_NODE_EFFICIENCY
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import data_parallel, scenario_from_mapping

GIB = 1024**3
BASE = Scenario(
    model="llama-3.1-8b",
    method="full",
    gpu="H100 SXM 80GB",
    gpus=8,
    zero_stage=3,
    seq_len=16384,
    micro_batch=1,
    grad_accum=1,
    activation_checkpointing="full",
)


def _with(**fields: object) -> Scenario:
    return dataclasses.replace(BASE, **fields)


def _terms(scenario: Scenario, phase: str | None = None) -> dict[str, float]:
    result = estimate(scenario)
    chosen = result.peak if phase is None else next(p for p in result.phases if p.name == phase)
    return {term.name: term.value for term in chosen.terms}


def test_exchange_widths_of_llama_8b() -> None:
    """8 KV heads x (128 + 128) key and value elements per layer and token, 32 layers of them;
    32 x 128 query (and output) elements."""
    exchange = context_exchange(resolve_model("llama-3.1-8b"))
    assert exchange.layer_kv_elements == 8 * 256
    assert exchange.kv_elements == 32 * 8 * 256
    assert exchange.layer_q_elements == 32 * 128
    assert exchange.layer_out_elements == 32 * 128


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_activations_and_logits_divide_by_cp(cp: int) -> None:
    """Each GPU keeps 1 / cp of every sequence: the saved activations and the loss's logits at
    the peak (the same moment, the start of backward) divide exactly."""
    one, split = _terms(_with()), _terms(_with(context_parallel=cp))
    assert split["activations"] == pytest.approx(one["activations"] / cp, rel=1e-12)
    assert split["logits"] == pytest.approx(one["logits"] / cp, rel=1e-12)


def test_states_shard_over_the_context_parallel_ranks() -> None:
    """FSDP shards over dp_shard x cp (torchtitan's mesh): 8 GPUs as 4 replicas x cp 2 hold the
    same weight, gradient and optimizer shards as 8 data-parallel replicas."""
    full, split = estimate(_with()), estimate(_with(context_parallel=2))
    assert data_parallel(_with(context_parallel=2)) == 4
    assert split.assumptions["shard_group"] == 8
    assert {s.name: s.value for s in split.states} == {s.name: s.value for s in full.states}


def test_hsdp_states_shard_within_a_replica_group() -> None:
    """16 GPUs as 2 HSDP replicas of 8 hold what 8 fully sharded GPUs hold (1/8 each), twice
    what 16 fully sharded GPUs hold."""
    hsdp = estimate(_with(gpus=16, data_parallel_replicate=2))
    eight, sixteen = estimate(_with(gpus=8)), estimate(_with(gpus=16))
    states = {s.name: s.value for s in hsdp.states}
    assert states == {s.name: s.value for s in eight.states}
    weights = {s.name: s.value for s in sixteen.states}["weights"]
    assert states["weights"] == pytest.approx(2 * weights, rel=1e-12)
    assert hsdp.assumptions["shard_group"] == 8


def test_context_exchange_time_by_hand() -> None:
    """With nothing overlapped (comm_overlap 0), one micro-batch of 16,384 tokens over cp 2 on
    one H100 node: each GPU holds 8,192 tokens and receives, per token, the other rank's keys and
    values three times (forward, its recompute under full checkpointing, backward: 3 x 32 x 2,048
    x 2 bytes) and their fp32 gradients once (32 x 2,048 x 4 bytes), over NVLink (450 GB/s each
    way on the H100 SXM record) at the intra-node bus efficiency."""
    result = estimate(_with(context_parallel=2, comm_overlap=0.0))
    assert result.time is not None
    per_token = 3 * 32 * 2048 * 2 + 32 * 2048 * 4
    nvlink = (find_gpu("H100 SXM 80GB").scale_up_bandwidth_bytes_per_s or 0.0) / 2
    expected = per_token * 8192 / (nvlink * INTRA_NODE_EFFICIENCY)
    assert result.time.step.context_parallel_comm == pytest.approx(expected, rel=1e-12)
    # none without context parallelism
    single = estimate(_with(comm_overlap=0.0))
    assert single.time is not None and single.time.step.context_parallel_comm == 0.0


def test_context_exchange_hides_under_attention_by_default() -> None:
    """At 16k tokens the attention's own compute is far longer than the exchange: with the
    default overlap nothing is exposed, and the step's compute is the unsplit step's."""
    split, one = estimate(_with(context_parallel=2)), estimate(_with())
    assert split.time is not None and one.time is not None
    assert split.time.step.context_parallel_comm == 0.0
    # the same FLOPs per token, spread over the same 8 GPUs
    assert split.time.step.compute == pytest.approx(one.time.step.compute / 2, rel=1e-12)


def test_exchange_buffers_join_the_layer_working_set() -> None:
    """Without checkpointing at micro-batch 8 the forward peak holds one layer's exchange
    buffers besides 1 / cp of the activations: (cp + 1) local key/value copies at 2 bytes and
    the fp32 output accumulator, per local token. The layer itself adds no forward transient
    here (every tensor it makes is saved), so the temporaries grow by exactly the buffers."""
    scenario = _with(activation_checkpointing="none", micro_batch=8, seq_len=4096, gpus=8)
    one = _terms(scenario, "forward")
    split = _terms(dataclasses.replace(scenario, context_parallel=2), "forward")
    local = 8 * 4096 / 2
    buffers = (3 * 2048 * 2 + 4 * 4096) * local
    assert split["activations"] == pytest.approx(one["activations"] / 2, rel=1e-12)
    assert split["temporaries"] - one["temporaries"] == pytest.approx(buffers, rel=1e-12)


def test_hsdp_keeps_the_gathers_inside_a_node() -> None:
    """On two 8-GPU nodes, full sharding gathers and reduce-scatters every layer over the
    network; HSDP's 2 replicas of 8 do it over NVLink and all-reduce only the 1/8 shards over
    the network, so its data-parallel time (nothing overlapped) is far lower."""
    full = estimate(_with(gpus=16, comm_overlap=0.0))
    hsdp = estimate(_with(gpus=16, data_parallel_replicate=2, comm_overlap=0.0))
    assert full.time is not None and hsdp.time is not None
    assert hsdp.time.step.data_parallel_comm < 0.5 * full.time.step.data_parallel_comm


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        (
            {"context_parallel": 3, "gpus": 6, "seq_len": 4096},
            "context_parallel",
            "multiple of 2 x context_parallel",
        ),
        ({"context_parallel": 2, "attention": "eager"}, "context_parallel", "flash or sdpa"),
        ({"context_parallel": 3}, "gpus", "x context_parallel = 3"),
        ({"data_parallel_replicate": 3}, "data_parallel_replicate", "does not divide the 8"),
        ({"data_parallel_replicate": 2, "zero_stage": 0}, "data_parallel_replicate", "zero_stage >= 1"),
        (
            {"model": "SDXL-base-1.0", "context_parallel": 2, "seq_len": 2048},
            "context_parallel",
            "context parallelism must be 1",
        ),
    ],
)
def test_layouts_that_cannot_run_are_refused(fields: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(InputError) as error:
        estimate(_with(**fields))  # type: ignore[arg-type]
    assert error.value.field == field
    assert words in error.value.message


def test_range_is_checked_on_parse() -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"context_parallel": 0})
    assert error.value.field == "context_parallel"


def test_context_parallel_alone_still_shards() -> None:
    """accelerate's cp.yaml layout (8 GPUs, cp_size 8, dp_shard_size 1): one data-parallel
    replica, yet FSDP2 shards over the flattened dp_shard_cp mesh of 8 (accelerate
    parallelism_config.py fsdp_dim_names): the states are 1/8 each, ZeRO is not idle, and the
    checkpoint holds the fp32 master once (FSDP's shard is the master)."""
    alone = estimate(_with(context_parallel=8, seq_len=16384))
    eight = estimate(_with())
    assert data_parallel(_with(context_parallel=8)) == 1
    assert {s.name: s.value for s in alone.states} == {s.name: s.value for s in eight.states}
    assert not any("no effect" in warning for warning in alone.warnings)
    assert alone.time is not None and eight.time is not None
    assert alone.time.fixed.checkpoint_bytes == eight.time.fixed.checkpoint_bytes


def test_the_planner_searches_context_parallel_where_a_sequence_is_long() -> None:
    """1 always, the scenario's own, and each of 2, 4, 8 that leaves every GPU at least 8,192
    tokens a head-tail split can divide; with CP, ZeRO-3 only (FSDP over dp x cp)."""
    from trainplan.engine.plan_request import PlanRequest

    def degrees(seq_len: int, own: int = 1) -> tuple[int, ...]:
        return PlanRequest(base=_with(seq_len=seq_len, context_parallel=own)).context_parallels()

    assert degrees(4096) == (1,)
    assert degrees(4096, own=2) == (1, 2)
    assert degrees(16384) == (1, 2)
    assert degrees(131072) == (1, 2, 4, 8)
    one_node = {"zero_stages": (0, 1, 2, 3), "max_gpus": 8}
    request = PlanRequest(base=_with(seq_len=131072), **one_node)  # type: ignore[arg-type]
    assert request.grid_parts() == (((1,), (0, 1, 2, 3), False), ((2, 4, 8), (3,), False))
    without = PlanRequest(base=_with(seq_len=4096), **one_node)  # type: ignore[arg-type]
    # 4 ZeRO stages without CP, 3 CP degrees at ZeRO-3 with it: 7 / 4 of the unsplit grid
    assert request.candidates() * 4 == without.candidates() * 7
    # past one node, ZeRO-3 once more as HSDP (one shard group a node), over the counts past it
    nodes = PlanRequest(
        base=_with(seq_len=4096), zero_stages=(0, 1, 2, 3), gpu_counts=(8, 16, 32), max_gpus=32
    )
    assert nodes.grid_parts() == (((1,), (0, 1, 2, 3), False), ((1,), (3,), True))
    assert nodes.part_counts(True) == (16, 32)


def _brute_force(request: Any) -> list[tuple[float, dict[str, Any]]]:
    """Every (GPUs, tp, cp, zero) of the request through estimate(), the ones that run and fit."""
    from trainplan.specs.scenario import scenario_to_mapping

    found = []
    for gpus, tp, cp, zero in itertools.product(
        request.counts(), request.tensor_parallel, request.context_parallels(), request.zero_stages
    ):
        if (cp > 1 and zero != 3) or gpus % (tp * cp):
            continue
        target = request.global_sequences()
        accum = max(round(target / (gpus // (tp * cp))), 1)
        if abs(gpus // (tp * cp) * accum - target) > 0.05 * target:
            continue
        data = {
            **scenario_to_mapping(request.base),
            "gpus": gpus, "tensor_parallel": tp, "context_parallel": cp, "zero_stage": zero,
            "grad_accum": accum, "sequence_parallel": False,
        }  # fmt: skip
        try:
            result = estimate(scenario_from_mapping(data))
        except InputError:
            continue
        if result.total_bytes <= find_gpu(request.base.gpu).memory_bytes and result.time is not None:
            found.append((result.time.run_s, data))
    return sorted(found, key=lambda item: item[0])


def test_the_planner_agrees_with_every_context_parallel_layout_estimated() -> None:
    """A 131,072-token full fine-tune of Llama-3.1-8B does not fit one H100 at micro-batch 1
    even fully checkpointed: the fastest plan splits the sequence, and it is the fastest of
    every layout estimated one by one; each valid candidate is one estimate() accepts and fits."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    request = PlanRequest(
        base=_with(seq_len=131072, train_tokens=1e9),
        methods=("full",),
        gpu_types=("H100 SXM 80GB",),
        max_gpus=16,
        gpu_counts=(8, 16),
        target_global_sequences=4,
        micro_batches=(1,),
        tensor_parallel=(1, 2),
        pipeline_parallel=(1,),
        zero_stages=(0, 3),
        checkpointing=("full",),
        offloads=("none",),
        objective="time",
        top_k=3,
    )
    result = plan(request)
    expected = _brute_force(request)
    assert expected and all(data["context_parallel"] > 1 for _, data in expected)
    assert result.plans[0].total_s == pytest.approx(expected[0][0], rel=1e-9)
    assert result.plans[0].scenario.context_parallel == expected[0][1]["context_parallel"]
    assert result.candidates_evaluated - sum(result.rejected.values()) == len(expected)


def test_a_trace_refuses_context_parallel_and_hsdp() -> None:
    """A fake-tensor trace runs one GPU or rank 0 of plain FSDP2: a context-parallel or HSDP
    layout is refused, naming gpus, before anything is traced."""
    from trainplan.engine.measure.compare import check_traceable

    check_traceable(_with())  # plain FSDP2 over 8 ranks: traceable
    for layout in (_with(context_parallel=2), _with(gpus=16, data_parallel_replicate=2)):
        with pytest.raises(InputError) as error:
            check_traceable(layout)
        assert error.value.field == "gpus" and "context parallelism or HSDP replicas" in error.value.message


def test_a_long_sequence_that_does_not_fit_is_offered_a_split() -> None:
    """A 65,536-token full fine-tune on 8 H100s: splitting each sequence over 2 GPUs is offered,
    with its own estimate (the activations and logits halve); at 4,096 tokens it is not."""
    from trainplan.interfaces.text.hints import hints

    long = _with(seq_len=65536)
    offered = {hint.id: hint for hint in hints(long, estimate(long))}
    split = offered["context_parallel"]
    assert split.change == {"context_parallel": 2}
    assert split.total_bytes == estimate(_with(seq_len=65536, context_parallel=2)).total_bytes
    short = _with(seq_len=4096, micro_batch=64)
    assert "context_parallel" not in {hint.id for hint in hints(short, estimate(short))}


def test_the_planner_searches_hsdp_past_a_node_and_agrees_with_estimate() -> None:
    """Full sharding against HSDP with one shard group a node, on 8 to 32 H100s: the planner's
    fastest plan is the fastest of every layout estimated one by one, HSDP ones included."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest
    from trainplan.specs.scenario import scenario_to_mapping

    request = PlanRequest(
        base=_with(seq_len=4096, train_tokens=1e9, comm_overlap=0.0),
        methods=("full",),
        gpu_types=("H100 SXM 80GB",),
        max_gpus=32,
        gpu_counts=(8, 16, 32),
        target_global_sequences=32,
        micro_batches=(1,),
        tensor_parallel=(1,),
        pipeline_parallel=(1,),
        zero_stages=(3,),
        checkpointing=("full",),
        offloads=("none",),
        objective="time",
        top_k=3,
    )
    result = plan(request)
    found = []
    for gpus in (8, 16, 32):
        for replicas in {1, max(1, gpus // 8)}:
            data = {
                **scenario_to_mapping(request.base),
                "gpus": gpus, "data_parallel_replicate": replicas, "grad_accum": 32 // gpus,
            }  # fmt: skip
            estimated = estimate(scenario_from_mapping(data))
            assert estimated.time is not None
            found.append((estimated.time.run_s, replicas))
    best_s, best_replicas = min(found)
    assert result.plans[0].total_s == pytest.approx(best_s, rel=1e-9)
    assert result.plans[0].scenario.data_parallel_replicate == best_replicas
    assert result.candidates_evaluated - sum(result.rejected.values()) == len(found)
