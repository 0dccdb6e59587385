"""What fused layer kernels save for backward, in place of the eager modules' tensors.

`kernels: liger` is Liger-Kernel's patch of a Hugging Face model (`use_liger_kernel`,
`apply_liger_kernel_to_llama`); `kernels: unsloth` is Unsloth's patched model. Both replace:

- RMSNorm: `LigerRMSNormFunction.forward` (liger_kernel/ops/rms_norm.py) and Unsloth's
  `Fast_RMS_Layernorm.forward` (unsloth/kernels/rms_layernorm.py) call
  `ctx.save_for_backward(X, W, RSTD)`: the input at its own dtype and one fp32 1/rms per row. The
  eager HF norm keeps an fp32 copy of the input instead, and its normalised output when the
  norm weight trains; the kernels recompute both from X and RSTD.
- SwiGLU / GeGLU: `LigerSiLUMulFunction` (liger_kernel/ops/swiglu.py) saves the gate and up
  outputs `(a, b)` and recomputes the activation in backward; eager keeps act(gate) as well.
  The product is a new tensor that the down projection keeps only when it needs its input.
- RoPE: both rotate q and k with kernels that save only the cos / sin tables, as eager RoPE
  does in effect (a multiply by a constant keeps nothing per token), so nothing changes there.

Unsloth adds fused LoRA functions (unsloth/kernels/fast_lora.py, applied when `lora_dropout`
is 0 and the adapted projections have no bias):
- `LoRA_QKV.forward` saves `(X, QA, QB, KA, KB, VA, VB)`: the attention input once, where peft
  keeps one copy per adapted projection (fp32 for fp32 adapters).
- `LoRA_W.forward` saves `(A, B, X)` with X the attention kernel's output, a view of the
  tensor flash attention already keeps, so the out-projection adds nothing.
- `LoRA_MLP.forward` saves `(gateA, gateB, upA, upB, downA, downB, X, e, g)`: the MLP input
  once and the gate and up outputs; the SwiGLU product h, the down projection's input, is
  recomputed in backward from e and g.
All figures are exact per-token byte counts of those saved tensors (estimate: which kernels a
framework version applies to a given architecture).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trainplan.engine.terms.mode import ActivationMode


def fused_layer_kernels(mode: ActivationMode) -> bool:
    """Liger's and Unsloth's RMSNorm and SwiGLU kernels replace the eager modules."""
    return mode.kernels != "eager"


def fused_rms_norm_bytes(mode: ActivationMode, width: int) -> float:
    """Saved bytes per token of a fused RMSNorm: its input at the stream dtype plus an fp32
    1/rms per row (`save_for_backward(X, W, RSTD)`)."""
    return mode.residual_bytes * width + 4


def fused_glu_bytes(mode: ActivationMode, inner: int) -> float:
    """Saved bytes per token of a fused gated activation: the gate and up outputs only."""
    return 2 * mode.activation_bytes * inner


def fused_lora(mode: ActivationMode, names: list[str]) -> bool:
    """Unsloth's fused LoRA function runs over `names`: every one carries an adapter, the base
    is frozen and there is no LoRA dropout (unsloth's patch_peft_model conditions)."""
    return (
        mode.kernels == "unsloth"
        and not mode.weights_trainable
        and not mode.lora_dropout
        and bool(names)
        and all(name in mode.lora_targets for name in names)
    )
