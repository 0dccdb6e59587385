"""The compiled-layer rule of terms/activations.py against AOTAutograd's min-cut partition.

measure/compiled.py traces one transformers decoder layer eagerly and through the partitioner
torch.compile uses; the saved bytes per token must equal `layer_activations` with
`compiled` off and on. Exact: both sides count the same tensors. The trace also saves the
rank-sized `lora_A` outputs, which the activation terms leave out as negligible (8 x 4 bytes
per adapted module here); they are added to the expected value. Skipped without torch.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainplan.engine.measure.compiled import trace_compiled_layer
from trainplan.engine.terms.activations import ActivationMode, layer_activations
from trainplan.inputs.hf import spec_from_config

LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 1,
    "vocab_size": 128,
}
ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _predicted(config: dict[str, Any], targets: frozenset[str], compiled: bool, residual: int = 2) -> float:
    model = spec_from_config(config, "trace")
    full = not targets
    mode = ActivationMode(2, residual, full, targets, "sdpa", "none", adapter_bytes=4, compiled=compiled)
    return layer_activations(model, model.blocks[0], mode).per_token(0)


@pytest.mark.parametrize("model_type", ["llama", "qwen3"])
def test_full_fine_tune_layer(model_type: str) -> None:
    # Llama, hand count of the compiled side (h 256, q 256, kv 128, inner 688, bf16):
    # norms 2 x (2 x 256 + 4) = 1032; attention: the normed input 512, rotated q, k and v
    # 2 x (256 + 128 + 128) = 1024, the SDPA output 512 and its fp32 logsumexp 16 -> 2064;
    # MLP: its input 512, gate and up 2 x 2 x 688, the product 2 x 688 -> 4640. Total 7736,
    # against 11160 eager (fp32 norm copies and outputs, and silu(gate), recomputed).
    config = {**LLAMA, "model_type": model_type}
    traced = trace_compiled_layer(config)
    assert traced.eager == _predicted(config, frozenset(), compiled=False)
    assert traced.compiled == _predicted(config, frozenset(), compiled=True)
    if model_type == "llama":
        assert traced.compiled == 7736


def test_lora_layer_with_fp32_adapters() -> None:
    # peft's fp32 adapters on a bf16 layer: eager keeps one fp32 input copy per adapted module
    # (7), compiled one per distinct input (4: attention input, o input, MLP input, product)
    traced = trace_compiled_layer(LLAMA, method="lora", lora_targets=ALL_LINEAR)
    lora_a_outputs = len(ALL_LINEAR) * 8 * 4
    targets = frozenset(ALL_LINEAR)
    assert traced.eager == _predicted(LLAMA, targets, compiled=False) + lora_a_outputs
    assert traced.compiled == _predicted(LLAMA, targets, compiled=True) + lora_a_outputs


def test_autocast_layer() -> None:
    # fp32 weights under bf16 autocast (CUDA's op lists): eager keeps a bf16 input copy per
    # linear and fp32 norm internals (13720 B/token); compiled one copy per input, the fp32 block
    # input and the bf16 o-projection output for the norms (8248)
    traced = trace_compiled_layer(LLAMA, amp=True)
    assert traced.eager == _predicted(LLAMA, frozenset(), compiled=False, residual=4) == 13720
    assert traced.compiled == _predicted(LLAMA, frozenset(), compiled=True, residual=4) == 8248
