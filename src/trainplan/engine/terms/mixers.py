"""Linear-attention, recurrent and short-conv mixers: what training keeps for backward, and FLOPs.

Notation per token: h = hidden width, H = value heads of width d_v (V = H d_v), H_k key heads of
width d_k (K = H_k d_k; KDA: H_k = H, d_k = d_v), C = conv channels (2K + V), Q = chunk length,
r = KDA's gate rank, a = bytes of a 16-bit activation. Tensors that are the input of a frozen
weight (the conv input, a norm's input to its weight) are kept only when weights train.

`naive` is transformers' PyTorch path (no kernels, e.g. on CPU); its tensors below are listed one
by one from the modules' forward (Qwen3NextGatedDeltaNet with torch_chunk_gated_delta_rule,
MiniMaxLightningAttention, Lfm2ShortConv, KimiLinearDeltaAttention with chunk_kimi_delta_attention,
RecurrentGemmaRecurrentBlock, RwkvBlock, transformers 5.24) and were checked against the tensors
autograd saves for one bf16 mixer (saved-tensor hooks, tests/test_mixers.py): within 1 %, the
rest being per-layer constants (causal masks, lightning attention's decay tables) and the conv's
K - 1 padding rows.
`fused` is the path transformers takes when flash-linear-attention (fla) and causal-conv1d are
installed; where it saves differently the formula says so. Both are derived for a 16-bit stream;
under autocast the fp32 tensors stay fp32 and the 16-bit ones are the autocast copies, so the
same count is used (an estimate there).
"""

from __future__ import annotations

from trainplan.engine.terms.mode import ActivationMode, linear_input
from trainplan.specs.model import Attention, LinearMixer, ModelSpec
from trainplan.specs.scenario import SSM_KERNELS
from trainplan.specs.weights import mixer_linears

_LOW_RANK_SECOND = ("f_b_proj", "g_b_proj")
_FLA_CHUNK = 64  # fla's chunk_gated_delta_rule works in chunks of 64 tokens (its A is 64 wide)


def mixer_bytes(model: ModelSpec, mixer: LinearMixer, mode: ActivationMode, kernel: str = "fused") -> float:
    """Bytes one linear mixer keeps per token for backward (see the module docstring; RWKV's
    also count what its channel mixing keeps beyond the block's plain MLP)."""
    assert kernel in SSM_KERNELS, kernel  # the scenario validates the choice
    hidden = model.hidden_size
    if mixer.kind == "rwkv":
        return rwkv_bytes(mixer, mode, kernel, hidden)
    *inputs, out = mixer_linears(mixer, hidden)
    # the projections reading the layer input (KDA's low-rank second halves read the rank-r one)
    in_names = [linear.name for linear in inputs if linear.name not in _LOW_RANK_SECOND]
    kept = linear_input(mode, hidden, in_names)
    out_input = linear_input(mode, mixer.value_size, [out.name])
    if mixer.kind == "gated_deltanet":
        return kept + gated_deltanet_bytes(mixer, mode, kernel) + out_input
    if mixer.kind == "lightning":
        return kept + lightning_bytes(mixer, mode) + out_input
    if mixer.kind == "short_conv":
        return kept + short_conv_bytes(mixer, mode, kernel) + out_input
    if mixer.kind == "rg_lru":
        return kept + rg_lru_bytes(mixer, mode) + out_input
    return kept + kda_bytes(mixer, mode, kernel) + out_input


