"""Bytes per parameter for each precision recipe, optimizer and frozen-base format.

Sources:
- Mixed precision with an fp32 master copy (bf16-mixed / fp16-mixed): ZeRO, Rajbhandari et al.
  2020, sec. 3.1: 2 (half weights) + 2 (half grads) + K=12 (fp32 master, momentum, variance)
  bytes per parameter, as Megatron-LM and DeepSpeed hold model states.
- amp-* (torch.autocast over fp32 weights, the HF Trainer with bf16=True on an fp32 model):
  fp32 weights 4 + fp32 grads 4 + Adam 8; autocast caches a half copy (2 bytes) of every fp32
  leaf weight that requires grad until the autocast region exits (PyTorch autocast docs,
  "cache_enabled"; measured in the traces, see docs/accuracy.md).
- Pure bf16: weights, grads and optimizer state all bf16 (torch.optim keeps state in the
  parameter dtype).
- 8-bit AdamW: Dettmers et al. 2022, block-wise 8-bit states: 1 byte per state element plus one
  fp32 absmax per 256-element block (bitsandbytes' block size) = 1.015625 bytes.
- NF4: QLoRA, Dettmers et al. 2023, sec. 3: 4-bit weights, one absmax per 64 weights; double
  quantisation stores those absmax in 8 bits with one fp32 constant per 256 of them:
  4 + 8/64 + 32/(64*256) = 4.127 bits; without double quantisation 4 + 32/64 = 4.5 bits.
- LLM.int8(): Dettmers et al. 2022: 1 byte per weight plus one fp32 scale per output row.
- fp8-mixed (Transformer Engine): each fp8 Linear keeps the fp8 cast of its weight from forward
  to backward, so while backward runs the whole model holds one more byte per linear weight.
- fp8-torchao (torchao Float8Linear, which torchtitan's `float8` converter swaps in):
  pytorch/ao torchao/float8/float8_linear.py @ 7ca1bfbe, `matmul_with_hp_or_float8_args`:
  forward saves `input_hp` and `weight_hp_t` (the high-precision input and the parameter itself)
  and backward casts both to float8 again; scaling is dynamic (a 0-d fp32 scale per cast,
  computed and freed within the matmul; no amax history buffers). So nothing is held beyond
  bf16-mixed: no fp8 weight copy, saved activations at the 16-bit size. torchtitan leaves
  `enable_fsdp_float8_all_gather` off by default, so FSDP2 gathers the 16-bit weights.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrecisionBytes:
    """How one precision recipe stores trainable parameters and activations."""

    name: str
    weight_bytes: float
    grad_bytes: float
    master_bytes: float
    state_bytes: float
    autocast_copy_bytes: float
    activation_bytes: int
    residual_bytes: int
    compute: str
    note: str


PRECISIONS: dict[str, PrecisionBytes] = {
    recipe.name: recipe
    for recipe in (
        PrecisionBytes("bf16-mixed", 2, 2, 4, 4, 0, 2, 2, "bf16",
                        "bf16 weights and grads, fp32 master + states in the optimizer (ZeRO 2+2+12)"),
        PrecisionBytes("fp16-mixed", 2, 2, 4, 4, 0, 2, 2, "fp16",
                        "fp16 weights and grads, fp32 master + states, loss scaling (ZeRO 2+2+12)"),
        PrecisionBytes("amp-bf16", 4, 4, 0, 4, 2, 2, 4, "bf16",
                        "fp32 weights and grads under bf16 autocast (4+4+8, + bf16 weight copies)"),
        PrecisionBytes("amp-fp16", 4, 4, 0, 4, 2, 2, 4, "fp16",
                        "fp32 weights and grads under fp16 autocast with a GradScaler"),
        PrecisionBytes("bf16", 2, 2, 0, 2, 0, 2, 2, "bf16",
                        "pure bf16: weights, grads and optimizer state in bf16, no master copy"),
        PrecisionBytes("fp32", 4, 4, 0, 4, 0, 4, 4, "fp32",
                        "everything fp32 (matmuls at fp32 rate; TF32 off, PyTorch's default)"),
        PrecisionBytes("fp8-mixed", 2, 2, 4, 4, 1, 2, 2, "fp8",
                        "fp8 matmuls (Transformer Engine): bf16 weights/grads, fp32 master + states, "
                        "plus a cached fp8 weight copy"),
        PrecisionBytes("fp8-torchao", 2, 2, 4, 4, 0, 2, 2, "fp8",
                        "fp8 matmuls (torchao Float8Linear, dynamic scaling): bf16 weights/grads, fp32 "
                        "master + states; saves the 16-bit input, no fp8 weight copy"),
    )
}  # fmt: skip


# LoRA/DoRA adapters as peft holds them: fp32 weights, gradients and optimizer state.
ADAPTER_RECIPE = PrecisionBytes(
    "adapters-fp32", 4, 4, 0, 4, 0, 4, 4, "fp32", "peft adapters: fp32 weights, grads and states"
)


def compute_dtype_adapters(compute_bytes: int) -> PrecisionBytes:
    """Adapters kept at the compute dtype, as torchtune keeps its whole model (`dtype: bf16`):
    weights, grads and optimizer state (torch.optim keeps state in the parameter dtype) at
    `compute_bytes` each, no master copy."""
    b = compute_bytes
    return PrecisionBytes(
        f"adapters-{b}B", b, b, 0, b, 0, b, b, "fp32" if b == 4 else "bf16", "adapters at the compute dtype"
    )


@dataclass(frozen=True)
class OptimizerBytes:
    """Optimizer state per trainable parameter and the transient memory of its step.

    `transient` is "all" for multi-tensor (foreach) steps, which allocate temporaries the size of
    all states at once, "largest" for per-parameter steps (temporaries of the largest tensor),
    or "none" for fused kernels.
    """

    name: str
    states: int
    state_bytes: float | None
    factored: bool
    transient: str
    transient_tensors: float
    paged: bool
    note: str


OPTIMIZERS: dict[str, OptimizerBytes] = {
    recipe.name: recipe
    for recipe in (
        OptimizerBytes("adamw", 2, None, False, "all", 1, False,
                        "torch.optim.AdamW, foreach: momentum + variance; sqrt(variance) is "
                        "materialised for all parameters during step()"),
        OptimizerBytes("adamw-fused", 2, None, False, "none", 0, False,
                        "torch.optim.AdamW(fused=True): momentum + variance, no step temporaries"),
        OptimizerBytes("adamw-8bit", 2, 1 + 4 / 256, False, "none", 0, False,
                        "bitsandbytes AdamW8bit: block-wise 8-bit states (Dettmers et al. 2022)"),
        OptimizerBytes("paged-adamw-8bit", 2, 1 + 4 / 256, False, "none", 0, True,
                        "as adamw-8bit, states in paged (unified) memory that can spill to the CPU "
                        "under pressure; outside the resident peak (memory.paged_bytes)"),
        OptimizerBytes("adamw-4bit", 2, 0.5 + 4 / 128, False, "none", 0, False,
                        "torchao AdamW4bit (transformers adamw_torch_4bit): 4-bit states in blocks "
                        "of 128 values with one fp32 scale each (Li et al. 2023, arXiv:2309.01507; "
                        "torchao/optim README: block size 128 for 4-bit); its step is one compiled "
                        "kernel. Tensors under 4,096 values keep fp32 states there, not counted"),
        OptimizerBytes("sgd", 0, None, False, "none", 0, False, "plain SGD: no state"),
        OptimizerBytes("sgd-momentum", 1, None, False, "none", 0, False,
                        "SGD with momentum: one momentum buffer, updated in place"),
        OptimizerBytes("adafactor", 0, None, True, "largest", 3, False,
                        "Adafactor (Shazeer & Stern 2018) without first moment: factored row + "
                        "column second moments (r + c per matrix); fp32 update temporaries per "
                        "parameter"),
        OptimizerBytes("lion", 1, None, False, "largest", 2, False,
                        "Lion (Chen et al. 2023): one momentum buffer; per-parameter update "
                        "temporaries"),
    )
}  # fmt: skip


def nf4_bytes_per_param(double_quant: bool = True) -> float:
    """NF4 storage per weight: 4 bits + block absmax (QLoRA sec. 3), in bytes."""
    bits = 4 + 8 / 64 + 32 / (64 * 256) if double_quant else 4 + 32 / 64
    return bits / 8


BASE_WEIGHT_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "int8": 1.0,
    "nf4": nf4_bytes_per_param(),
}

# Dequantising a 4-bit base (bitsandbytes) before each matmul costs time per micro-batch set by
# the weight count, not by the tokens: about 18 bytes of memory traffic per quantised weight per
# forward+backward (derived from matched QLoRA/LoRA step-time pairs: litgpt config-hub runs on
# A10G give ~18 on four models, litgpt A100 resource tables 16-23, compiled torchtune ~15.5;
# calibration/published.yaml). Full recompute dequantises once more (x1.5, an inference: no
# matched pair measures it).
QLORA_DEQUANT_BYTES_PER_WEIGHT = 18.0
QLORA_RECOMPUTE_FACTOR = 1.5
