"""Expert parallelism: the routed experts split over expert_parallel GPUs, by hand.

Qwen3-30B-A3B as its config.json states it (Qwen/Qwen3-30B-A3B: hidden 2048, 48 layers, 128
routed experts of moe_intermediate_size 768, 8 a token, gated). torchtitan's layout
(pytorch/torchtitan@238fa995 parallel_dims.py, expert_tensor_parallel_degree 1): whole experts
a rank, num_experts / ep of them, FSDP over efsdp = dp_shard x cp x tp / ep.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainplan import Scenario, estimate
from trainplan.engine.per_replica import coefficients
from trainplan.engine.terms.timing import INTRA_NODE_EFFICIENCY
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import InputError

EXPERT_PARAMS = 48 * 128 * 3 * 2048 * 768
BASE = Scenario(
    model="Qwen3-30B-A3B",
    method="full",
    gpu="H100 SXM 80GB",
    gpus=8,
    zero_stage=0,
    seq_len=4096,
    micro_batch=1,
    grad_accum=4,
    activation_checkpointing="full",
)


def _states(scenario: Scenario) -> dict[str, float]:
    return {state.name: state.value for state in estimate(scenario).states}


def test_the_routed_experts_of_qwen3_30b() -> None:
    share = coefficients(resolve_model(BASE.model), BASE).experts
    assert share.params == EXPERT_PARAMS
    # a dispatch moves 8 copies of the 2,048-wide hidden state in each of the 48 MoE layers
    assert share.dispatch_elements == 48 * 8 * 2048


def test_unsharded_states_hold_one_eighth_of_the_experts() -> None:
    """Without ZeRO each GPU holds 1 / 8 of the experts at EP 8: bf16-mixed weights (2 bytes),
    gradients (2) and optimizer state (12: the fp32 master and two Adam states) each lose 7 / 8
    of the experts' bytes."""
    one, split = _states(BASE), _states(dataclasses.replace(BASE, expert_parallel=8))
    for name, per_param in (("weights", 2), ("gradients", 2), ("optimizer", 12)):
        assert one[name] - split[name] == pytest.approx(EXPERT_PARAMS * per_param * 7 / 8, rel=1e-9)


def test_sharded_states_are_the_dense_share_with_or_without_ep() -> None:
    """Under ZeRO-3 every state is 1 / 8 a GPU whether the experts are split by EP or by FSDP."""
    sharded = dataclasses.replace(BASE, zero_stage=3)
    assert _states(dataclasses.replace(sharded, expert_parallel=8)) == _states(sharded)


def test_all_to_all_time_by_hand() -> None:
    """Dispatch and combine, forward, backward and the recomputed forward (full checkpointing):
    6 all-to-alls of 8 copies x 2,048 x 2 bytes a token and MoE layer, 7 / 8 leaving the GPU,
    for 4 micro-batches of 4,096 tokens, over NVLink (450 GB/s each way) at the bus efficiency."""
    result = estimate(dataclasses.replace(BASE, expert_parallel=8))
    assert result.time is not None
    per_token = 6 * 48 * 8 * 2048 * 2 * 7 / 8
    nvlink = (find_gpu("H100 SXM 80GB").scale_up_bandwidth_bytes_per_s or 0.0) / 2 * INTRA_NODE_EFFICIENCY
    assert result.time.step.expert_parallel_comm == pytest.approx(per_token * 4 * 4096 / nvlink, rel=1e-12)
    plain = estimate(BASE)
    assert plain.time is not None and plain.time.step.expert_parallel_comm == 0.0


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"model": "llama-3.1-8b", "expert_parallel": 2}, "has no routed experts"),
        ({"gpus": 6, "expert_parallel": 3}, "does not divide the 128 routed experts"),
        ({"expert_parallel": 16}, "does not divide tensor_parallel x the ranks the states shard over = 8"),
        ({"tensor_parallel": 4, "expert_parallel": 2}, "is not a multiple of tensor_parallel 4"),
    ],
)
def test_expert_layouts_that_cannot_run(fields: dict[str, object], words: str) -> None:
    with pytest.raises(InputError) as error:
        estimate(dataclasses.replace(BASE, **fields))  # type: ignore[arg-type]
    assert error.value.field == "expert_parallel" and words in error.value.message


