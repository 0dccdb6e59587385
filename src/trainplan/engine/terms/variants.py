"""Activation memory of the attention, routing and norm variants beyond the common layer
(terms/activations.py): JetMoE's mixture of attention heads and its routing, Doge's dynamic
mask, A.X K2's gated RMSNorms, Inkling's relative-position logits, short convolutions and
shared-expert weights, Hy-V4's hyper-connections. Each is derived from the transformers module's
forward, in bytes per token (and per key where the term grows with the sequence)."""

from __future__ import annotations

from trainplan.engine.terms.mode import ActivationMode, eager_per_key, linear_input
from trainplan.specs.model import Attention, Block, ModelSpec


def sorted_scatter_bytes(mode: ActivationMode, top_k: int, hidden: int) -> float:
    """JetMoE's routing (transformers 5.24 models/jetmoe/modeling_jetmoe.py, JetMoeTopKGating and
    the index_add that merges the experts' outputs), per token: the fp32 softmax over the top-k
    logits (4k), their int64 indices (8k), the sorted expert order and the token index it gives
    (2 x 8k), the gathered gates (a k), and the weighted expert outputs, which index_add keeps as
    its source (a h per routed copy)."""
    a = mode.activation_bytes
    return top_k * (4 + 8 + 16 + a + a * hidden)


def mixture_of_heads_bytes(
    model: ModelSpec, attention: Attention, mode: ActivationMode
) -> tuple[float, float]:
    """JetMoE's mixture of attention heads (transformers 5.24 models/jetmoe/modeling_jetmoe.py,
    JetMoeAttention.forward with JetMoeMoA.map / reduce), per token, k = top-k, K = kv heads x
    head_dim, H = k x kv heads:
    the normed input, read by the router and kv_proj, is kept as any linear input; the routing and
    the merge of the output projections (`sorted_scatter_bytes`); each routed copy keeps its
    gathered input (input_linear's weight gradient, h wide), its query, which map's index_add keeps
    as its source (K), its gathered attention output (output_linear's input, K) and its expert
    output (for the gate product, h). RoPE multiplies by cos and sin, keeping nothing per token
    (the cos / sin tables it keeps are per position, not per sample, and left out); keys and
    values are repeated k times before the kernel, so it keeps q, k and v of H x head_dim each,
    and (flash / SDPA) its output and fp32 logsumexp, or (eager) the scores per key."""
    a, hidden, heads = mode.activation_bytes, model.hidden_size, attention.num_heads
    q_name, kv_name, _, o_name = attention.names
    top_k, width, kv = attention.routed_top_k, heads * attention.head_dim, attention.kv_size
    router = q_name.rsplit(".", 1)[0] + ".router.layer"
    kept = linear_input(mode, hidden, [router, kv_name]) + sorted_scatter_bytes(mode, top_k, hidden)
    kept += top_k * (
        linear_input(mode, hidden, [q_name]) + a * kv + linear_input(mode, kv, [o_name]) + a * hidden
    )
    kept += a * 3 * width  # rotated q, repeated k and v: the kernel's inputs
    per_key = 0.0
    if mode.attention == "eager":
        per_key = eager_per_key(attention, mode)
    else:
        kept += a * width + 4 * heads  # kernel output + fp32 logsumexp
    if mode.dropout:
        kept += 2 * hidden  # dropout masks after attention and after the MLP (bool)
    return kept, per_key


