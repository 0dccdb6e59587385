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
from typing import Any

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


def _formula_inputs(scenario: Scenario) -> tuple[Any, Any]:
    """The scenario's per-replica coefficients and layout, as estimate() builds them."""
    from trainplan.engine.estimate import device_of, layout_of
    from trainplan.engine.per_replica import coefficients
    from trainplan.inputs.catalogs.gpus import find_gpu
    from trainplan.inputs.resolve import resolve_model

    coeffs = coefficients(resolve_model(scenario.model), scenario)
    return coeffs, layout_of(coeffs, scenario, device_of(scenario, find_gpu(scenario.gpu)))


def _moments(scenario: Scenario) -> dict[str, float]:
    """The gradients at each moment of the step (the end of backward is its own moment)."""
    from trainplan.engine.per_gpu import memory

    coeffs, layout = _formula_inputs(scenario)
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


def _torch_interleaved_in_flight(stages: int, micro_batches: int, chunks: int, rank: int) -> float:
    """A rank's most chunks in flight under torch's own ScheduleInterleaved1F1B action list
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
    for action in schedule._calculate_single_rank_operations(rank):
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

    for rank in range(stages):
        ours = pipeline_in_flight(SCHEDULE_CODES["interleaved-1f1b"], stages, micro_batches, chunks, rank)
        theirs = _torch_interleaved_in_flight(stages, micro_batches, chunks, rank)
        assert ours == pytest.approx(theirs, rel=1e-12), rank


def test_one_f_one_b_in_flight_is_torchs() -> None:
    """torch 2.13 Schedule1F1B._step_microbatches: warmup_chunks = min(n_microbatches,
    num_stages - stage_index), then a backward before each forward; GPipe holds every
    micro-batch on every rank, ZB-H1 as 1F1B."""
    from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_in_flight

    for stages, micro_batches in ((8, 32), (4, 4), (8, 3)):
        for rank in range(stages):
            expected = min(micro_batches, stages - rank)
            assert pipeline_in_flight(SCHEDULE_CODES["1f1b"], stages, micro_batches, 1, rank) == expected
            assert (
                pipeline_in_flight(SCHEDULE_CODES["zero-bubble"], stages, micro_batches, 1, rank) == expected
            )
            assert (
                pipeline_in_flight(SCHEDULE_CODES["gpipe"], stages, micro_batches, 1, rank) == micro_batches
            )


PER_STAGE = Scenario(
    model="llama-3.1-8b",
    method="full",
    precision="bf16-mixed",
    gpu="H100 SXM 80GB",
    gpus=16,
    tensor_parallel=2,
    pipeline_parallel=4,
    zero_stage=1,
    micro_batch=1,
    grad_accum=16,
    seq_len=8192,
    activation_checkpointing="none",
)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"pipeline_schedule": "gpipe"},
        {"pipeline_schedule": "zero-bubble"},
        {"pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2},
        {"zero_stage": 3, "activation_checkpointing": "full"},
        {"method": "lora", "grad_accum": 2},
    ],
)
def test_per_gpu_is_the_worst_stage(fields: dict[str, object]) -> None:
    """memory.per_gpu is the largest of memory.per_stage, which lists every rank, and that is the
    first or the last (the others hold fewer micro-batches than the first, no head)."""
    result = estimate(dataclasses.replace(PER_STAGE, **fields)).to_dict()["memory"]
    stages = result["per_stage"]
    assert [stage["stage"] for stage in stages] == [0, 1, 2, 3]
    worst = max(stages, key=lambda stage: stage["total_bytes"])
    assert worst["total_bytes"] == pytest.approx(result["per_gpu"]["total_bytes"], rel=1e-12)
    assert worst["stage"] in (0, 3)
    assert sum(stage["params_fraction"] for stage in stages) == pytest.approx(1.0, rel=1e-12)


def test_each_stage_holds_its_own_micro_batches_and_only_the_last_the_logits() -> None:
    """1F1B over 4 ranks, 16 micro-batches: rank r holds 4 - r micro-batches of its layers'
    activations, so their activations step down by one micro-batch's a rank (ranks 1 and 2 hold
    the same layers); the logits and the loss are the last rank's alone, and the embedding
    (128,256 x 4,096 parameters, in bf16 over 2 tensor-parallel ranks) the first's."""
    memory = estimate(PER_STAGE).to_dict()["memory"]
    stages = memory["per_stage"]
    assert [stage["micro_batches_in_flight"] for stage in stages] == [4, 3, 2, 1]
    forward = [estimate_phase(PER_STAGE, rank, "forward") for rank in range(4)]
    held = [terms["activations"] for terms in forward]
    one = held[1] - held[2]
    assert one > 0
    assert held[0] - held[1] == pytest.approx(one, rel=1e-9)
    assert held[2] - held[3] == pytest.approx(one, rel=1e-9)
    assert [stage["logits_bytes"] for stage in stages[:3]] == [0.0, 0.0, 0.0]
    assert stages[3]["logits_bytes"] > 0
    embedding = 128_256 * 4096 * 2 / 2
    assert stages[0]["weights_bytes"] - stages[1]["weights_bytes"] == pytest.approx(embedding, rel=1e-9)


