"""What a model spec implies: every weight matrix of each block (named as Hugging Face names its
module), the parameters outside them, and the model's parameter counts. Exact arithmetic from
the spec's shapes; the spec types are in model.py."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from trainplan.specs.model import Attention, Block, Linear, LinearMixer, Mlp, ModelSpec, Ssm, derived


def hyper_connection_params(streams: int, hidden_size: int) -> int:
    """One hyper-connection mixer (transformers 5.24 models/hy_v4/modeling_hy_v4.py,
    HYV4HyperConnection): `fn` maps the N streams (N x h, flattened) to N input and N output
    weights (2N x N h), a bias `base` for each (2N) and two scales."""
    return 2 * streams * streams * hidden_size + 2 * streams + 2


def attention_linears(attention: Attention, hidden_size: int) -> list[Linear]:
    """The weight matrices of one attention module, named as Hugging Face names them; Qwen3-Next's
    q_proj is twice as wide (query and output gate); a per-head gate adds g_proj h -> heads."""
    bias, q, kv = attention.qkv_bias, attention.q_size, attention.kv_size
    q_name, k_name, v_name, o_name = attention.names
    width = attention.input_size or hidden_size
    if attention.routed_experts:
        return mixture_of_heads_linears(attention, width)
    if attention.kind == "xlnet":  # XLNetRelativeAttention: einsums over (h, heads, head_dim) tensors
        heads_width = attention.q_size
        return [
            Linear(q_name, "einsum", hidden_size, heads_width),
            Linear(k_name, "einsum", hidden_size, heads_width),
            Linear(v_name, "einsum", hidden_size, heads_width),
            Linear(o_name, "einsum", heads_width, hidden_size),
            Linear("r", "einsum", hidden_size, heads_width),  # projects the relative positions
        ]
    if attention.kind == "mla":
        heads, rope = attention.num_heads, attention.rope_head_dim
        nope, v_dim = attention.head_dim - rope, attention.v_head_dim
        linears: list[Linear] = []
        if attention.query_gate:  # AXK2Attention: query and output gate from both query latents
            linears += [
                Linear("q_a_proj", "q_a", hidden_size, attention.q_lora_rank, bias),
                Linear("q_gate_proj", "q_b", 2 * attention.q_lora_rank, heads * (attention.head_dim + v_dim)),
            ]
        elif attention.q_lora_rank:
            linears += [
                Linear("q_a_proj", "q_a", hidden_size, attention.q_lora_rank, bias),
                Linear("q_b_proj", "q_b", attention.q_lora_rank, heads * attention.head_dim),
            ]
        else:
            linears.append(Linear(q_name, "q", hidden_size, heads * attention.head_dim))
        linears += [
            Linear("kv_a_proj_with_mqa", "kv_a", hidden_size, attention.kv_lora_rank + rope, bias),
            Linear("kv_b_proj", "kv_b", attention.kv_lora_rank, heads * (nope + v_dim)),
            Linear(o_name, "o", heads * v_dim, hidden_size, attention.out_bias),
        ]
        if attention.gate_size:  # a gated MLA output (dots3's per-head g_proj)
            linears.insert(-1, Linear(attention.gate_name, "attn_gate", hidden_size, attention.gate_size))
        return linears + _head_gate(attention, hidden_size) + indexer_linears(attention, hidden_size)
    v = attention.num_kv_heads * attention.v_head_dim  # = kv unless values are narrower (MiMo-V2)
    mask = _dynamic_mask(attention, v) + _relative_projection(attention, width)
    out = Linear(o_name, "o", attention.num_heads * attention.v_head_dim, hidden_size, attention.out_bias)
    # gated attention (Qiu et al. 2025, "Gated Attention for Large Language Models"): the output is
    # multiplied by an activation of gate_proj(x), one gate per head or per channel
    gate = (
        [Linear(attention.gate_name, "attn_gate", width, attention.gate_size)] if attention.gate_size else []
    )
    if attention.kv_shared:  # Gemma4TextAttention with is_kv_shared_layer: q_proj and o_proj only
        return [Linear(q_name, "q", width, q, bias), *gate, out, *_head_gate(attention, width)]
    if attention.fused_qkv:
        return [
            Linear(attention.fused_qkv, "qkv", width, q + kv + v, bias),
            *gate,
            out,
            *_head_gate(attention, width),
        ]
    return [
        Linear(q_name, "q", width, 2 * q if attention.output_gate else q, bias),
        Linear(k_name, "k", width, kv, bias and attention.k_bias),
        Linear(v_name, "v", width, v, bias),
        *mask,
        *gate,
        out,
        *_head_gate(attention, width),
    ]


def _dynamic_mask(attention: Attention, values: int) -> list[Linear]:
    """Doge's dynamic mask attention (Shi et al. 2025, "Trainable Dynamic Mask Sparse Attention",
    arXiv 2508.02124; transformers' DogeAttention): dt_proj maps the value states (kv heads x
    head_dim) to one logit per kv head, with the attention bias setting; exp(A x softplus(dt))
    becomes the score bias of each key."""
    if not attention.dynamic_mask:
        return []
    return [Linear("dt_proj", "attn_mask", values, attention.num_kv_heads, attention.qkv_bias)]


def _relative_projection(attention: Attention, width: int) -> list[Linear]:
    """Inkling's r_proj (transformers 5.24 models/inkling/modeling_inkling.py, InklingAttention):
    h -> heads x relative_width, each head's mix of the relative-position bias profiles."""
    if not attention.relative_width:
        return []
    return [Linear("r_proj", "attn_rel", width, attention.num_heads * attention.relative_width)]


