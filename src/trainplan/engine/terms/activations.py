"""Activation memory: the tensors autograd saves for the backward pass, per token and layer.

Follows the method of Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", sec. 4.1: count every tensor a layer keeps for backward), but derived for
the real architecture instead of the fixed 34 + 5as/h constant of their GPT layer: GQA widths,
gated MLP width, qk-norms, MoE routing, flash vs materialised attention scores, norms computed
in fp32 as Hugging Face implements them, and which inputs frozen (LoRA) weights do not need.
Tensor parallelism shards the head/intermediate-sized tensors; sequence parallelism also shards
the hidden-sized ones (their sec. 4.2.2). Full checkpointing keeps one layer input per layer and
recomputes the layer in backward (Chen et al. 2016); selective recomputes only core attention.
All values are bytes per token unless named otherwise.

Compiled layers (`ActivationMode.compiled`, torch.compile of each block as torchtune and
torchtitan apply it): AOTAutograd's min-cut partitioner decides what the forward saves
(torch/_functorch/partitioners.py, torch 2.13.0: `min_cut_rematerialization_partition`, its
`should_ban_recomputation` and `get_default_op_list`). Its rules, and what follows from them:
1. matmuls and the SDPA kernels are "compute intensive" and never recomputed; an op outside the
   recomputable allow-list is never recomputed (`ban_recompute_not_in_allowlist`);
2. a tensor that a non-fusible backward op reads (a matmul's input, needed for its weight
   gradient) is "materialized in backward" and saved as it is: every linear input stays;
3. everything else on the allow-list (casts, pow, mean, rsqrt, mul, silu, the RoPE slices) is
   recomputed from the cheapest saved frontier, which the max-flow min cut finds;
4. AOTAutograd first runs CSE over the joint graph (functorch config `cse`), so the identical
   casts autocast or peft make of one tensor, one per consumer, become one.
So: an RMSNorm keeps its input and the fp32 1/rms, not its fp32 copy or its normalised output;
a SwiGLU keeps gate and up, not silu(gate); qk-norms keep the projection outputs; one cast copy
per input tensor. Attention, RoPE (its q and k are SDPA inputs), LayerNorm, dropout masks and
eager softmax keep what they keep in eager. Checked per layer against an AOTAutograd trace of
transformers' Llama and Qwen3 decoder layers (tests/measure/test_compiled_trace.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainplan.engine.terms.kernels import (
    fused_glu_bytes,
    fused_layer_kernels,
    fused_lora,
    fused_rms_norm_bytes,
)
from trainplan.engine.terms.mode import ActivationMode, eager_per_key, linear_input
from trainplan.engine.terms.savers import lora_dropout_input_bytes
from trainplan.specs.model import Attention, Block, Mlp, ModelSpec
from trainplan.specs.weights import block_linears

# the mode and the two shared rules live in terms/mode.py; they are named here too for callers
__all__ = [
    "ActivationMode",
    "LayerActivations",
    "attention_bytes",
    "block_norm_bytes",
    "eager_per_key",
    "grad_carrying_blocks",
    "layer_activations",
    "layer_working_bytes",
    "linear_input",
    "mlp_bytes",
    "outside_layers",
]


@dataclass(frozen=True)
class LayerActivations:
    """Saved bytes of one layer for one token; `scores_per_key` scales with sequence length."""

    norms: float
    attention: float
    mlp: float
    scores_per_key: float

    def per_token(self, seq_len: int) -> float:
        """Everything one layer keeps for one token at this sequence length."""
        return self.norms + self.attention + self.mlp + self.scores_per_key * seq_len


def _norm_bytes(model: ModelSpec, width: int, mode: ActivationMode, first: bool = True) -> float:
    """A norm over `width` channels: HF RMSNorm keeps the fp32 input (4 B) and 1/rms (4 B per
    row); the normalised output is kept only when the norm weight is trained (never for an
    RMSNorm without a weight, HRM's: x.float() x rsqrt(mean(x^2) + eps)). LayerNorm keeps
    its input at the residual dtype plus mean and rstd (a parameter-free one keeps the same).

    Liger's and Unsloth's RMSNorm keep the input at its dtype and 1/rms (terms/kernels.py);
    their autograd functions are opaque to torch.compile, so they decide what a norm keeps.

    Compiled (module docstring, rules 2-3): the fp32 copy and the normalised output are
    recomputed from the input and the saved 1/rms. The block's first norm keeps the block input
    (residual dtype); a later norm's input is the residual sum of a matmul output, and the cut
    saves that matmul output at the compute dtype instead (the block input is saved already)."""
    if model.norm not in ("rmsnorm", "rmsnorm-no-weight"):
        return mode.residual_bytes * width + 8
    if fused_layer_kernels(mode):
        return fused_rms_norm_bytes(mode, width)
    if mode.compiled:
        return (mode.residual_bytes if first else mode.activation_bytes) * width + 4
    trained = mode.weights_trainable and model.norm == "rmsnorm"  # a weightless one multiplies nothing
    kept_output = mode.residual_bytes * width if trained else 0
    return 4 * width + 4 + kept_output


def block_norm_bytes(model: ModelSpec, count: int, width: int, mode: ActivationMode) -> float:
    """Saved bytes of a block's `count` norms over `width` channels (`_norm_bytes`)."""
    if count == 0:
        return 0.0
    return _norm_bytes(model, width, mode) + (count - 1) * _norm_bytes(model, width, mode, first=False)


def attention_bytes(model: ModelSpec, attention: Attention, mode: ActivationMode) -> tuple[float, float]:
    """(projections + rope + kernel inputs and output, scores per key) bytes per token."""
    if attention.routed_experts:
        from trainplan.engine.terms.variants import mixture_of_heads_bytes

        return mixture_of_heads_bytes(model, attention, mode)
    if attention.kind == "xlnet":
        from trainplan.engine.terms.variants import xlnet_attention_bytes

        return xlnet_attention_bytes(model, attention, mode)
    a = mode.activation_bytes
    # a KV-shared layer projects, norms and rotates queries only; the keys and values its kernel
    # reads are tensors the producing layer (or the backbone) already keeps (Gemma4TextAttention)
    q, kv = attention.q_size, attention.own_kv_size
    v_width = (
        attention.num_heads if attention.kind == "mla" else attention.num_kv_heads
    ) * attention.v_head_dim
    v_width = 0 if attention.kv_shared else v_width
    names = list(attention.names[:3]) if not attention.fused_qkv else [attention.fused_qkv]
    names = names[:1] if attention.kv_shared else names
    names += [attention.gate_name] if attention.gate_size else []
    names += ["r_proj"] if attention.relative_width else []  # Inkling's relative-logit mix
    if attention.kind == "mla":
        names = ["q_a_proj" if attention.q_lora_rank else attention.names[0], "kv_a_proj_with_mqa"]
        names += [attention.gate_name] if attention.gate_size else []
        latent = attention.q_lora_rank + attention.kv_lora_rank
        kept = linear_input(mode, model.hidden_size, names) + a * latent + 8 * 2
        if attention.query_gate:
            # AXK2Attention: q_gate_proj reads both query latents (one more q latent), and its gate
            # half's fp32 sigmoid and the gated product (o_proj's input) are kept
            gated = attention.num_heads * attention.v_head_dim
            kept += a * attention.q_lora_rank + 4 * gated + linear_input(mode, gated, [attention.names[3]])
        kv = q  # MLA expands keys to every head
        v_width = attention.num_heads * attention.v_head_dim
    elif fused_lora(mode, names):  # Unsloth's LoRA_QKV keeps its input once
        kept = float(a * (attention.input_size or model.hidden_size))
    else:
        kept = linear_input(mode, attention.input_size or model.hidden_size, names)
    if attention.gate_size:
        # gated attention: the gate's activation output and the gated product (the out-projection's
        # input, no longer the kernel output itself) are kept for backward
        kept += a * (attention.gate_size + attention.num_heads * attention.v_head_dim)
    if attention.qk_norm != "none":
        # eager: the fp32 inputs, 1/rms per head, and with trained norm weights the normalised
        # output at the projection's dtype (as `_norm_bytes`); compiled: the projections'
        # outputs only (the rest is recomputed from them, module docstring rule 3)
        norm_input = a if mode.compiled else 4 + (a if mode.weights_trainable else 0)
        norm_rows = attention.num_heads + (0 if attention.kv_shared else attention.num_kv_heads)
        kept += norm_input * (q + kv) + 4 * norm_rows
    # rotated q and k, and v, are the saved inputs of the attention kernel
    core_inputs = a * (q + kv + v_width)
    if attention.dynamic_mask:  # with a mask, SDPA gets k and v repeated to every head (sdpa_attention.py)
        core_inputs = a * (q + 2 * attention.num_heads * attention.head_dim)
    output = a * attention.num_heads * (attention.v_head_dim or attention.head_dim)
    if mode.attention == "eager":
        # q @ k^T on heads-expanded k/v, fp32 softmax kept, its half copy kept for probs @ v
        core_inputs = a * (q + 2 * attention.num_heads * attention.head_dim)
        # (Gemma 2's score soft-capping keeps its tanh output too)
        per_key = eager_per_key(attention, mode)
        core = 0.0  # eager keeps no kernel output
    else:
        per_key = 0.0
        core = output + 4 * attention.num_heads  # kernel output + fp32 logsumexp
    # The kernel output is also the out-projection's input (a 16-bit tensor, so autocast makes
    # no copy); only an fp32 LoRA adapter on a 16-bit stream keeps a copy of its own.
    o_name = attention.names[3]
    adapted_o = not mode.weights_trainable and o_name in mode.lora_targets
    adapter = mode.adapter_bytes
    o_copy = adapter * output / a if adapted_o and not mode.casts_inputs and a < adapter else 0.0
    if adapted_o and mode.lora_dropout:
        o_copy = lora_dropout_input_bytes(a, mode.casts_inputs, int(output // a), adapter)
    if fused_lora(mode, [o_name]):  # Unsloth's LoRA_W keeps a view of the kernel output
        o_copy = 0.0
    if mode.attention == "eager":
        # eager keeps no kernel output; the merged heads are kept only for the out-projection
        kept += core_inputs + (output if mode.weights_trainable or adapted_o else 0.0) + o_copy
    else:
        kept += core_inputs + core + o_copy
    if mode.dropout:
        kept += 2 * model.hidden_size  # dropout masks after attention and after the MLP (bool)
    return kept, per_key


def mlp_bytes(model: ModelSpec, mlp: Mlp, mode: ActivationMode) -> float:
    """Saved bytes of the MLP per token: gated = gate, act(gate), up, product (4 x inner;
    MiniMax-M3's clamped SwiGLU 7 x inner);
    plain = pre-activation, activation internals and output (4 x inner); MoE = router logits
    plus top-k experts' worth of per-token expert tensors (gathered input, inner tensors,
    weighted output), or JetMoE's routing and merge (`sorted_scatter_bytes`). Compiled,
    act(gate) and a Python-written GELU's intermediates are recomputed from the saved matmul
    outputs (module docstring, rule 3)."""
    a, hidden = mode.activation_bytes, model.hidden_size
    gate_name, up_name, down_name = mlp.names
    inputs = [gate_name, up_name] if mlp.gated and not mlp.fused_gate_up else [up_name]

    def ffn(inner: int) -> float:
        down_kept = linear_input(mode, inner, [down_name])
        if mlp.activation == "clamped_swiglu":
            # MiniMax-M3's (transformers 5.24 models/minimax_m3_vl/modeling_minimax_m3_vl.py,
            # MiniMaxM3VLDenseMLP.forward, MiniMaxM3VLExperts._apply_gate): both clamps keep their
            # input, the gate_up output (2 I); the clamped gate, sigmoid's output, up + 1 and the
            # glu product are kept by the two multiplies (4 I). No fused kernel covers it;
            # compiled, the chain is recomputed from gate_up (rule 3)
            return a * (2 if mode.compiled else 6) * inner + down_kept
        if mlp.gated and fused_layer_kernels(mode):  # gate and up; act(gate) is recomputed
            return fused_glu_bytes(mode, inner) + down_kept
        if mlp.gated:  # gate, act(gate), up (their product is the down projection's input)
            return a * (2 if mode.compiled else 3) * inner + down_kept
        if mlp.activation == "gelu_new" and not mode.compiled:
            # GPT-2's tanh GELU written in Python ops keeps the pre-activation and three
            # intermediates; under autocast those run in fp32 (pow is on CUDA's fp32 list)
            internal = 4 if mode.casts_inputs else a
            return a * inner + 3 * internal * inner + down_kept
        if mlp.activation == "relu":  # relu keeps only its output, the down input itself
            return down_kept if down_kept else a * inner
        return a * inner + down_kept  # a fused activation keeps its input

    inner_mask = mlp.intermediate_size if mlp.inner_dropout and mode.dropout else 0  # bool, XLNet

    clamped = mlp.activation == "clamped_swiglu"
    if not mlp.is_moe and mlp.gated and not clamped and fused_lora(mode, [*inputs, down_name]):
        # Unsloth's LoRA_MLP: the input once, gate and up; the product is recomputed
        return a * hidden + fused_glu_bytes(mode, mlp.intermediate_size)
    if not mlp.is_moe:
        dense = linear_input(mode, hidden, inputs) + ffn(mlp.intermediate_size) + inner_mask
        if mlp.output_scale:
            from trainplan.engine.terms.variants import output_scale_bytes

            dense += output_scale_bytes(mode, hidden)
        return dense
    shared_input = linear_input(mode, hidden, ["gate", *inputs])
    routed = mlp.experts_per_token * (
        linear_input(mode, hidden, inputs) + ffn(mlp.intermediate_size) + a * hidden
    )
    router = float(4 * mlp.num_experts + 8 * mlp.experts_per_token)
    if mlp.sorted_scatter:  # JetMoE's top-k gating and index_add merge
        from trainplan.engine.terms.variants import sorted_scatter_bytes

        router = sorted_scatter_bytes(mode, mlp.experts_per_token, hidden)
    shared = 0.0
    if mlp.num_shared_experts:
        shared = ffn(mlp.shared_intermediate_size * mlp.num_shared_experts)
    if mlp.shared_scores:  # the router scores the shared experts too and weights them (Inkling)
        from trainplan.engine.terms.variants import scored_router_bytes, shared_weight_bytes

        count = mlp.num_shared_experts
        router = scored_router_bytes(mode, hidden, mlp.num_experts + count, mlp.experts_per_token, count)
        shared += shared_weight_bytes(mode, mlp.shared_intermediate_size * count, count)
    return shared_input + routed + router + shared


def grad_carrying_blocks(model: ModelSpec, mode: ActivationMode) -> list[Block]:
    """The blocks that keep activations: all of them when weights train; under LoRA, none
    before the first layer holding an adapter, since nothing there requires a gradient (the
    embedding is frozen) and autograd records no op (e.g. a hybrid's Mamba layers ahead of its
    first attention layer when only attention is adapted)."""
    if mode.weights_trainable:
        return list(model.blocks)
    for index, block in enumerate(model.blocks):
        if any(linear.name in mode.lora_targets for linear in block_linears(block, model.hidden_size)):
            return list(model.blocks[index:])
    return []


def layer_activations(model: ModelSpec, block: Block, mode: ActivationMode) -> LayerActivations:
    """What one layer of `block` saves per token, before parallelism and checkpointing.

    The `attention` slot holds the layer's token mixers: attention and/or an SSM mixer
    (terms/ssm.py, for the kernel the mode names), or a linear mixer (terms/mixers.py)."""
    from trainplan.engine.terms.mixers import mixer_bytes, output_gate_bytes
    from trainplan.engine.terms.ssm import ssm_bytes
    from trainplan.engine.terms.variants import (
        dynamic_mask_bytes,
        gated_norm_bytes,
        hyper_connection_bytes,
        relative_logits_bytes,
        short_conv_bytes,
    )

    hidden = model.hidden_size
    norms = block_norm_bytes(model, block.norms, hidden, mode)
    attention, per_key = 0.0, 0.0
    if block.attention is not None:
        attention, per_key = attention_bytes(model, block.attention, mode)
    if block.ssm is not None:
        attention += ssm_bytes(model, block.ssm, mode, mode.ssm_kernel)
    if block.mixer is not None:
        attention += mixer_bytes(model, block.mixer, mode, mode.ssm_kernel)
    if block.attention is not None:  # gated attention's gate and gated output, Doge's dynamic mask
        attention += output_gate_bytes(block.attention, mode)
        for kept, kept_per_key in (
            dynamic_mask_bytes(block.attention, mode),
            relative_logits_bytes(block.attention, mode),
        ):
            attention += kept
            per_key += kept_per_key
    attention += short_conv_bytes(model, block)  # Inkling's key, value and sub-layer convolutions
    if block.hyper_streams:  # Hy-V4's two hyper-connection mixers and residual updates
        norms += 2 * hyper_connection_bytes(mode, block.hyper_streams, hidden)
    if block.cross_attention is not None:
        cross, cross_key = attention_bytes(model, block.cross_attention, mode)
        attention += cross
        per_key += cross_key
    mlp = 0.0 if block.mlp is None else mlp_bytes(model, block.mlp, mode)
    for linear in block.linears:  # Zamba2's per-layer linear and adapters keep their inputs
        mlp += linear_input(mode, linear.in_features, [linear.name])
    norms += block.gated_norms * gated_norm_bytes(model, block.gated_norm_rank, mode)
    shared = not mode.casts_inputs or mode.compiled  # compiled, CSE merges the two casts
    if block.parallel and block.mlp is not None and mode.weights_trainable and shared:
        # attention and MLP read the same normed tensor (GPT-J, Falcon): it is kept once
        mlp -= mode.activation_bytes * hidden
    return LayerActivations(norms, attention, mlp, per_key)


def outside_layers(model: ModelSpec, mode: ActivationMode, head_trainable: bool) -> float:
    """Bytes per token kept outside the layers: final norm(s), the LM-head input, the embedding
    indices, and the embedding dropout mask. The final norm runs outside the compiled blocks
    (torchtune and torchtitan compile each block) and keeps what it keeps in eager."""
    hidden = model.hidden_size
    eager = replace(mode, compiled=False) if mode.compiled else mode  # no copy in the common case
    final = model.final_norms * _norm_bytes(model, hidden, eager)
    head_input = mode.activation_bytes * model.head_width if head_trainable else 0
    indices = 8 * (2 if model.encoder_decoder else 1)
    dropout = float(hidden if mode.dropout else 0)
    if model.residual_streams > 1:  # the hyper-connection head folding the streams (Hy-V4)
        from trainplan.engine.terms.variants import hyper_head_bytes

        final += hyper_head_bytes(mode, model.residual_streams, hidden)
    if any(block.attention is not None and block.attention.kind == "xlnet" for block in model.blocks):
        from trainplan.engine.terms.variants import xlnet_outside_bytes

        dropout += xlnet_outside_bytes(model, mode)
    return final + head_input + indices + dropout


def layer_working_bytes(model: ModelSpec, block: Block, mode: ActivationMode) -> tuple[float, float]:
    """(forward, backward) bytes per token that one layer allocates and frees while it runs, on
    top of what it keeps: the layer's peak, not its saved set.

    Forward: a peft LoRA projection computes `base(x) + lora_B(lora_A(x)) * scaling`; the
    adapter's output and its scaled copy exist together, at the adapter's dtype (peft
    `lora.Linear.forward`; bf16 under autocast): 2 x dtype x the output width. The layer's last
    adapted projection (the down projection under all-linear) runs with everything the layer
    keeps already saved, so its transient is the one on top; an earlier, wider one runs before
    the tensors after it are saved, which in the traces outweigh it. Unsloth's `matmul_lora`
    adds the adapter into the output in place (addmm_), Inductor fuses the scale and the add
    into one kernel that writes the output (compiled), and frozen or fully trained linears return
    only their output.
    Backward: a gated MLP's backward has the gradient of the down projection's input and, from
    the product's `MulBackward`, the gradients of act(gate) and of up alive at once (3 x a x
    intermediate); a plain MLP has the input and output gradients of its activation (2 x);
    Liger's and Unsloth's SwiGLU backward write the gate and up gradients into their saved inputs,
    leaving only the product's gradient (1 x). Compiled, Inductor writes one of the two gradients
    into the product gradient's buffer, dead after the fused kernel reads it
    (torch/_inductor/config.py `inplace_buffers`, on by default): 2 x. Checked against traces of
    long sequences with a small vocabulary (where the logits do not hide the layers). MoE layers:
    not modelled (0).
    """
    a = mode.activation_bytes
    forward = 0.0
    if not mode.weights_trainable:
        adapter = a if mode.casts_inputs else max(a, mode.adapter_bytes)
        widths = [
            linear.out_features
            for linear in block_linears(block, model.hidden_size)
            if linear.name in mode.lora_targets and not linear.expert
        ]
        if widths and not mode.compiled and not _unsloth_fused(model, block, mode):
            forward = 2.0 * adapter * widths[-1]
    backward = 0.0
    mlp = block.mlp
    if mlp is not None and not mlp.is_moe:
        if mlp.gated:
            copies = 1 if fused_layer_kernels(mode) else 2 if mode.compiled else 3
            backward = copies * a * mlp.intermediate_size
        else:
            backward = 2.0 * a * mlp.intermediate_size
    return forward, backward


def _unsloth_fused(model: ModelSpec, block: Block, mode: ActivationMode) -> bool:
    """Unsloth's fused LoRA functions run every projection of this block (all of them adapted)."""
    return fused_lora(mode, [linear.name for linear in block_linears(block, model.hidden_size)])
