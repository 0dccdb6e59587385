"""Step time and time to train: a roofline with first-order overheads.

compute = FLOPs / (GPUs x dense peak FLOP/s of the compute precision x efficiency)
(the training roofline; efficiency is the sustained fraction of peak on the work done,
recompute included; Narayanan et al. 2021, sec. 5.1). Under the fp8 recipes the layers' linears
run at the fp8 peak x efficiency x `fp8_matmul_efficiency_ratio`, the attention core and the
output head at the 16-bit rate. When the user gives `mfu` it is taken as the all-in efficiency
(no fp8 ratio) and nothing is added. Otherwise trainplan adds, each documented:
- pipeline bubble: compute x (pp - 1) / m for m micro-batches per step (Narayanan et al. 2021,
  sec. 2.2.1, 1F1B schedule);
- data-parallel gradient sync: ring all-reduce moves 2 (n - 1)/n x the gradient bytes per GPU
  (Patarasuk & Yuan 2009; ZeRO sec. 7: stages 1-2 have the same volume, stage 3 adds two
  weight all-gathers per micro-batch); up to `comm_overlap` x the compute it runs under
  (backward for gradients, forward and backward for ZeRO-3 gathers) is hidden;
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer of b x s x h activations
  (Shoeybi et al. 2019, fig. 4), on the intra-node link, not overlapped;
- CPU offload: gradients down and updated weights up over PCIe each step (ZeRO-Offload,
  Ren et al. 2021, sec. 4), not overlapped;
- QLoRA: dequantising the 4-bit base before each matmul slows the frozen-weight matmuls;
- torchao float8 (fp8-torchao): the dynamic-scaling casts before each fp8 matmul, memory
  traffic at the GPU's memory bandwidth (`float8_cast_bytes`);
- torch.compile: Inductor's fusion of the norms, RoPE and the gated activation removes memory
  traffic of the eager step (`compile_fusion_bytes`), subtracted at the memory bandwidth, at
  most the (1 - efficiency) share of compute that is not matmul work at peak;
- a diffusion pipeline's frozen encoders (`frozen_encoders` gpu / offload): their forward FLOPs
  (terms/encoders.py) at the compute dtype's rate, the 16-bit one under an fp8 recipe, and the
  step's efficiency (also under a given `mfu`).
Link speeds come from the GPU catalog; the bus-bandwidth efficiencies are stated judgements.
"""

from __future__ import annotations

from typing import Any

from trainplan.engine.scalar_or_array import minimum
from trainplan.specs.model import ModelSpec