def test_torchtitan_expert_parallel_degree(tmp_path: Path) -> None:
    """torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml (pytorch/torchtitan@238fa995)
    lines 44-53: expert_parallel_degree 8 with FSDP over every GPU left: at least 8 GPUs."""
    from trainplan.inputs.configs import scenario_from_config
    from trainplan.specs.scenario import scenario_from_mapping

    text = (
        '[model]\nname = "llama3"\nflavor = "8B"\n'
        "[parallelism]\ndata_parallel_replicate_degree = 1\ndata_parallel_shard_degree = -1\n"
        "tensor_parallel_degree = 1\npipeline_parallel_degree = 1\nexpert_parallel_degree = 8\n"
        "expert_tensor_parallel_degree = 1\n"
    )
    (tmp_path / "job.toml").write_text(text)
    reading = scenario_from_config([tmp_path / "job.toml"])
    assert reading.mapping["expert_parallel"] == 8
    assert scenario_from_mapping(reading.mapping).gpus == 8


def test_a_moe_run_that_does_not_fit_is_offered_expert_parallelism() -> None:
    """Without ZeRO each of 8 GPUs holds every expert: splitting them over the 8 is offered,
    with its own estimate; a dense model's estimate refuses it, so it is not offered there, nor
    under ZeRO-3, where the experts' share is the dense one already."""
    from trainplan.interfaces.text.hints import Hint, hints

    def offered(scenario: Scenario) -> dict[str, Hint]:
        return {hint.id: hint for hint in hints(scenario, estimate(scenario))}

    split = offered(BASE)["expert_parallel"]
    assert split.change == {"expert_parallel": 8}
    expected = estimate(dataclasses.replace(BASE, expert_parallel=8)).total_bytes
    assert split.total_bytes == expected
    dense = dataclasses.replace(BASE, model="llama-3.1-70b")
    assert "expert_parallel" not in offered(dense)
    assert "expert_parallel" not in offered(dataclasses.replace(BASE, zero_stage=3))


def test_expert_imbalance_slows_the_busiest_rank() -> None:
    """expert_imbalance 1.5: the busiest expert rank routes 1.5 x the mean's tokens, so the
    all-to-alls take 1.5 x as long and its expert matmuls half as long again: 0.5 x the routed
    experts' share of the matmul parameters a token touches (Qwen3-30B-A3B: 8 of 128 experts of
    3 x 2,048 x 768 in each of 48 layers, against attention's 2,048 x (4,096 + 2 x 512) + 4,096 x
    2,048 and the router's 2,048 x 128) x the linears' compute (bf16: the compute less the
    attention core and the head)."""
    from trainplan.engine.per_replica import coefficients
    from trainplan.inputs.resolve import resolve_model

    base = Scenario(
        model="Qwen3-30B-A3B", method="full", precision="bf16-mixed", gpu="H100 SXM 80GB", gpus=16,
        expert_parallel=8, zero_stage=3, micro_batch=1, grad_accum=4, seq_len=4096,
        activation_checkpointing="full",
    )  # fmt: skip
    experts = 8 * 3 * 2048 * 768
    attention = 2048 * (4096 + 2 * 512) + 4096 * 2048 + 2048 * 128
    coeffs = coefficients(resolve_model(base.model), base)
    assert coeffs.experts.active_fraction == pytest.approx(experts / (experts + attention), rel=1e-9)
    balanced, skewed = estimate(base), estimate(dataclasses.replace(base, expert_imbalance=1.5))
    assert balanced.time is not None and skewed.time is not None
    flat, skew = balanced.time.step, skewed.time.step
    assert flat.expert_imbalance == 0.0
    assert skew.expert_parallel_comm == pytest.approx(1.5 * flat.expert_parallel_comm, rel=1e-12)
    work = coeffs.work
    linear_share = 1 - (work.attention_flops + work.flops.head_training) / work.flops.total
    expected = 0.5 * coeffs.experts.active_fraction * flat.compute * linear_share
    assert skew.expert_imbalance == pytest.approx(expected, rel=1e-9)
    assert skewed.time.step.total == pytest.approx(
        flat.total + expected + 0.5 * flat.expert_parallel_comm, rel=1e-12
    )
    # without expert parallelism every GPU runs every expert: the factor changes nothing
    whole = dataclasses.replace(base, expert_parallel=1)
    assert estimate(dataclasses.replace(whole, expert_imbalance=1.5)).time == estimate(whole).time
