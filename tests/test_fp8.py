"""fp8 recipes: Transformer Engine's fp8 weight copy against torchao's Float8Linear, which holds
nothing beyond bf16-mixed (terms/precisions.py cites the torchao source)."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.precisions import PRECISIONS
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.scenario import Scenario

LINEAR = 32 * (41_943_040 + 176_160_768)  # every matrix inside Llama-3.1-8B's layers
HEAD = 128_256 * 4096  # the untied LM head


def run(config: dict[str, Any], **fields: Any) -> Any:
    # the tensors' arithmetic: no allocator cache (tests/test_device_memory.py holds that term)
    return estimate(
        Scenario(model="x", gpu="H100-SXM", cache_fraction=0.0, **fields),
        model=spec_from_config(config, "l8b"),
    )


def phases(result: Any) -> dict[str, float]:
    return {phase.name: phase.total for phase in result.phases}


def test_torchao_float8_holds_what_bf16_mixed_holds(llama8b_config: dict[str, Any]) -> None:
    # Float8Linear saves the 16-bit input and the parameter itself for backward and casts to
    # float8 inside the matmul: every phase equals bf16-mixed's, byte for byte
    fields: dict[str, Any] = {"method": "full", "optimizer": "adamw-fused", "micro_batch": 2, "seq_len": 2048}
    bf16 = run(llama8b_config, precision="bf16-mixed", **fields)
    fp8 = run(llama8b_config, precision="fp8-torchao", **fields)
    assert phases(fp8) == phases(bf16)
    assert {t.name: t.value for t in fp8.states} == {t.name: t.value for t in bf16.states}


def test_transformer_engine_adds_one_byte_per_matmul_weight(llama8b_config: dict[str, Any]) -> None:
    # TE keeps each layer's fp8 weight from forward to its backward: 1 byte x (layer matrices +
    # head) = 1 x (6_979_321_856 + 525_336_576) = 7_504_658_432 bytes more in forward
    fields: dict[str, Any] = {"method": "full", "optimizer": "adamw-fused", "micro_batch": 1, "seq_len": 1024}
    te = run(llama8b_config, precision="fp8-mixed", **fields)
    ao = run(llama8b_config, precision="fp8-torchao", **fields)
    forward = "forward"
    assert phases(te)[forward] - phases(ao)[forward] == LINEAR + HEAD == 7_504_658_432


def test_torchao_float8_runs_only_the_layers_linears_at_the_fp8_rate(llama8b_config: dict[str, Any]) -> None:
    # compute = tokens x ((F - S) / (fp8_peak x r) + S / bf16_peak) / (gpus x efficiency), S the
    # FLOPs left at the 16-bit rate (the attention core A and the output head H), r Hopper's fp8
    # matmul efficiency relative to bf16 (terms/timing.py: 70.9% / 80.3% = 0.883); against
    # bf16-mixed (tokens x F / bf16_peak / ...) the ratio is ((F - S) / (2 r) + S) / F with the
    # fp8 peak at 2x
    fields: dict[str, Any] = {
        "method": "full",
        "optimizer": "adamw-fused",
        "micro_batch": 1,
        "seq_len": 4096,
        "activation_checkpointing": "none",
    }
    bf16 = run(llama8b_config, precision="bf16-mixed", **fields)
    fp8 = run(llama8b_config, precision="fp8-torchao", **fields)
    ratio = fp8.time.step.compute / bf16.time.step.compute
    flops = bf16.time.flops
    attention = 3 * flops.attention_forward  # forward + backward (2x forward), no recompute
    # the head trains in full: forward 2 x HEAD, input and weight gradients 2 x HEAD each
    head = 6 * HEAD
    assert head == 3_152_019_456
    assert flops.head_training == head
    assert fp8.time.efficiency == bf16.time.efficiency == 0.47
    # catalog peaks: 1978.9 / 989.4 TFLOP/s (a hair over 2x), so the ratio is written out in full
    fp8_peak, bf16_peak = fp8.time.peak_flops_per_s, bf16.time.peak_flops_per_s
    assert (fp8_peak, bf16_peak) == (1.9789e15, 9.894e14)
    sixteen = attention + head
    expected = ((flops.total - sixteen) / (fp8_peak * 0.883) + sixteen / bf16_peak) / (
        flops.total / bf16_peak
    )
    assert ratio == pytest.approx(expected, rel=1e-12)
    # ~10% attention and ~5% head at 4096 tokens: 0.85 / (2 x 0.883) + 0.15 = 0.63
    assert 0.6 < ratio < 0.65
    # the result says which ratio it used
    assert fp8.assumptions["fp8_matmul_efficiency_ratio"] == 0.883
    assert bf16.assumptions["fp8_matmul_efficiency_ratio"] is None


def test_fp8_linears_at_the_full_fp8_peak_under_a_given_mfu(llama8b_config: dict[str, Any]) -> None:
    # a given mfu is the all-in efficiency: no fp8 matmul ratio on top, the head and attention
    # still at the 16-bit rate: ((F - S) / 2 + S) / F of bf16-mixed's compute at the same mfu
    fields: dict[str, Any] = {
        "method": "lora",
        "micro_batch": 1,
        "seq_len": 4096,
        "activation_checkpointing": "none",
        "mfu": 0.4,
    }
    bf16 = run(llama8b_config, precision="bf16-mixed", **fields)
    fp8 = run(llama8b_config, precision="fp8-mixed", **fields)
    flops = bf16.time.flops
    # LoRA: the frozen head has no weight gradient, forward and input gradients 2 x HEAD each
    assert flops.head_training == 4 * HEAD == 2_101_346_304
    sixteen = 3 * flops.attention_forward + flops.head_training
    fp8_peak, bf16_peak = 1.9789e15, 9.894e14
    expected = ((flops.total - sixteen) / fp8_peak + sixteen / bf16_peak) / (flops.total / bf16_peak)
    assert fp8.time.step.compute / bf16.time.step.compute == pytest.approx(expected, rel=1e-12)
    assert fp8.assumptions["fp8_matmul_efficiency_ratio"] is None


def test_fp8_matmul_ratio_by_architecture() -> None:
    # the published MAMF pairs (terms/timing.py): Hopper 70.9 / 80.3, Blackwell 76.3 / 77.6; no
    # pair for the others, which keep their 16-bit efficiency
    from trainplan.engine.terms.timing import fp8_matmul_efficiency_ratio

    assert fp8_matmul_efficiency_ratio("Hopper") == pytest.approx(70.9 / 80.3, abs=5e-4)
    assert fp8_matmul_efficiency_ratio("Blackwell") == pytest.approx(76.3 / 77.6, abs=5e-4)
    assert fp8_matmul_efficiency_ratio("Ada") == 1.0


def test_fp8_recipes_share_the_model_states() -> None:
    te, ao = PRECISIONS["fp8-mixed"], PRECISIONS["fp8-torchao"]
    assert (te.weight_bytes, te.grad_bytes, te.master_bytes, te.state_bytes) == (2, 2, 4, 4)
    assert (ao.weight_bytes, ao.grad_bytes, ao.master_bytes, ao.state_bytes) == (2, 2, 4, 4)
    assert (te.autocast_copy_bytes, ao.autocast_copy_bytes) == (1, 0)


# Llama-3.1-8B layer linears (in, out): q (4096, 4096), k and v (4096, 1024), o (4096, 4096),
# gate and up (4096, 14336), down (14336, 4096); x 32 layers
INPUTS = 32 * (4 * 4096 + 2 * 4096 + 14336)  # 1_245_184 input features per token
OUTPUTS = 32 * (4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096)  # 1_376_256 output features per token


def test_float8_cast_traffic_by_hand(llama8b_config: dict[str, Any]) -> None:
    # eager torchao, no recompute, one GPU: every input, output (grad_output) and weight element
    # is cast twice per micro-batch at 5 bytes a cast (terms/timing.py):
    # per token 10 x (1_245_184 + 1_376_256) = 26_214_400 bytes; weights 10 x 6_979_321_856
    assert (INPUTS, OUTPUTS, INPUTS + OUTPUTS) == (1_245_184, 1_376_256, 32 * 81_920)
    tokens = 2 * 2048  # micro-batch 2 x seq 2048, grad_accum 3 micro-batches per step
    per_micro = tokens * 10 * (INPUTS + OUTPUTS) + 10 * LINEAR
    assert per_micro == 107_374_182_400 + 69_793_218_560
    fields: dict[str, Any] = {
        "method": "full", "optimizer": "adamw-fused", "micro_batch": 2, "seq_len": 2048, "grad_accum": 3,
        "activation_checkpointing": "none",
    }  # fmt: skip
    eager = run(llama8b_config, precision="fp8-torchao", **fields)
    assert eager.time.step.float8_casts == pytest.approx(3 * per_micro / 3.35e12, rel=1e-12)
    # compiled: the max|x| read folds into the producer, 3 bytes a cast instead of 5
    compiled = run(llama8b_config, precision="fp8-torchao", compile=True, **fields)
    assert compiled.time.step.float8_casts == pytest.approx(3 / 5 * eager.time.step.float8_casts, rel=1e-12)
    # Transformer Engine fuses its casts; bf16 has none
    for precision in ("fp8-mixed", "bf16-mixed"):
        assert run(llama8b_config, precision=precision, **fields).time.step.float8_casts == 0
    assert eager.to_dict()["time"]["step_breakdown_s"]["float8_casts"] == eager.time.step.float8_casts


def test_float8_casts_shard_with_tensor_parallelism_and_repeat_with_recompute(
    llama8b_config: dict[str, Any],
) -> None:
    base: dict[str, Any] = {"method": "full", "optimizer": "adamw-fused", "precision": "fp8-torchao",
                            "micro_batch": 1, "seq_len": 1024, "grad_accum": 1}  # fmt: skip
    none = run(llama8b_config, activation_checkpointing="none", **base).time.step.float8_casts
    # tensor parallel 2: each GPU casts half of every linear
    tp = run(llama8b_config, activation_checkpointing="none", gpus=2, tensor_parallel=2, **base)
    assert tp.time.step.float8_casts == pytest.approx(none / 2, rel=1e-12)
    # full recompute re-runs every forward: inputs and weights are cast 3 times, outputs twice
    # (2 x grad_output): 5 x (3 x (tokens x inputs + weights) + 2 x tokens x outputs)
    full = run(llama8b_config, activation_checkpointing="full", **base).time.step.float8_casts
    tokens = 1024
    expected = 5 * (3 * (tokens * INPUTS + LINEAR) + 2 * tokens * OUTPUTS) / 3.35e12
    assert full == pytest.approx(expected, rel=1e-12)
