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
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.model import Attention, Block, Mlp, ModelSpec, block_linears
from trainplan.terms.savers import lora_dropout_input_bytes


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

    @property
    def casts_inputs(self) -> bool:
        """Autocast over fp32 activations: each linear keeps its own half-precision input copy."""
        return self.residual_bytes > self.activation_bytes


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


def _norm_bytes(model: ModelSpec, width: int, mode: ActivationMode) -> float:
    """A norm over `width` channels: HF RMSNorm keeps the fp32 input (4 B) and 1/rms (4 B per
    row); the normalised output is kept only when the norm weight is trained. LayerNorm keeps
    its input at the residual dtype plus mean and rstd (a parameter-free one keeps the same)."""
    if model.norm != "rmsnorm":
        return mode.residual_bytes * width + 8
    kept_output = mode.residual_bytes * width if mode.weights_trainable else 0
    return 4 * width + 4 + kept_output


def linear_input(mode: ActivationMode, width: int, consumers: list[str]) -> float:
    """Bytes kept of one tensor feeding `consumers` (linear modules).

    Trained weights keep the input itself (shared), or under autocast one half-precision copy
    per consumer. Frozen weights keep nothing; a LoRA adapter keeps its own copy of the input
    at the adapter's dtype: peft holds adapters in fp32 (`autocast_adapter_dtype`), so on a
    16-bit stream each adapted module keeps a 4-byte copy, under autocast a half copy, and in
    fp32 training the shared input.
    """
    if mode.weights_trainable:
        copies = len(consumers) if mode.casts_inputs else 1
        return copies * mode.activation_bytes * width
    adapted = [name for name in consumers if name in mode.lora_targets]
    if not adapted:
        return 0.0
    if mode.lora_dropout:
        return len(adapted) * lora_dropout_input_bytes(
            mode.activation_bytes, mode.casts_inputs, width, mode.adapter_bytes
        )
    if mode.casts_inputs:
        return len(adapted) * mode.activation_bytes * width
    if mode.activation_bytes < mode.adapter_bytes:
        return len(adapted) * mode.adapter_bytes * width
    # adapters at the stream's dtype read the input itself, kept once for all its consumers
    return float(mode.activation_bytes * width)


def attention_bytes(model: ModelSpec, attention: Attention, mode: ActivationMode) -> tuple[float, float]:
    """(projections + rope + kernel inputs and output, scores per key) bytes per token."""
    if attention.routed_experts:
        from trainplan.terms.variants import mixture_of_heads_bytes

        return mixture_of_heads_bytes(model, attention, mode)
    a = mode.activation_bytes
    q, kv = attention.q_size, attention.kv_size
    v_width = (
        attention.num_heads if attention.kind == "mla" else attention.num_kv_heads
    ) * attention.v_head_dim
    names = list(attention.names[:3]) if not attention.fused_qkv else [attention.fused_qkv]
    names += [attention.gate_name] if attention.gate_size else []
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
    else:
        kept = linear_input(mode, attention.input_size or model.hidden_size, names)
    if attention.gate_size:
        # gated attention: the gate's activation output and the gated product (the out-projection's
        # input, no longer the kernel output itself) are kept for backward
        kept += a * (attention.gate_size + attention.num_heads * attention.v_head_dim)
    if attention.qk_norm != "none":
        kept += 4 * (q + kv) + 4 * (attention.num_heads + attention.num_kv_heads)
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
    if mode.attention == "eager":
        # eager keeps no kernel output; the merged heads are kept only for the out-projection
        kept += core_inputs + (output if mode.weights_trainable or adapted_o else 0.0) + o_copy
    else:
        kept += core_inputs + core + o_copy
    if mode.dropout:
        kept += 2 * model.hidden_size  # dropout masks after attention and after the MLP (bool)
    return kept, per_key


def eager_per_key(attention: Attention, mode: ActivationMode) -> float:
    """Eager attention's score tensors per key: the fp32 softmax kept, its half copy kept for
    probs @ v, Gemma 2's soft-capping tanh output, the dropout mask (bool)."""
    softcap = mode.activation_bytes if attention.logit_softcap else 0
    return float(attention.num_heads * (4 + mode.activation_bytes + softcap + (1 if mode.dropout else 0)))


