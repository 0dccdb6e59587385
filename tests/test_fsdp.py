"""FSDP2 (ZeRO-3) working set: hand-computed bytes for Llama-3.1-8B, and the settings' warnings.

Llama-3.1-8B (tests/configs.py): hidden 4096, 32 layers, MLP 14336, k/v width 1024, vocabulary
128256, untied head. One layer's matrices: q and o 4096 x 4096, k and v 4096 x 1024, gate, up and
down 4096 x 14336: 2 x 16,777,216 + 2 x 4,194,304 + 3 x 58,720,256 = 218,103,808 parameters.
Embedding and head 128256 x 4096 = 525,336,576 each; the final norm 4096.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate, layout_of
from trainplan.engine.per_gpu import memory
from trainplan.engine.per_replica import coefficients
from trainplan.engine.terms.device import flat_overhead
from trainplan.engine.terms.fsdp import all_gather_pool_bytes, reduce_buffer_bytes
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.scenario import scenario_from_mapping

LAYER = 218_103_808
P = 8_030_261_248  # Llama-3.1-8B parameters (test_params.py)
EMBEDDING = 128256 * 4096
ROOT = 2 * EMBEDDING + 4096
FULL_8 = {
    "model": "x",
    "method": "full",
    "gpus": 8,
    "zero_stage": 3,
    "grad_accum": 1,
    "overhead_gib": 0.0,
    "cache_fraction": 0.0,
}


def coeffs(config: dict[str, Any], **fields: Any) -> Any:
    scenario = scenario_from_mapping({**FULL_8, **fields})
    return coefficients(spec_from_config(config, "l8b"), scenario)


def run(config: dict[str, Any], **fields: Any) -> Any:
    return estimate(scenario_from_mapping({**FULL_8, **fields}), model=spec_from_config(config, "l8b"))


def phase_term(result: Any, phase: str, name: str) -> float:
    return float(next(p for p in result.phases if p.name == phase).term(name).value)


def test_reduce_buffer_is_the_larger_of_gradient_and_buffer() -> None:
    # bf16 gradients (2 bytes) copied into an fp32 buffer (4 bytes): 4 per parameter
    assert reduce_buffer_bytes(10, 2, "fp32") == 40
    # reduce at the gradient's own dtype: the buffer is the gradient's size
    assert reduce_buffer_bytes(10, 2, "compute") == 20
    # fp32 gradients are never narrowed
    assert reduce_buffer_bytes(10, 4, "compute") == 40


def test_all_gather_pool_is_the_largest_consecutive_pair() -> None:
    assert all_gather_pool_bytes([5.0, 1.0, 1.0, 3.0]) == 6.0  # 5 + 1
    assert all_gather_pool_bytes([1.0, 2.0, 4.0]) == 6.0  # 2 + 4
    assert all_gather_pool_bytes([7.0]) == 7.0
    assert all_gather_pool_bytes([]) == 0.0


def test_default_working_set(llama8b_config: dict[str, Any]) -> None:
    c = coeffs(llama8b_config)
    # the layer computing and one prefetched, bf16: 2 x 2 bytes x LAYER
    assert c.fsdp.gathered_backward_bytes == 2 * 2 * LAYER
    assert c.fsdp.gathered_forward_bytes == 2 * 2 * LAYER
    # one layer's bf16 gradients (= a bf16 reduce-scatter buffer)
    assert c.fsdp.layer_reduce_bytes == 2 * LAYER
    assert c.fsdp.root_gathered_bytes == 0.0
    # the embedding's group is reduced last: its bf16 gradients and a bf16 buffer
    assert c.fsdp.last_group_grad_bytes == 4 * EMBEDDING
    # groups in forward order: embedding, layers, head; the largest pair is embedding + layer
    assert c.fsdp.all_gather_pool_bytes == 2 * (EMBEDDING + LAYER)


def test_fp32_reduce_root_wrap_and_prefetch(llama8b_config: dict[str, Any]) -> None:
    c = coeffs(llama8b_config, fsdp_reduce_dtype="fp32", fsdp_wrap="root", fsdp_prefetch=2)
    assert c.fsdp.gathered_backward_bytes == 3 * 2 * LAYER
    assert c.fsdp.layer_reduce_bytes == 4 * LAYER
    assert c.fsdp.root_gathered_bytes == 2 * ROOT
    # root first (embedding, head and norm together), then the first layer
    assert c.fsdp.all_gather_pool_bytes == 2 * (ROOT + LAYER)
    # the root's bf16 gradients and their fp32 buffer when its backward ends: 2 + 4 per parameter
    assert c.fsdp.last_group_grad_bytes == 6 * ROOT
    assert c.fsdp.reduce_grad_factor == 2.0


def test_no_reshard_after_forward_keeps_every_layer(llama8b_config: dict[str, Any]) -> None:
    c = coeffs(llama8b_config, reshard_after_forward=False)
    # every layer, and the embedding and head groups, stay gathered in bf16
    assert c.fsdp.gathered_forward_bytes == 32 * 2 * LAYER + 2 * 2 * EMBEDDING
    assert c.fsdp.gathered_backward_bytes == 2 * 2 * LAYER


def test_root_wrap_in_the_backward_peak(llama8b_config: dict[str, Any]) -> None:
    # no checkpointing and long sequences: the loss gradient at the start of backward is the
    # backward phase's peak, not its end
    fields = {"activation_checkpointing": "none", "seq_len": 8192, "micro_batch": 2}
    base = run(llama8b_config, **fields)
    titan = run(llama8b_config, **fields, fsdp_wrap="root", fsdp_reduce_dtype="fp32")
    # at the end of forward and while the loss gradient is formed no layer gradient or reduce
    # buffer exists yet: temporaries grow by the root's bf16 copy and the pool's change (root +
    # layer instead of embedding + layer)
    grown = 2 * ROOT + 2 * (ROOT - EMBEDDING)
    for phase in ("forward", "backward"):
        assert phase_term(titan, phase, "temporaries") - phase_term(base, phase, "temporaries") == (
            pytest.approx(grown)
        )
    # the head's gradient does not exist yet at that moment (the head's backward comes after the
    # loss's): no gradient at all
    assert phase_term(titan, "backward", "gradients") == 0
    # reserved beside the allocations: the all-gather pool and the blocks of the fp32 gradient
    # shards (4 bytes x P / 8), which the reduce-scatter stream keeps once zero_grad frees them
    assert titan.stream_pool_bytes == pytest.approx(2 * (ROOT + LAYER) + 4 * P / 8)
    assert titan.allocated_peak_bytes == pytest.approx(titan.total_bytes - titan.stream_pool_bytes)
    # the all-gather pool stays reserved through the optimizer step (beside foreach AdamW's
    # temporaries)
    assert phase_term(titan, "optimizer", "temporaries") - phase_term(base, "optimizer", "temporaries") == (
        pytest.approx(2 * (ROOT - EMBEDDING))
    )


def test_end_of_backward_under_the_root(llama8b_config: dict[str, Any]) -> None:
    scenario = scenario_from_mapping({**FULL_8, "fsdp_wrap": "root", "fsdp_reduce_dtype": "fp32"})
    c = coefficients(spec_from_config(llama8b_config, "l8b"), scenario)
    mem = memory(c, layout_of(c, scenario, flat_overhead(0.0)))
    terms, pool = mem.moments["backward end"]
    # the larger of a layer's working set with the unsharded head gradient (2 x 2L + 4L + 2E)
    # and the root's bf16 gradients with their fp32 buffer (6 x ROOT), beside the pool
    assert 6 * ROOT > 8 * LAYER + 2 * EMBEDDING
    assert terms["temporaries"] == pytest.approx(6 * ROOT + pool)
    assert pool == 2 * (ROOT + LAYER)


def test_fsdp_keeps_the_master_in_the_shard(llama8b_config: dict[str, Any]) -> None:
    shard = run(llama8b_config)
    separate = run(llama8b_config, zero3_master="separate")
    # FSDP: fp32 shards (4 / 8 per parameter), Adam moments 8 / 8, fp32 gradient shards 4 / 8
    assert phase_term(shard, "optimizer", "weights") == pytest.approx(4 * P / 8)
    assert phase_term(shard, "optimizer", "optimizer") == pytest.approx(8 * P / 8)
    assert phase_term(shard, "optimizer", "gradients") == pytest.approx(4 * P / 8)
    # DeepSpeed (ZeRO paper 2 + 2 + 12): bf16 partitions, bf16 gradients, fp32 master + moments
    assert phase_term(separate, "optimizer", "weights") == pytest.approx(2 * P / 8)
    assert phase_term(separate, "optimizer", "optimizer") == pytest.approx(12 * P / 8)
    assert phase_term(separate, "optimizer", "gradients") == pytest.approx(2 * P / 8)


def test_tensor_parallel_divides_the_working_set(llama8b_config: dict[str, Any]) -> None:
    pools = []
    for tp in (1, 2):
        scenario = scenario_from_mapping({**FULL_8, "fsdp_wrap": "root", "gpus": 16, "tensor_parallel": tp})
        c = coefficients(spec_from_config(llama8b_config, "l8b"), scenario)
        pools.append(memory(c, layout_of(c, scenario, flat_overhead(0.0))).moments["optimizer"][1])
    # the all-gather pool (root + first layer, bf16) is split by tensor parallelism
    assert pools == [pytest.approx(2 * (ROOT + LAYER)), pytest.approx(ROOT + LAYER)]


def test_settings_without_sharded_weights_warn(llama8b_config: dict[str, Any]) -> None:
    result = run(llama8b_config, zero_stage=2, fsdp_wrap="root", fsdp_prefetch=2)
    assert "fsdp_wrap has no effect without ZeRO-3 over several data-parallel ranks" in result.warnings
    assert "fsdp_prefetch has no effect without ZeRO-3 over several data-parallel ranks" in result.warnings
    assert result.stream_pool_bytes == 0.0
    assert not [w for w in run(llama8b_config, fsdp_wrap="root").warnings if "fsdp" in w]


def test_fp32_reduce_doubles_the_reduce_scatter_traffic(llama8b_config: dict[str, Any]) -> None:
    # ZeRO-3 moves 2 gathers + 1 reduce-scatter per micro-batch; with fp32 the reduce-scatter is
    # twice the bf16 gradients, without resharding after forward one gather is saved
    c16 = coeffs(llama8b_config)
    c32 = coeffs(llama8b_config, fsdp_reduce_dtype="fp32", reshard_after_forward=False)
    assert (1 + c16.fsdp.reshard_after_forward, c16.fsdp.reduce_grad_factor) == (2, 1.0)
    assert (1 + c32.fsdp.reshard_after_forward, c32.fsdp.reduce_grad_factor) == (1, 2.0)


def test_bad_prefetch_is_a_field_error(llama8b_config: dict[str, Any]) -> None:
    from trainplan.specs.errors import InputError

    with pytest.raises(InputError, match="fsdp_prefetch"):
        run(llama8b_config, fsdp_prefetch=17)
    with pytest.raises(InputError, match="fsdp_wrap"):
        run(llama8b_config, fsdp_wrap="everything")
