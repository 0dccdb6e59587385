"""The frozen encoders of a diffusion pipeline: their GPU memory, forward peak, FLOPs, PCIe traffic.

`frozen_encoders` says where the VAE and the text encoders (`ModelSpec.frozen`, counted by
`hf/encoders.py`) live during training:

- `precomputed`: latents and text embeddings were cached beforehand (the SDXL LoRA scripts'
  `--cache_latents`, train_dreambooth_lora_sdxl.py, which encodes the dataset once; prompt
  embeddings computed once): nothing of them is on the GPU, nothing runs per step. Not counted:
  those scripts keep the cached latent distributions on the GPU (mean and log-variance, 2 x
  latent channels x latent pixels per training image, in the VAE's dtype) and keep the VAE too
  when a validation prompt is given.
- `gpu`: every component is moved to the GPU once at the compute dtype and runs without grad each
  micro-batch. The diffusers scripts cast what they do not train to `weight_dtype`
  (train_dreambooth_lora_flux.py: `vae.to(accelerator.device, dtype=weight_dtype)`, the same for
  both text encoders; bf16 = 2 bytes). The whole VAE is moved, decoder included, though training
  runs only its encoder. train_text_to_image_sdxl.py keeps the SDXL VAE in fp32 (its fp16 NaNs)
  unless a fixed VAE is given: pass `weight_bytes=4` for it.
- `offload`: the components stay in CPU memory and each one is moved to the GPU for its forward
  and back after (the DreamBooth LoRA scripts' `--offload`: "offload the VAE and the text
  encoders to CPU when they are not used"): no resident bytes, one component's weights at a time
  on the GPU, and their bytes over PCIe both ways every micro-batch.

Each function takes Python numbers or numpy arrays for `micro_batch` (the planner's candidates)
and returns bytes, FLOPs per sample, or bytes per micro-batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.scalar_or_array import maximum
from trainplan.engine.terms.flops import attention_core, block_matmul_active
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.terms.vae_encoder import (
    FRAME_TILES,
    PADDED_INPUT,
    VAE_PEAK_COPIES,
    frame_tiles,
    vae_flops,
    vae_working_bytes,
)
from trainplan.specs.errors import InputError
from trainplan.specs.labels import ESTIMATE, EXACT
from trainplan.specs.model import FrozenComponent, ModelSpec

__all__ = [
    "ALL_HIDDEN_STATES",
    "EAGER_ATTENTION",
    "FRAME_TILES",
    "KINDS",
    "PADDED_INPUT",
    "VAE_PEAK_COPIES",
    "FrozenEncoderCost",
    "encoder_tokens",
    "flops_per_sample",
    "frame_tiles",
    "frozen_encoder_cost",
    "offload_bytes",
    "peak_bytes",
    "resident_bytes",
    "text_flops",
    "text_working_bytes",
    "vae_flops",
    "vae_working_bytes",
    "working_bytes",
]


def resident_bytes(model: ModelSpec, frozen_encoders: str, weight_bytes: int = 2) -> int:
    """GPU bytes the frozen components hold for the whole run: every weight of every component
    (both VAE halves) at `weight_bytes` for `gpu`; 0 for `precomputed` and `offload`. Exact."""
    if frozen_encoders != "gpu":
        return 0
    return sum(component.params for component in model.frozen) * weight_bytes


def offload_bytes(model: ModelSpec, frozen_encoders: str, weight_bytes: int = 2) -> int:
    """Bytes over PCIe per micro-batch for `offload`: each component's weights host -> device
    before its forward and device -> host after (`module.to(device)`, `module.to("cpu")`, each a
    full copy), 2 x params x weight_bytes summed; 0 otherwise. A step of grad_accum micro-batches
    moves grad_accum times this. Exact."""
    if frozen_encoders != "offload":
        return 0
    return 2 * sum(component.params for component in model.frozen) * weight_bytes


def encoder_tokens(component: FrozenComponent, shape: TokenShape) -> int:
    """Tokens a text encoder reads per sample: CLIP its fixed context (the pipelines pad every
    prompt to the tokenizer's 77), a T5 the denoiser's text length less the positions other
    encoders take ahead of it (SD3: 333 - 77 = 256), plus the prompt template its pipeline puts
    ahead of the prompt (HunyuanVideo's LLaMA: 256 + 95); InputError naming text_tokens when
    none are left. Exact."""
    if component.context_tokens:
        return component.context_tokens
    tokens = shape.text_tokens - component.text_offset
    if tokens < 1:
        raise InputError(
            "text_tokens",
            f"{shape.text_tokens}: the first {component.text_offset} text positions are CLIP's, so "
            f"{component.name} ({component.architecture}) needs at least {component.text_offset + 1}",
        )
    return tokens + component.template_tokens


def text_flops(component: FrozenComponent, shape: TokenShape) -> float:
    """Forward FLOPs per sample of a text encoder, by the rules of `terms/flops.py`: 2 x matmul
    weights x tokens (embedding lookups cost none; Kaplan et al. 2020, sec. 2.1) plus scores and
    weighted sum, 2 x heads x tokens x (d_k + d_v) per token and layer over all tokens (CLIP's
    causal mask saves nothing on the math path), plus a pooled projection on one token. Exact
    arithmetic, elementwise ops left out."""
    text = component.text
    assert text is not None, "a text component carries its layout"
    tokens = encoder_tokens(component, shape)
    per_token = sum(
        block.count * (2 * block_matmul_active(block, text) + attention_core(block, tokens))
        for block in text.blocks
    )
    return per_token * tokens + sum(2 * extra.params for extra in text.extras)


#: Intermediate-width tensors a text encoder's MLP holds at once: fc1's output and its GELU (2);
#: quick_gelu computes x * sigmoid(1.702 x), so fc1's output, 1.702 x and the sigmoid (3); T5's
#: gated FFN runs gelu_new as Python arithmetic on wi_0's output, which holds it, 0.5 x, x^3 and
#: 0.044715 x^3 at once (4; then wi_1's output and the product: 3); a decoder's gated MLP
#: (LlamaMLP, Gemma2MLP: down_proj(act(gate_proj(x)) * up_proj(x))) the activation, up_proj's
#: output and the product (3).
_MLP_COPIES = {"gelu": 2, "quick_gelu": 3, "gated": 4, "gated-decoder": 3}

#: Decoders run as text encoders whose attention is eager (transformers 5.24 Gemma2Model refuses
#: SDPA: its logit soft-capping): the layer's attention weights, heads x L^2, are alive at the
#: peak, and so are its two additive bf16 masks, full and sliding-window, L^2 each.
EAGER_ATTENTION = ("Gemma2Model",)

#: Text encoders whose pipeline asks for every layer's hidden states (HunyuanVideoPipeline calls
#: its LlamaModel with output_hidden_states=True and reads hidden_states[-3]): the model keeps
#: each layer's output to the end of the forward.
ALL_HIDDEN_STATES = ("LlamaModel",)


def _decoder_extra(component: FrozenComponent, block_count: int, tokens: int) -> tuple[int, int]:
    """What a decoder run as an encoder holds beyond an encoder layer's tensors, per sample and
    per micro-batch: its KV cache (the base model's forward keeps a DynamicCache, use_cache
    defaulting to true: 2 x kv heads x head_dim x L for every layer), the earlier layers' hidden
    states (ALL_HIDDEN_STATES: layers - 2 more L x h beyond the embedding output and the layer
    input), and under eager attention (EAGER_ATTENTION) the attention weights and the two masks;
    RoPE's cos and sin, 2 x L x head_dim, are shared by the micro-batch."""
    text = component.text
    assert text is not None, "a text component carries its layout"
    per_sample, shared = 0, 0
    for block in text.blocks:
        attention = block.attention
        assert attention is not None, "decoder text encoders have attention"
        per_sample += block.count * 2 * attention.num_kv_heads * attention.head_dim * tokens
        shared = 2 * tokens * attention.head_dim
        if component.architecture in EAGER_ATTENTION:
            per_sample += (attention.num_heads + 2) * tokens * tokens
    if component.architecture in ALL_HIDDEN_STATES:
        per_sample += (block_count - 2) * tokens * text.hidden_size
    return per_sample, shared


def text_working_bytes(
    component: FrozenComponent, shape: TokenShape, micro_batch: Any = 1, activation_bytes: int = 2
) -> Any:
    """Bytes a text encoder's no-grad forward holds at its peak for a micro-batch (transformers
    5.x modeling_clip.py, modeling_t5.py, modeling_llama.py, modeling_gemma2.py; matched by a
    fake-tensor trace, tests/test_encoders.py). Held across each layer: the embedding output
    (kept by the model while its layers run; Gemma-2's scaled copy) and the layer input (kept by
    the layer loop). In attention they hold with the normed copy and q, k, v and the output
    (3 L h + 4 L x heads x d; SDPA's memory-efficient kernel keeps no scores); in the MLP with the
    post-attention residual and its normed copy (4 L h) and the MLP's intermediates
    (`_MLP_COPIES` x L i). A T5 adds its relative position bias, heads x L^2, which its first
    layer computes and the stack keeps (UMT5: each attention computes its own and drops it), and
    in attention each layer's contiguous copy of it (transformers' create_position_bias_mask);
    neither is per sample: the pipelines give T5 no padding mask. A decoder adds
    `_decoder_extra`, counted at its last layer (the cache full). The larger of the two moments
    in the widest layer. An estimate."""
    text = component.text
    assert text is not None, "a text component carries its layout"
    tokens = encoder_tokens(component, shape)
    biased = [bool(block.attention and block.attention.relative_bias_params) for block in text.blocks]
    shared = biased[0] and not all(biased)  # T5: the first layer's bias serves the stack; UMT5: one each
    decoder = all(block.role == "decoder" for block in text.blocks)
    layers = sum(block.count for block in text.blocks)
    extra, extra_shared = _decoder_extra(component, layers, tokens) if decoder else (0, 0)
    peak: Any = 0
    for block in text.blocks:
        attention, mlp = block.attention, block.mlp
        assert attention is not None and mlp is not None, "text encoder layers have attention and an MLP"
        bias = attention.num_heads * tokens * tokens if shared or attention.relative_bias_params else 0
        kind = ("gated-decoder" if decoder else "gated") if mlp.gated else mlp.activation
        copies = _MLP_COPIES.get(kind, 2)
        hidden, inner, width = (
            tokens * text.hidden_size,
            tokens * mlp.intermediate_size,
            tokens * attention.q_size,
        )
        in_attention = micro_batch * (3 * hidden + 4 * width + extra) + 2 * bias + extra_shared
        in_mlp = micro_batch * (4 * hidden + copies * inner + extra) + (bias if shared else 0) + extra_shared
        peak = maximum(peak, maximum(in_attention, in_mlp))
    return peak * activation_bytes


def working_bytes(
    component: FrozenComponent, shape: TokenShape, micro_batch: Any = 1, activation_bytes: int = 2
) -> Any:
    """The no-grad forward working set of one component (VAE or text encoder). An estimate."""
    if component.kind == "vae":
        return vae_working_bytes(component, shape, micro_batch, activation_bytes)
    return text_working_bytes(component, shape, micro_batch, activation_bytes)


def peak_bytes(
    model: ModelSpec,
    shape: TokenShape,
    micro_batch: Any,
    frozen_encoders: str,
    activation_bytes: int = 2,
    weight_bytes: int = 2,
) -> Any:
    """The transient GPU peak of running the frozen components on one micro-batch, over what
    `resident_bytes` holds: they run one after another without grad, so the largest of their
    working sets on the micro-batch; under `offload` each also brings its weights for the while
    (params x weight_bytes). 0 for `precomputed`. An estimate."""
    peak: Any = 0 * micro_batch
    if frozen_encoders == "precomputed":
        return peak
    for component in model.frozen:
        weights = component.params * weight_bytes if frozen_encoders == "offload" else 0
        peak = maximum(peak, working_bytes(component, shape, micro_batch, activation_bytes) + weights)
    return peak


def flops_per_sample(model: ModelSpec, shape: TokenShape, frozen_encoders: str) -> float:
    """Forward FLOPs per sample of every frozen component that runs each step (`gpu`, `offload`):
    the VAE encoder over the pixels and each text encoder over its tokens; 0 for `precomputed`.
    Exact arithmetic (matmuls and convolutions)."""
    if frozen_encoders == "precomputed":
        return 0.0
    return sum(
        vae_flops(component, shape) if component.kind == "vae" else text_flops(component, shape)
        for component in model.frozen
    )


@dataclass(frozen=True)
class FrozenEncoderCost:
    """What the frozen components add to a step (see `KINDS` for each field's kind and formula)."""

    resident_bytes: int
    peak_bytes: Any
    flops_per_sample: float
    offload_bytes_per_micro_batch: int


#: Field of FrozenEncoderCost -> (exact | estimate, one-line formula), for the result tree.
KINDS = {
    "resident_bytes": (EXACT, "gpu: every VAE and text-encoder weight at the compute dtype"),
    "peak_bytes": (ESTIMATE, "the largest component's no-grad forward working set on the micro-batch"),
    "flops_per_sample": (EXACT, "2 x weights x tokens (text); 2 x in x out x taps x positions (VAE convs)"),
    "offload_bytes_per_micro_batch": (EXACT, "offload: 2 x weights x bytes, host to device and back"),
}


def frozen_encoder_cost(
    model: ModelSpec,
    shape: TokenShape,
    micro_batch: Any,
    frozen_encoders: str,
    compute_bytes: int = 2,
) -> FrozenEncoderCost:
    """Everything above for one scenario, weights and activations at the compute dtype."""
    # samples.sample_shape refuses gpu / offload for a pipeline with geometry-only components
    assert frozen_encoders == "precomputed" or all(c.counted for c in model.frozen), model.name
    return FrozenEncoderCost(
        resident_bytes=resident_bytes(model, frozen_encoders, compute_bytes),
        peak_bytes=peak_bytes(model, shape, micro_batch, frozen_encoders, compute_bytes, compute_bytes),
        flops_per_sample=flops_per_sample(model, shape, frozen_encoders),
        offload_bytes_per_micro_batch=offload_bytes(model, frozen_encoders, compute_bytes),
    )
