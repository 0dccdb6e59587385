"""Pipeline parallelism under FSDP: the stage's gradients stay unsharded through the micro-batches.

torch 2.13 distributed/pipelining/stage.py runs every micro-batch's backward with
`set_requires_gradient_sync(False)` and `set_reshard_after_backward(False)`
(backward_maybe_with_nosync) and reduces once, after the last (perform_reduce_grad); FSDP2 then
accumulates each unsharded gradient at the reduce dtype (fsdp/_fully_shard/_fsdp_param.py
to_accumulated_grad_if_needed). So from the first backward to the reduce-scatter a GPU holds its
stage's whole gradients in fp32 (torchtitan's default reduce dtype), where without pipelining it
holds its shard.
"""

from __future__ import annotations

import dataclasses

import pytest

from trainplan import Scenario, estimate
from trainplan.specs.scenario import data_parallel

BASE = Scenario(
    model="llama-3.1-8b",
    method="full",
    gpu="H100 SXM 80GB",
    gpus=16,
    pipeline_parallel=2,
    zero_stage=3,
    fsdp_reduce_dtype="fp32",
    micro_batch=1,
    grad_accum=8,
    seq_len=4096,
    activation_checkpointing="full",
)


def _gradients(scenario: Scenario) -> dict[str, float]:
    result = estimate(scenario)
    return {
        phase.name: next(term.value for term in phase.terms if term.name == "gradients")
        for phase in result.phases
    }


def _moments(scenario: Scenario) -> dict[str, float]:
    """The gradients at each moment of the step (the end of backward is its own moment)."""
    from trainplan.engine.estimate import device_of, layout_of
    from trainplan.engine.per_gpu import memory
    from trainplan.engine.per_replica import coefficients
    from trainplan.inputs.catalogs.gpus import find_gpu
    from trainplan.inputs.resolve import resolve_model

    coeffs = coefficients(resolve_model(scenario.model), scenario)
    layout = layout_of(coeffs, scenario, device_of(scenario, find_gpu(scenario.gpu)))
    return {name: terms["gradients"] for name, (terms, _) in memory(coeffs, layout).moments.items()}


def test_a_pipelined_stage_holds_its_unsharded_gradients() -> None:
    """8 data-parallel replicas: in forward (after the first micro-batch's backward) the stage's
    fp32 gradients are all there, 8 x the fp32 shard the optimizer steps on; at the end of
    backward the shards they reduce into are there too."""
    grads = _gradients(BASE)
    assert data_parallel(BASE) == 8
    assert grads["forward"] == pytest.approx(8 * grads["optimizer"], rel=1e-12)
    moments = _moments(BASE)
    assert moments["backward end"] == pytest.approx(9 * grads["optimizer"], rel=1e-12)


def test_without_pipelining_the_accumulated_gradients_are_sharded() -> None:
    """The same replicas without pipeline stages accumulate into their shards (FSDP2 reduces
    every backward): one shard in forward, as in the optimizer step."""
    flat = dataclasses.replace(BASE, pipeline_parallel=1, gpus=8)
    grads = _gradients(flat)
    assert grads["forward"] == pytest.approx(grads["optimizer"], rel=1e-12)


def test_a_bf16_reduce_accumulates_at_bf16() -> None:
    """fsdp_reduce_dtype compute: the gradients already have the reduce dtype, so nothing is
    upcast and the unsharded accumulation is half the fp32 one."""
    fp32, bf16 = _gradients(BASE), _gradients(dataclasses.replace(BASE, fsdp_reduce_dtype="compute"))
    assert bf16["forward"] == pytest.approx(fp32["forward"] / 2, rel=1e-12)