def gated_deltanet_bytes(mixer: LinearMixer, mode: ActivationMode, kernel: str) -> float:
    """Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks", sec. 3; Qwen3-Next), between the
    input projections and out_proj, per token.

    naive: a C (conv input, trained weights only) + a C (conv output, SiLU's input)
      + a H (beta = sigmoid(b)) + 2 x 4 H (softplus input and output of the decay, fp32)
      + 2 (4 H d_k + 4 H) (q and k repeated to the value heads, fp32, and their L2-norm rstd)
      + 4 H + 4 V + 4 H d_k (beta, v and the normalised k in fp32)
      + 4 x 4 H Q (four per-head Q x Q chunk matrices: pairwise decays, the UT system, the
      intra-chunk scores and the decayed product) + 2 x 4 H d_k (k beta and k for their bmm)
      + 3 x 4 H (cumulative decays) + 4 V + 4 H d_k (v beta, decayed k beta)
      + 4 H Q + 2 x 4 H d_k + 4 V + 4 H d_k d_v / Q (the scan over chunks: the intra-chunk
      scores, k and the decayed q / k, the corrected values, one fp32 state per chunk)
      + gated RMSNorm: 4 V + 4 H (fp32 input, rstd per head) + a V (its cast, trained weight
      only) + 2 x 4 V (the gate z in fp32, SiLU's output) + a V (the weighted output).
    fused (fla chunk_gated_delta_rule with the L2 norm in the kernel, causal-conv1d): a C (the
      conv input, kept by the kernel) + a C (the conv output: v is a slice of it) + the same
      gates + a 2K (the normalised q and k the kernel saves) + 2 x 4 H_k (their rstd) + 4 H (the
      cumulated decay, fp32) + 64 a H (the kernel's A, 64 per head) + the same gated RMSNorm.
    """
    a, heads = mode.activation_bytes, mixer.num_heads
    channels, values, d_k = mixer.conv_channels, mixer.value_size, mixer.key_head_dim or mixer.head_dim
    weight_input = a if mode.weights_trainable else 0
    gates = a * heads + 2 * 4 * heads
    norm = 4 * values + 4 * heads + weight_input * values + 2 * 4 * values + a * values
    if kernel == "fused":
        key_heads = mixer.num_key_heads or heads
        core = 2 * a * mixer.key_size + 2 * 4 * key_heads + 4 * heads + _FLA_CHUNK * a * heads
        return 2 * a * channels + gates + core + norm
    chunk = mixer.chunk_size
    head_keys = heads * d_k
    naive = (
        weight_input * channels
        + a * channels
        + gates
        + 2 * (4 * head_keys + 4 * heads)
        + 4 * heads
        + 4 * values
        + 4 * head_keys
        + 4 * 4 * heads * chunk
        + 2 * 4 * head_keys
        + 3 * 4 * heads
        + 4 * values
        + 4 * head_keys
        + 4 * heads * chunk
        + 2 * 4 * head_keys
        + 4 * values
        + 4 * head_keys * mixer.head_dim / chunk
    )
    return naive + norm


def lightning_bytes(mixer: LinearMixer, mode: ActivationMode) -> float:
    """Lightning attention (Qin et al. 2024, "Lightning Attention-2", alg. 1; MiniMax-01) in
    blocks of Q, per token; transformers has no fused kernel for it, so both paths are this one.

    a 3V (qkv_proj output, SiLU's input) + a 3V (SiLU's output: q, k, v) + a H Q (the decayed
    intra-block scores, the operand of scores @ v) + a V + a V (q and k times their decays)
    + a H d^2 / Q (the K^T V state of each block) + RMSNorm over V: 4 V + 4 (fp32 input, rstd)
    + a V (its cast, trained weight only) + a V (its output) + a V (the sigmoid output gate).
    """
    a, values, chunk = mode.activation_bytes, mixer.value_size, mixer.chunk_size
    weight_input = a if mode.weights_trainable else 0
    core = 2 * a * 3 * values + a * mixer.num_heads * chunk + 2 * a * values
    state = a * mixer.num_heads * mixer.head_dim**2 / chunk
    norm = 4 * values + 4 + weight_input * values + 2 * a * values
    return core + state + norm


def short_conv_bytes(mixer: LinearMixer, mode: ActivationMode, kernel: str) -> float:
    """LFM2's gated short convolution (y = C * conv(B * x), Lfm2ShortConv), per token.

    a 3h (in_proj output: B and x for their product, C for the output gate) + a h (B x, the conv
    input: kept for the conv weight's gradient when it trains; causal-conv1d's kernel keeps it
    always) + a h (the conv output, the gate's other operand).
    """
    a, width = mode.activation_bytes, mixer.value_size
    conv_input = a * width if mode.weights_trainable or kernel == "fused" else 0
    return a * 3 * width + conv_input + a * width