def dynamic_mask_bytes(attention: Attention, mode: ActivationMode) -> tuple[float, float]:
    """Doge's dynamic mask (transformers 5.24 models/doge/modeling_doge.py, DogeAttention.forward
    and prepare_dynamic_mask): (bytes per token, bytes per key and token).

    Per token: dt_proj's input, the value states (16-bit already, so autocast makes no copy; the
    kernel's own v when no head is repeated and the weight trains), then softplus keeps its
    input, the product with A the softplus output and exp its output, one value per kv head each
    (3 a kv_heads).
    Per key: the causal mask's fill pattern (bool, shared by the heads) and the score bias the
    masked SDPA kernel keeps for its gradient, repeated to every head (a x heads); eager attention
    adds the bias to the scores, which keeps nothing. Past keep_window_size keys a top-k window
    adds its own masks; those are not counted (the result says so)."""
    if not attention.dynamic_mask:
        return 0.0, 0.0
    a, kv_heads = mode.activation_bytes, attention.num_kv_heads
    values = kv_heads * attention.v_head_dim
    shared = attention.num_heads == kv_heads and mode.weights_trainable
    dt_input = 0.0 if shared else linear_input(mode, values, ["dt_proj"])
    bias = 0 if mode.attention == "eager" else a * attention.num_heads
    return dt_input + 3 * a * kv_heads, float(1 + bias)


def gated_norm_bytes(model: ModelSpec, rank: int, mode: ActivationMode) -> float:
    """What a gated RMSNorm keeps beyond its norm and its fc1 / fc2 inputs (A.X K2's
    AXK2GatedRMSNorm, transformers 5.24 models/axk2/modeling_axk2.py: y x sigmoid(fc2(silu(fc1(y))))
    in fp32): SiLU's input (a x rank), the fp32 sigmoid the product keeps (4 h), and y itself for
    the product where fc1 keeps no such copy (frozen, or its own half copy under autocast)."""
    hidden = model.hidden_size
    own_y = 0 if mode.weights_trainable and not mode.casts_inputs else mode.residual_bytes * hidden
    return mode.activation_bytes * rank + 4 * hidden + own_y


def relative_logits_bytes(attention: Attention, mode: ActivationMode) -> tuple[float, float]:
    """Inkling's relative-position logits (transformers 5.24 models/inkling/modeling_inkling.py,
    InklingAttention.forward and InklingRelativeLogits.forward), as (per token, per key) bytes.

    Per token: `relative_states @ proj` keeps relative_states, r_proj's output (a x heads x
    relative_width), for the gradient of the trained bias bank, and `gather` keeps its input, the
    logits of every head over the extent (a x heads x extent); r_proj's input is the normed hidden
    state q/k/v read, counted with theirs (`attention_bytes`).
    Per key: `gather` keeps its int64 index (8) and `masked_fill` its bool mask (1), the clamped
    distance of each query-key pair, expanded (a view) to the heads and the batch, so counted per
    token they are exact at micro-batch 1 and an upper bound above it. Eager attention adds the
    bias to the scores, which keeps nothing more; SDPA (integrations/sdpa_attention.py,
    create_position_bias_mask) turns it into a float mask with `torch.where` over the bool causal
    mask (1), and the memory-efficient CUDA kernel keeps that mask for the bias gradient, one
    value per head (a x heads)."""
    if not attention.relative_width:
        return 0.0, 0.0
    a, heads = mode.activation_bytes, attention.num_heads
    states = a * heads * attention.relative_width if mode.weights_trainable else 0.0
    per_key = 8.0 + 1.0
    if mode.attention != "eager":
        per_key += 1.0 + a * heads
    return states + a * heads * attention.relative_extent, per_key


def short_conv_bytes(model: ModelSpec, block: Block) -> float:
    """Inkling's causal depthwise short convolutions (InklingShortConvolution.forward, run in fp32):
    each casts its input to fp32 and conv1d keeps that copy (4 B per channel) for its weight and
    input gradients; the residual add and the cast back keep nothing. Per token: the key and value
    convolutions over the kv width and the two over the hidden width after attention and the MLP."""
    kv = 2 * block.attention.kv_size if block.attention is not None and block.attention.kv_conv_kernel else 0
    hidden = 2 * (block.width or model.hidden_size) if block.sublayer_conv_kernel else 0
    return 4.0 * (kv + hidden)