def estimate_phase(scenario: Scenario, rank: int, phase: str) -> dict[str, float]:
    """Pipeline rank `rank`'s terms at `phase` (per_gpu.stage_memory over the scenario's layout)."""
    from trainplan.engine.per_gpu import stage_memory

    coeffs, layout = _formula_inputs(scenario)
    fraction = coeffs.rank_fractions(scenario.pipeline_parallel, scenario.virtual_stages)[rank]
    terms: dict[str, float] = stage_memory(coeffs, layout, rank, fraction).phases[phase]
    return terms


def test_each_schedule_holds_its_micro_batches() -> None:
    """8 stages, 32 micro-batches, full checkpointing (each layer keeps its input): the stored
    activations are 1F1B's 8 micro-batches, GPipe's 32, interleaved 1F1B's 23 chunks of half a
    stage (11.5; torch's warm-up 8 + 14, then one forward), and ZB-H1's 8, as 1F1B's."""
    base = dataclasses.replace(BASE, gpus=8, pipeline_parallel=8, zero_stage=0, grad_accum=32)

    def stored(**fields: object) -> float:
        return estimate_phase(dataclasses.replace(base, **fields), 0, "forward")["activations"]

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


def test_the_stage_line_says_each_ranks_peak() -> None:
    """The CLI and the page say every rank's peak and micro-batches in flight, the worst marked
    (phrasing.stage_line, from memory.per_stage); none without pipelining."""
    from trainplan.interfaces.text.phrasing import stage_line
    from trainplan.specs.units import format_gib

    result = estimate(PER_STAGE)
    stages = result.to_dict()["memory"]["per_stage"]
    line = stage_line(result)
    assert line is not None
    assert line.startswith("Pipeline stages, each rank's peak: stage 0 ")
    assert f"stage 0 {format_gib(stages[0]['total_bytes'])} (4 micro-batches in flight; the worst)" in line
    assert line.endswith(f"stage 3 {format_gib(stages[3]['total_bytes'])} (1)")
    assert stage_line(estimate(dataclasses.replace(PER_STAGE, pipeline_parallel=1, gpus=4))) is None


def test_the_cli_prints_the_stage_line() -> None:
    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    args = ["estimate", "--model", "llama-3.1-8b", "--gpu", "H100 SXM 80GB", "--gpus", "16"]
    args += ["--tensor-parallel", "2", "--pipeline-parallel", "4", "--grad-accum", "16"]
    out = CliRunner().invoke(app, [*args, "--seq-len", "8192", "--activation-checkpointing", "none"])
    assert out.exit_code == 0, out.output
    assert "Pipeline stages, each rank's peak: stage 0" in " ".join(out.output.split())


