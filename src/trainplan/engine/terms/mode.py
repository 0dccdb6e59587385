"""What decides what a layer keeps for backward, shared by every block type's counting
(terms/activations.py, mixers.py, ssm.py, variants.py, kernels.py, denoisers.py): the activation
mode (dtypes and switches), the bytes a linear's input costs its consumers, and eager attention's
score tensors per key. The formulas cite their sources where they are used (terms/activations.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.engine.terms.savers import lora_dropout_input_bytes
from trainplan.specs.model import Attention

__all__ = ["ActivationMode", "eager_per_key", "linear_input"]


@dataclass(frozen=True)
class ActivationMode:
    """Dtypes and switches that decide what a layer saves."""

    activation_bytes: int  # matmul outputs (bf16 = 2, fp32 = 4)
    residual_bytes: int  # residual stream and norm outputs (fp32 under autocast over fp32 weights)
    weights_trainable: bool  # full fine-tune: linear inputs are kept for weight gradients
    lora_targets: frozenset[str]  # module names that carry a LoRA adapter (their inputs are kept)
    attention: str  # flash | sdpa | eager
    checkpointing: str  # none | selective | full
    dropout: bool = False
    lora_dropout: bool = False  # peft lora_dropout > 0 (terms/savers.py)
    adapter_bytes: int = 4  # LoRA adapter dtype: fp32 (peft) or the compute dtype (torchtune)
    ssm_kernel: str = "fused"  # fused (mamba-ssm) | naive (transformers' PyTorch path)
    kernels: str = "eager"  # eager | liger | unsloth layer kernels (terms/kernels.py)
    compiled: bool = False  # torch.compile of each block: the min-cut partition (module docstring)

    @property
    def casts_inputs(self) -> bool:
        """Autocast over fp32 activations: each linear keeps its own half-precision input copy."""
        return self.residual_bytes > self.activation_bytes


def linear_input(mode: ActivationMode, width: int, consumers: list[str]) -> float:
    """Bytes kept of one tensor feeding `consumers` (linear modules).

    Trained weights keep the input itself (shared), or under autocast one half-precision copy
    per consumer. Frozen weights keep nothing; a LoRA adapter keeps its own copy of the input
    at the adapter's dtype: peft holds adapters in fp32 (`autocast_adapter_dtype`), so on a
    16-bit stream each adapted module keeps a 4-byte copy, under autocast a half copy, and in
    fp32 training the shared input.

    Compiled, CSE merges the per-consumer casts into one copy per input (terms/activations.py docstring,
    rule 4); peft's per-module dropouts are random ops, neither merged nor recomputed (rule 1).
    """
    if mode.weights_trainable:
        copies = len(consumers) if mode.casts_inputs and not mode.compiled else 1
        return copies * mode.activation_bytes * width
    adapted = [name for name in consumers if name in mode.lora_targets]
    if not adapted:
        return 0.0
    if mode.lora_dropout:
        return len(adapted) * lora_dropout_input_bytes(
            mode.activation_bytes, mode.casts_inputs, width, mode.adapter_bytes
        )
    copies = 1 if mode.compiled else len(adapted)
    if mode.casts_inputs:
        return copies * mode.activation_bytes * width
    if mode.activation_bytes < mode.adapter_bytes:
        return copies * mode.adapter_bytes * width
    # adapters at the stream's dtype read the input itself, kept once for all its consumers
    return float(mode.activation_bytes * width)


def eager_per_key(attention: Attention, mode: ActivationMode) -> float:
    """Eager attention's score tensors per key: the fp32 softmax kept, its half copy kept for
    probs @ v, Gemma 2's soft-capping tanh output, the dropout mask (bool: the model's dropout, or
    the attention's own `attention_dropout`, whose dropped probabilities replace the half copy
    for probs @ v and whose mask is the one byte more). With attention sinks
    (gpt-oss's eager_attention_forward) the softmax runs at the logits' own dtype, which the
    sink parameter and the mask (the embeddings' dtype) promote to fp32 only with fp32 weights:
    its result is kept, and probs[..., :-1] @ v reads a view of it unless a cast to the values'
    dtype makes a copy (checked against a traced gpt-oss layer's saved tensors)."""
    a = mode.activation_bytes
    softcap = a if attention.logit_softcap else 0
    dropout = 1 if mode.dropout or attention.dropout > 0 else 0
    if attention.sinks:
        logits = mode.residual_bytes
        return float(attention.num_heads * (logits + (a if logits != a else 0) + softcap + dropout))
    return float(attention.num_heads * (4 + a + softcap + dropout))