def mixture_of_heads_linears(attention: Attention, hidden_size: int) -> list[Linear]:
    """JetMoE's mixture of attention heads (Shen et al. 2024, "JetMoE", arXiv 2404.07413, its
    attention experts; transformers' JetMoeAttention and JetMoeMoA): each of E experts holds a query
    projection h -> K and an output projection K -> h (K = kv heads x head_dim, stored as one
    E x out x in parameter each), a router h -> E picks top-k of them per token, and one kv_proj
    h -> 2K gives the keys and values all experts share. Routed with the same expert count and
    top-k as the layer's MoE MLP (JetMoE reads both from num_local_experts and
    num_experts_per_tok), so the routed copies are `expert` linears."""
    q_name, kv_name, _, o_name = attention.names
    experts, kv = attention.routed_experts, attention.kv_size
    return [
        Linear(q_name, "q", hidden_size, kv, copies=experts, expert=True),
        Linear(kv_name, "qkv", hidden_size, 2 * kv),
        Linear(q_name.rsplit(".", 1)[0] + ".router.layer", "router", hidden_size, experts),
        Linear(o_name, "o", kv, hidden_size, copies=experts, expert=True),
    ]


def gated_norm_linears(names: tuple[str, ...], rank: int, hidden_size: int) -> tuple[Linear, ...]:
    """The low-rank gates of gated RMSNorms (A.X K2's AXK2GatedRMSNorm, after Megatron's
    GatedNormWrapper; transformers 5.24 models/axk2/modeling_axk2.py): per norm `name`, fc1
    h -> rank and fc2 rank -> h, without biases."""
    return tuple(
        linear
        for name in names
        for linear in (
            Linear(f"{name}.mlp.fc1", "proj", hidden_size, rank),
            Linear(f"{name}.mlp.fc2", "proj", rank, hidden_size),
        )
    )


def _head_gate(attention: Attention, width: int) -> list[Linear]:
    """The per-head output gate's projection (g_proj, one sigmoid logit per head), if any."""
    return [Linear("g_proj", "attn_gate", width, attention.num_heads)] if attention.head_gate else []


def indexer_linears(attention: Attention, hidden_size: int) -> list[Linear]:
    """The lightning indexer of DeepSeek sparse attention (DeepSeek-V3.2-Exp report, sec. 2.1;
    transformers' DeepseekV32Indexer): wq_b from the query latent to index_heads x index_head_dim,
    wk from the hidden state to one index_head_dim key, weights_proj to one weight per index head."""
    if not attention.index_heads:
        return []
    dim, heads = attention.index_head_dim, attention.index_heads
    return [
        Linear("indexer.wq_b", "indexer", attention.q_lora_rank, heads * dim),
        Linear("indexer.wk", "indexer", hidden_size, dim),
        Linear("indexer.weights_proj", "indexer", hidden_size, heads),
    ]


