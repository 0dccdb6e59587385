"""A JEPA's layers and sample tensors: the ViT layer of its context encoder and predictor, the
tokens each runs over under the recipe's mask generators, the clip and embeddings it keeps, and
the loss against the EMA target encoder (the I-JEPA and V-JEPA repos, transformers' VJEPA2).
Bytes per sample: estimates, checked against traces."""

from __future__ import annotations

from trainplan.engine.terms.block_parts import (
    Dims,
    Masks,
    core,
    kernel_output_input,
    layer_norm,
    linear_inputs,
    sdpa,
)
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.terms.jepa_masks import JepaRecipe, MaskGenerator, model_recipe
from trainplan.specs.model import Block, Linear, ModelSpec


def vit_layer(dims: Dims, block: Block, recipe: JepaRecipe, sequences: list[tuple[float, float]]) -> float:
    """A pre-norm JEPA ViT layer over `sequences` ((tokens, count) per sample): LayerNorm
    (trained weight), the q/k/v inputs (one cast each under autocast, or one for the repos'
    fused qkv), the attention, the proj input, LayerNorm, fc1 input, GELU, fc2 input.

    V-JEPA 2's RoPE (transformers' VJEPA2RopeAttention.apply_rotary_embeddings) rotates
    2 x (head_dim // 3 // 2) channels of each head per axis (frames, height, width) with
    per-token cos and sin tables, which `x * cos + rotated * sin` keeps for q and for k: 4 tables
    of heads x rotated channels, in fp32 under autocast (their frequencies come from a `pow`,
    which CUDA autocast runs in fp32); checked against one traced VJEPA2Layer to the byte per
    token. I-JEPA and V-JEPA add fixed sin-cos tables to the embeddings instead: nothing kept in
    the layer. `merge_copy`: the head-merged output is copied for proj, which keeps the copy
    (transformers' VJEPA2 `contiguous()`, I-JEPA's transpose of `attn @ v`); V-JEPA's SDPA
    output transposes back to a view. Eager attention (I-JEPA's Attention.forward) keeps the
    contiguous copies matmul makes of the strided q, k and v views, and per head and key the
    fp32 softmax (softmax is on autocast's fp32 list) and its 16-bit cast for `attn @ v`."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = block.width, mlp.intermediate_size
    q, k, v, o = attention.names
    up, _, down = mlp.names
    tokens = sum(length * count for length, count in sequences)
    per_token = 2 * layer_norm(dims, width)
    if recipe.positions == "rope-3d":
        rotated = 3 * 2 * (attention.head_dim // 3 // 2)
        tables = 4 if dims.autocast else dims.a  # `10000 ** omega` is on autocast's fp32 list
        per_token += 4 * tables * attention.num_heads * rotated
    qkv = [attention.fused_qkv] if attention.fused_qkv else [q, k, v]
    per_token += linear_inputs(dims, width, qkv, dims.autocast)
    if recipe.merge_copy:
        per_token += linear_inputs(dims, attention.q_size, [o], False)
    else:
        per_token += kernel_output_input(dims, attention.q_size, o)
    per_token += (
        linear_inputs(dims, width, [up], dims.autocast)
        + dims.a * inner
        + linear_inputs(dims, inner, [down], False)
    )
    if recipe.attention == "eager":
        copies = dims.a * (attention.q_size + 2 * attention.kv_size) * tokens
        scores = sum(attention.num_heads * n * n * count * (4 + dims.a) for n, count in sequences)
        return per_token * tokens + copies + scores
    return per_token * tokens + sdpa(dims, attention, tokens, tokens)


def context_tokens(shape: TokenShape, masks: tuple[MaskGenerator, ...]) -> float:
    """Visible tokens a JEPA's context encoder sees, summed over the mask generators."""
    return sum(shape.image_tokens * mask.context for mask in masks)


def target_tokens(shape: TokenShape, masks: tuple[MaskGenerator, ...]) -> float:
    """Masked tokens the predictor predicts, summed over the generators and their passes."""
    return sum(shape.image_tokens * mask.target * mask.passes for mask in masks)


def predictor_tokens(shape: TokenShape, masks: tuple[MaskGenerator, ...]) -> float:
    """Tokens the predictor runs over: per pass the context plus one mask token per target."""
    return sum(shape.image_tokens * (mask.context + mask.target) * mask.passes for mask in masks)


def jepa_sequences(
    block: Block, shape: TokenShape, masks: tuple[MaskGenerator, ...]
) -> list[tuple[float, float]]:
    """(tokens, count) of the sequences a JEPA layer group runs per sample: the context encoder
    one per generator over its visible tokens, the predictor one per pass over the context and
    that pass's mask tokens."""
    if block.role == "predictor":
        return [(shape.image_tokens * (m.context + m.target), float(m.passes)) for m in masks]
    return [(shape.image_tokens * m.context, 1.0) for m in masks]


def jepa_tokens(block: Block, shape: TokenShape, masks: tuple[MaskGenerator, ...]) -> float:
    """Tokens a JEPA layer group runs over, summed over the mask generators: the context encoder
    sees each generator's visible tokens, the predictor all tokens (context + one mask token per
    target)."""
    if block.role == "predictor":
        return predictor_tokens(shape, masks)
    return context_tokens(shape, masks)


def jepa_linear_tokens(
    model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks
) -> float:
    return jepa_tokens(block, shape, masks)


def jepa_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    assert block.attention is not None
    sequences = jepa_sequences(block, shape, masks)
    return sum(count * core(block.attention, tokens, tokens) for tokens, count in sequences)


def jepa_sample_bytes(
    model: ModelSpec, shape: TokenShape, dims: Dims, masks: Masks, latent: float
) -> tuple[float, float, float, float]:
    """(kept outside the layers, held from the loss to backward, peak while the loss is formed,
    peak while its gradient is formed) per sample of a JEPA: the clip, each generator's patch
    embedding, and the loss against the EMA target encoder's output."""
    a, encoder_width = dims.a, model.hidden_size
    targets = target_tokens(shape, masks)
    recipe = model_recipe(model)
    # the clip (or image) as the data loader hands it over, fp32 (`clips.to(device)` in the
    # repos' train.py); per mask generator the whole patch embedding, which the gather of the
    # context tokens (apply_masks: torch.gather, whose backward formula reads its input)
    # keeps: fp32 where a fixed sin-cos table of the fp32 weights is added, else the
    # convolution's output dtype; the EMA target encoder's output and its LayerNorm at the
    # loss (vjepa2 app/vjepa/train.py forward_target, loss_fn with loss_exp 1.0). Under
    # autocast the patch convolution of each generator's context pass keeps its own 16-bit
    # cast of the fp32 clip.
    embedding = 4 if recipe.positions == "sincos" and dims.fp32_weights else a
    cast = a * latent if dims.autocast else 0.0
    outside = 4.0 * latent + len(masks) * (cast + embedding * encoder_width * shape.image_tokens)
    # The loss runs in fp32 under autocast: the target encoder's LayerNorm outputs fp32, so
    # `prediction - h` is fp32 (V-JEPA's |.| ** loss_exp keeps the difference and its abs;
    # I-JEPA's smooth_l1_loss, on autocast's fp32 list, keeps the fp32 cast of the prediction
    # and the target): two tensors per target element either way.
    loss_bytes = 4 if dims.autocast else a
    held = 2.0 * loss_bytes * encoder_width * targets
    peak = held + 2.0 * loss_bytes * encoder_width * shape.image_tokens
    backward = held + loss_bytes * encoder_width * targets
    return outside, held, peak, backward
