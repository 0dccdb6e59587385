"""What every block of a diffusion, video or JEPA model is counted with: the dtypes a scenario
runs it at, a linear's kept input, a LayerNorm's, the attention kernel's saved tensors and its
FLOPs. Bytes per token (or per sample where a function says so): estimates, checked against
traces (terms/denoisers.py, terms/jepa.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainplan.engine.terms.jepa_masks import MaskGenerator
from trainplan.engine.terms.mode import ActivationMode, linear_input
from trainplan.specs.model import Attention


@dataclass(frozen=True)
class Dims:
    """The dtypes one scenario runs a denoiser at."""

    a: int  # matmul outputs
    autocast: bool  # fp32 weights under autocast: LayerNorms run (and output) fp32
    trainable: bool  # full fine-tune
    fp32_weights: bool
    mode: ActivationMode

    def norm_bytes(self, fp32: bool = False) -> int:
        """Bytes per element of a norm's kept input and its output (and the modulated tensor):
        fp32 under autocast (layer_norm and group_norm are on its fp32 list) or for an fp32 norm."""
        return 4 if fp32 or self.autocast else self.a


def dims_of(mode: ActivationMode, fp32_weights: bool) -> Dims:
    autocast = mode.residual_bytes > mode.activation_bytes
    return Dims(mode.activation_bytes, autocast, mode.weights_trainable, fp32_weights, mode)


def linear_inputs(dims: Dims, width: int, names: list[str], fp32_input: bool) -> float:
    """What the linears `names` keep of their shared input (one copy per consumer of an fp32
    input under autocast)."""
    mode = replace(dims.mode, residual_bytes=4 if fp32_input and dims.autocast else dims.a)
    return linear_input(mode, width, names)


def kernel_output_input(dims: Dims, width: int, name: str) -> float:
    """What the output projection `name` keeps beyond the attention kernel's output. Flash and
    memory-efficient SDPA write their output as (batch, seq, heads, head_dim) in memory, so the
    transpose and reshape before the projection are views: a trained projection, or an adapter at
    the stream's dtype, keeps that same tensor (SDPA already keeps it); only an adapter at another
    dtype (peft's fp32) or with dropout keeps a copy of its own."""
    kept = linear_inputs(dims, width, [name], False)
    return 0.0 if kept == dims.a * width else kept


def layer_norm(dims: Dims, width: int, fp32: bool = False) -> float:
    """native_layer_norm: the input (fp32 under autocast or an FP32LayerNorm) + fp32 mean, rstd."""
    return dims.norm_bytes(fp32) * width + 8


def sdpa(dims: Dims, attention: Attention, queries: float, keys: float) -> float:
    """Bytes per sample the attention kernel keeps: q per query, k and v per key, the output and
    an fp32 logsumexp per head and query; eager keeps fp32 scores and their 16-bit softmax."""
    a, heads = dims.a, attention.num_heads
    kept = a * attention.q_size * queries + a * 2 * attention.kv_size * keys
    kept += (a * attention.q_size + 4 * heads) * queries
    if dims.mode.attention == "eager":
        kept += heads * queries * keys * (4 + a)
    return float(kept)


def core(attention: Attention, queries: float, keys: float) -> float:
    """Scores and weighted sum: 2 x queries x keys x (d_qk + d_v) per head (Kaplan et al. 2020)."""
    return 2 * attention.num_heads * queries * keys * (attention.head_dim + attention.v_head_dim)


# ---- the block table: one row per block role -------------------------------------------------
# A row says how one kind of block keeps activations for backward (`saved`, per sample), what a
# checkpointed layer of it keeps instead (`layer_input` elements, at the activation dtype; None
# for embedders and heads, which diffusers and the JEPA repos never checkpoint), the tokens
# each of its linears runs over, and its attention cores' forward FLOPs. A new block type is a
# new row, not a branch in the activation, FLOP and checkpointing code.
Masks = tuple[MaskGenerator, ...]