def rg_lru_bytes(mixer: LinearMixer, mode: ActivationMode) -> float:
    """Griffin's recurrent block (De et al. 2024, sec. 2.4 and 2.6; RecurrentGemmaRecurrentBlock
    with its sequential torch scan: transformers has no kernel for it, so both paths are this one),
    V the recurrence width, per token.

    a V x 12: GeLU's input and output (the y branch), the conv output (kept through the gates'
    reshaped input), the input and recurrence gates (sigmoid outputs), -8 x the recurrence gate,
    its exp (a) and exp(2 x) (a^2), 1 - a^2 (the bounded sqrt's input), the gated input and the
    multiplier of their product, the scan output; + a V (the conv input, trained weights only)
    + 2 x 4 V (the scan's fp32 copy of a and the fp32 state, each step).
    """
    a, width = mode.activation_bytes, mixer.value_size
    conv_input = a * width if mode.weights_trainable else 0
    return 12 * a * width + conv_input + 2 * 4 * width


def rwkv_bytes(mixer: LinearMixer, mode: ActivationMode, kernel: str, hidden: int) -> float:
    """RWKV-4's time mixing (Peng et al. 2023, sec. 3; RwkvSelfAttention), and what its channel
    mixing keeps beyond a plain two-matrix MLP (the block's `Mlp` and receptance linear count the
    rest), per token; V = attention_hidden_size.

    Token shift, both mixings: the normed input and its shifted copy, kept for the mix vectors'
    gradients when they train: 2 x 2 a h. Time mixing: the three mixed inputs of key, value and
    receptance (a h each when trained) + the sigmoid receptance a V + the WKV output a V + the
    output linear's input.
    naive (rwkv_linear_attention_cpu, token by token in fp32): the value a V (each step reads a
    slice) + 12 x 4 V (per step: the two maxima's inputs twice each, the four exps, numerator,
    denominator and both operands of their quotient).
    fused (transformers' RWKV CUDA kernel, RwkvLinearAttention): the key and value a V each (the
    WKV output is the same tensor as above).
    Channel mixing, beyond the plain MLP: the sigmoid receptance and the value output, operands
    of their product: 2 a h.
    """
    a, width = mode.activation_bytes, mixer.value_size
    shifts = 2 * 2 * a * hidden if mode.weights_trainable else 0
    inputs = sum(linear_input(mode, hidden, [name]) for name in ("key", "value", "receptance"))
    time_mixing = inputs + a * width + a * width + linear_input(mode, width, ["output"])
    core = a * width + 12 * 4 * width if kernel == "naive" else 2 * a * width
    return shifts + time_mixing + core + 2 * a * hidden


def kda_bytes(mixer: LinearMixer, mode: ActivationMode, kernel: str) -> float:
    """Kimi Delta Attention (Kimi Team 2025, "Kimi Linear"): a gated delta rule whose decay is
    per channel, per token.

    Around the kernel: a C (conv input, trained weights only) + a C (conv output) + the gates'
    low-rank inputs (f_b_proj, g_b_proj: a r each when trained) + the forget gate's softplus
    (exp output, 1 + exp, the clamp mask of K bytes, its output: 3 x 4 K + K) + a H (beta)
    + gated RMSNorm: 4 V + 4 H + 4 V (normalised, trained weight only) + 4 V + 4 V (weighted
    output, sigmoid gate; all fp32).
    naive kernel (chunk_kimi_delta_attention): 3 x 4 K + 4 V + 3 x 4 H (q, k, normalised k,
      v in fp32; two rstd and beta) + 2 x 4 Q K + 4 K (the per-channel decayed Q x Q x d_k
      key products) + 4 H (Q^2 - 1) / 3 (the forward substitution: a row block of i x i and
      i x 1 per step i < Q, fp32) + 3 x 4 K + 4 H Q (k beta, decayed keys, the UT system)
      + 7 x 4 K + 4 H Q + 4 Q K + 4 H d^2 / Q + 4 K / Q (the scan: decayed q and k, values,
      the intra-chunk scores and their per-channel products, one state per chunk).
    fused (fla chunk_kda, not traced here: taken as the Gated DeltaNet kernel's saving with a
      per-channel decay): a 2K (normalised q, k) + 2 x 4 H (their rstd) + 4 K (the cumulated
      per-channel decay, fp32) + 64 a H (the kernel's A).
    Ling 3.0 (bailing_hybrid: full-rank gates, r = 0, and a sigmoid "safe" forget gate that keeps
    2 x 4 K instead of the softplus' 3 x 4 K + K) is given the same count: an estimate, not traced.
    """
    a, heads, keys, values = mode.activation_bytes, mixer.num_heads, mixer.key_size, mixer.value_size
    channels, rank, chunk = mixer.conv_channels, mixer.gate_rank, mixer.chunk_size
    weight_input = a if mode.weights_trainable else 0
    low_rank = (
        linear_input(mode, rank, ["f_b_proj"]) + linear_input(mode, rank, ["g_b_proj"]) if rank else 0.0
    )
    forget = 3 * 4 * keys + keys + a * heads
    norm = 4 * values + 4 * heads + (4 * values if mode.weights_trainable else 0) + 2 * 4 * values
    around = a * channels + low_rank + forget + norm
    if kernel == "fused":
        return around + a * channels + 2 * a * keys + 2 * 4 * heads + 4 * keys + _FLA_CHUNK * a * heads
    naive = (
        3 * 4 * keys
        + 4 * values
        + 3 * 4 * heads
        + 2 * 4 * chunk * keys
        + 4 * keys
        + 4 * heads * (chunk**2 - 1) / 3
        + 3 * 4 * keys
        + 4 * heads * chunk
        + 7 * 4 * keys
        + 4 * heads * chunk
        + 4 * chunk * keys
        + 4 * heads * mixer.head_dim**2 / chunk
        + 4 * keys / chunk
    )
    return around + weight_input * channels + naive