def _v_actions(schedule: str, stages: int, micro_batches: int) -> dict[int, list[tuple[Any, ...]]]:
    """torch 2.13's own action list of every rank of a V schedule (ScheduleDualPipeV,
    ScheduleZBVZeroBubble: their `_calculate_single_rank_operations`, run on the schedule's
    bookkeeping alone), each step as the actions it runs: one, or an overlapped forward and
    backward (forward first)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    runs = object.__new__(getattr(schedules, schedule))
    runs.pp_group_size = stages
    runs._n_microbatches = micro_batches
    runs.n_local_stages = 2
    runs.num_stages = runs._num_stages = 2 * stages
    overlapped = schedules._ComputationType.OVERLAP_F_B
    lists = {}
    for rank in range(stages):
        runs.rank = rank
        lists[rank] = [
            tuple(action.sub_actions) if action.computation_type == overlapped else (action,)
            for action in runs._calculate_single_rank_operations(rank)
            if action is not None
        ]
    return lists


def _v_most_chunks(steps: list[tuple[Any, ...]]) -> int:
    """A rank's most chunks in flight: each held from its forward to its full or weight
    backward."""
    kinds = pytest.importorskip("torch.distributed.pipelining.schedules")._ComputationType
    held = most = 0
    for action in (action for step in steps for action in step):
        if action.computation_type == kinds.FORWARD:
            held += 1
        elif action.computation_type in (kinds.FULL_BACKWARD, kinds.BACKWARD_WEIGHT):
            held -= 1
        most = max(most, held)
    assert held == 0
    return most


@pytest.mark.parametrize(("stages", "micro_batches"), [(2, 4), (4, 8), (4, 16), (8, 16), (8, 40)])
def test_dualpipev_in_flight_is_torchs(stages: int, micro_batches: int) -> None:
    """Every rank's most chunks in flight under torch's ScheduleDualPipeV, in stage
    micro-batches (a chunk is half a stage): 2p + 1 chunks on every rank."""
    from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_in_flight

    for rank, steps in _v_actions("ScheduleDualPipeV", stages, micro_batches).items():
        ours = pipeline_in_flight(SCHEDULE_CODES["dualpipev"], stages, micro_batches, 2, rank)
        assert ours == _v_most_chunks(steps) / 2, rank


@pytest.mark.parametrize(
    ("stages", "micro_batches"), [(2, 1), (2, 2), (4, 3), (4, 5), (4, 8), (8, 9), (8, 12), (8, 32)]
)
def test_zero_bubble_v_in_flight_is_torchs(stages: int, micro_batches: int) -> None:
    """Every rank's most chunks in flight under torch's ScheduleZBVZeroBubble:
    min(2p, m + 1 + r, 2m) chunks of half a stage."""
    from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_in_flight

    for rank, steps in _v_actions("ScheduleZBVZeroBubble", stages, micro_batches).items():
        ours = pipeline_in_flight(SCHEDULE_CODES["zero-bubble-v"], stages, micro_batches, 2, rank)
        assert ours == _v_most_chunks(steps) / 2, rank


def _v_span(schedule: str, stages: int, micro_batches: int) -> float:
    """The makespan of torch's action lists of a V schedule run in order with their
    dependencies (a chunk's forward after the previous chunk's, its input gradient after the
    next chunk's and its own forward, its weight gradient after its input gradient), forward,
    input and weight gradient one time unit each; an overlapped pair starts once both may and
    takes the sum of its two (no overlap credit)."""
    kinds = pytest.importorskip("torch.distributed.pipelining.schedules")._ComputationType
    lists = _v_actions(schedule, stages, micro_batches)
    last = 2 * stages - 1
    done: dict[tuple[str, int, int], float] = {}
    clock = dict.fromkeys(lists, 0.0)
    at = dict.fromkeys(lists, 0)

    def needs(action: Any) -> list[tuple[str, int, int]]:
        stage, kind, batch = action.stage_index, action.computation_type, action.microbatch_index
        if kind == kinds.FORWARD:
            return [("F", stage - 1, batch)] if stage else []
        if kind == kinds.BACKWARD_WEIGHT:
            return [("I", stage, batch)]
        return [("F", stage, batch)] + ([("I", stage + 1, batch)] if stage < last else [])

    def gives(action: Any) -> tuple[list[str], float]:
        kind = action.computation_type
        if kind == kinds.FULL_BACKWARD:
            return ["I", "W"], 2.0
        return [{kinds.FORWARD: "F", kinds.BACKWARD_INPUT: "I", kinds.BACKWARD_WEIGHT: "W"}[kind]], 1.0

    moved = True
    while moved:
        moved = False
        for rank, steps in lists.items():
            while at[rank] < len(steps):
                step = steps[at[rank]]
                wanted = [key for action in step for key in needs(action)]
                if not all(key in done for key in wanted):
                    break
                end = max([clock[rank], *(done[key] for key in wanted)]) + sum(gives(a)[1] for a in step)
                for action in step:
                    for name in gives(action)[0]:
                        done[(name, action.stage_index, action.microbatch_index)] = end
                clock[rank], at[rank], moved = end, at[rank] + 1, True
    assert all(at[rank] == len(steps) for rank, steps in lists.items())
    return max(clock.values())


@pytest.mark.parametrize(
    ("schedule", "stages", "micro_batches"),
    [
        ("dualpipev", 2, 4),
        ("dualpipev", 4, 8),
        ("dualpipev", 4, 32),
        ("dualpipev", 8, 16),
        ("dualpipev", 8, 64),
        ("zero-bubble-v", 2, 2),
        ("zero-bubble-v", 4, 3),
        ("zero-bubble-v", 4, 5),
        ("zero-bubble-v", 8, 11),
        ("zero-bubble-v", 8, 12),
        ("zero-bubble-v", 8, 64),
    ],
)
def test_v_bubbles_are_the_simulated_schedules(schedule: str, stages: int, micro_batches: int) -> None:
    """The idle time beyond the compute of m micro-batches of two chunks of three units each, as
    torch's action lists run, is the engine's bubble: DualPipeV's (p - 1) / (3 m), ZB-V's
    max(p - 1, 2 (2p - 1 - m)) chunk steps."""
    from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_bubble_seconds
    from trainplan.specs.pipeline import V_CLASSES

    torch_class = V_CLASSES[schedule]
    compute = micro_batches * 2 * 3.0
    simulated = _v_span(torch_class, stages, micro_batches) - compute
    ours = pipeline_bubble_seconds(compute, stages, micro_batches, 2, SCHEDULE_CODES[schedule])
    assert ours == pytest.approx(simulated, rel=1e-12)


DUALPIPEV = Scenario(
    model="Qwen3-30B-A3B",
    method="full",
    precision="bf16-mixed",
    gpu="H100 SXM 80GB",
    gpus=16,
    pipeline_parallel=4,
    expert_parallel=4,
    zero_stage=3,
    micro_batch=1,
    grad_accum=16,
    seq_len=4096,
    activation_checkpointing="none",
    pipeline_schedule="dualpipev",
    virtual_stages=2,
)


def test_dualpipev_puts_the_head_beside_the_embedding_on_rank_0() -> None:
    """In a V rank r holds chunks r and 2p - 1 - r: rank 0 the embedding and the head, so the
    logits and the loss are its alone and it is the worst; every rank holds 4.5 stage
    micro-batches (2p + 1 chunks of half a stage)."""
    from trainplan.engine.per_replica import coefficients
    from trainplan.inputs.resolve import resolve_model

    memory = estimate(DUALPIPEV).to_dict()["memory"]
    stages = memory["per_stage"]
    assert [stage["micro_batches_in_flight"] for stage in stages] == [4.5] * 4
    assert stages[0]["logits_bytes"] > 0
    assert [stage["logits_bytes"] for stage in stages[1:]] == [0.0] * 3
    assert max(stages, key=lambda stage: stage["total_bytes"])["stage"] == 0
    assert stages[0]["total_bytes"] == pytest.approx(memory["per_gpu"]["total_bytes"], rel=1e-12)
    coeffs = coefficients(resolve_model(DUALPIPEV.model), DUALPIPEV)
    # 48 layers in 8 chunks of 6: rank 0 holds chunks 0 and 7, the embedding and the head
    layers = coeffs.layer_params
    counts = coeffs.counts
    first = sum(layers[:6]) + counts.embedding + counts.extras
    last = sum(layers[42:]) + counts.head + coeffs.model.final_norms * coeffs.model.norm_params
    assert stages[0]["params_fraction"] == pytest.approx((first + last) / counts.total, rel=1e-12)
    assert stages[1]["params_fraction"] == pytest.approx(
        (sum(layers[6:12]) + sum(layers[36:42])) / counts.total, rel=1e-12
    )


def test_dualpipev_hides_the_expert_all_to_alls() -> None:
    """The expert all-to-alls run under the overlapped chunks' compute at comm_overlap
    (DeepSeek-V3 sec. 3.2.1): exposed, what comm_overlap x compute does not cover; under ZB-H1,
    the same bubble without the overlap, all of them."""
    from trainplan.engine.terms.timing import exposed_seconds

    dual = estimate(DUALPIPEV)
    plain = estimate(dataclasses.replace(DUALPIPEV, pipeline_schedule="zero-bubble", virtual_stages=1))
    assert dual.time is not None and plain.time is not None
    raw = plain.time.step.expert_parallel_comm
    assert raw > 0
    overlap = DUALPIPEV.comm_overlap
    expected = exposed_seconds(raw, plain.time.step.compute, overlap)
    assert dual.time.step.expert_parallel_comm == pytest.approx(expected, rel=1e-12)
    assert dual.time.step.expert_parallel_comm < raw
    assert dual.time.step.pipeline_bubble == pytest.approx(plain.time.step.pipeline_bubble, rel=1e-12)


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"virtual_stages": 1}, "pipeline_schedule", "exactly 2 model chunks per GPU"),
        ({"grad_accum": 4}, "grad_accum", "grad_accum >= 2 x pipeline_parallel = 8"),
        ({"compile": True}, "compile", "set compile false"),
        ({"activation_checkpointing": "full"}, "activation_checkpointing", "set none"),
        ({"pipeline_schedule": "zero-bubble-v", "virtual_stages": 1}, "pipeline_schedule", "exactly 2"),
        ({"pipeline_schedule": "zero-bubble-v", "compile": True}, "compile", "set compile false"),
    ],
)
def test_dualpipev_layouts_that_cannot_run(fields: dict[str, object], field: str, words: str) -> None:
    """torch ScheduleDualPipeV: 2 chunks a rank, at least 2p micro-batches, no compiled stages;
    torchtitan (dual_pipe_v.py): no checkpointing with expert parallelism."""
    from trainplan.specs.errors import InputError

    with pytest.raises(InputError) as error:
        estimate(dataclasses.replace(DUALPIPEV, **fields))  # type: ignore[arg-type]
    assert error.value.field == field and words in error.value.message


def test_zero_bubble_v_puts_the_head_on_rank_0() -> None:
    """ZB-V places its chunks in the same V as DualPipeV: the logits are rank 0's alone, and
    with 16 micro-batches on 4 ranks every rank holds 2p = 8 chunks, 4 stage micro-batches."""
    zbv = dataclasses.replace(DUALPIPEV, pipeline_schedule="zero-bubble-v")
    stages = estimate(zbv).to_dict()["memory"]["per_stage"]
    assert [stage["micro_batches_in_flight"] for stage in stages] == [4.0] * 4
    assert stages[0]["logits_bytes"] > 0
    assert [stage["logits_bytes"] for stage in stages[1:]] == [0.0] * 3
