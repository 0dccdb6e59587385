"""`compile: true`: the saved tensors of compiled blocks (terms/activations.py) and the eager
traffic Inductor's fusion removes (terms/timing.py), by hand on Llama-3.1-8B."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.activations import ActivationMode, layer_activations
from trainplan.engine.terms.timing import compile_fusion_bytes
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.scenario import Scenario

H, Q, KV, INNER = 4096, 4096, 1024, 14336  # Llama-3.1-8B: hidden, q and kv widths, MLP width


def run(config: dict[str, Any], **fields: Any) -> Any:
    return estimate(Scenario(model="x", gpu="H100-SXM", **fields), model=spec_from_config(config, "l8b"))


def _layer(config: dict[str, Any], mode: ActivationMode) -> float:
    model = spec_from_config(config, "l8b")
    return layer_activations(model, model.blocks[0], mode).per_token(0)


def test_compiled_full_fine_tune_layer_by_hand(llama8b_config: dict[str, Any]) -> None:
    # bf16 full fine-tune, per token: eager norms 2 x (4h + 4 + 2h), SwiGLU gate, silu, up,
    # product; compiled norms 2 x (2h + 4), gate, up, product (silu(gate) recomputed)
    eager = ActivationMode(2, 2, True, frozenset(), "sdpa", "none")
    compiled = ActivationMode(2, 2, True, frozenset(), "sdpa", "none", compiled=True)
    removed = 2 * (4 * H + 2 * H - 2 * H) + 2 * INNER
    assert _layer(llama8b_config, eager) - _layer(llama8b_config, compiled) == removed == 61_440
    # the attention block keeps the same tensors: q, k, v after RoPE, the SDPA output, its input
    attention = 2 * H + 2 * (Q + 2 * KV) + 2 * Q + 4 * 32
    assert (
        layer_activations(
            spec_from_config(llama8b_config, "l8b"),
            spec_from_config(llama8b_config, "l8b").blocks[0],
            compiled,
        ).attention
        == attention
    )


def test_compiled_autocast_keeps_one_cast_per_input(llama8b_config: dict[str, Any]) -> None:
    # fp32 weights under autocast: eager, q, k and v each keep a bf16 copy of the normed input,
    # gate and up one each; compiled, CSE leaves one per input (2 copies fewer + 1 fewer);
    # norms: the first keeps the fp32 block input (4h + 4), the second the bf16 o-projection
    # output (2h + 4), against eager's 2 x (4h + 4 + 4h)
    eager = ActivationMode(2, 4, True, frozenset(), "sdpa", "none")
    compiled = ActivationMode(2, 4, True, frozenset(), "sdpa", "none", compiled=True)
    casts = (2 + 1) * 2 * H
    norms = 2 * (8 * H + 4) - (4 * H + 4) - (2 * H + 4)
    assert _layer(llama8b_config, eager) - _layer(llama8b_config, compiled) == casts + norms + 2 * INNER


def test_compiled_lora_keeps_one_fp32_copy_per_input(llama8b_config: dict[str, Any]) -> None:
    # peft's fp32 adapters on q and v (bf16 base): eager keeps an fp32 copy of the normed input
    # for each (2 x 4h), compiled one (4h); frozen norms 4h + 4 -> 2h + 4; SwiGLU gate, silu, up
    # -> gate, up
    targets = frozenset({"q_proj", "v_proj"})
    eager = ActivationMode(2, 2, False, targets, "sdpa", "none")
    compiled = ActivationMode(2, 2, False, targets, "sdpa", "none", compiled=True)
    removed = 4 * H + 2 * (2 * H) + 2 * INNER
    assert _layer(llama8b_config, eager) - _layer(llama8b_config, compiled) == removed


def test_fusion_bytes_by_hand(llama8b_config: dict[str, Any]) -> None:
    # per layer and token at bf16 (a = 2): 2 norms x h x (3a + 28 + 5a + 68) = 2 x 4096 x 112,
    # RoPE (q + kv) x 21a = 5120 x 42, SwiGLU inner x 6a = 14336 x 12; 32 layers
    model = spec_from_config(llama8b_config, "l8b")
    per_layer = 2 * H * 112 + (Q + KV) * 42 + INNER * 12
    assert per_layer == 1_304_576
    assert compile_fusion_bytes(model, 2, [0]) == 32 * per_layer
    # full checkpointing re-runs each layer's forward: + 2h(3a + 28) + (q + kv) 8a + inner 2a
    forward = 2 * H * 34 + (Q + KV) * 16 + INNER * 4
    assert compile_fusion_bytes(model, 2, [32]) == 32 * (per_layer + forward)


def test_compile_moves_step_time_by_the_fused_traffic(llama8b_config: dict[str, Any]) -> None:
    # one H100 SXM (3.35 TB/s), 2 x 2048 tokens, no recompute: the step is shorter by
    # tokens x 32 x 1_304_576 bytes / 3.35e12 B/s, and nothing else in it moves
    fields: dict[str, Any] = {
        "method": "full", "precision": "bf16", "optimizer": "adamw-fused", "micro_batch": 2,
        "seq_len": 2048, "grad_accum": 1, "activation_checkpointing": "none",
    }  # fmt: skip
    eager, compiled = run(llama8b_config, **fields), run(llama8b_config, compile=True, **fields)
    saved = 2 * 2048 * 32 * 1_304_576 / 3.35e12
    assert eager.time.step.compile_fusion == 0
    assert compiled.time.step.compile_fusion == pytest.approx(-saved, rel=1e-12)
    assert eager.time.step.total - compiled.time.step.total == pytest.approx(saved, rel=1e-9)
    assert (
        compiled.to_dict()["time"]["step_breakdown_s"]["compile_fusion"] == compiled.time.step.compile_fusion
    )


def activations(result: Any) -> float:
    return float(next(p for p in result.phases if p.name == "forward").term("activations").value)


def test_compile_lowers_the_saved_activations(llama8b_config: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"method": "full", "precision": "bf16", "micro_batch": 1, "seq_len": 2048}
    for checkpointing in ("selective", "op", "full"):
        eager = run(llama8b_config, activation_checkpointing=checkpointing, **fields)
        compiled = run(llama8b_config, activation_checkpointing=checkpointing, compile=True, **fields)
        assert activations(compiled) <= activations(eager), checkpointing
    none = run(llama8b_config, activation_checkpointing="none", **fields)
    compiled = run(llama8b_config, activation_checkpointing="none", compile=True, **fields)
    # 32 layers x 2048 tokens x 61_440 bytes fewer saved (test above); the final norm is eager
    assert activations(none) - activations(compiled) == 32 * 2048 * 61_440


def test_fusion_saving_is_bounded_by_the_non_matmul_time(tiny_config: dict[str, Any]) -> None:
    # a tiny model is memory-bound in eager: its removed traffic would exceed the step, so the
    # saving stops at the (1 - efficiency) share of compute the efficiency leaves beyond the
    # matmuls at peak (H100: efficiency 0.47)
    fields: dict[str, Any] = {"method": "full", "precision": "bf16", "micro_batch": 1, "seq_len": 512}
    model = spec_from_config(tiny_config, "tiny")
    compiled = estimate(Scenario(model="x", gpu="H100-SXM", compile=True, **fields), model=model)
    step = compiled.time.step
    assert step.compile_fusion == pytest.approx(-(1 - 0.47) * step.compute, rel=1e-12)
    assert step.total > 0


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "Gemma-2-2B", "Mixtral-8x7B-v0.1", "Phi-3-mini-4k"])
@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("checkpointing", ["none", "full", "op"])
def test_compile_never_adds_memory_or_time(name: str, method: str, checkpointing: str) -> None:
    # recomputing instead of saving and fusing kernels only ever remove bytes and seconds (MoE,
    # qk-norms, four norms a block, a fused gate/up projection)
    from trainplan.inputs.resolve import catalog_spec

    fields: dict[str, Any] = {
        "method": method, "activation_checkpointing": checkpointing, "micro_batch": 1, "seq_len": 1024,
        "grad_accum": 1,
    }  # fmt: skip
    model = catalog_spec(name)
    eager = estimate(Scenario(model=name, gpu="H100-SXM", **fields), model=model)
    compiled = estimate(Scenario(model=name, gpu="H100-SXM", compile=True, **fields), model=model)
    assert activations(compiled) <= activations(eager)
    assert compiled.total_bytes <= eager.total_bytes
    assert 0 < compiled.time.step.total < eager.time.step.total