# Judgement, from the hardware sheet's rules of thumb: NCCL bus bandwidth reaches ~70-85% of the
# one-direction NVLink figure within a node, and ~40-45 of 50 GB/s on 400 Gb/s networks.
INTRA_NODE_EFFICIENCY = 0.8
INTER_NODE_EFFICIENCY = 0.85
DEFAULT_EFFICIENCY = 0.45  # the seed calculator's MFU
# Sustained fraction of dense peak on training matmul work, by GPU architecture, from published
# single-job measurements with little communication (calibration/published.yaml):
# Ampere A100: MosaicML MPT-7B 64% MFU (8 GPUs, no recompute), torchtitan Llama 3 8B 58%,
# IBM fms-fsdp Llama 2 7B 57%; Hopper H100: MosaicML MPT-7B 46%, Megatron-Core 42-47%,
# Llama 3 405B 38-43%; Ada RTX 4090: torchtune Llama 3.1 8B full fine-tune 1,650 tok/s = 64% of
# the dense bf16 peak with recompute counted. Other architectures: the seed's 0.45 (no data).
EFFICIENCY_BY_ARCHITECTURE = {"Ampere": 0.58, "Hopper": 0.47, "Ada": 0.6}
# fp8 matmuls reach a lower share of the fp8 peak than 16-bit matmuls of the 16-bit peak: the
# efficiency above applies to the fp8 recipes' linears times this ratio, by GPU architecture.
# Source: S. Bekman, Machine Learning Engineering Open Book, compute/accelerator/README.md
# (stas00/ml-engineering @ 744d01e1, read 2026-12-01), "Maximum Achievable Matmul FLOPS
# comparison table": the best mean TFLOPS of torch matmuls over a brute-force sweep of shapes,
# 100 iterations after 50 of warm-up, BF16 and FP8 (float8_e4m3fn) inputs on the same GPU:
# - Hopper: H100 SXM, torch 2.7.0+cu126: FP8 1,402.6 of 1,979 = 70.9%, BF16 794.5 of 989 =
#   80.3%: 70.9 / 80.3 = 0.883 (H200 SXM: FP8 73.4% against the same BF16 80.3% = 0.914; the
#   900 W GH200: 77.6 / 83.8 = 0.926: the more power the part may draw, the nearer the two);
# - Blackwell: B200 SXM, torch 2.7.1+cu128: FP8 76.3%, BF16 77.6%: 0.983 (B300 0.948).
# Other architectures: 1 (no published pair; their fp8 runs are not calibrated). Why fp8 falls
# further short (a reading of the table, not a measurement of clocks): an fp8 matmul does twice
# the work per clock on the same tensor cores and draws more power, so at the power limit it runs
# at lower clocks; the parts allowed more power (GH200 at 900 W) come nearer to 1.
FP8_MATMUL_EFFICIENCY_RATIO_BY_ARCHITECTURE = {"Hopper": 0.883, "Blackwell": 0.983}
# Diffusion and video denoisers reach a different share of peak than a language model on the same
# GPU: the efficiency above is multiplied by a factor per model kind (`efficiency_kind`), fitted as
# measured / predicted images (clips) per second on the fit cases of
# calibration/diffusion_time_reference.py, the other cases held out (docs/accuracy.md):
# - unet: 0.67 = 128.7 / 192.7 images/s per GPU, MLPerf Training v4.0 Stable Diffusion v2 on one
#   8 x H200 node (mlperf-v40-sd2-h200-8gpu); held out: 64 and 512 H100s, 64 L40S;
# - video: 0.70 = 0.1205 / 0.1718 clips/s, Wan 2.1 T2V 1.3B LoRA on an A100 at 81 x 832x480
#   (diffsynth-wan21-1.3b-lora-a100); no held-out case survived the source checks.
# - jepa: 0.43 = 92.68 / 215.6 images/s per GPU, I-JEPA ViT-H/14 pretrained on ImageNet-1K for
#   300 epochs on 16 A100s in "under 72 hours" (ijepa-vith14-in1k-300ep-16xa100): an upper bound
#   on the time, so the factor is a lower bound; applied to V-JEPA and V-JEPA 2 too, with no
#   held-out run (no primary GPU count and wall time found for them).
# A diffusion transformer keeps the language models' figure, checked against two runs and fitted
# on neither: FLUX.1-dev QLoRA on an RTX 4090 (-14%, a whole-run time) and MLPerf Training v5.1's
# FLUX.1 on 16 GB200s in MXFP8 (+89%: the Blackwell default applied to the fp8 peak; the run
# reaches 0.46 of the bf16 peak), whose ratio, 0.53, would correct fp8 on Blackwell rather than
# the model kind (docs/accuracy.md).
EFFICIENCY_FACTOR_BY_MODEL_KIND = {"unet": 0.67, "video": 0.70, "jepa": 0.43}


def efficiency_kind(model: ModelSpec) -> str:
    """The model kind the efficiency factor is looked up by: `llm`, `unet` (a diffusion model
    with resnet blocks), `diffusion-transformer`, `video` or `jepa`."""
    if model.kind == "diffusion":
        from trainplan.engine.terms.denoisers import is_unet

        return "unet" if is_unet(model) else "diffusion-transformer"
    return model.kind


def fp8_matmul_efficiency_ratio(architecture: str) -> float:
    """The fp8 linears' share of the fp8 peak relative to the 16-bit efficiency (table above)."""
    return FP8_MATMUL_EFFICIENCY_RATIO_BY_ARCHITECTURE.get(architecture, 1.0)


def default_efficiency(architecture: str, model_kind: str = "llm") -> float:
    """trainplan's compute efficiency for a GPU architecture and a model kind (`efficiency_kind`)."""
    factor = EFFICIENCY_FACTOR_BY_MODEL_KIND.get(model_kind, 1.0)
    return EFFICIENCY_BY_ARCHITECTURE.get(architecture, DEFAULT_EFFICIENCY) * factor


