"""Mamba / Mamba-2 mixers: what training keeps for backward, and the FLOPs of the scan.

Notation per token: h = hidden width, D = inner width (expand x h), N = state size, H = Mamba-2
heads (P = D / H channels each), G = B/C groups, R = Mamba's dt rank, Q = Mamba-2 chunk length,
W = in_proj output width (Mamba: 2D; Mamba-2: 2D + 2GN + H), a = bytes of a 16-bit activation.

Two kernels, stated separately because they differ by orders of magnitude:

* `fused` -- the mamba-ssm CUDA/Triton kernels transformers calls in training when they are
  installed. Mamba-2 (`MambaSplitConv1dScanCombinedFn.forward`, mamba_ssm/ops/triton/ssd_combined.py)
  saves `zxbcdt` (the in_proj output, W), `out_x` (the scan output, D), the gated norm's fp32 `rstd`
  (G per token) and weights; the conv output, the normalised output and the out_proj input are
  recomputed in backward. Mamba (`MambaInnerFn.forward`, mamba_ssm/ops/selective_scan_interface.py,
  checkpoint_lvl = 1) saves `xz` (2D), `x_dbl` (R + 2N), contiguous copies of B and C (2N), the scan
  output `out` (D) and fp32 `scan_intermediates` of D x 2N per 2048-token chunk; conv1d_out and
  delta are recomputed. Both also keep in_proj's input (h) as a linear layer does.
* `naive` -- transformers' PyTorch fallback (no kernels, e.g. on CPU): every op of the chunked SSD
  (Mamba2Mixer.forward -> mamba2_chunk_scan) or of the sequential scan (MambaMixer.slow_forward)
  keeps its autograd inputs, most in fp32; Mamba-2's intra-chunk `L`, `G = C B^T` and the copy of
  `M = G * L` that its einsum keeps are H x Q per token each. The formulas below list those tensors
  one by one; they were checked against the tensors autograd saves for one bf16 mixer (saved-tensor
  hooks, transformers 5.24, four shapes): within 0.1 % (Mamba-2) and 1 % (Mamba). They assume the
  sequence is a whole number of chunks (padding to a chunk multiple adds up to Q - 1 tokens).
  Under autocast the einsums run in 16 bits, so their operand copies are 16-bit (within 1 % of
  the tensors saved under the emulated CUDA autocast policy).

Zamba's multi-head Mamba runs neither MambaInnerFn nor MambaMixer.slow_forward but a path of
its own (the conv, per-head projections and one selective scan per head): `_zamba_bytes`.
"""

from __future__ import annotations

from trainplan.engine.terms.mode import ActivationMode, linear_input
from trainplan.specs.model import ModelSpec, Ssm
from trainplan.specs.scenario import SSM_KERNELS
from trainplan.specs.weights import ssm_linears

_MAMBA_SCAN_CHUNK = 2048  # mamba-ssm's selective_scan_fwd processes 2048 tokens per chunk


def in_proj_width(ssm: Ssm, hidden_size: int) -> int:
    """W: the in_proj output width (z and x for Mamba; z, x, B, C and dt for Mamba-2)."""
    return ssm_linears(ssm, hidden_size)[0].out_features


def ssm_bytes(model: ModelSpec, ssm: Ssm, mode: ActivationMode, kernel: str = "fused") -> float:
    """Bytes one SSM mixer keeps per token for backward (see the module docstring).

    fused Mamba-2: in_proj input + a W + a D + 4 G.
    fused Mamba:   in_proj input + a (2D + R + 2N + 2N + D) + 4 D 2N / 2048.
    naive Mamba-2 (transformers' chunked SSD, tensor by tensor):
      in_proj input + a W (projected states, kept alive through the conv input view) + a C_conv
      (the conv output, silu's input) + 2 a H (softplus and clamp inputs) + 4 D + 4 H + 4 D + 4 H
      (x and dt in fp32, x dt, A dt) + 3 x 4 H Q (L, G, M's copy) + 3 x 4 H N (B and C repeated to
      heads, C's second copy) + 2 x 4 H N (B_decay and its copy) + 3 x 4 D (x's chunked copies,
      C x states) + 2 x 4 H (decays) + 2 x 4 D N / Q (chunk states, both einsums) + 5 x 4 D + 4 G
      (the gated RMSNorm in fp32: input, gate, silu, product, normalised; rstd) + out_proj input.
    naive Mamba (sequential scan): in_proj input + a (2D + D + D + R + D + D + D) (projected
      states, conv out, x_proj input, dt_proj input, softplus in and out, y + D x) + 4 N + 4 D
      (B and x in fp32) + 2 x 4 D N (exp(delta A), delta B) + (4 + a) D N (the running state each
      step, in fp32 and cast for C) + 4 D (the gate in fp32) + out_proj input.
    """
    assert kernel in SSM_KERNELS, kernel  # the scenario validates the choice
    a, hidden = mode.activation_bytes, model.hidden_size
    inner, state, width = ssm.inner_size, ssm.state_size, in_proj_width(ssm, hidden)
    kept = linear_input(mode, hidden, ["in_proj"])
    out_input = linear_input(mode, inner, ["out_proj"])
    if ssm.kind == "mamba" and ssm.num_heads:
        return kept + _zamba_bytes(ssm, a, kernel) + out_input
    if ssm.kind == "mamba":
        x_dbl = ssm.dt_rank + 2 * state
        if kernel == "fused":
            scan_chunks = 4 * inner * 2 * state / _MAMBA_SCAN_CHUNK
            return kept + a * (2 * inner + x_dbl + 2 * state + inner) + scan_chunks
        sequential = (
            a * (6 * inner + inner + ssm.dt_rank)
            + 4 * state
            + 4 * inner
            + 2 * 4 * inner * state
            + (4 + a) * inner * state
            + 4 * inner
        )
        return kept + sequential + out_input
    heads, groups, chunk = ssm.num_heads, ssm.n_groups, ssm.chunk_size
    if kernel == "fused":
        return kept + a * width + a * inner + 4 * groups
    # under autocast the einsums run in 16 bits, so the operand copies they keep are `a` bytes
    # wide, the conv keeps its own cast input, and softplus (an fp32-list op) its fp32 input
    e = a if mode.casts_inputs else 4
    conv_in = a * ssm.conv_channels if mode.casts_inputs else 0.0
    soft = 4 if mode.casts_inputs else a
    naive = (
        a * width
        + conv_in
        + a * ssm.conv_channels
        + 2 * soft * heads
        + 2 * 4 * inner
        + 2 * 4 * heads
        + 4 * heads * chunk  # L
        + 2 * e * heads * chunk  # G and M's copy
        + 3 * e * heads * state  # B, C and C's second copy, repeated to heads
        + 4 * heads * state  # B_decay
        + e * heads * state  # its copy
        + 3 * e * inner  # x's two chunked copies, C x states
        + 2 * 4 * heads
        + 2 * e * inner * state / chunk
        + 5 * 4 * inner
        + 4 * groups
    )
    return kept + naive + out_input


