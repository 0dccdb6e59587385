"""Activations and FLOPs of diffusion, video and JEPA models, per sample, block by block: the
table of block kinds (`BLOCK_KINDS`) and the diffusion-transformer and UNet blocks. A JEPA's ViT
layer and sample tensors are terms/jepa.py; what every block is counted with, terms/block_parts.py.

The same method as for language models (Korthikanti et al. 2022, sec. 4.1: count every tensor a
layer keeps for backward), derived from the diffusers and V-JEPA modules as they run:

- LayerNorm (`native_layer_norm`) keeps its input and fp32 mean and rstd per row. Under autocast
  it runs in fp32 (layer_norm is on autocast's fp32 list), so the kept input is an fp32 copy and
  its output is fp32; Wan's FP32LayerNorm is fp32 always.
- adaLN modulation `x * (1 + scale) + shift` keeps the normed x when `scale` needs a gradient
  (the modulation linears train); the gate product `gate * out` keeps `out` likewise.
- torch.nn.RMSNorm (the q/k norms) keeps its input and an fp32 1/rms per row in CUDA's fused
  kernel; with an fp32 weight under autocast the composite form keeps the fp32 upcast instead,
  and the normed tensor when the weight trains.
- A linear keeps its input when its weight trains (under autocast one 16-bit copy per consumer of
  an fp32 input); a frozen one keeps nothing, a LoRA adapter its own copy (terms/activations.py
  `linear_input`). SDPA (flash / memory-efficient) keeps q, k, v, its output and an fp32
  logsumexp per head and query; eager keeps the softmax over every key.
- GELU keeps its input. The attention kernel writes its output as (batch, seq, heads, dim) in
  memory, so the reshape before the output projection is a view: a trained projection keeps the
  kernel's output itself, which SDPA keeps anyway. Above micro-batch 1 a joint block's split of
  that output into image and text rows is not contiguous, and a trained or adapted projection
  keeps a copy of its rows (`_split_copies`).

Block types: FLUX double-stream (`FluxTransformerBlock`) and SD3 joint blocks
(`JointTransformerBlock`, with SD3.5's context_pre_only last block and MMDiT-X's second
attention) keep per-token tensors in an image and a text stream around one joint attention over
both; FLUX single-stream blocks run on the concatenated tokens with one fused input projection;
Wan 2.1 blocks (`WanTransformerBlock`) self-attend over the video tokens and cross-attend to the
text, whose keys and values are projected in every block from one shared text tensor; PixArt,
Sana (`SanaTransformerBlock`: ReLU linear self-attention and the GLUMBConv FFN) and LTX-Video
(`LTXVideoTransformerBlock`: RMSNorms, q/k norms, RoPE) blocks follow the same self- then
cross-attention pattern under adaLN-single. CogVideoX blocks (`CogVideoXBlock`) run text and
video tokens as one sequence through shared weights, with expert adaLN (separate modulation of
each kind of token) and affine LayerNorms on each head of q and k. HunyuanVideo's dual- and
single-stream blocks have FLUX's weights (with diffusers' RMSNorm on q and k); its token refiner
runs pre-norm self-attention blocks over the text alone. A V-JEPA ViT layer (transformers'
VJEPA2Layer: query/key/value, 3-D RoPE, SDPA, proj, fc1/GELU/fc2) is a pre-norm transformer
layer with trainable LayerNorms.

All figures are bytes per sample (one image or clip): estimates, checked against traces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from trainplan.engine.terms.block_parts import (
    Dims,
    Masks,
    core,
    dims_of,
    kernel_output_input,
    layer_norm,
    linear_inputs,
    sdpa,
)
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.terms.jepa import (
    context_tokens,
    jepa_attention,
    jepa_linear_tokens,
    jepa_sample_bytes,
    jepa_sequences,
    jepa_tokens,
    predictor_tokens,
    target_tokens,
    vit_layer,
)
from trainplan.engine.terms.jepa_masks import MaskGenerator, model_recipe
from trainplan.engine.terms.mode import ActivationMode
from trainplan.specs.errors import InputError
from trainplan.specs.model import Attention, Block, Linear, ModelSpec
from trainplan.specs.weights import block_linears

__all__ = [
    "DenoiserActivations",
    "checkpointed_blocks",
    "denoiser_activations",
    "denoiser_flops",
    "is_unet",
    "sample_tokens",
]


def checkpointed_blocks(model: ModelSpec, every: int | None) -> list[int]:
    """Per block, how many layers diffusers' (or V-JEPA's) gradient checkpointing wraps: every
    transformer block (every `every`-th of them for full:N), never the embedders and heads."""
    counts: list[int] = []
    start = 0
    for block in model.blocks:
        if every is None or not block_kind(block, model).layer:
            counts.append(0)
            continue
        end = start + block.count
        counts.append(end // every - start // every)
        start = end
    return counts


def positions(shape: TokenShape, level: int) -> int:
    """Latent positions a UNet block at `level` runs over (each level halves both sides)."""
    return (shape.latent_width >> level) * (shape.latent_height >> level) * shape.latent_frames


def sample_tokens(shape: TokenShape) -> int:
    """Tokens of a sample's main stream (image / video / patch tokens): the unit `seq_len` counts
    for these kinds, so per-token coefficients times micro_batch x tokens give per-sample bytes."""
    return shape.image_tokens


@dataclass(frozen=True)
class DenoiserActivations:
    """Per-sample saved bytes of every layer group, and what checkpointing keeps instead."""

    layers: tuple[tuple[Block, float], ...]  # (block, bytes of one layer of it)
    block_inputs: tuple[float, ...]  # per block: bytes one checkpointed layer keeps (its inputs)
    outside: float  # inputs and tensors outside the layers, kept through the step
    loss_held: float  # kept from the loss to the start of backward
    loss_peak: float  # alive while the loss is formed
    loss_backward: float  # alive while the loss gradient is formed
    # per block: bytes one layer of it keeps per sample only at a micro-batch above 1 (`_split_copies`)
    batch_splits: tuple[float, ...] = ()


def _attn2(attention: Attention) -> Attention:
    """The second attention of a block (diffusers' `attn2`: cross-attention, or MMDiT-X's second
    self-attention), shaped as the first."""
    return replace(attention, names=("attn2.to_q", "attn2.to_k", "attn2.to_v", "attn2.to_out.0"))


def _modulated(dims: Dims, width: int, trained: bool, fp32: bool = False) -> float:
    """x_norm * (1 + scale): x_norm is kept when scale needs a gradient."""
    return dims.norm_bytes(fp32) * width if trained else 0.0


def _rms_norm(dims: Dims, width: int, rows: int) -> float:
    """torch.nn.RMSNorm (diffusers' q/k norms) over `width` channels in `rows` groups. With the
    weight at the input's dtype, CUDA runs the fused kernel (`aten::_fused_rms_norm`, torch 2.8+),
    whose backward reads the input itself and the fp32 1/rms per row. With an fp32 weight under
    autocast (a full fine-tune) the dtypes differ and F.rms_norm falls back to its composite
    form: the fp32 upcast of the input, 1/rms, and the fp32 normed tensor for the weight's
    gradient when the weight trains."""
    if not dims.fp32_weights:
        return dims.a * width + 4 * rows
    return 4 * width + 4 * rows + (4 * width if dims.trainable else 0)


def _diffusers_rms_norm(dims: Dims, width: int, rows: int) -> float:
    """diffusers' own RMSNorm (SD3's q/k norms): the fp32 copy `pow` keeps for the variance, the
    input and the fp32 1/rms for `x * rsqrt(var)`, and the normed tensor when its weight trains
    (fp32 with an fp32 weight, else cast to the weight's 16-bit dtype)."""
    kept_output = (4 if dims.fp32_weights else dims.a) * width if dims.trainable else 0
    return 4 * width + dims.a * width + 4 * rows + kept_output


def _qk_norms(dims: Dims, attention: Attention, torch_norm: bool = True) -> float:
    """q and k norms per token: per head (`head`) or over all heads (`full`, Wan); FLUX and Wan
    use torch.nn.RMSNorm, SD3 diffusers' RMSNorm."""
    if attention.qk_norm == "none":
        return 0.0
    rows = attention.num_heads if attention.qk_norm == "head" else 1
    norm = _rms_norm if torch_norm else _diffusers_rms_norm
    return norm(dims, attention.q_size, rows) + norm(dims, attention.kv_size, rows)


def _trained(dims: Dims, name: str) -> bool:
    """Whether the modulation linear `name` (scale, shift and gate) needs gradients."""
    return dims.trainable or name in dims.mode.lora_targets


def _stream(
    dims: Dims,
    block: Block,
    attention: Attention,
    names: tuple[str, str, str, str, str, str],
    modulation: str,
    inner: int,
    width: int,
    pre_only: bool = False,
    torch_norm: bool = True,
) -> float:
    """Per-token bytes of one MMDiT stream outside the joint attention kernel: norm1 and its
    modulation, the q/k/v inputs and q/k norms, the output projection's copy and gate, norm2,
    the GELU FFN and its gate (`pre_only`: SD3's last context stream, only norm1 and q/k/v)."""
    q, k, v, o, up, down = names
    mod = _trained(dims, modulation)
    kept = layer_norm(dims, width) + _modulated(dims, width, mod)
    kept += linear_inputs(dims, width, [q, k, v], dims.autocast) + _qk_norms(dims, attention, torch_norm)
    if pre_only:
        return kept
    kept += kernel_output_input(dims, attention.q_size, o) + (dims.a * width if mod else 0)
    kept += layer_norm(dims, width) + _modulated(dims, width, mod)
    kept += linear_inputs(dims, width, [up], dims.autocast) + dims.a * inner
    kept += linear_inputs(dims, inner, [down], False) + (dims.a * width if mod else 0)
    return kept


def _split_copy(dims: Dims, width: int, name: str, rows: int) -> float:
    """A trained output projection, or an adapter at the stream's dtype, that reads `rows` rows
    sliced out of the joint attention's output: at a micro-batch above 1 the slice is not
    contiguous, so the matmul's reshape copies it, and the copy is what it keeps (at micro-batch
    1 the slice is a view of the kernel's output, which SDPA keeps anyway)."""
    return dims.a * width * rows if linear_inputs(dims, width, [name], False) == dims.a * width else 0.0


def _split_copies(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape, masks: Masks) -> float:
    """Per sample, what one FLUX double-stream or SD3 joint layer keeps only at a micro-batch
    above 1: its attention processor splits the joint output into image and text rows
    (`hidden_states[:, :n]`, FluxAttnProcessor2_0 and JointAttnProcessor2_0) before to_out.0 and
    to_add_out (`_split_copy`)."""
    assert block.attention is not None
    names = {linear.name for linear in block.linears}
    width, out = block.attention.q_size, block.attention.names[3]
    kept = _split_copy(dims, width, out, shape.image_tokens)
    if "attn.to_add_out" in names:
        kept += _split_copy(dims, width, "attn.to_add_out", shape.text_tokens)
    return kept


def _mmdit(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A FLUX double-stream or SD3 joint block: image and text streams around joint attention
    over both (SD3.5 Medium's MMDiT-X adds a second self-attention over the image tokens)."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    names = {linear.name for linear in block.linears}
    q, k, v, o = attention.names
    up, _, down = mlp.names
    # FluxAttention: torch.nn.RMSNorm; SD3 and HunyuanVideo: diffusers' RMSNorm
    flux = block.role == "double_stream" and not _hunyuan_video(model)
    image = _stream(
        dims, block, attention, (q, k, v, o, up, down), "norm1.linear", inner, width, torch_norm=flux
    )
    context_names = (
        "attn.add_q_proj",
        "attn.add_k_proj",
        "attn.add_v_proj",
        "attn.to_add_out",
        "ff_context.net.0.proj",
        "ff_context.net.2",
    )
    pre_only = "attn.to_add_out" not in names
    text = _stream(
        dims,
        block,
        attention,
        context_names,
        "norm1_context.linear",
        inner,
        width,
        pre_only=pre_only,
        torch_norm=flux,
    )
    tokens = shape.image_tokens + shape.text_tokens
    kept = image * shape.image_tokens + text * shape.text_tokens + sdpa(dims, attention, tokens, tokens)
    if "attn2.to_q" in names:  # MMDiT-X: a second attention on the same normed image tokens
        second = _attn2(attention)
        mod = _trained(dims, "norm1.linear")
        per_token = linear_inputs(dims, width, ["attn2.to_q", "attn2.to_k", "attn2.to_v"], dims.autocast)
        per_token += _qk_norms(dims, second, flux) + kernel_output_input(dims, width, "attn2.to_out.0")
        per_token += dims.a * width if mod else 0
        kept += per_token * shape.image_tokens + sdpa(dims, second, shape.image_tokens, shape.image_tokens)
    return kept


def _single_stream(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """FLUX single-stream block over text + image tokens: norm and modulation, one input shared by
    to_q/k/v and proj_mlp, GELU, q/k norms, attention, proj_out over [attention, MLP] and its gate."""
    width = model.hidden_size
    linears = {linear.name: linear for linear in block.linears}
    inner = linears["proj_mlp"].out_features
    attention = _single_attention(block, model)
    mod = _trained(dims, "norm.linear")
    per_token = layer_norm(dims, width) + _modulated(dims, width, mod)
    hunyuan = _hunyuan_video(model)
    if hunyuan:
        per_token += linear_inputs(dims, width, ["attn.to_q", "attn.to_k", "attn.to_v"], dims.autocast)
        per_token += linear_inputs(dims, width, ["proj_mlp"], dims.autocast)
    else:
        per_token += linear_inputs(
            dims, width, ["attn.to_q", "attn.to_k", "attn.to_v", "proj_mlp"], dims.autocast
        )
    per_token += dims.a * inner + _qk_norms(dims, attention, torch_norm=not hunyuan)
    per_token += linear_inputs(dims, width + inner, ["proj_out"], False) + (dims.a * width if mod else 0)
    tokens = shape.image_tokens + shape.text_tokens
    return per_token * tokens + sdpa(dims, attention, tokens, tokens)


def _hunyuan_video(model: ModelSpec) -> bool:
    """HunyuanVideo (the model with a token refiner). Its dual- and single-stream blocks carry
    FLUX's weights but run diffusers' generic `Attention`, whose q/k norms are diffusers' RMSNorm
    (an fp32 copy for the variance, as SD3's), not torch.nn.RMSNorm; and its single-stream block
    splits the normed tokens into video and text rows that its attention processor concatenates
    again (HunyuanVideoAttnProcessor2_0), so to_q/k/v read a copy that proj_mlp does not share."""
    return any(block.role == "text_refiner" for block in model.blocks)


def _cogvideox(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A CogVideoXBlock (diffusers `cogvideox_transformer_3d.py`) over text + video tokens, the
    same per token for both kinds (one set of weights; only their modulations differ):
    norm1 (affine LayerNorm + modulation; CogVideoXLayerNormZero), q/k/v on the concatenated
    tokens, affine LayerNorms over each head of q and k (`qk_norm="layer_norm"`: each keeps its
    input and an fp32 mean and rstd per head; CogVideoX-5b's RoPE then rotates in place, keeping
    only the shared cos/sin tables), the attention kernel, to_out's input (a copy of the
    kernel's output) and the gated residual; norm2 and its modulation, the shared GELU-tanh FFN
    on the concatenated tokens and its gate."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    mod = _trained(dims, "norm1.linear")
    q, k, v, o = attention.names
    up, _, down = mlp.names
    heads = attention.num_heads
    per_token = 2 * (layer_norm(dims, width) + _modulated(dims, width, mod))  # norm1, norm2
    per_token += linear_inputs(dims, width, [q, k, v], dims.autocast)
    per_token += dims.norm_bytes() * (attention.q_size + attention.kv_size) + 2 * 8 * heads
    # the per-head norms leave q contiguous as (batch, heads, seq, head_dim); flash attention
    # allocates its output like q, so the reshape before to_out copies it, and a trained or
    # adapted to_out keeps that copy
    per_token += linear_inputs(dims, attention.q_size, [o], False) + (dims.a * width if mod else 0)
    per_token += (
        linear_inputs(dims, width, [up], dims.autocast)
        + dims.a * inner
        + linear_inputs(dims, inner, [down], False)
    )
    per_token += dims.a * width if mod else 0
    tokens = shape.image_tokens + shape.text_tokens
    return per_token * tokens + sdpa(dims, attention, tokens, tokens)


def _cogvideox_output(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """CogVideoX's head over the video tokens: norm_final (affine LayerNorm), norm_out's affine
    LayerNorm and modulation (AdaLayerNorm), proj_out's input."""
    width = model.hidden_size
    mod = _trained(dims, "norm_out.linear")
    per_token = 2 * layer_norm(dims, width) + _modulated(dims, width, mod)
    return shape.image_tokens * (per_token + linear_inputs(dims, width, ["proj_out"], dims.autocast))


def _text_refiner(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A HunyuanVideoIndividualTokenRefinerBlock over the text tokens (diffusers
    `transformer_hunyuan_video.py`): affine LayerNorm, self-attention (AttnProcessor2_0, no q/k
    norms; the prompt mask per head), the output gated by the refiner's adaNorm, affine
    LayerNorm, the SiLU FFN (`linear-silu`: net.0.proj then SiLU, which keeps its input) and its
    gate."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    mod = _trained(dims, "norm_out.linear")
    q, k, v, o = attention.names
    up, _, down = mlp.names
    per_token = layer_norm(dims, width) + linear_inputs(dims, width, [q, k, v], dims.autocast)
    per_token += kernel_output_input(dims, attention.q_size, o) + (dims.a * width if mod else 0)
    per_token += layer_norm(dims, width) + linear_inputs(dims, width, [up], dims.autocast)
    per_token += dims.a * inner + linear_inputs(dims, inner, [down], False) + (dims.a * width if mod else 0)
    text = shape.text_tokens
    # the prompt mask, repeated per head by Attention.prepare_attention_mask and cast to the
    # queries' dtype, is kept by the attention kernel for backward: heads x text x text
    mask = dims.a * attention.num_heads * text * text
    return per_token * text + sdpa(dims, attention, text, text) + mask


def _single_attention(block: Block, model: ModelSpec) -> Attention:
    """A FLUX single-stream block's attention (its q/k/v live in the block's linears): heads of
    head_dim, read off its q/k norms' weights (2 x head_dim extra parameters)."""
    head = block.extra_params // 2 or model.hidden_size
    heads = model.hidden_size // head
    return Attention(heads, heads, head, head, qk_norm="head")


def _video_dit(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A Wan 2.1 block: FP32LayerNorm + modulation, self-attention with q/k norms over all heads,
    the fp32 gated residual, FP32LayerNorm + cross-attention to the text, FP32LayerNorm +
    modulation, GELU FFN and its fp32 gate. The text keys and values are projected per block
    from the shared text tensor (kept once, in `outside`)."""
    attention, cross, mlp = block.attention, block.cross_attention, block.mlp
    assert attention is not None and cross is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    mod = dims.trainable  # the learned scale_shift_table plus the shared time projection
    q, k, v, o = attention.names
    cq, _, _, co = cross.names
    up, _, down = mlp.names
    per_token = layer_norm(dims, width, fp32=True) + _modulated(dims, width, mod, fp32=True)
    per_token += linear_inputs(dims, width, [q, k, v], False) + _qk_norms(dims, attention)
    per_token += kernel_output_input(dims, attention.q_size, o) + (dims.a * width if mod else 0)
    per_token += layer_norm(dims, width, fp32=True) + linear_inputs(dims, width, [cq], False)
    if cross.qk_norm != "none":
        per_token += _rms_norm(dims, cross.q_size, 1)
    per_token += kernel_output_input(dims, cross.q_size, co)
    per_token += layer_norm(dims, width, fp32=True) + _modulated(dims, width, mod, fp32=True)
    per_token += (
        linear_inputs(dims, width, [up], False) + dims.a * inner + linear_inputs(dims, inner, [down], False)
    )
    per_token += 4 * width if mod else 0  # ff_output.float() kept for the fp32 gate
    per_text = _rms_norm(dims, cross.kv_size, 1) if cross.qk_norm != "none" else 0.0
    image, text = shape.image_tokens, shape.text_tokens
    return (
        per_token * image
        + per_text * text
        + sdpa(dims, attention, image, image)
        + sdpa(dims, cross, image, text)
    )


def _pixart(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A PixArt BasicTransformerBlock under adaLN-single: LayerNorm + modulation, self-attention
    and its gate; cross-attention read straight off the residual (PixArt applies no norm there),
    keys and values per text token; LayerNorm + modulation, the GELU FFN and its gate."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    mod = _trained(dims, "adaln_single.linear")
    q, k, v, o = attention.names
    up, _, down = mlp.names
    cross = _attn2(attention)
    per_token = layer_norm(dims, width) + _modulated(dims, width, mod)
    per_token += linear_inputs(dims, width, [q, k, v], dims.autocast)
    per_token += kernel_output_input(dims, attention.q_size, o)
    per_token += dims.a * width if mod else 0
    per_token += linear_inputs(dims, width, ["attn2.to_q"], False) + kernel_output_input(
        dims, width, "attn2.to_out.0"
    )
    per_token += layer_norm(dims, width) + _modulated(dims, width, mod)
    per_token += (
        linear_inputs(dims, width, [up], dims.autocast)
        + dims.a * inner
        + linear_inputs(dims, inner, [down], False)
    )
    per_token += dims.a * width if mod else 0
    image, text = shape.image_tokens, shape.text_tokens
    return per_token * image + sdpa(dims, attention, image, image) + sdpa(dims, cross, image, text)


def _linear_attention(dims: Dims, attention: Attention) -> float:
    """Per-token bytes of Sana's ReLU linear attention kernel (diffusers
    `SanaLinearAttnProcessor2_0`, attention_processor.py): ReLU keeps its output for q and k;
    the two matmuls (V_pad K, then (V_pad K) Q, with V padded by a row of ones) keep their
    operands; the division by the last row keeps the un-normalised output (a view of it) and the
    denominator, one per head. The kernel upcasts q, k, v with `.float()`, but matmul is on
    autocast's lower-precision list and the diffusers scripts train under accelerate's autocast,
    so with 16-bit compute the matmuls cast them back and keep 16-bit copies (the fp32 upcasts
    are kept by nothing); with fp32 compute the upcasts are the ReLU outputs themselves. The
    (d + 1) x d scores per head and sample are in `_sana`."""
    a, heads, head = dims.a, attention.num_heads, attention.head_dim
    kernels = a * (attention.q_size + attention.kv_size)  # ReLU(q), ReLU(k)
    casts = kernels if a < 4 else 0.0  # the matmuls' 16-bit copies of the fp32 q, k
    return kernels + casts + a * heads * (2 * (head + 1) + 1)  # V_pad, output, denominator


def _glumbconv(dims: Dims, block: Block, width: int) -> float:
    """Per-token bytes of Sana's GLUMBConv (`sana_transformer.py`): conv_inverted (1x1, dim ->
    2h), SiLU, the depthwise 3x3 conv_depth over 2h, chunk into value and gate, value x
    SiLU(gate), conv_point (1x1, h -> dim). A convolution keeps its input whether or not its
    weight trains (its backward formula reads input and weight together; only linears split
    them): conv_inverted's input (the modulated tensor, a 16-bit copy under autocast), SiLU's
    input and conv_depth's input (2h each), conv_depth's output (2h, which the gate's SiLU and
    the product keep through their views), SiLU(gate) (h) and conv_point's input (h): w + 8h."""
    hidden = next(linear for linear in block.linears if linear.name.endswith("conv_point")).in_features
    adapters = sum(
        linear_inputs(dims, features, [name], False)
        for name, features in (("ff.conv_inverted", width), ("ff.conv_point", hidden))
        if name in dims.mode.lora_targets
    )
    return dims.a * (width + 8 * hidden) + adapters


def _sana(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """A SanaTransformerBlock (`sana_transformer.py`) under adaLN-single: LayerNorm and
    modulation, the ReLU linear self-attention (`_linear_attention`; its output reaches to_out
    through a strided view, which the projection copies when it trains) and its gate;
    cross-attention read straight off the residual, SDPA over the caption tokens (their keys and
    values per text token); LayerNorm and modulation, GLUMBConv (`_glumbconv`) and its gate.
    Sana 1.5's q/k norms (diffusers RMSNorm over all heads) where the config has them."""
    attention, cross = block.attention, block.cross_attention
    assert attention is not None and cross is not None
    width = model.hidden_size
    mod = _trained(dims, "time_embed.linear")
    q, k, v, o = attention.names
    cq, _, _, co = cross.names
    per_token = layer_norm(dims, width) + _modulated(dims, width, mod)
    per_token += linear_inputs(dims, width, [q, k, v], dims.autocast) + _qk_norms(dims, attention, False)
    per_token += _linear_attention(dims, attention) + linear_inputs(dims, attention.q_size, [o], False)
    per_token += dims.a * width if mod else 0
    per_token += linear_inputs(dims, width, [cq], False) + kernel_output_input(dims, cross.q_size, co)
    per_text = 0.0
    if cross.qk_norm != "none":
        per_token += _diffusers_rms_norm(dims, cross.q_size, 1)
        per_text = _diffusers_rms_norm(dims, cross.kv_size, 1)
    per_token += layer_norm(dims, width) + _modulated(dims, width, mod)
    per_token += _glumbconv(dims, block, width) + (dims.a * width if mod else 0)
    image, text = shape.image_tokens, shape.text_tokens
    scores = dims.a * attention.num_heads * (attention.head_dim + 1) * attention.head_dim
    return per_token * image + per_text * text + scores + sdpa(dims, cross, image, text)


def _unweighted_rms_norm(dims: Dims, width: int) -> float:
    """diffusers' RMSNorm without a weight (LTX-Video's norm1 / norm2) over the residual: `pow`
    keeps the fp32 copy of the input (the input itself when the stream is fp32), `x * rsqrt`
    keeps the input and the fp32 1/rms per row."""
    if dims.autocast:  # an fp32 residual: its fp32 "copy" is the input itself
        return 4 * width + 4
    return 4 * width + dims.a * width + 4


def _ltx_video(dims: Dims, block: Block, model: ModelSpec, shape: TokenShape) -> float:
    """An LTXVideoTransformerBlock (`transformer_ltx.py`): RMSNorm and modulation, q/k/v inputs,
    q/k RMSNorms over all heads (torch.nn.RMSNorm), RoPE (`x * cos + rotated * sin` keeps only
    the shared cos / sin tables, counted once in the embedder), SDPA, the output projection and
    its gate; cross-attention read straight off the residual with its own q/k RMSNorms (keys per
    text token), no gate; RMSNorm and modulation, the GELU FFN and its gate."""
    attention, cross, mlp = block.attention, block.cross_attention, block.mlp
    assert attention is not None and cross is not None and mlp is not None
    width, inner = model.hidden_size, mlp.intermediate_size
    mod = _trained(dims, "time_embed.linear")
    q, k, v, o = attention.names
    cq, _, _, co = cross.names
    up, _, down = mlp.names
    per_token = _unweighted_rms_norm(dims, width) + _modulated(dims, width, mod)
    per_token += linear_inputs(dims, width, [q, k, v], dims.autocast) + _qk_norms(dims, attention)
    per_token += kernel_output_input(dims, attention.q_size, o) + (dims.a * width if mod else 0)
    per_token += linear_inputs(dims, width, [cq], False) + _rms_norm(dims, cross.q_size, 1)
    per_token += kernel_output_input(dims, cross.q_size, co)
    per_token += _unweighted_rms_norm(dims, width) + _modulated(dims, width, mod)
    per_token += (
        linear_inputs(dims, width, [up], dims.autocast)
        + dims.a * inner
        + linear_inputs(dims, inner, [down], False)
    )
    per_token += dims.a * width if mod else 0
    image, text = shape.image_tokens, shape.text_tokens
    return (
        per_token * image
        + _rms_norm(dims, cross.kv_size, 1) * text
        + sdpa(dims, attention, image, image)
        + sdpa(dims, cross, image, text)
    )


def _group_norm_silu(dims: Dims, width: int) -> float:
    """GroupNorm then SiLU: the norm keeps its input (an fp32 copy under autocast, where
    group_norm runs in fp32 and outputs fp32), SiLU keeps the norm's output."""
    return 2 * dims.norm_bytes() * width


def _resnet(dims: Dims, block: Block, shape: TokenShape) -> float:
    """ResnetBlock2D per sample: GroupNorm + SiLU + conv1, the time projection added, GroupNorm +
    SiLU + conv2; the 1x1 shortcut reads the block input (which under autocast only it keeps)."""
    names = {linear.name.rsplit(".", 1)[-1]: linear for linear in block.linears}
    conv1, conv2 = names["conv1"], names["conv2"]
    inp, out = conv1.in_features // 9, block.width
    per = _group_norm_silu(dims, inp) + linear_inputs(dims, inp, [conv1.name], dims.autocast)
    per += _group_norm_silu(dims, out) + linear_inputs(dims, out, [conv2.name], dims.autocast)
    shortcut = names.get("conv_shortcut")
    if shortcut is not None and dims.autocast:
        per += linear_inputs(dims, inp, [shortcut.name], False)
    return per * positions(shape, block.level)


def _unet_transformer(dims: Dims, block: Block, shape: TokenShape) -> float:
    """One BasicTransformerBlock per sample: LayerNorm + self-attention (q/k/v inputs, SDPA, the
    reshaped output's copy), LayerNorm + cross-attention to the text (keys and values per text
    token), LayerNorm + GEGLU (its gate, value and GELU(gate) kept, then the down input)."""
    attention, mlp = block.attention, block.mlp
    assert attention is not None and mlp is not None
    width, inner = block.width, mlp.intermediate_size
    q, k, v, o = attention.names
    up, _, down = mlp.names
    cross = _attn2(attention)
    count = positions(shape, block.level)
    per = layer_norm(dims, width) + linear_inputs(dims, width, [q, k, v], dims.autocast)
    per += kernel_output_input(dims, width, o)
    per += layer_norm(dims, width) + linear_inputs(dims, width, ["attn2.to_q"], dims.autocast)
    per += kernel_output_input(dims, width, "attn2.to_out.0")
    per += layer_norm(dims, width) + linear_inputs(dims, width, [up], dims.autocast)
    per += 3 * dims.a * inner + linear_inputs(dims, inner, [down], False)
    return per * count + sdpa(dims, attention, count, count) + sdpa(dims, cross, count, shape.text_tokens)


def _unet_weights(dims: Dims, block: Block, shape: TokenShape) -> float:
    """proj_in (after the GroupNorm), proj_out, the down / upsampling convs, conv_norm_out + SiLU
    + conv_out, per sample; conv_in reads the latents (in `outside`)."""
    kept = 0.0
    for linear in block.linears:
        name = linear.name
        if name.endswith("proj_in"):
            kept += positions(shape, block.level) * (
                dims.norm_bytes() * block.width + linear_inputs(dims, block.width, [name], dims.autocast)
            )
        elif name.endswith(("proj_out", "downsamplers.0.conv", "upsamplers.0.conv")):
            kept += positions(shape, block.level) * linear_inputs(dims, block.width, [name], False)
        elif name == "conv_out":
            width = linear.in_features // 9
            kept += positions(shape, 0) * (
                _group_norm_silu(dims, width) + linear_inputs(dims, width, [name], dims.autocast)
            )
    return kept


def denoiser_activations(
    model: ModelSpec,
    shape: TokenShape,
    mode: ActivationMode,
    *,
    fp32_weights: bool,
    masks: tuple[MaskGenerator, ...] = (),
) -> DenoiserActivations:
    """Per-sample saved bytes of every block of a diffusion, video or JEPA model, the inputs one
    checkpointed layer keeps, the sample's inputs and the loss buffers."""
    dims = dims_of(mode, fp32_weights)
    a = dims.a
    layers: list[tuple[Block, float]] = []
    inputs: list[float] = []
    splits: list[float] = []
    for block in model.blocks:
        kind = block_kind(block, model)
        layers.append((block, kind.saved(dims, block, model, shape, masks)))
        splits.append(kind.batch_split(dims, block, model, shape, masks) if kind.batch_split else 0.0)
        width_tokens = kind.layer_input
        inputs.append(a * width_tokens(block, model, shape, masks) if width_tokens is not None else 0.0)
    latent = shape.latent_elements * (model.geometry.latent_channels if model.geometry else 1)
    if model.kind == "jepa":
        outside, held, peak, backward = jepa_sample_bytes(model, shape, dims, masks, latent)
    else:
        # the noisy latents, the noise and the target at the model's dtype; the text embeddings
        # (and their projection in the text-stream embedder); the fp32 loss: pred.float() and the
        # difference kept for ** 2 (diffusers train_dreambooth_lora_flux.py, train_text_to_image)
        text_width = _text_width(model)
        outside = 3.0 * a * latent + a * text_width * shape.text_tokens
        held = 4.0 * latent
        peak = 12.0 * latent
        backward = 8.0 * latent
    return DenoiserActivations(tuple(layers), tuple(inputs), outside, held, peak, backward, tuple(splits))


def _text_width(model: ModelSpec) -> int:
    """Width of the text embeddings the denoiser reads (its context embedder's input, or a
    UNet's cross-attention keys' input)."""
    for block in model.blocks:
        for linear in block.linears:
            if linear.name in _TEXT_INPUTS:
                return linear.in_features
    return 0


#: The linears that read the text embeddings themselves (their input width is the text width).
_TEXT_INPUTS = (
    "context_embedder",
    "condition_embedder.text_embedder.linear_1",
    "caption_projection.linear_1",
    "patch_embed.text_proj",
    "context_embedder.proj_in",
    "attn2.to_k",
)


def is_unet(model: ModelSpec) -> bool:
    """Whether a diffusion model is a UNet (it has resnet blocks)."""
    return any(block.role == "resnet" for block in model.blocks)


def _weights_block(
    dims: Dims, block: Block, model: ModelSpec, shape: TokenShape, masks: tuple[MaskGenerator, ...]
) -> float:
    """Embedders and heads per sample. The patch and context embedders read the sample's inputs
    (counted in `outside`); Wan's text embedder keeps its GELU input and, when trained, linear_2's;
    an output head keeps its norm (fp32 in Wan), the modulated tensor and proj_out's input; a
    JEPA's encoder norm runs over the context tokens, the predictor's embedding reads them, its
    norm runs over every predictor token and its projection over the targets."""
    width = model.hidden_size
    names = {linear.name: linear for linear in block.linears}
    contexts, targets = context_tokens(shape, masks), target_tokens(shape, masks)
    kept = 0.0
    text = names.get("condition_embedder.text_embedder.linear_2") or names.get("caption_projection.linear_2")
    if text is not None:
        kept += shape.text_tokens * (
            dims.a * text.in_features + linear_inputs(dims, text.in_features, [text.name], False)
        )
    if "caption_projection.linear_2" in names and _has_role(model, "sana") and _caption_trains(dims):
        # Sana's caption_norm (diffusers RMSNorm with a weight) over the projected caption
        kept += shape.text_tokens * _diffusers_rms_norm(dims, width, 1)
    if "proj_in" in names and _has_role(model, "ltx_video"):
        # LTX-Video's RoPE: fp32 cos and sin tables over the video tokens, kept by every block
        kept += shape.image_tokens * 2 * 4 * width
    if block.role == "output" and model.kind != "jepa":
        video = _has_role(model, "video_dit")  # Wan's FP32LayerNorm
        kept += shape.image_tokens * (
            layer_norm(dims, width, video)
            + _modulated(dims, width, dims.trainable, video)
            + linear_inputs(dims, width, ["proj_out"], dims.autocast and not video)
        )
    if block.role == "encoder_norm":
        kept += contexts * layer_norm(dims, width)
    if "predictor_embeddings" in names:
        kept += contexts * linear_inputs(dims, width, ["predictor_embeddings"], False)
    if "predictor.proj" in names:
        kept += predictor_tokens(shape, masks) * layer_norm(dims, block.width)
        kept += targets * linear_inputs(dims, block.width, ["predictor.proj"], dims.autocast)
    return kept


def _has_role(model: ModelSpec, role: str) -> bool:
    return any(block.role == role for block in model.blocks)


def _caption_trains(dims: Dims) -> bool:
    """Whether the caption projection's output needs a gradient (it trains, or carries adapters)."""
    return dims.trainable or any(name.startswith("caption_projection.") for name in dims.mode.lora_targets)


#: Embedder linears by the tokens they run over (the rest of an embed block runs once per sample).
_TEXT_LINEARS = (
    "context_embedder",
    "condition_embedder.text_embedder.",
    "caption_projection.",
    "patch_embed.text_proj",
)
_SAMPLE_LINEARS = (
    "time_text_embed.",
    "context_embedder.time_text_embed.",  # HunyuanVideo's refiner: on the pooled text
    "condition_embedder.time_",
    "time_embedding.",
    "add_embedding.",
    "adaln_single.",
    "time_embed.",
)


def _linear_tokens(
    model: ModelSpec, linear: Linear, shape: TokenShape, masks: tuple[MaskGenerator, ...]
) -> float:
    """Tokens one linear of an embedder or head runs over, per sample."""
    name = linear.name
    if name.startswith(_SAMPLE_LINEARS) or linear.role == "modulation":
        return 1.0
    if name.startswith(_TEXT_LINEARS):
        return float(shape.text_tokens)
    if name == "predictor_embeddings":
        return context_tokens(shape, masks)
    if name == "predictor.proj":
        return target_tokens(shape, masks)
    return float(shape.image_tokens)


def _streams(
    model: ModelSpec, block: Block, shape: TokenShape, masks: tuple[MaskGenerator, ...]
) -> list[tuple[float, float]]:
    """(multiply-accumulates per token, tokens) of each linear of one layer of `block`."""
    kind = block_kind(block, model)
    out: list[tuple[float, float]] = []
    for linear in block_linears(block, model.hidden_size):
        macs = float(linear.in_features * linear.out_features * linear.copies)
        if linear.role == "modulation":  # adaLN from the pooled condition: once per sample
            tokens = 1.0
        else:
            tokens = kind.linear_tokens(model, block, linear, shape, masks)
        out.append((macs, tokens))
    return out


def linear_attention_core(attention: Attention, tokens: float) -> float:
    """Sana's linear attention per head: V_pad K is (d + 1) x tokens x d multiply-adds, and
    (V_pad K) Q the same again, so 4 x heads x tokens x d x (d + 1) FLOPs (Katharopoulos et al.
    2020, "Transformers are RNNs", sec. 3.2: linear in the tokens)."""
    head = attention.head_dim
    return 4 * attention.num_heads * tokens * head * (head + 1)


def _attention_forward(
    model: ModelSpec, block: Block, shape: TokenShape, masks: tuple[MaskGenerator, ...]
) -> float:
    """Forward FLOPs per sample of one layer's attention cores (no causal mask)."""
    return block_kind(block, model).attention_flops(model, block, shape, masks)


@dataclass(frozen=True)
class DenoiserFlops:
    """Training FLOPs per sample."""

    matmul_forward: float
    attention_forward: float
    total: float
    recompute: float
    target_forward: float  # a JEPA's EMA target encoder: forward only, all tokens


def denoiser_flops(
    model: ModelSpec,
    shape: TokenShape,
    *,
    frozen_base: bool,
    adapted: frozenset[str],
    rank: int,
    checkpointed: list[int],
    masks: tuple[MaskGenerator, ...] = (),
) -> DenoiserFlops:
    """Training FLOPs per sample: 2 per multiply-accumulate forward; backward 2x (input and
    weight gradients) or 1x for frozen weights, plus 6 x rank x (in + out) per adapted token
    (the 6N rule, Kaplan et al. 2020; Narayanan et al. 2021); attention 3x its forward;
    recompute re-runs the checkpointed layers' forward. A JEPA's target encoder adds one forward
    of the encoder over every token (no backward)."""
    matmul = attention = recompute = adapters = target = 0.0
    for block, count in zip(model.blocks, checkpointed, strict=True):
        streams = _streams(model, block, shape, masks)
        macs = sum(m * t for m, t in streams)
        scores_forward = _attention_forward(model, block, shape, masks)
        matmul += block.count * 2 * macs
        attention += block.count * scores_forward
        recompute += count * (2 * macs + scores_forward)
        for linear, (_, tokens) in zip(block_linears(block, model.hidden_size), streams, strict=True):
            if linear.name in adapted:
                adapters += block.count * 6 * rank * (linear.in_features + linear.out_features) * tokens
        if model.kind == "jepa" and block.role in ("embed", "encoder", "encoder_norm"):
            tokens = shape.image_tokens
            scores = core(block.attention, tokens, tokens) if block.attention is not None else 0.0
            target += block.count * (2 * sum(m for m, _ in streams) * tokens + scores)
    weight_grad = 0.0 if frozen_base else matmul
    total = matmul + matmul + weight_grad + 3 * attention + adapters + recompute + target
    return DenoiserFlops(matmul, attention, total, recompute, target)


@dataclass(frozen=True)
class BlockKind:
    """How one role of block keeps activations and runs its tokens (the table above)."""

    saved: Callable[[Dims, Block, ModelSpec, TokenShape, Masks], float]
    layer_input: Callable[[Block, ModelSpec, TokenShape, Masks], float] | None
    linear_tokens: Callable[[ModelSpec, Block, Linear, TokenShape, Masks], float]
    attention_flops: Callable[[ModelSpec, Block, TokenShape, Masks], float]
    # what one layer keeps per sample only at a micro-batch above 1
    batch_split: Callable[[Dims, Block, ModelSpec, TokenShape, Masks], float] | None = None

    @property
    def layer(self) -> bool:
        """Whether gradient checkpointing wraps this block's layers."""
        return self.layer_input is not None


def _joint_width(block: Block, model: ModelSpec, shape: TokenShape, masks: Masks) -> float:
    return float(model.hidden_size * (shape.image_tokens + shape.text_tokens))


def _image_width(block: Block, model: ModelSpec, shape: TokenShape, masks: Masks) -> float:
    return float(model.hidden_size * shape.image_tokens)


def _joint_tokens(model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks) -> float:
    return float(shape.image_tokens + shape.text_tokens)


def _stream_tokens(model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks) -> float:
    """An MMDiT block's linears: the text stream's over the text tokens, the image stream's over
    the image tokens."""
    text = linear.name.startswith(("attn.add_", "attn.to_add_out", "ff_context."))
    return float(shape.text_tokens if text else shape.image_tokens)


def _cross_tokens(model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks) -> float:
    """A cross-attention DiT's linears: the cross keys and values over the text, the rest over
    the image or video tokens."""
    cross_kv = linear.name in ("attn2.to_k", "attn2.to_v")
    return float(shape.text_tokens if cross_kv else shape.image_tokens)


def _text_tokens(model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks) -> float:
    return float(shape.text_tokens)


def _unet_tokens(model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks) -> float:
    """A UNet block's linears: cross keys and values over the text, the rest over the block's
    latent positions (a stride-2 downsampler's over its outputs)."""
    cross_kv = linear.name.endswith(("attn2.to_k", "attn2.to_v"))
    level = block.level + (1 if block.role == "downsample" else 0)
    return float(shape.text_tokens if cross_kv else positions(shape, level))


def _embedder_tokens(
    model: ModelSpec, block: Block, linear: Linear, shape: TokenShape, masks: Masks
) -> float:
    return _linear_tokens(model, linear, shape, masks)


def _no_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    return 0.0


def _mmdit_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    """Joint attention over text + image (and MMDiT-X's second attention over the image)."""
    assert block.attention is not None
    joint = shape.image_tokens + shape.text_tokens
    flops = core(block.attention, joint, joint)
    if any(linear.name == "attn2.to_q" for linear in block.linears):
        flops += core(block.attention, shape.image_tokens, shape.image_tokens)
    return flops


def _single_stream_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    joint = shape.image_tokens + shape.text_tokens
    return core(_single_attention(block, model), joint, joint)


def _joint_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    assert block.attention is not None
    joint = shape.image_tokens + shape.text_tokens
    return core(block.attention, joint, joint)


def _cross_dit_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    """Self-attention over the image or video tokens, then cross-attention to the text."""
    assert block.attention is not None
    cross = block.cross_attention or block.attention
    return core(block.attention, shape.image_tokens, shape.image_tokens) + core(
        cross, shape.image_tokens, shape.text_tokens
    )


def _sana_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    """ReLU linear self-attention, then cross-attention to the text."""
    assert block.attention is not None and block.cross_attention is not None
    return linear_attention_core(block.attention, shape.image_tokens) + core(
        block.cross_attention, shape.image_tokens, shape.text_tokens
    )


def _text_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    assert block.attention is not None
    return core(block.attention, shape.text_tokens, shape.text_tokens)


def _unet_attention(model: ModelSpec, block: Block, shape: TokenShape, masks: Masks) -> float:
    """A UNet transformer block: self-attention over its positions, cross-attention to the text."""
    assert block.attention is not None
    count = positions(shape, block.level)
    return core(block.attention, count, count) + core(block.attention, count, shape.text_tokens)


def _cross_dit(
    recipe: Callable[[Dims, Block, ModelSpec, TokenShape], float],
    attention: Callable[[ModelSpec, Block, TokenShape, Masks], float] = _cross_dit_attention,
) -> BlockKind:
    return BlockKind(lambda d, b, m, s, k: recipe(d, b, m, s), _image_width, _cross_tokens, attention)


_WEIGHTS = BlockKind(_weights_block, None, _embedder_tokens, _no_attention)
_UNET_WEIGHTS = BlockKind(lambda d, b, m, s, k: _unet_weights(d, b, s), None, _unet_tokens, _no_attention)

#: Block role -> its row. The embedders and heads (`embed`, `output`, `encoder_norm`, a JEPA
#: embedding block without attention) share one row; a UNet's output head is `_UNET_WEIGHTS`.
BLOCK_KINDS: dict[str, BlockKind] = {
    "double_stream": BlockKind(
        lambda d, b, m, s, k: _mmdit(d, b, m, s),
        _joint_width,
        _stream_tokens,
        _mmdit_attention,
        _split_copies,
    ),
    "joint": BlockKind(
        lambda d, b, m, s, k: _mmdit(d, b, m, s),
        _joint_width,
        _stream_tokens,
        _mmdit_attention,
        _split_copies,
    ),
    "single_stream": BlockKind(
        lambda d, b, m, s, k: _single_stream(d, b, m, s),
        _joint_width,
        _joint_tokens,
        _single_stream_attention,
    ),
    "video_dit": _cross_dit(_video_dit),
    "pixart": _cross_dit(_pixart),
    "sana": _cross_dit(_sana, _sana_attention),
    "ltx_video": _cross_dit(_ltx_video),
    "cogvideox": BlockKind(
        lambda d, b, m, s, k: _cogvideox(d, b, m, s), _joint_width, _joint_tokens, _joint_attention
    ),
    # run outside the checkpointed layers: HunyuanVideo's token refiner, CogVideoX's head
    "text_refiner": BlockKind(
        lambda d, b, m, s, k: _text_refiner(d, b, m, s), None, _text_tokens, _text_attention
    ),
    "cogvideox_output": BlockKind(
        lambda d, b, m, s, k: _cogvideox_output(d, b, m, s), None, _embedder_tokens, _no_attention
    ),
    "encoder": BlockKind(
        lambda d, b, m, s, k: vit_layer(d, b, model_recipe(m), jepa_sequences(b, s, k)),
        lambda b, m, s, k: b.width * jepa_tokens(b, s, k),
        jepa_linear_tokens,
        jepa_attention,
    ),
    "resnet": BlockKind(
        lambda d, b, m, s, k: _resnet(d, b, s),
        lambda b, m, s, k: (b.linears[0].in_features // 9) * positions(s, b.level),
        _unet_tokens,
        _no_attention,
    ),
    "transformer": BlockKind(
        lambda d, b, m, s, k: _unet_transformer(d, b, s),
        lambda b, m, s, k: b.width * positions(s, b.level),
        _unet_tokens,
        _unet_attention,
    ),
    "proj": _UNET_WEIGHTS,
    "downsample": _UNET_WEIGHTS,
    "upsample": _UNET_WEIGHTS,
    "embed": _WEIGHTS,
    "output": _WEIGHTS,
    "encoder_norm": _WEIGHTS,
}
BLOCK_KINDS["predictor"] = BLOCK_KINDS["encoder"]


def block_kind(block: Block, model: ModelSpec) -> BlockKind:
    """The row of `block`: by its role, with a JEPA embedding block (no attention) as an
    embedder and a UNet's output head as a UNet weight block; an unknown role is refused."""
    if block.role in ("encoder", "predictor") and block.attention is None:
        return _WEIGHTS
    if block.role == "output" and model.kind == "diffusion" and is_unet(model):
        return _UNET_WEIGHTS
    kind = BLOCK_KINDS.get(block.role)
    if kind is None:
        raise InputError(
            "model",
            f"{model.name}: memory of its {block.role!r} blocks is not modelled; its parameters "
            "are counted (`trainplan models --family diffusion`)",
        )
    return kind