# torchao float8 with dynamic tensorwise scaling (pytorch/ao torchao/float8/float8_linear.py @
# 7ca1bfbe, `matmul_with_hp_or_float8_args`, and float8_scaling_utils.hp_tensor_to_float8_dynamic):
# 1. every cast first reduces max|x| over the 16-bit tensor (reads 2 bytes per element), then
#    scales and writes float8 (reads 2, writes 1): 5 bytes per element per cast, unfused (eager);
# 2. forward casts the linear's input and its weight; backward casts the grad_output twice (for
#    grad_input and for grad_weight), the weight again and the saved 16-bit input again;
# 3. so per micro-batch each element of a linear's input, output (its grad_output) and weight
#    is cast twice: 2 x 5 = 10 bytes; a recomputed forward casts input and weight once more;
# 4. under torch.compile Inductor folds the max|x| reduction into the kernel that produces the
#    tensor (no extra read), but the tensor-wide maximum is known only after that kernel ends,
#    so scaling and casting is a second pass: read 2, write 1 = 3 bytes per element per cast
#    (an estimate from the kernel structure, not a measured figure).
# Cross-check: torchao's own roofline (torchao/testing/training/roofline_utils.py @ 36027d82,
# `get_tensor_memory_traffic_ovhd_s`, tensorwise) counts per element and step an input or
# grad_output amax read (2, none when fused into the producer) and one kernel that reads 2 and
# writes float8 twice, row- and column-major for the backward's transposed operands (4): 4-6
# bytes against 6 here (two casts of 3); a weight 2 + 3 + 3 = 8 against 6. The weight's amax
# across FSDP shards (float8 all-gather) is one small all-reduce, not counted; rowwise scaling
# (more traffic, a slower matmul) is not modelled.
FLOAT8_CAST_BYTES_PER_ELEMENT = 5.0
FLOAT8_CAST_BYTES_PER_ELEMENT_COMPILED = 3.0
# The recipes whose casts are separate kernels; Transformer Engine (fp8-mixed) fuses its amax and
# cast into the neighbouring kernels and saves fp8 inputs, so no cast term is added for it.
FLOAT8_DYNAMIC_CAST_RECIPES = frozenset({"fp8-torchao"})


def float8_cast_bytes(
    input_elements: Any,
    output_elements: Any,
    weight_elements: Any,
    recompute_share: Any,
    compiled: bool = False,
) -> Any:
    """Memory traffic of torchao's dynamic float8 casts for one micro-batch (derivation above):
    `input_elements` and `output_elements` summed over the fp8 linears (tokens x features),
    `weight_elements` their weights; `recompute_share` of the forward re-runs in backward."""
    per_cast = FLOAT8_CAST_BYTES_PER_ELEMENT_COMPILED if compiled else FLOAT8_CAST_BYTES_PER_ELEMENT
    forward = (1 + recompute_share) * (input_elements + weight_elements)
    backward = 2 * output_elements + input_elements + weight_elements
    return per_cast * (forward + backward)