def attention_extra_params(attention: Attention) -> int:
    """Non-matrix attention parameters: q/k norms (the query's alone in a KV-shared layer), MLA's
    latent norms, relative position bias, one sink logit per head, a gate bias per head, the DSA
    indexer's key LayerNorm (weight and bias), the dynamic mask's A (one per kv head), the key and
    value short convolutions' depthwise taps (kv width x taps each, no bias: InklingShortConvolution)."""
    params = attention.relative_bias_params + (attention.num_heads if attention.sinks else 0)
    params += 2 * attention.kv_size * attention.kv_conv_kernel
    params += attention.num_kv_heads if attention.dynamic_mask else 0  # Doge's A, one per kv head
    params += attention.num_heads if attention.gate_bias else 0
    per_norm = 2 if attention.qk_norm_bias else 1
    if attention.qk_norm == "head":
        params += (1 if attention.kv_shared else 2) * attention.head_dim * per_norm
    elif attention.qk_norm == "full":
        params += (attention.q_size + attention.own_kv_size) * per_norm
    if attention.kind == "mla":
        params += attention.kv_lora_rank + attention.q_lora_rank
    return params + 2 * attention.index_head_dim


def mlp_linears(mlp: Mlp, hidden_size: int) -> list[Linear]:
    """The weight matrices of one MLP: experts (with copies), shared experts, the router."""
    gate_name, up_name, down_name = mlp.names
    if not mlp.is_moe:
        return _ffn(mlp, hidden_size, mlp.intermediate_size, 1, False, (gate_name, up_name, down_name))
    linears = _ffn(mlp, hidden_size, mlp.intermediate_size, mlp.num_experts, True, mlp.names)
    routed = mlp.num_experts + mlp.zero_experts  # the experts the router picks from
    if mlp.zero_experts:
        # LongcatFlashExperts allocates gate_up_proj for every expert the router can pick, identity
        # ones included, and down_proj for the real ones only (models/longcat_flash/modeling_longcat_flash.py)
        linears = [replace(lin, copies=routed) if lin.role != "down" else lin for lin in linears]
    scored = routed + (mlp.num_shared_experts if mlp.shared_scores else 0)  # Inkling scores shared ones too
    linears.append(
        Linear("gate", "router", hidden_size, scored, mlp.router_bias, in_all_linear=mlp.expert_adapters)
    )
    if mlp.num_shared_experts:
        shared = mlp.shared_intermediate_size * mlp.num_shared_experts
        names = ("shared_experts.gate_proj", "shared_experts.up_proj", "shared_experts.down_proj")
        linears += _ffn(mlp, hidden_size, shared, 1, False, names, mlp.bias or mlp.shared_bias)
    if mlp.shared_expert_gate:
        linears.append(Linear("shared_expert_gate", "router", hidden_size, 1, in_all_linear=True))
    return linears


def _ffn(
    mlp: Mlp,
    hidden: int,
    inner: int,
    copies: int,
    expert: bool,
    names: tuple[str, str, str],
    bias: bool | None = None,
) -> list[Linear]:
    gate_name, up_name, down_name = names
    bias = mlp.bias if bias is None else bias
    adaptable = mlp.expert_adapters or not expert
    converted = mlp.expert_adapters and expert
    down = Linear(down_name, "down", inner, hidden, bias, copies, expert, adaptable)
    if not mlp.gated:
        return [Linear(up_name, "up", hidden, inner, bias, copies, expert, adaptable, converted), down]
    if mlp.fused_gate_up:
        return [
            Linear(up_name, "gate_up", hidden, 2 * inner, bias, copies, expert, adaptable, converted),
            down,
        ]
    return [
        Linear(gate_name, "gate", hidden, inner, bias, copies, expert, adaptable, converted),
        Linear(up_name, "up", hidden, inner, bias, copies, expert, adaptable, converted),
        down,
    ]


def ssm_linears(ssm: Ssm, hidden_size: int) -> list[Linear]:
    """The weight matrices of one Mamba / Mamba-2 mixer, named as Hugging Face names them.

    Mamba: in_proj h -> 2 inner (x and gate z); x_proj inner -> dt_rank + 2 state (dt, B, C);
    dt_proj dt_rank -> inner, always with a bias; out_proj inner -> h.
    Mamba-2: in_proj h -> z (inner) + x, B, C (conv channels) + dt (one per head); out_proj.
    Zamba's multi-head Mamba: in_proj and out_proj only (its per-head projections are
    `ssm_head_weights`).
    (transformers' MambaMixer, Mamba2Mixer and ZambaMambaMixer; Gu & Dao 2023, alg. 2; Dao & Gu
    2024, sec. 7.)
    """
    bias, inner = ssm.proj_bias, ssm.inner_size
    if ssm.kind == "mamba" and ssm.num_heads:  # Zamba: x_proj and dt_proj are per-head tensors
        return [
            Linear("in_proj", "ssm_in", hidden_size, 2 * inner, bias),
            Linear("out_proj", "ssm_out", inner, hidden_size, bias),
        ]
    if ssm.kind == "mamba":
        return [
            Linear("in_proj", "ssm_in", hidden_size, 2 * inner, bias),
            Linear("x_proj", "ssm_x", inner, ssm.dt_rank + 2 * ssm.state_size),
            Linear("dt_proj", "ssm_dt", ssm.dt_rank, inner, True),
            Linear("out_proj", "ssm_out", inner, hidden_size, bias),
        ]
    return [
        Linear("in_proj", "ssm_in", hidden_size, inner + ssm.conv_channels + ssm.num_heads, bias),
        Linear("out_proj", "ssm_out", inner, hidden_size, bias),
    ]