def _torch_interleaved_in_flight(stages: int, micro_batches: int, chunks: int) -> float:
    """Rank 0's most chunks in flight under torch's own ScheduleInterleaved1F1B action list
    (its `_calculate_single_rank_operations`, run on the schedule's bookkeeping alone), in
    micro-batches of the stage's activations (a chunk holds 1 / chunks of them)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    schedule = object.__new__(schedules.ScheduleInterleaved1F1B)
    schedule.pp_group_size = stages
    schedule.n_local_stages = chunks
    schedule._n_microbatches = micro_batches
    schedule.number_of_rounds = max(1, micro_batches // stages)
    schedule.microbatches_per_round = micro_batches // schedule.number_of_rounds
    held = most = 0
    for action in schedule._calculate_single_rank_operations(0):
        if action is None:
            continue
        if action.computation_type == schedules._ComputationType.FORWARD:
            held += 1
        elif action.computation_type == schedules._ComputationType.FULL_BACKWARD:
            held -= 1
        most = max(most, held)
    return most / chunks


@pytest.mark.parametrize(
    ("stages", "micro_batches", "chunks"), [(8, 32, 2), (4, 8, 2), (4, 16, 4), (8, 8, 2), (2, 4, 3)]
)
def test_interleaved_in_flight_is_torchs(stages: int, micro_batches: int, chunks: int) -> None:
    from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_in_flight

    ours = pipeline_in_flight(SCHEDULE_CODES["interleaved-1f1b"], stages, micro_batches, chunks)
    assert ours == pytest.approx(_torch_interleaved_in_flight(stages, micro_batches, chunks), rel=1e-12)


def test_each_schedule_holds_its_micro_batches() -> None:
    """8 stages, 32 micro-batches, full checkpointing (each layer keeps its input): the stored
    activations are 1F1B's 8 micro-batches, GPipe's 32, interleaved 1F1B's 23 chunks of half a
    stage (11.5; torch's warm-up 8 + 14, then one forward), and ZB-H1's 8, as 1F1B's."""
    base = dataclasses.replace(BASE, gpus=8, pipeline_parallel=8, zero_stage=0, grad_accum=32)

    def stored(**fields: object) -> float:
        phase = next(p for p in estimate(dataclasses.replace(base, **fields)).phases if p.name == "forward")
        return next(term.value for term in phase.terms if term.name == "activations")

    # what is kept outside the layers (the embedding's output, the last norm) does not scale
    # with the micro-batches in flight: compare the layers' part, each schedule against 1F1B
    one_f_one_b = stored()
    per_micro_batch = (stored(pipeline_schedule="gpipe") - one_f_one_b) / (32 - 8)
    assert per_micro_batch > 0
    assert stored(pipeline_schedule="zero-bubble") == one_f_one_b
    interleaved = stored(pipeline_schedule="interleaved-1f1b", virtual_stages=2)
    assert interleaved - one_f_one_b == pytest.approx(per_micro_batch * (11.5 - 8), rel=1e-9)


def test_each_schedule_has_its_bubble() -> None:
    """(p - 1) / m of the compute for 1F1B and GPipe, / (m v) interleaved, / (3 m) for ZB-H1."""
    base = dataclasses.replace(BASE, gpus=8, pipeline_parallel=8, zero_stage=0, grad_accum=32)

    def bubble(**fields: object) -> tuple[float, float]:
        result = estimate(dataclasses.replace(base, **fields))
        assert result.time is not None
        step = result.time.step
        return (
            step.pipeline_bubble,
            step.compute + step.dequantisation + step.float8_casts + step.compile_fusion,
        )

    seconds, compute = bubble()
    assert seconds == pytest.approx(compute * 7 / 32, rel=1e-12)
    assert bubble(pipeline_schedule="gpipe")[0] == pytest.approx(seconds, rel=1e-12)
    assert bubble(pipeline_schedule="zero-bubble")[0] == pytest.approx(seconds / 3, rel=1e-12)
    assert bubble(pipeline_schedule="interleaved-1f1b", virtual_stages=2)[0] == pytest.approx(
        seconds / 2, rel=1e-12
    )


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"pipeline_schedule": "interleaved-1f1b"}, "needs virtual_stages > 1"),
        ({"pipeline_schedule": "gpipe", "virtual_stages": 2}, "runs one model chunk per GPU"),
    ],
)
def test_schedule_and_virtual_stages_must_agree(fields: dict[str, object], words: str) -> None:
    from trainplan.specs.errors import InputError
    from trainplan.specs.scenario import scenario_from_mapping, scenario_to_mapping

    data = {**scenario_to_mapping(BASE), **fields}
    with pytest.raises(InputError) as error:
        scenario_from_mapping(data)
    assert error.value.field == "pipeline_schedule" and words in error.value.message
