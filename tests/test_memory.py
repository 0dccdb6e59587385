"""Memory: hand-computed model states, ZeRO sharding, NF4 arithmetic, phases."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.precisions import nf4_bytes_per_param
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.scenario import Scenario
from trainplan.specs.units import GIB

P = 8_030_261_248  # Llama-3.1-8B, derived in test_params.py
LINEAR = 32 * (41_943_040 + 176_160_768)  # every matrix inside the layers


def run(config: dict[str, Any], **fields: Any) -> Any:
    # the tensors' arithmetic: no allocator cache (tests/test_device_memory.py holds that term)
    fields.setdefault("cache_fraction", 0.0)
    scenario = Scenario(**fields) if "model" in fields else Scenario(model="x", **fields)
    return estimate(scenario, model=spec_from_config(config, "l8b"))


def test_full_finetune_states_are_16_bytes_per_param(llama8b_config: dict[str, Any]) -> None:
    # bf16-mixed AdamW (ZeRO sec. 3.1): 2 weight + 2 grad + 12 optimizer = 16 bytes/param
    result = run(
        llama8b_config, method="full", optimizer="adamw-fused", gpus=1, grad_accum=1, overhead_gib=2.0
    )
    states = {term.name: term.value for term in result.states}
    assert states == {"weights": 2 * P, "gradients": 2 * P, "optimizer": 12 * P}
    optimizer_phase = next(p for p in result.phases if p.name == "optimizer")
    assert optimizer_phase.total == 16 * P + 2 * GIB
    # the fused step adds nothing, so the peak (16 bytes/param) is first reached when the last
    # gradient lands at the end of backward: weights + optimizer state + every gradient
    assert result.total_bytes == 16 * P + 2 * GIB
    assert result.peak.name == "backward"


@pytest.mark.parametrize(
    ("optimizer", "state_bytes"),
    [
        ("adamw-8bit", 2 * (1 + 4 / 256)),  # bitsandbytes: 8-bit codes, an fp32 absmax per 256
        ("adamw-4bit", 2 * (0.5 + 4 / 128)),  # torchao AdamW4bit: 4-bit codes, an fp32 scale per 128
    ],
)
def test_low_bit_adamw_states_with_the_fp32_master(
    llama8b_config: dict[str, Any], optimizer: str, state_bytes: float
) -> None:
    result = run(llama8b_config, method="full", optimizer=optimizer, gpus=1, grad_accum=1)
    states = {term.name: term.value for term in result.states}
    assert states["optimizer"] == pytest.approx((4 + state_bytes) * P)  # bf16-mixed: fp32 master too


def test_foreach_adamw_adds_a_state_sized_temporary(llama8b_config: dict[str, Any]) -> None:
    # torch's default (foreach) AdamW materialises sqrt(v) for all params: 4 more bytes/param
    fused = run(llama8b_config, method="full", optimizer="adamw-fused", grad_accum=1)
    foreach = run(llama8b_config, method="full", optimizer="adamw", grad_accum=1)
    step = {p.name: p.total for p in foreach.phases}["optimizer"]
    assert step - {p.name: p.total for p in fused.phases}["optimizer"] == 4 * P


def test_amp_is_4_4_8_plus_autocast_copy(llama8b_config: dict[str, Any]) -> None:
    result = run(llama8b_config, method="full", precision="amp-bf16", optimizer="adamw-fused")
    states = {term.name: term.value for term in result.states}
    assert states == {"weights": 4 * P, "gradients": 4 * P, "optimizer": 8 * P}
    forward = next(p for p in result.phases if p.name == "forward")
    # bf16 copy of every matmul weight (layers' matrices + the LM head) until forward ends
    assert forward.term("temporaries").value == 2 * (LINEAR + 128256 * 4096)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stages_shard_in_order(llama8b_config: dict[str, Any], stage: int) -> None:
    # ZeRO sec. 5: stage 1 shards optimizer state, 2 also grads, 3 also weights (over 8 ranks);
    # the paper's (DeepSpeed's) split keeps the fp32 master beside 16-bit partitions (FSDP's
    # fp32 shards are in test_fsdp.py)
    result = run(
        llama8b_config,
        method="full",
        optimizer="adamw-fused",
        gpus=8,
        zero_stage=stage,
        zero3_master="separate",
    )
    states = {term.name: term.value for term in result.states}
    assert states["optimizer"] == 12 * P / (8 if stage >= 1 else 1)
    assert states["gradients"] == 2 * P / (8 if stage >= 2 else 1)
    assert states["weights"] == 2 * P / (8 if stage >= 3 else 1)


def test_nf4_bits_match_qlora_paper() -> None:
    # QLoRA sec. 3: 4 + 32/64 = 4.5 bits; double quantisation: 4 + 8/64 + 32/(64*256) = 4.127
    assert nf4_bytes_per_param(False) * 8 == 4.5
    assert nf4_bytes_per_param(True) * 8 == pytest.approx(4.127, abs=5e-4)


def test_qlora_base_weights(llama8b_config: dict[str, Any]) -> None:
    # matrices in NF4 (4.127 bits); embedding, head and norms stay bf16 (2 bytes)
    result = run(llama8b_config, method="qlora", precision="bf16-mixed")
    lora = 6_815_744
    # adapters stay fp32 (4 bytes) as peft keeps them
    expected = LINEAR * nf4_bytes_per_param() + (P - LINEAR) * 2 + lora * 4
    assert {t.name: t.value for t in result.states}["weights"] == pytest.approx(expected)
    # about 5.3 GiB for an 8B base: the seed page's QLoRA example shows a 4.21 GB (GiB) base
    # without the bf16 embedding and head
    assert 5.0 * GIB < expected < 5.6 * GIB


def test_tensor_and_pipeline_parallel_split_states(llama8b_config: dict[str, Any]) -> None:
    single = run(llama8b_config, method="full", optimizer="adamw-fused", gpus=1)
    tp = run(llama8b_config, method="full", optimizer="adamw-fused", gpus=4, tensor_parallel=4)
    weights = {t.name: t.value for t in single.states}["weights"]
    assert {t.name: t.value for t in tp.states}["weights"] == weights / 4
    pp = run(llama8b_config, method="full", optimizer="adamw-fused", gpus=4, pipeline_parallel=4)
    # heaviest stage: 8 layers + the untied head + final norm (the last stage)
    layer = 41_943_040 + 176_160_768 + 8192
    heaviest = 8 * layer + 128256 * 4096 + 4096
    assert {t.name: t.value for t in pp.states}["weights"] == pytest.approx(2 * heaviest)


def test_offload_moves_optimizer_to_cpu(llama8b_config: dict[str, Any]) -> None:
    result = run(llama8b_config, method="full", optimizer="adamw-fused", gpus=8, zero_stage=2,
                 offload="optimizer")  # fmt: skip
    states = {t.name: t.value for t in result.states}
    assert states["optimizer"] == 0
    assert result.cpu_offload_bytes == 12 * P / 8


def test_overhead_is_user_set(llama8b_config: dict[str, Any]) -> None:
    a = run(llama8b_config, overhead_gib=2.0)
    b = run(llama8b_config, overhead_gib=0.5)
    assert a.total_bytes - b.total_bytes == 1.5 * GIB


def test_peak_breakdown_sums_to_total(llama8b_config: dict[str, Any]) -> None:
    result = run(llama8b_config)
    assert sum(term.value for term in result.peak.terms) == result.total_bytes
    assert result.total_bytes == max(phase.total for phase in result.phases)
    kinds = {term.name: term.kind for term in result.peak.terms}
    assert kinds["weights"] == "exact" and kinds["activations"] == "estimate"


def test_logits_scale_with_vocab_and_tokens(llama8b_config: dict[str, Any]) -> None:
    # held at end of forward: bf16 logits (2) + fp32 log-softmax (4); +4 for the fp32 upcast
    result = run(llama8b_config, micro_batch=2, seq_len=1024)
    forward = next(p for p in result.phases if p.name == "forward")
    assert forward.term("logits").value == 2 * 1024 * 128256 * (2 + 4 + 4)


def test_fused_loss_holds_no_vocab_sized_buffers(llama8b_config: dict[str, Any]) -> None:
    # fused linear + cross-entropy (Liger): held = grad of hidden states, 2 bytes x 4096 per
    # token; while the loss runs a logits chunk and its fp32 softmax add (2 + 4) x 4096
    tokens = 2 * 1024
    fused = run(llama8b_config, micro_batch=2, seq_len=1024, loss="fused")
    forward = next(p for p in fused.phases if p.name == "forward")
    assert forward.term("logits").value == tokens * (2 * 4096 + 6 * 4096)
    standard = run(llama8b_config, micro_batch=2, seq_len=1024)
    assert fused.total_bytes < standard.total_bytes


def test_the_allocated_peak_holds_tensors_only() -> None:
    """memory.allocated_peak_bytes is what max_memory_allocated counts: live tensors, so neither
    the allocator's cache, nor the memory outside the allocator (CUDA context, workspace, NCCL:
    no tensors), nor the blocks that FSDP2's side streams keep reserved. Setting the overhead to
    5 GiB moves the device figure and leaves the allocated one where it was."""
    from trainplan.engine.estimate import estimate

    base = estimate({"model": "Llama-3.1-8B", "overhead_gib": 2})
    assert base.stream_pool_bytes == 0
    cache = base.peak.term("cache").value
    assert base.allocated_peak_bytes == base.total_bytes - 2 * 2**30 - cache
    more = estimate({"model": "Llama-3.1-8B", "overhead_gib": 5})
    assert more.total_bytes == base.total_bytes + 3 * 2**30
    assert more.allocated_peak_bytes == base.allocated_peak_bytes
    sharded = estimate(
        {"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3, "overhead_gib": 2}
    )
    assert sharded.stream_pool_bytes > 0
    assert sharded.allocated_peak_bytes == pytest.approx(
        sharded.total_bytes - sharded.stream_pool_bytes - 2 * 2**30 - sharded.peak.term("cache").value
    )


@pytest.mark.parametrize(
    ("loss", "held"), [("standard", 2 * 4096), ("chunked", 4 * 128256), ("fused", 2 * 4096)]
)
def test_what_the_loss_leaves_beside_the_last_layers_backward(
    llama8b_config: dict[str, Any], loss: str, held: float
) -> None:
    """Once the loss's backward is done the standard loss keeps only the hidden states' gradient
    (bf16, 2 x hidden per token: its fp32 log-softmax is freed; traced FSDP2 and 8,192-token
    steps), as the fused loss keeps its saved one; the chunked loss keeps its per-token figure
    (4 bytes per vocabulary entry, as torchtune's published runs need)."""
    from trainplan.engine.per_replica import coefficients

    scenario = Scenario(model="x", method="full", precision="bf16", loss=loss)
    c = coefficients(spec_from_config(llama8b_config, "l8b"), scenario)
    assert c.loss.logits_held == held