def ssm_head_weights(ssm: Ssm) -> int:
    """Weights of Zamba's per-head projections, batched matmuls of nn.Parameter tensors
    (models/zamba/modeling_zamba.py, ZambaMambaMixer): x_proj_weight, H heads x (R + 2N) x D / H,
    and dt_proj_weight, H x D / H x R -- (R + 2N) D + R D in all, as many as Mamba's x_proj and
    dt_proj matrices and as many multiply-accumulates a token; 0 for other mixers."""
    if ssm.kind != "mamba" or not ssm.num_heads:
        return 0
    return (ssm.dt_rank + 2 * ssm.state_size) * ssm.inner_size + ssm.dt_rank * ssm.inner_size


def ssm_extra_params(ssm: Ssm) -> int:
    """Non-matrix SSM parameters: the depthwise conv (channels x kernel, + bias), A_log and D
    (per channel x state and per channel for Mamba; per head for Mamba-2), Mamba-2's dt_bias
    and gated RMSNorm, Jamba's dt/B/C RMSNorms; Zamba's per-head projection weights and its
    dt_proj_bias (one per channel)."""
    conv = ssm.conv_channels * ssm.conv_kernel + (ssm.conv_channels if ssm.conv_bias else 0)
    if ssm.kind == "mamba":
        norms = ssm.dt_rank + 2 * ssm.state_size if ssm.dt_bc_norms else 0
        heads = ssm_head_weights(ssm) + ssm.inner_size if ssm.num_heads else 0
        return conv + ssm.inner_size * ssm.state_size + ssm.inner_size + norms + heads
    return conv + 3 * ssm.num_heads + (ssm.inner_size if ssm.gated_norm else 0)