def short_conv_weights(block: Block, hidden: int) -> int:
    """Multiply-adds per token of Inkling's convolutions outside the linears, counted like matmul
    weights (each tap is a weight a token multiplies once; it has input and weight gradients):
    the key and value convolutions (2 kv x taps), the two sub-layer output convolutions (2 h x taps)
    and the relative logits, each head's relative_width states against the relative_width x extent
    bias bank (heads x relative_width x extent)."""
    attention = block.attention
    total = 2 * (block.width or hidden) * block.sublayer_conv_kernel
    if attention is not None:
        total += 2 * attention.kv_size * attention.kv_conv_kernel
        total += attention.num_heads * attention.relative_bias_params if attention.relative_width else 0
    return total


def scored_router_bytes(mode: ActivationMode, hidden: int, scored: int, top_k: int, shared: int) -> float:
    """Inkling's router (InklingTopkRouter.forward, in fp32), per token, E + S = `scored` experts
    and shared experts scored, k = top_k: the fp32 copy of its input F.linear keeps for the weight
    gradient (4 h, when the weight trains), the logits `gather` keeps (4 (E + S)) and the sigmoid
    output (4 (E + S)), the top-k indices (8 k), then over the k + S chosen logits `logsigmoid`'s
    input, buffer and output, `exp`'s output and the scaled weights global_scale's gradient reads
    (5 x 4 (k + S)) and the logsumexp (4). (The fp32 copy of the router weight is per layer, not
    per token, and left out.)"""
    own_input = 4 * hidden if mode.weights_trainable else 0
    return float(own_input + 8 * scored + 8 * top_k + 20 * (top_k + shared) + 4)


def shared_weight_bytes(mode: ActivationMode, inner: int, shared: int) -> float:
    """Inkling's shared experts weighted by their router scores (InklingSharedExperts.forward,
    act(gate) x up x gammas): the product before the weight, kept for the weights' gradient
    (a x the shared experts' width), and the weights themselves (a x S); the weighted product is
    the down input, kept as any."""
    return float(mode.activation_bytes * (inner + shared))


def output_scale_bytes(mode: ActivationMode, hidden: int) -> float:
    """A learned scalar on the MLP's output (InklingMLP.global_scale): the product keeps the MLP
    output for the scalar's gradient (a x h) when it trains."""
    return float(mode.activation_bytes * hidden) if mode.weights_trainable else 0.0


def hyper_connection_bytes(mode: ActivationMode, streams: int, hidden: int) -> float:
    """One of Hy-V4's hyper-connection mixers and the residual update after its sub-layer
    (transformers 5.24 models/hy_v4/modeling_hy_v4.py, HYV4HyperConnection.forward and
    HYV4DecoderLayer.forward; autocast off, fp32), per token, N streams of h:
    the streams' fp32 copy `F.linear` and the norm keep (4 N h) and 1/rms (4); the 2N mixes before
    the norm's factor (4 x 2N), and after it, for the two scales' gradients (4 x 2N, when they
    train); both sigmoid outputs (4 x 2N); the streams themselves at their dtype and the input
    weights (a N h + 4 N) for the weighted sum. The update post x sublayer + residual keeps the
    sub-layer's output in fp32 (4 h) and the output weights (4 N)."""
    mixes = 4 * 2 * streams
    scales = mixes if mode.weights_trainable else 0
    mixer = 4 * streams * hidden + 4 + mixes + scales + mixes + mode.activation_bytes * streams * hidden
    return float(mixer + 4 * streams + 4 * hidden + 4 * streams)


def hyper_head_bytes(mode: ActivationMode, streams: int, hidden: int) -> float:
    """The hyper-connection head (HYV4HyperHead.forward) before the final norm, per token: the
    streams' fp32 copy (4 N h), 1/rms (4), the N mixes before and after the norm's factor and the
    sigmoid output (3 x 4 N), the streams at their dtype and the weights for the sum (a N h + 4 N)."""
    return float(
        4 * streams * hidden + 4 + 12 * streams + mode.activation_bytes * streams * hidden + 4 * streams
    )


