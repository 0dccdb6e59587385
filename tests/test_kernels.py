"""Fused layer kernels (kernels: liger | unsloth): hand-counted saved bytes per token for
Llama-3.1-8B (hidden 4096, 32 heads of 128, 8 KV heads, intermediate 14336), and invariants."""

from __future__ import annotations

import dataclasses

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.activations import ActivationMode, layer_activations
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.scenario import scenario_from_mapping

H, Q, KV, INNER, HEADS = 4096, 4096, 1024, 14336, 32
ALL_LINEAR = frozenset({"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"})


def _mode(
    kernels: str, trainable: bool, targets: frozenset[str] = frozenset(), **kw: object
) -> ActivationMode:
    return ActivationMode(
        activation_bytes=2,
        residual_bytes=2,
        weights_trainable=trainable,
        lora_targets=targets,
        attention="flash",
        checkpointing="none",
        kernels=kernels,
        **kw,  # type: ignore[arg-type]
    )


def _layer(mode: ActivationMode) -> float:
    model = resolve_model("Llama-3.1-8B")
    return layer_activations(model, model.blocks[0], mode).per_token(4096)


# flash attention's saved inputs and output, the same for every kernel choice:
# rotated q, k and v (2 x (4096 + 1024 + 1024)), the output (2 x 4096), fp32 logsumexp per head
CORE = 2 * (Q + KV + KV) + 2 * Q + 4 * HEADS


def test_full_fine_tune_eager_liger_difference_is_hand_counted() -> None:
    # eager: HF RMSNorm keeps the fp32 input (4 B) + 1/rms (4 B) + its bf16 output for the weight
    # gradient (2 B); two norms. MLP: input once, gate, act(gate), up, product (down's input).
    eager_norms = 2 * (4 * H + 4 + 2 * H)
    eager_mlp = 2 * H + 3 * 2 * INNER + 2 * INNER
    attention_inputs = 2 * H  # the q/k/v input, kept once for the three weight gradients
    eager = eager_norms + attention_inputs + CORE + eager_mlp
    assert _layer(_mode("eager", True)) == eager
    # liger: each norm keeps its bf16 input + fp32 1/rms; the SwiGLU keeps gate and up only
    liger_norms = 2 * (2 * H + 4)
    liger_mlp = 2 * H + 2 * 2 * INNER + 2 * INNER
    assert _layer(_mode("liger", True)) == liger_norms + attention_inputs + CORE + liger_mlp
    # for a full fine-tune Unsloth's norm and SwiGLU kernels save the same as Liger's
    assert _layer(_mode("unsloth", True)) == _layer(_mode("liger", True))


def test_unsloth_fused_lora_keeps_each_input_once() -> None:
    # LoRA on all linears, fp32 adapters (peft's default) on a bf16 stream
    # peft: each adapted projection keeps its own fp32 copy of its input
    peft = _layer(_mode("liger", False, ALL_LINEAR))
    liger_norms = 2 * (2 * H + 4)
    peft_attention = 3 * 4 * H + CORE + 4 * Q  # q/k/v copies, then the o_proj copy
    peft_mlp = 2 * 4 * H + 2 * 2 * INNER + 4 * INNER  # gate/up copies, gate and up, down's fp32 copy
    assert peft == liger_norms + peft_attention + peft_mlp
    # Unsloth: LoRA_QKV keeps X once (bf16), LoRA_W a view of the kernel output, LoRA_MLP keeps
    # X, e and g and recomputes the product
    unsloth = _layer(_mode("unsloth", False, ALL_LINEAR))
    assert unsloth == liger_norms + (2 * H + CORE) + (2 * H + 2 * 2 * INNER)
    assert unsloth == 110_728


def test_unsloth_lora_with_dropout_falls_back_to_peft_modules() -> None:
    # Unsloth patches its fused LoRA functions only when lora_dropout is 0
    with_dropout = _mode("unsloth", False, ALL_LINEAR, lora_dropout=True)
    assert _layer(with_dropout) == _layer(dataclasses.replace(with_dropout, kernels="liger"))
    # partial targets: the MLP function needs all of gate, up and down adapted
    qv = frozenset({"q_proj", "v_proj"})
    assert _layer(_mode("unsloth", False, qv)) == _layer(_mode("liger", False, qv))


def _forward_activations(scenario_fields: dict[str, object]) -> tuple[float, float]:
    result = estimate(scenario_from_mapping(scenario_fields))
    forward = next(phase for phase in result.phases if phase.name == "forward")
    return next(term.value for term in forward.terms if term.name == "activations"), result.total_bytes


@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
@pytest.mark.parametrize("model", ["Llama-3.1-8B", "Qwen3-8B", "Gemma-2-9B", "Mixtral-8x7B", "GPT-2"])
def test_fused_kernels_never_add_memory(method: str, model: str) -> None:
    base = {
        "model": model,
        "method": method,
        "seq_len": 2048,
        "micro_batch": 2,
        "activation_checkpointing": "none",
    }
    runs = [_forward_activations({**base, "kernels": kernels}) for kernels in ("eager", "liger", "unsloth")]
    activations, totals = [run[0] for run in runs], [run[1] for run in runs]
    assert totals[0] >= totals[1] >= totals[2]
    assert activations[0] >= activations[1] >= activations[2]
    if model != "GPT-2":  # GPT-2 has LayerNorm and a plain MLP: nothing for the kernels to replace
        assert activations[0] > activations[1]
    else:
        assert activations[0] == activations[1]


def test_kernels_are_refused_for_a_diffusion_model() -> None:
    from trainplan.specs.errors import InputError

    with pytest.raises(InputError) as error:
        estimate(scenario_from_mapping({"model": "FLUX.1-dev", "method": "lora", "kernels": "liger"}))
    assert error.value.field == "kernels"


def test_liger_kernels_remove_the_fused_ops_traffic_without_the_residual_add() -> None:
    # terms/timing.py: a fused norm removes 2a + 28 forward (Inductor's, with the residual add,
    # 3a + 28); the backward, RoPE and SwiGLU savings are the same. Llama-3.1-8B, no recompute:
    # the difference is 32 layers x 2 norms x 4096 channels x a (2 bytes) per token
    model = resolve_model("Llama-3.1-8B")
    from trainplan.engine.terms.timing import compile_fusion_bytes

    layers = [block.count for block in model.blocks]
    none = [0] * len(model.blocks)
    assert compile_fusion_bytes(model, 2, none) - compile_fusion_bytes(
        model, 2, none, residual_add=False
    ) == (sum(layers) * 2 * 4096 * 2)
    eager = estimate(scenario_from_mapping({"model": "Llama-3.1-8B", "method": "lora"}))
    liger = estimate(scenario_from_mapping({"model": "Llama-3.1-8B", "method": "lora", "kernels": "liger"}))
    assert eager.time is not None and liger.time is not None
    assert liger.time.tokens_per_s > eager.time.tokens_per_s