def mixer_linears(mixer: LinearMixer, hidden_size: int) -> list[Linear]:
    """The weight matrices of one linear mixer, named as Hugging Face names them (K = key_size,
    V = value_size, H = value heads, r = gate_rank).

    Gated DeltaNet: in_proj_qkvz h -> 2K + 2V (q, k, v and the output gate z) and in_proj_ba
    h -> 2H (the write strength beta and the decay input a), or Qwen3.5's in_proj_qkv (2K + V),
    in_proj_z (V), in_proj_b and in_proj_a (H each), or OLMo-Hybrid's q/k/v/a/b/g_proj (the
    same widths, one module each); out_proj (o_proj) V -> h.
    Lightning: qkv_proj h -> 3V, output_gate h -> V, out_proj V -> h.
    Short conv: in_proj h -> 3h (B, C, x), out_proj h -> h, both with the conv's bias setting.
    KDA: q/k/v_proj h -> K, K, V; the forget gate f_a_proj h -> r, f_b_proj r -> K; b_proj
    h -> H; the output gate g_a_proj h -> r, g_b_proj r -> V; o_proj V -> h (Ling 3.0, r = 0:
    full-rank f_proj h -> K and g_proj h -> V).
    RG-LRU (Griffin's recurrent block): linear_y h -> V (the GeLU branch), linear_x h -> V,
    linear_out V -> h, all with biases. RWKV time mixing: key, value, receptance h -> V, output
    V -> h (V = attention_hidden_size).
    """
    keys, values, heads, h = mixer.key_size, mixer.value_size, mixer.num_heads, hidden_size
    if mixer.kind == "gated_deltanet":
        if mixer.projections == "separate":
            return [
                Linear("q_proj", "mixer_in", h, keys),
                Linear("k_proj", "mixer_in", h, keys),
                Linear("v_proj", "mixer_in", h, values),
                Linear("a_proj", "mixer_gate", h, heads),
                Linear("b_proj", "mixer_gate", h, heads),
                Linear("g_proj", "mixer_gate", h, values),
                Linear("o_proj", "mixer_out", values, h),
            ]
        out = Linear("out_proj", "mixer_out", values, h)
        if mixer.projections == "split":
            return [
                Linear("in_proj_qkv", "mixer_in", h, 2 * keys + values),
                Linear("in_proj_z", "mixer_gate", h, values),
                Linear("in_proj_b", "mixer_gate", h, heads),
                Linear("in_proj_a", "mixer_gate", h, heads),
                out,
            ]
        return [
            Linear("in_proj_qkvz", "mixer_in", h, 2 * keys + 2 * values),
            Linear("in_proj_ba", "mixer_gate", h, 2 * heads),
            out,
        ]
    if mixer.kind == "lightning":
        return [
            Linear("qkv_proj", "mixer_in", h, 3 * values),
            Linear("output_gate", "mixer_gate", h, values),
            Linear("out_proj", "mixer_out", values, h),
        ]
    if mixer.kind == "short_conv":
        return [
            Linear("in_proj", "mixer_in", h, 3 * values, mixer.conv_bias),
            Linear("out_proj", "mixer_out", values, h, mixer.conv_bias),
        ]
    if mixer.kind == "rwkv":
        return [
            Linear("key", "mixer_in", h, values),
            Linear("value", "mixer_in", h, values),
            Linear("receptance", "mixer_gate", h, values),
            Linear("output", "mixer_out", values, h),
        ]
    if mixer.kind == "rg_lru":
        return [
            Linear("linear_y", "mixer_gate", h, values, True),
            Linear("linear_x", "mixer_in", h, values, True),
            Linear("linear_out", "mixer_out", values, h, True),
        ]
    assert mixer.kind == "kda", mixer.kind
    rank = mixer.gate_rank
    if not rank:  # Ling 3.0's full-rank forget and output gates
        return [
            Linear("q_proj", "mixer_in", h, keys),
            Linear("k_proj", "mixer_in", h, keys),
            Linear("v_proj", "mixer_in", h, values),
            Linear("f_proj", "mixer_gate", h, keys),
            Linear("b_proj", "mixer_gate", h, heads),
            Linear("g_proj", "mixer_gate", h, values),
            Linear("o_proj", "mixer_out", values, h),
        ]
    return [
        Linear("q_proj", "mixer_in", h, keys),
        Linear("k_proj", "mixer_in", h, keys),
        Linear("v_proj", "mixer_in", h, values),
        Linear("f_a_proj", "mixer_gate", h, rank),
        Linear("f_b_proj", "mixer_gate", rank, keys),
        Linear("b_proj", "mixer_gate", h, heads),
        Linear("g_a_proj", "mixer_gate", h, rank),
        Linear("g_b_proj", "mixer_gate", rank, values),
        Linear("o_proj", "mixer_out", values, h),
    ]


def mixer_extra_params(mixer: LinearMixer) -> int:
    """Non-matrix parameters of one linear mixer: the depthwise conv (channels x taps, + bias),
    Gated DeltaNet's A_log and dt_bias (one per value head) and its gated RMSNorm (one head wide,
    shared by the heads); lightning attention's RMSNorm over all heads; KDA's A_log (per head),
    dt_bias (per key channel) and gated RMSNorm (one head wide); RG-LRU's recurrence parameter
    (per channel) and its input and recurrence gates, block-diagonal: H blocks of (V / H)^2
    weights plus a bias each; RWKV's time_decay and time_first (per channel; its token-shift mix
    vectors are hidden-wide and counted with the block)."""
    conv = mixer.conv_channels * mixer.conv_kernel + (mixer.conv_channels if mixer.conv_bias else 0)
    if mixer.kind == "gated_deltanet":
        return conv + 2 * mixer.num_heads + mixer.head_dim
    if mixer.kind == "lightning":
        return mixer.value_size
    if mixer.kind == "kda":
        return conv + mixer.num_heads + mixer.key_size + mixer.head_dim
    if mixer.kind == "rwkv":
        return 2 * mixer.value_size
    if mixer.kind == "rg_lru":
        block = mixer.value_size // mixer.num_heads
        return conv + mixer.value_size + 2 * (mixer.num_heads * block * block + mixer.value_size)
    return conv