def mlp_bytes(model: ModelSpec, mlp: Mlp, mode: ActivationMode) -> float:
    """Saved bytes of the MLP per token: gated = gate, act(gate), up, product (4 x inner);
    plain = pre-activation, activation internals and output (4 x inner); MoE = router logits
    plus top-k experts' worth of per-token expert tensors (gathered input, inner tensors,
    weighted output), or JetMoE's routing and merge (`sorted_scatter_bytes`)."""
    a, hidden = mode.activation_bytes, model.hidden_size
    gate_name, up_name, down_name = mlp.names
    inputs = [gate_name, up_name] if mlp.gated and not mlp.fused_gate_up else [up_name]

    def ffn(inner: int) -> float:
        down_kept = linear_input(mode, inner, [down_name])
        if mlp.gated:  # gate, act(gate), up (their product is the down projection's input)
            return a * 3 * inner + down_kept
        if mlp.activation == "gelu_new":
            # GPT-2's tanh GELU written in Python ops keeps the pre-activation and three
            # intermediates; under autocast those run in fp32 (pow is on CUDA's fp32 list)
            internal = 4 if mode.casts_inputs else a
            return a * inner + 3 * internal * inner + down_kept
        if mlp.activation == "relu":  # relu keeps only its output, the down input itself
            return down_kept if down_kept else a * inner
        return a * inner + down_kept  # a fused activation keeps its input

    if not mlp.is_moe:
        return linear_input(mode, hidden, inputs) + ffn(mlp.intermediate_size)
    shared_input = linear_input(mode, hidden, ["gate", *inputs])
    routed = mlp.experts_per_token * (
        linear_input(mode, hidden, inputs) + ffn(mlp.intermediate_size) + a * hidden
    )
    router = float(4 * mlp.num_experts + 8 * mlp.experts_per_token)
    if mlp.sorted_scatter:  # JetMoE's top-k gating and index_add merge
        from trainplan.terms.variants import sorted_scatter_bytes

        router = sorted_scatter_bytes(mode, mlp.experts_per_token, hidden)
    shared = 0.0
    if mlp.num_shared_experts:
        shared = ffn(mlp.shared_intermediate_size * mlp.num_shared_experts)
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
    from trainplan.terms.mixers import mixer_bytes, output_gate_bytes
    from trainplan.terms.ssm import ssm_bytes
    from trainplan.terms.variants import dynamic_mask_bytes, gated_norm_bytes

    hidden = model.hidden_size
    norms = block.norms * _norm_bytes(model, hidden, mode)
    attention, per_key = 0.0, 0.0
    if block.attention is not None:
        attention, per_key = attention_bytes(model, block.attention, mode)
    if block.ssm is not None:
        attention += ssm_bytes(model, block.ssm, mode, mode.ssm_kernel)
    if block.mixer is not None:
        attention += mixer_bytes(model, block.mixer, mode, mode.ssm_kernel)
    if block.attention is not None:  # gated attention's gate and gated output, Doge's dynamic mask
        attention += output_gate_bytes(block.attention, mode)
        mask, mask_per_key = dynamic_mask_bytes(block.attention, mode)
        attention += mask
        per_key += mask_per_key
    if block.cross_attention is not None:
        cross, cross_key = attention_bytes(model, block.cross_attention, mode)
        attention += cross
        per_key += cross_key
    mlp = 0.0 if block.mlp is None else mlp_bytes(model, block.mlp, mode)
    for linear in block.linears:  # Zamba2's per-layer linear and adapters keep their inputs
        mlp += linear_input(mode, linear.in_features, [linear.name])
    norms += block.gated_norms * gated_norm_bytes(model, block.gated_norm_rank, mode)
    if block.parallel and block.mlp is not None and mode.weights_trainable and not mode.casts_inputs:
        # attention and MLP read the same normed tensor (GPT-J, Falcon): it is kept once
        mlp -= mode.activation_bytes * hidden
    return LayerActivations(norms, attention, mlp, per_key)


def outside_layers(model: ModelSpec, mode: ActivationMode, head_trainable: bool) -> float:
    """Bytes per token kept outside the layers: final norm(s), the LM-head input, the embedding
    indices, and the embedding dropout mask."""
    hidden = model.hidden_size
    final = model.final_norms * _norm_bytes(model, hidden, mode)
    head_input = mode.activation_bytes * model.head_width if head_trainable else 0
    indices = 8 * (2 if model.encoder_decoder else 1)
    dropout = hidden if mode.dropout else 0
    return final + head_input + indices + dropout
