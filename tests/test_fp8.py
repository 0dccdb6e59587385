"""fp8 recipes: Transformer Engine's fp8 weight copy against torchao's Float8Linear, which holds
nothing beyond bf16-mixed (terms/recipes.py cites the torchao source)."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.estimate import estimate
from trainplan.hf import spec_from_config
from trainplan.scenario import Scenario
from trainplan.terms.recipes import PRECISIONS

LINEAR = 32 * (41_943_040 + 176_160_768)  # every matrix inside Llama-3.1-8B's layers
HEAD = 128_256 * 4096  # the untied LM head


def run(config: dict[str, Any], **fields: Any) -> Any:
    return estimate(Scenario(model="x", gpu="H100-SXM", **fields), model=spec_from_config(config, "l8b"))


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


def test_torchao_float8_runs_only_the_linears_at_the_fp8_rate(llama8b_config: dict[str, Any]) -> None:
    # compute = tokens x ((F - A) / fp8_peak + A / bf16_peak) / (gpus x efficiency), A the
    # attention-core FLOPs; H100 SXM's fp8 peak is twice its bf16 peak, so against bf16-mixed
    # (tokens x F / bf16_peak / ...) the ratio is ((F - A) / 2 + A) / F = 1/2 + A / (2F)
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
    assert 0.5 < ratio < 0.6  # attention is ~10% of the FLOPs at 4096 tokens
    flops = bf16.time.flops
    attention = 3 * flops.attention_forward  # forward + backward (2x forward), no recompute
    # catalog peaks: 1978.9 / 989.4 TFLOP/s (a hair over 2x), so the ratio is written out in full
    fp8_peak, bf16_peak = fp8.time.peak_flops_per_s, bf16.time.peak_flops_per_s
    assert (fp8_peak, bf16_peak) == (1.9789e15, 9.894e14)
    expected = ((flops.total - attention) / fp8_peak + attention / bf16_peak) / (flops.total / bf16_peak)
    assert ratio == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(0.5 + attention / (2 * flops.total), rel=1e-4)


def test_fp8_recipes_share_the_model_states() -> None:
    te, ao = PRECISIONS["fp8-mixed"], PRECISIONS["fp8-torchao"]
    assert (te.weight_bytes, te.grad_bytes, te.master_bytes, te.state_bytes) == (2, 2, 4, 4)
    assert (ao.weight_bytes, ao.grad_bytes, ao.master_bytes, ao.state_bytes) == (2, 2, 4, 4)
    assert (te.autocast_copy_bytes, ao.autocast_copy_bytes) == (1, 0)
