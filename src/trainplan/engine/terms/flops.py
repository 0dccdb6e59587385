"""Training FLOPs per token from the architecture.

Matmuls: a forward pass costs 2 FLOPs per multiply-accumulate, so 2 x (matmul parameters a token
touches) per token; backward costs twice that (input and weight gradients), giving the 6N rule
(Kaplan et al. 2020, sec. 2.1; Narayanan et al. 2021, sec. 5.1, eq. for F = 72BsLh^2(...)).
Frozen weights (LoRA/QLoRA) skip the weight gradient: 2N forward + 2N backward = 4N.
Attention scores and the weighted sum add 2 x heads x context x (d_qk + d_v) per token and
layer in forward (Kaplan's 2 n_layer n_ctx d_attn term); causal kernels (flash) skip the masked
half, so the context is seq/2 for decoders (XLNet's einsums score every key: seq, and its
relative-position terms, `xlnet_scores`). PaLM (Chowdhery et al. 2022, app. B) counts the
unmasked 6N + 12 L H Q T for MFU; `palm_flops_per_token` gives that convention.
Full activation checkpointing re-runs every layer's forward once more (+1 forward of the
layers); selective recompute re-runs only the attention core (Korthikanti et al. 2022, sec. 5);
`full:N` re-runs the checkpointed layers only, and torchtitan's op-level selective AC only the
matmuls it does not save (terms/savers.py).
A block that runs under no_grad (`Block.no_grad`, HRM's earlier low-level cycles) costs its
forward only: no input or weight gradients, nothing to recompute.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.engine.terms.mixers import mixer_flops
from trainplan.engine.terms.savers import checkpoint_every, checkpointed_layers, op_sac_saved
from trainplan.engine.terms.ssm import ssm_scan_flops
from trainplan.engine.terms.variants import hyper_connection_weights, short_conv_weights
from trainplan.specs.model import Attention, Block, ModelSpec
from trainplan.specs.weights import block_linears, ssm_head_weights


@dataclass(frozen=True)
class FlopsPerToken:
    """Training FLOPs per token, split by what performs them."""

    matmul_forward: float
    attention_forward: float
    head_forward: float
    total: float
    recompute: float
    palm_model_flops: float
    # attention forward of the layers that run with grad (all of them but no_grad passes)
    attention_grad_forward: float | None = None
    # the output head's FLOPs of a step: forward, input gradients and, when it trains, weight
    # gradients (never recomputed); the fp8 recipes run it at the 16-bit rate (terms/timing.py)
    head_training: float = 0.0

    @property
    def attention_training(self) -> float:
        """Attention FLOPs of a step before recompute: forward everywhere, input gradients (2x)
        where the layer runs with grad."""
        grad = self.attention_forward if self.attention_grad_forward is None else self.attention_grad_forward
        return self.attention_forward + 2 * grad


def block_matmul_active(block: Block, model: ModelSpec) -> float:
    """Matmul parameters one token touches in one layer (top-k of the routed experts), Zamba's
    per-head SSM projections included (batched matmuls of weight tensors, not linear layers)."""
    total = 0.0 if block.ssm is None else float(ssm_head_weights(block.ssm))
    total += short_conv_weights(block, model.hidden_size)  # Inkling's convolutions, relative logits
    total += hyper_connection_weights(block, model.hidden_size)  # Hy-V4's hyper-connection mixers
    if block.attention is not None and block.attention.kind == "xlnet":
        # XLNet's r projects klen + qlen = 2 x seq relative positions, each batch row its own copy
        # (XLNetModel.relative_positional_encoding, attn_type "bi"): two rows per token, one beyond
        # the one the linear below counts
        total += model.hidden_size * block.attention.q_size
    top_k = block.mlp.experts_per_token if block.mlp is not None else 0
    for linear in block_linears(block, model.hidden_size):
        per_copy = linear.in_features * linear.out_features
        if linear.expert:
            total += per_copy * top_k
        else:
            total += per_copy * linear.copies
    return total


def attention_core(block: Block, context: float) -> float:
    """Forward FLOPs per token of scores and weighted sum over `context` keys, plus an SSM
    mixer's scan and convolution (terms/ssm.py) or a linear mixer's (terms/mixers.py), the other
    weightless token mixers."""
    attention = block.attention
    flops = 0.0
    if attention is not None and attention.kind == "xlnet":
        flops += xlnet_scores(attention, context)
    elif attention is not None:
        flops += 2 * attention.num_heads * context * (attention.head_dim + attention.v_head_dim)
    if block.ssm is not None:
        flops += ssm_scan_flops(block.ssm)
    if block.mixer is not None:
        flops += mixer_flops(block.mixer)
    if block.cross_attention is not None:
        cross = block.cross_attention
        flops += 2 * cross.num_heads * 2 * context * (cross.head_dim + cross.v_head_dim)
    return flops


def xlnet_scores(attention: Attention, keys: float) -> float:
    """Forward FLOPs per token of XLNet's relative attention core over `keys` keys (transformers
    5.24 models/xlnet/modeling_xlnet.py, XLNetRelativeAttention.rel_attn_core): the content
    scores ac (q + r_w_bias against every key, 2 H d keys), the position scores bd (q + r_r_bias
    against the 2 x keys relative positions before rel_shift trims them, 4 H d keys), the segment
    scores ef (q + r_s_bias against the two segment embeddings, 4 H d, and their selection by the
    one-hot same-segment matrix, 4 H keys: the tokenizer passes token_type_ids) and the weighted
    sum (2 H d keys). The einsums score every key whatever the mask, so the caller passes the
    whole sequence."""
    heads, dim = attention.num_heads, attention.head_dim
    return 2 * heads * dim * keys + 4 * heads * dim * keys + 4 * heads * (dim + keys) + 2 * heads * dim * keys


def attended_keys(block: Block, model: ModelSpec, seq_len: float) -> float:
    """Keys each query is scored against: all of them for encoder-decoder models and XLNet's
    einsum attention, half on average where a causal kernel skips the masked ones."""
    unmasked = block.attention is not None and block.attention.kind == "xlnet"
    return seq_len if model.encoder_decoder or unmasked else seq_len / 2


def recompute_flops(model: ModelSpec, checkpointing: str, seq_len: float) -> float:
    """Forward FLOPs per token re-run in backward: the whole forward of every checkpointed layer
    (`full`, `full:N`), the attention core (`selective`), or the matmuls op-level SAC does not
    save (`op`: every second matmul and the routed experts; the SDPA output is saved)."""
    every = checkpoint_every(checkpointing)
    if every is not None:
        layers = checkpointed_layers(model, every)
        return sum(
            count
            * (
                2 * block_matmul_active(block, model)
                + attention_core(block, attended_keys(block, model, seq_len))
            )
            for count, block in zip(layers, model.blocks, strict=True)
        )
    grad_blocks = [block for block in model.blocks if not block.no_grad]
    if checkpointing == "op":
        return sum(block.count * 2 * op_sac_saved(block, model, 2)[1] for block in grad_blocks)
    if checkpointing == "selective":
        return sum(
            block.count * attention_core(block, attended_keys(block, model, seq_len)) for block in grad_blocks
        )
    return 0.0


def flops_per_token(
    model: ModelSpec,
    seq_len: int,
    *,
    frozen_base: bool,
    lora_params: int,
    checkpointing: str,
    lora_runs: tuple[int, int] | None = None,
) -> FlopsPerToken:
    """Training FLOPs per token: forward, backward (2x, or 1x for frozen matmuls), recompute.

    Adapters cost 2 FLOPs per parameter forward and 4 backward (6 x `lora_params`), or with
    `lora_runs` (`params.lora_run_params`: adapter parameters over every layer run, over the runs
    with grad) 2 x the first plus 4 x the second, for layers that run more than once."""
    grad_blocks = [block for block in model.blocks if not block.no_grad]
    matmul = sum(block.count * block_matmul_active(block, model) for block in model.blocks)
    matmul_grad = sum(block.count * block_matmul_active(block, model) for block in grad_blocks)
    attention = sum(
        block.count * attention_core(block, attended_keys(block, model, seq_len)) for block in model.blocks
    )
    attention_grad = sum(
        block.count * attention_core(block, attended_keys(block, model, seq_len)) for block in grad_blocks
    )
    head = model.head_rows * model.head_width
    matmul_forward = 2 * matmul
    attention_forward = attention
    head_forward = 2 * head
    weight_grad = 0.0 if frozen_base else 2 * (matmul_grad + head)
    adapter_runs, adapter_grad = lora_runs if lora_runs is not None else (lora_params, lora_params)
    adapters = 2 * adapter_runs + 4 * adapter_grad
    total = (
        attention_forward
        + 2 * attention_grad  # input grads (2x): attention has no weights
        + matmul_forward
        + head_forward
        + 2 * (matmul_grad + head)  # input grads
        + weight_grad
        + adapters
    )
    recompute = recompute_flops(model, checkpointing, seq_len)
    unmasked = sum(block.count * attention_core(block, seq_len) for block in model.blocks)
    unmasked_grad = sum(block.count * attention_core(block, seq_len) for block in grad_blocks)
    # PaLM's 6N + 12LHQT for the layers with grad; 2N + 4LHQT (the forward) for the others
    palm = 6 * (matmul_grad + head) + 2 * (matmul - matmul_grad) + 3 * unmasked_grad
    palm += unmasked - unmasked_grad
    return FlopsPerToken(
        matmul_forward=matmul_forward,
        attention_forward=attention_forward,
        head_forward=head_forward,
        total=total + recompute,
        recompute=recompute,
        palm_model_flops=palm,
        attention_grad_forward=attention_grad,
        head_training=head_forward + 2 * head + (0.0 if frozen_base else 2 * head),
    )