def weight_linears(model: ModelSpec) -> tuple[tuple[int, Linear], ...]:
    """(copies in the model, matrix) for every weight matrix: a layer group's `count` times, a
    shared block's (Zamba2) once per copy however many layers run it. Compute and adapters
    follow the layers instead (`block_linears` x count)."""
    return derived(model, _weight_linears)


def _weight_linears(model: ModelSpec) -> tuple[tuple[int, Linear], ...]:
    weights: list[tuple[int, Linear]] = []
    shared_seen = False
    for block in model.blocks:
        if block.rerun:  # its weights are an earlier block's
            continue
        linears = block_linears(block, model.hidden_size)
        if not block.shared_copies:
            weights += [(block.count, linear) for linear in linears]
            continue
        own = [linear for linear in linears if linear in block.linears]
        if not shared_seen:
            weights += [(block.shared_copies, linear) for linear in linears if linear not in own]
            shared_seen = True
        weights += [(block.count, linear) for linear in own]
    return tuple(weights)


@lru_cache(maxsize=4096)
def block_linears(block: Block, hidden_size: int) -> tuple[Linear, ...]:
    """All weight matrices of one layer of `block`, in forward order."""
    hidden_size = block.width or hidden_size
    linears: list[Linear] = []
    if block.attention is not None:
        linears += attention_linears(block.attention, hidden_size)
    if block.ssm is not None:
        linears += ssm_linears(block.ssm, hidden_size)
    if block.mixer is not None:
        linears += mixer_linears(block.mixer, hidden_size)
    if block.cross_attention is not None:
        linears += attention_linears(block.cross_attention, hidden_size)
    if block.mlp is not None:
        linears += mlp_linears(block.mlp, hidden_size)
    return (*linears, *block.linears)


def block_params(block: Block, model: ModelSpec) -> int:
    """Parameters of one layer of `block`: matrices, norms, attention and SSM extras; only its
    own extra linears for a layer running a shared block (those weights are model extras); none
    for a later pass over an earlier block's layers."""
    if block.rerun:
        return 0
    if block.shared_copies:
        return sum(linear.params for linear in block.linears)
    matrices = sum(linear.params for linear in block_linears(block, model.hidden_size))
    extra = 0 if block.attention is None else attention_extra_params(block.attention)
    if block.ssm is not None:
        extra += ssm_extra_params(block.ssm)
    if block.mixer is not None:
        extra += mixer_extra_params(block.mixer)
    if block.mlp is not None:
        extra += block.mlp.activation_params + (1 if block.mlp.output_scale else 0)
    extra += 2 * model.hidden_size * block.sublayer_conv_kernel  # Inkling's attn_sconv, mlp_sconv
    if block.hyper_streams:  # one hyper-connection mixer before attention, one before the MLP
        extra += 2 * hyper_connection_params(block.hyper_streams, model.hidden_size)
    if block.cross_attention is not None:
        extra += attention_extra_params(block.cross_attention)
    return matrices + extra + block.extra_params + block.norms * model.norm_params


def block_active_params(block: Block, model: ModelSpec) -> int:
    """Parameters one token touches in one layer: routed experts count top-k of them."""
    total = block_params(block, model)
    mlp = block.mlp
    if mlp is None or not mlp.is_moe:
        return total
    experts = [linear for linear in block_linears(block, model.hidden_size) if linear.expert]
    expert_params = sum(linear.params for linear in experts)
    return (
        total
        - expert_params
        + sum(linear.params // linear.copies for linear in experts) * mlp.experts_per_token
    )


def embedding_params(model: ModelSpec) -> int:
    """Token embedding (vocab x width) plus learned positions (positions x width); the width is
    the hidden size, or the embedding size of a factorised embedding (ELECTRA)."""
    return (model.vocab_size + model.learned_positions) * model.embedding_width


def head_params(model: ModelSpec) -> int:
    """The LM head: vocab x width (the width it reads) when untied, nothing extra when tied to
    the embedding; plus a vocab-sized bias where the head has one (GPT-J, CodeGen, Phi-1/2).
    A score head (`head_outputs`) is its own outputs x width matrix."""
    bias = model.head_rows if model.head_bias else 0
    return bias + (0 if model.tied_embeddings else model.head_rows * model.head_width)


def total_params(model: ModelSpec) -> int:
    """Every parameter of the model, tied weights counted once."""
    layers = sum(block.count * block_params(block, model) for block in model.blocks)
    extras = sum(extra.params for extra in model.extras)
    return (
        embedding_params(model) + head_params(model) + layers + model.final_norms * model.norm_params + extras
    )
