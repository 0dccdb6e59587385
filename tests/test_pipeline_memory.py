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