# Inductor's fusion (torch.compile of each block), bytes per element of the tensor named, at
# activation dtype a (bytes) and fp32 = 4, eager kernel by kernel from the ops HF and torchtune
# write (each eager kernel reads its inputs and writes its output once; per-row scalars and the
# broadcast cos/sin tables are left out), against the fused kernels Inductor generates (each
# reads its region's inputs and writes its outputs once; matmuls and SDPA stay separate kernels):
# 1. RMSNorm with the residual add before it, per hidden channel. Eager forward: add (read 2a,
#    write a), cast to fp32 (a + 4), pow (8), mean (4), x * rsqrt (8), cast back (4 + a), weight
#    mul (2a): 7a + 28. Fused: read residual and branch, write sum and normed output: 4a.
#    Eager backward: weight mul (grad_in 2a, grad_w 3a + a), cast (a + 4), x * rsqrt (8 + 12 +
#    4), mean (4), pow (20), the fp32 grads' sum (12), cast back (4 + a), the residual grads' sum
#    (3a): 11a + 68. Fused: grad_in with the residual grad (read 3a, write a) and the weight-grad
#    reduction (read 2a): 6a. Removed: 3a + 28 forward, 5a + 68 backward.
# 2. RoPE (q * cos + rotate_half(q) * sin), per rotated channel of q and k. Eager forward: two
#    muls (2a each), neg of one half (a), cat (2a), add (3a): 10a; fused 2a. Eager backward: two
#    muls (2a each), neg (a), slice_backward's zero-filled halves (4a), the grads' sums (6a):
#    15a; fused 2a. Removed: 8a forward, 13a backward.
# 3. SwiGLU act(gate) * up, per inner channel. Eager forward: silu (2a), mul (3a); fused 3a.
#    Eager backward: two muls (3a each), silu_backward (3a); fused: read grad, gate, up, write
#    two grads: 5a. Removed: 2a forward, 4a backward.
# An estimate: the op sequences are read from the modelling code; LayerNorm (already one eager
# kernel), plain GELU MLPs and the loss are counted as unchanged, and RoPE is counted for the
# RMSNorm decoders without learned positions or a relative bias (the RoPE families; the ALiBi
# ones, MPT and Bloom, use LayerNorm), so LayerNorm RoPE models (GPT-NeoX) are undercounted.
def compile_fusion_bytes(
    model: ModelSpec, activation_bytes: int, recomputed_layers: Any, residual_add: bool = True
) -> float:
    """Eager memory traffic per token that Inductor's fusion removes (derivation above), summed
    over the layers of `model`; the forward part again for each layer whose forward is
    recomputed in backward (`recomputed_layers`, one entry per block: how many of its layers).

    Liger's and Unsloth's Triton kernels (`kernels`, terms/kernels.py) fuse the same three ops one
    kernel each, but their RMSNorm reads the residual sum an eager add wrote
    (`residual_add=False`): the add's traffic (3a forward, read two and write one) stays and
    their fused norm writes only its output, so a norm removes 2a + 28 forward, not 3a + 28; the
    backward and the other two ops remove what Inductor's do."""
    a = activation_bytes
    norm_forward = 3 * a + 28 if residual_add else 2 * a + 28
    rmsnorm = model.norm in ("rmsnorm", "rmsnorm-no-weight")
    total = 0.0
    for block, recomputed in zip(model.blocks, recomputed_layers, strict=True):
        forward = backward = 0.0
        if rmsnorm:
            forward += block.norms * model.hidden_size * norm_forward
            backward += block.norms * model.hidden_size * (5 * a + 68)
        attention = block.attention
        rope = rmsnorm and not model.learned_positions
        if attention is not None and rope and not attention.relative_bias_params:
            rotated = attention.q_size + attention.own_kv_size
            forward += rotated * 8 * a
            backward += rotated * 13 * a
        mlp = block.mlp
        if mlp is not None and mlp.gated:
            inner = mlp.intermediate_size * (mlp.experts_per_token if mlp.is_moe else 1)
            inner += mlp.shared_intermediate_size * mlp.num_shared_experts
            forward += inner * 2 * a
            backward += inner * 4 * a
        total += block.count * (forward + (0.0 if block.no_grad else backward)) + recomputed * forward
    return total


def ring_allreduce_seconds(num_bytes: Any, ranks: Any, bytes_per_s: Any) -> Any:
    """Ring all-reduce: each rank sends and receives 2 (n - 1)/n x the buffer (zero for n = 1)."""
    return 2 * (ranks - 1) / ranks * num_bytes / bytes_per_s


def gather_or_scatter_seconds(num_bytes: Any, ranks: Any, bytes_per_s: Any) -> Any:
    """Ring all-gather or reduce-scatter: (n - 1)/n x the full buffer (zero for n = 1)."""
    return (ranks - 1) / ranks * num_bytes / bytes_per_s


def exposed_seconds(comm: Any, window: Any, overlap: float) -> Any:
    """Communication left on the critical path: up to `overlap` x the compute window it can
    run under is hidden (bucketed all-reduce under backward, prefetched all-gathers under
    forward and backward)."""
    return comm - minimum(comm, overlap * window)