def output_gate_bytes(attention: Attention, mode: ActivationMode) -> float:
    """Gated softmax attention (attn_output * sigmoid(gate)): the sigmoid output (a q for
    Qwen3-Next's per-channel gate from q_proj, a H for a per-head g_proj) and the gated product,
    which is o_proj's input instead of the kernel's output; nothing without a gate."""
    if attention.output_gate:
        gate = attention.q_size
    elif attention.head_gate:
        gate = attention.num_heads
    else:
        return 0.0
    output = attention.num_heads * (attention.v_head_dim or attention.head_dim)
    return mode.activation_bytes * gate + linear_input(mode, output, [attention.names[3]])


def mixer_flops(mixer: LinearMixer) -> float:
    """Forward FLOPs per token of the mixer outside its linear layers (exact for the algorithm as
    transformers computes it; elementwise gates and norms, under 1 %, are left out).

    Causal depthwise conv: 2 C x taps.
    Gated DeltaNet and KDA, chunked (Yang et al. 2024, sec. 3.3, the WY / UT form), per value
    head: k beta k^T and q k^T within a chunk 2 x 2 Q d_k, the two triangular solves Q (d_k +
    d_v), intra-chunk scores times the new values 2 Q d_v, reading the state for q and for the
    decayed k and writing it 3 x 2 d_k d_v (KDA's per-channel decay is elementwise on the same
    products).
    Lightning attention in blocks of Q (Qin et al. 2024, alg. 1), per head: q k^T and its product
    with v 2 x 2 Q d, the inter-block read q (K^T V) and the state update 2 x 2 d^2.
    Short conv: the conv and the two gate products (2 h).
    RG-LRU: the conv, the two block-diagonal gate matmuls 2 x 2 V^2 / H (their weights are not
    `Linear`s, so they are counted here), and the scan's multiply-add 2 V.
    RWKV: the WKV recurrence's 24 elementwise operations per channel (13 for the output, 11 for
    the state update, an exp counted as one).
    """
    conv = 2 * mixer.conv_channels * mixer.conv_kernel
    heads, d_v, chunk = mixer.num_heads, mixer.head_dim, mixer.chunk_size
    if mixer.kind in ("gated_deltanet", "kda"):
        d_k = mixer.key_head_dim or d_v
        per_head = 4 * chunk * d_k + chunk * (d_k + d_v) + 2 * chunk * d_v + 6 * d_k * d_v
        return conv + heads * per_head
    if mixer.kind == "lightning":
        return heads * (4 * chunk * d_v + 4 * d_v * d_v)
    if mixer.kind == "rg_lru":
        return conv + 4 * mixer.value_size * d_v + 2 * mixer.value_size
    if mixer.kind == "rwkv":
        return 24 * mixer.value_size
    return conv + 2 * mixer.value_size