def _zamba_bytes(ssm: Ssm, a: int, kernel: str) -> float:
    """Zamba's multi-head Mamba (models/zamba/modeling_zamba.py, ZambaMambaMixer.forward), between
    in_proj's input and out_proj's: H heads, each with its own dt, B and C (x_dbl = H (R + 2N)).

    Both kernels keep: the contiguous copy of x split off the in_proj output that the conv saves
    (a D); the conv output x (a D); the copy of x that the per-head x_proj matmul's broadcast
    makes for bmm (a D); x_dbl itself (a x_dbl), kept alive by dt_proj's input and by B and C,
    views of it; the gate z, copied out of the interleaved in_proj output by its reshape (a D).
    fused (the causal-conv1d kernel with the SiLU inside, then mamba-ssm's `SelectiveScanFn` once
    per head, which saves u, delta, B, C, z, its scan intermediates and, with z, its ungated output
    `out`; mamba_ssm/ops/selective_scan_interface.py): delta (a D), `out` (a D) and fp32
    intermediates of D x 2N per 2048-token chunk: a (6 D + x_dbl) + 4 D 2N / 2048.
    naive (transformers' mamba_selective_scan, its sequential loop) adds the conv output before
    the SiLU, softplus's input and output and SiLU(z) (a D each), so a (8 D + x_dbl); B and
    x in fp32 (4 H N + 4 D); exp(delta A) and delta B (2 x 4 D N); the running state each step in
    fp32 and cast for C ((4 + a) D N); the fp32 scan output the gate multiplies (4 D).
    Checked against the tensors autograd saves for one bf16 mixer on CPU (saved-tensor hooks,
    transformers 5.24): within 0.5 % (tests/test_layouts.py).
    """
    inner, state, heads = ssm.inner_size, ssm.state_size, ssm.num_heads
    x_dbl = heads * (ssm.dt_rank + 2 * state)
    if kernel == "fused":
        return a * (6 * inner + x_dbl) + 4 * inner * 2 * state / _MAMBA_SCAN_CHUNK
    return (
        a * (8 * inner + x_dbl)
        + 4 * heads * state
        + 4 * inner
        + 2 * 4 * inner * state
        + (4 + a) * inner * state
        + 4 * inner
    )


def ssm_scan_flops(ssm: Ssm) -> float:
    """Forward FLOPs per token of the mixer outside its linear layers (exact for the algorithm).

    Causal depthwise conv: 2 x channels x kernel. Mamba's selective scan (Gu & Dao 2023, sec. 3.3
    and alg. 2) per channel and state: delta*A (1), delta*B*u (2), h = Abar h + Bbar u (2),
    y = C h (2) = 7 D N, plus the skip D*u (2 D) and the SiLU gate (D).
    Mamba-2's SSD in chunks of Q (Dao & Gu 2024, sec. 6): C B^T within a chunk 2 Q H N, its
    product with x 2 Q D, chunk states B^T x 2 D N, their read-out C h 2 D N; plus the skip 2 D.
    Backward costs twice the forward (gradients of both operands), as for attention.
    """
    conv = 2 * ssm.conv_channels * ssm.conv_kernel
    inner, state = ssm.inner_size, ssm.state_size
    if ssm.kind == "mamba":
        return conv + 7 * inner * state + 3 * inner
    chunk = ssm.chunk_size
    return conv + 2 * chunk * ssm.num_heads * state + 2 * chunk * inner + 4 * inner * state + 2 * inner