def hyper_connection_weights(block: Block, hidden: int) -> int:
    """Multiply-adds per token of a layer's two hyper-connection mixers, each `fn` (2N x N h) over
    the flattened streams, counted like matmul weights; their weighted sums are elementwise."""
    streams = block.hyper_streams
    return 2 * 2 * streams * streams * (block.width or hidden)


def xlnet_attention_bytes(
    model: ModelSpec, attention: Attention, mode: ActivationMode
) -> tuple[float, float]:
    """XLNet's relative attention (transformers 5.24 models/xlnet/modeling_xlnet.py,
    XLNetRelativeAttention.forward and rel_attn_core, the content stream with token_type_ids as
    the tokenizer returns them): (bytes per token, bytes per key and token). It always runs its own
    einsums, whatever attention kernel the scenario names. W = heads x head_dim.

    Per token: the layer input, read by the q, k and v einsums (as any linear input); the content
    query q + r_w_bias, k and v (3 a W), the projected relative positions k_head_r, two per token
    for the klen + qlen positions of attn_type "bi" (2 a W, for the position query's gradient).
    With trained weights also the position query q + r_r_bias (k_head_r's gradient, hence r's)
    and the segment query q + r_s_bias (seg_embed's gradient; a W each), the positions r reads
    (2 a h: autocast's copy of the fp32 sinusoids in each layer; XLNet cannot run in pure 16-bit,
    where the fp32 sinusoids meet 16-bit weights in one einsum) and the attention output o reads
    (a W). Dropout masks after the attention and after the feed-forward (bool, 2 h).
    Per key: softmax keeps its output, in fp32 (autocast runs softmax in fp32; fp32 training
    too), the value einsum its 16-bit copy (or, in fp32, the dropout output), dropout its mask
    (bool), all per head; and, over fp32 weights, autocast's per-layer copy of the one-hot
    same-segment matrix seg_mat (2 a, one per segment class; built in the weights' dtype, so over
    16-bit weights it is one tensor for all layers, 2 a per key once, left out). The rel_shift of
    the position scores (reshape, slice, index_select) and the scaled sum of the three scores keep
    nothing. In fp32 the sinusoids and seg_mat are one tensor for all layers: the positions are
    counted once outside the layers (`xlnet_outside_bytes`); seg_mat's 8 bytes per key, once, are
    left out, and so are the weight-sized copy einsum makes of o's permuted tensor (per layer, not
    per token) and rel_shift's index (8 bytes per position). Checked against the tensors autograd
    saves in fp32 on CPU (tests/test_xlnet.py); CPU autocast keeps softmax in 16 bits and dropout
    masks at the input's dtype, where CUDA keeps fp32 and bool, so a CPU trace cannot check the
    autocast terms directly."""
    a, hidden, heads = mode.activation_bytes, model.hidden_size, attention.num_heads
    width = attention.q_size
    autocast = a < 4
    # the input of q/k/v; the content query, k and v (3 a W); k_head_r (2 a W)
    kept = linear_input(mode, hidden, list(attention.names[:3])) + 5 * a * width
    if mode.weights_trainable:  # position and segment queries, r's input, o's input
        kept += 2 * a * width + (2 * a * hidden if autocast else 0) + a * width
    if mode.dropout:
        kept += 2 * hidden
    copy = a if autocast or mode.dropout else 0
    per_key = heads * (4 + copy + (1 if mode.dropout else 0)) + (2 * a if mode.casts_inputs else 0)
    return kept, float(per_key)


def xlnet_outside_bytes(model: ModelSpec, mode: ActivationMode) -> float:
    """XLNet's bytes per token outside the layers beyond the common ones: the second dropout mask
    (XLNetModel drops out the embeddings and, again, the last layer's output: bool, h) and, in
    fp32 training with trained weights, the fp32 relative positions every layer's r reads (two
    rows per token, 8 h); under autocast each layer keeps its own copy instead."""
    shared_positions = (
        2 * 4 * model.hidden_size if mode.activation_bytes == 4 and mode.weights_trainable else 0
    )
    return float((model.hidden_size if mode.dropout else 0) + shared_positions)
