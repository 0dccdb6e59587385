"""The model spec: a decoder described by the shapes of its weights.

A model is an embedding, groups of identical blocks (each a token mixer -- attention, a Mamba
state-space mixer, both side by side, or a linear-attention / recurrent / short-conv mixer -- an
optional MLP, and norms) and a head. Every weight matrix is listed as a `Linear` with the name
Hugging Face gives that module, so parameter counts, LoRA targets and activation sizes all derive
from one description.
Hugging Face config keys never appear here: the `hf` package is the only adapter that reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, TypeVar

from trainplan.frozen import once

# Roles of linear layers; LoRA target presets select by role.
ATTENTION_ROLES = frozenset(
    {"q", "k", "v", "qkv", "o", "q_a", "q_b", "kv_a", "kv_b", "attn_gate", "attn_mask", "attn_rel"}
)
QUERY_VALUE_ROLES = frozenset({"q", "v", "qkv", "q_b", "kv_b"})
MLP_ROLES = frozenset({"gate", "up", "gate_up", "down"})
# SSM projections, and those of the linear-attention / short-convolution mixers (`LinearMixer`)
SSM_ROLES = frozenset({"ssm_in", "ssm_x", "ssm_dt", "ssm_out", "mixer_in", "mixer_gate", "mixer_out"})
INDEXER_ROLES = frozenset({"indexer"})  # DeepSeek sparse attention's lightning indexer (not "attention")
EXTRA_ROLES = frozenset({"proj", "adapter"})  # per-layer linears outside mixer and MLP (Zamba2)
# Role "einsum": a weight tensor applied by einsum, not an nn.Linear (XLNet's q/k/v/o/r): a matmul
# for FLOPs and weight gradients, but no module for a LoRA preset (or peft's "all-linear") to wrap.
# Linears of diffusion and JEPA models outside attention and MLP: adaLN modulation, condition
# embedders, a fused attention+MLP output, the output projection. Convolutions (role "conv",
# counted as in*k*k x out matrices) are not linear layers: "all-linear" leaves them out.
DENOISER_ROLES = frozenset({"modulation", "embed", "fused_out", "output"})
# What a model is trained to do; `trainplan models --family` filters by it.
MODEL_KINDS = ("llm", "diffusion", "video", "jepa")


T = TypeVar("T")


@dataclass(frozen=True)
class Linear:
    """One weight matrix y = x W^T (+ b), `copies` times (one per routed expert)."""

    name: str
    role: str
    in_features: int
    out_features: int
    bias: bool = False
    copies: int = 1
    expert: bool = False
    # whether peft can put an adapter on it: routed experts stored as fused 3-D parameters are
    # reached only where peft's transformers-5 MoE conversion maps them (Mlp.expert_adapters)
    adaptable: bool = True
    # that conversion adapts a routed expert's gate and up projections as one fused parameter at
    # twice the rank (terms/params.py `adapter_matrix_params`)
    peft_converted: bool = False
    # a router peft's all-linear reaches: an nn.Linear one (the shared-expert gate), or the
    # router weight peft's MoE conversion targets
    in_all_linear: bool = False

    @property
    def params(self) -> int:
        """in x out (+ out for the bias), times copies."""
        return (self.in_features * self.out_features + (self.out_features if self.bias else 0)) * (
            self.copies
        )


@dataclass(frozen=True)
class Attention:
    """Self- or cross-attention. `kind` is "mha" (covers GQA/MQA), "mla" (DeepSeek-V2/V3) or
    "xlnet" (XLNet's relative attention: content, position and segment scores, terms/variants.py)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    kind: str = "mha"
    qkv_bias: bool = False
    out_bias: bool = False
    fused_qkv: str | None = None
    qk_norm: str = "none"
    qk_norm_bias: bool = False
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_head_dim: int = 0
    relative_bias_params: int = 0
    logit_softcap: bool = False
    sinks: bool = False  # a learned attention-sink logit per head (gpt-oss style)
    dropout: float = 0.0  # the probabilities' dropout in training (config attention_dropout)
    output_gate: bool = False  # q_proj also emits a per-channel sigmoid gate on the output (Qwen3-Next)
    head_gate: bool = False  # a g_proj h -> heads gates each head's output (Ling 3.0, LFM3)
    input_size: int = 0  # width q/k/v read when not the hidden size (Zamba2: hidden + embedding)
    index_heads: int = 0  # DeepSeek sparse attention's indexer: its heads (0: no indexer)
    index_head_dim: int = 0
    gate_size: int = 0  # gated attention: width of the output-gate projection (heads, or all q channels)
    gate_bias: bool = False  # a learned gate bias per head (Beam)
    gate_name: str = "gate_proj"
    k_bias: bool = True  # with qkv_bias: False where k_proj alone has none (Whisper)
    # mixture of attention heads (JetMoE): query and output projections routed over this many expert
    # pairs of num_kv_heads heads each, num_heads / num_kv_heads of them per token (0: not routed)
    routed_experts: int = 0
    # Doge's dynamic mask attention: dt_proj over the values and a learned A per kv head give a score bias
    dynamic_mask: bool = False
    # A.X K2's MLA: q_gate_proj maps the normed and the raw query latent (concatenated) to each head's
    # query and a per-channel sigmoid gate on its output, in place of q_b_proj
    query_gate: bool = False
    # a KV-shared layer (Gemma 4's last num_kv_shared_layers, its assistant's every layer): it attends
    # to keys and values an earlier layer (or the backbone) computed, with no k/v projections or norms
    kv_shared: bool = False
    # Inkling's learned relative-position logits: r_proj h -> heads x `relative_width` mixes a bank of
    # relative_width x extent bias profiles (`relative_bias_params`) into one score bias per key
    relative_width: int = 0
    relative_extent: int = 0
    # Inkling's causal depthwise short convolutions of this many taps on the keys and on the values
    kv_conv_kernel: int = 0
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj")

    @property
    def q_size(self) -> int:
        """Width of all query heads."""
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of all key heads (= value heads for MHA/GQA)."""
        return self.num_kv_heads * self.head_dim

    @property
    def own_kv_size(self) -> int:
        """Width of the keys this layer projects itself: `kv_size`, or 0 in a KV-shared layer."""
        return 0 if self.kv_shared else self.kv_size

    @property
    def routed_top_k(self) -> int:
        """Expert pairs a token runs in a mixture of attention heads (0 when not routed)."""
        return self.num_heads // self.num_kv_heads if self.routed_experts else 0


@dataclass(frozen=True)
class Mlp:
    """A feed-forward block: dense (gated = 3 matrices, plain = 2) or mixture-of-experts."""

    intermediate_size: int
    gated: bool = True
    bias: bool = False
    fused_gate_up: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    shared_intermediate_size: int = 0
    shared_expert_gate: bool = False
    shared_bias: bool = False  # biased shared experts beside bias-free routed ones (ERNIE 4.5 with use_bias)
    router_bias: bool = False
    sorted_scatter: bool = False  # JetMoE: tokens sorted by expert, top-k softmax, merged by index_add
    # zero-computation (identity) experts the router may pick beside the real ones (LongCat-Flash)
    zero_experts: int = 0
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    activation: str = "silu"
    activation_params: int = 0  # a learned activation's own scalars (xIELU's alpha_p, alpha_n)
    output_scale: bool = False  # one learned scalar scales the MLP's output (Inkling's global_scale)
    shared_scores: bool = False  # the router also scores the shared experts, weighting them (Inkling)
    inner_dropout: bool = False  # dropout between the activation and the down projection (XLNet)
    # peft reaches the routed experts (terms/params.py PEFT_EXPERT_ADAPTER_TYPES); where it does not,
    # "all-linear" and projection names adapt the attention, router-free linears and shared experts only
    expert_adapters: bool = True

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts block."""
        return self.num_experts > 0


@dataclass(frozen=True)
class Ssm:
    """A Mamba (selective scan, Gu & Dao 2023) or Mamba-2 (SSD, Dao & Gu 2024) mixer.

    `inner_size` is the expanded width (expand x hidden); Mamba-2 splits it into `num_heads` of
    `head_dim` and shares B and C across `n_groups`; Mamba keeps one state of `state_size` per
    inner channel and projects the step size through a rank-`dt_rank` bottleneck. A Mamba mixer
    with `num_heads` > 0 is Zamba's multi-head one (ZambaMambaMixer): the inner channels split into
    that many independent heads, each with its own dt, B and C, its x_proj and dt_proj batched
    per-head weight tensors (nn.Parameter, not nn.Linear) rather than two linear layers.
    """

    kind: str  # "mamba" | "mamba2"
    inner_size: int
    state_size: int
    conv_kernel: int
    num_heads: int = 0
    n_groups: int = 1
    dt_rank: int = 0
    proj_bias: bool = False
    conv_bias: bool = True
    gated_norm: bool = True  # Mamba-2's RMSNorm over the inner width, gated by z
    dt_bc_norms: bool = False  # Jamba's RMSNorms on dt, B and C
    chunk_size: int = 256  # Mamba-2's SSD chunk length (Mamba2Config.chunk_size default)

    @property
    def conv_channels(self) -> int:
        """Channels of the causal depthwise conv: x (Mamba), or x, B and C (Mamba-2)."""
        if self.kind == "mamba":
            return self.inner_size
        return self.inner_size + 2 * self.n_groups * self.state_size


#: Kinds of `LinearMixer`, with the transformers module each one follows.
LINEAR_MIXER_KINDS = {
    "gated_deltanet": "Qwen3NextGatedDeltaNet / Qwen3_5GatedDeltaNet (Yang et al. 2024, Gated DeltaNet)",
    "lightning": "MiniMaxLightningAttention (Qin et al. 2024, Lightning Attention-2)",
    "short_conv": "Lfm2ShortConv (gated short convolution, Liquid AI LFM2)",
    "kda": "KimiLinearDeltaAttention (Kimi Delta Attention, Kimi Team 2025)",
    "rg_lru": "RecurrentGemmaRecurrentBlock (Griffin's RG-LRU, De et al. 2024)",
    "rwkv": "RwkvSelfAttention (RWKV-4's time mixing, Peng et al. 2023)",
}
#: How Gated DeltaNet's input projections are split into modules: Qwen3-Next's two fused ones,
#: Qwen3.5's four, OLMo-Hybrid's six.
DELTANET_PROJECTIONS = ("fused", "split", "separate")


@dataclass(frozen=True)
class LinearMixer:
    """A token mixer whose state does not grow with the context: linear attention, a gated linear
    recurrence (RG-LRU, RWKV) or a gated short convolution (kinds in `LINEAR_MIXER_KINDS`).

    `num_heads` value heads of `head_dim`; Gated DeltaNet reads queries and keys through
    `num_key_heads` heads of `key_head_dim` (0: as many / as wide as the value heads). A causal
    depthwise conv of `conv_kernel` taps runs over q, k and v (Gated DeltaNet, KDA) or over the
    gated input (short conv and RG-LRU, one head of the recurrence width; RG-LRU's gates are
    block-diagonal over `num_heads` blocks). `projections` is how Gated DeltaNet's input
    projections are split (`DELTANET_PROJECTIONS`); `gate_rank` is KDA's low-rank forget and
    output gate width; `chunk_size` the chunk length of the chunked scan (transformers' torch
    path: 64 for the delta rules, `block_size` for lightning attention).
    """

    kind: str
    num_heads: int
    head_dim: int
    num_key_heads: int = 0
    key_head_dim: int = 0
    conv_kernel: int = 0
    conv_bias: bool = False
    projections: str = "fused"
    gate_rank: int = 0
    chunk_size: int = 64

    @property
    def key_size(self) -> int:
        """Width of all query (= key) heads."""
        return (self.num_key_heads or self.num_heads) * (self.key_head_dim or self.head_dim)

    @property
    def value_size(self) -> int:
        """Width of all value heads (the mixer's output width)."""
        return self.num_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal depthwise conv: q, k and v, or the gated input's width (short
        conv, RG-LRU); none for lightning attention and RWKV."""
        if self.kind in ("short_conv", "rg_lru"):
            return self.value_size
        if self.kind in ("gated_deltanet", "kda"):
            return 2 * self.key_size + self.value_size
        return 0


@dataclass(frozen=True)
class Block:
    """`count` identical layers: a token mixer (attention and/or SSM, or a linear mixer), an
    optional MLP, norms.

    `parallel` marks attention and MLP reading the same normed input (GPT-J, Falcon, Cohere).
    `linears` are the per-layer matrices outside the mixer and MLP: Zamba2's output linear and
    its per-layer adapters, RWKV's receptance, and in diffusion and JEPA blocks adaLN
    modulation, a second stream's projections and convolutions (as in*k*k x out matrices).
    `shared_copies` > 0 marks layers that run one of that many shared blocks (Zamba2): their
    weights are counted once per copy in the model's extras, not per layer, except the layer's
    own `linears`. `extra_params` are norm weights, modulation tables, mask tokens; `width` is the block's own
    residual width where it is not the model's (a UNet stage, a JEPA predictor), and `level`
    a UNet block's resolution: it runs over the latent positions / 4^level (a downsampler at
    the level of its input, an upsampler's conv at the level it upsamples to).
    """

    count: int
    attention: Attention | None
    mlp: Mlp | None
    norms: int = 2
    cross_attention: Attention | None = None
    role: str = "decoder"
    ssm: Ssm | None = None
    mixer: LinearMixer | None = None
    parallel: bool = False
    shared_copies: int = 0
    linears: tuple[Linear, ...] = ()
    extra_params: int = 0
    width: int = 0
    level: int = 0
    # of the block's norms, this many are gated RMSNorms (A.X K2): y = norm(x), y x sigmoid(fc2(silu(fc1(y))))
    # through a rank-`gated_norm_rank` bottleneck; their fc1 / fc2 are in `linears`
    gated_norms: int = 0
    gated_norm_rank: int = 0
    # a later pass over layers whose weights an earlier block holds (HRM's cycles over its two
    # stacks): its compute and activations count, its weights (and LoRA adapters) do not
    rerun: bool = False
    # the pass runs under torch.no_grad (HRM's earlier low-level cycles): forward compute only,
    # no backward and nothing kept for it
    no_grad: bool = False
    # Inkling: a causal depthwise convolution of this many taps (no bias, a residual inside) on the
    # attention output and on the MLP output, each over the hidden width
    sublayer_conv_kernel: int = 0
    # hyper-connections (Hy-V4, after DeepSeek-V4): the residual stream is this many copies of the hidden
    # state; before attention and before the MLP a mixer reads them all and weights them in and back out
    hyper_streams: int = 0
    # where its layers sit in the module tree transformers or diffusers builds ("{}": the layer's
    # index within the stack): "transformer_blocks.{}", "model.layers.{}". "" for a block whose
    # linears are named from the model's top (an embedding or output block, a UNet's), or where
    # the tree is not modelled (a regular-expression LoRA target cannot be matched there)
    path: str = ""


@dataclass(frozen=True)
class ExtraComponent:
    """Parameters outside the transformer stack (vision tower, VQ tokenizer, class embedding)."""

    name: str
    params: int
    trainable: bool = False
    note: str = ""
    # weights whose activations are modelled (Zamba2's shared blocks, Hy-V4's hyper-connection head)
    in_layers: bool = False


@dataclass(frozen=True)
class LatentGeometry:
    """How pixels become denoiser (or encoder) tokens, from the model's configs.

    A frame of W x H pixels is encoded to (W / spatial_stride) x (H / spatial_stride) latents of
    `latent_channels`; `frames` pixel frames become 1 + (frames - 1) / temporal_stride latent
    frames for causal video VAEs (Wan), `frames / temporal_stride` tubelets for a JEPA
    (temporal_causal False); each token covers patch_t x patch x patch latents (FLUX packs
    2 x 2 latents into one token: patch 2 on a 1x1-patch transformer).
    """

    spatial_stride: int  # pixels per latent along one side (VAE downsampling; 1 for JEPA)
    latent_channels: int
    patch: int  # latents per token along one side
    temporal_stride: int = 1  # pixel frames per latent frame (video VAE / JEPA tubelet)
    patch_t: int = 1
    temporal_causal: bool = True  # the first frame is its own latent frame
    text_tokens: int = 0  # default text sequence length seen by the denoiser
    source: str = ""
    resolution: int | str = 0  # the pipeline's default sample size (pixels, or "WxH")
    frames: int = 1  # its default frames per clip
    recipe: str = ""  # a JEPA's pretraining recipe: a row of data/jepa_recipes.yaml


@dataclass(frozen=True)
class EncoderLayer:
    """One layer of a frozen VAE encoder that costs FLOPs, where it runs.

    `kind` "conv": a convolution of `kernel` taps per output value and input channel (k x k, or
    kt x k x k for a causal 3-D conv); "attention": the single-head self-attention of a mid block
    over the `in_channels`-wide latent pixels of one frame (its projections are listed as 1x1
    convs); "clip-attention": the same over the latent pixels of every frame at once;
    "linear-attention": AutoencoderDC's ReLU linear attention over `in_channels` query channels
    in heads of `out_channels` (its projections listed as convs). The layer's output is at
    1 / 2**`level` of the input's pixels per side and, in time, has 1 + (frames - 1) /
    2**`time_level` frames (a causal video VAE; 1 frame for images).
    `stride` is the spatial stride (2 for a downsampling conv: its input has 4x the pixels).
    `skips_first_frame`: the layer does not run on the first frame's chunk (Wan's strided time
    conv, which only sees later chunks); `cache_frames`: input frames a causal conv keeps from the
    previous chunk and prepends to the next (Wan's feature cache: 2 for a 3x3x3 conv, 1 for the
    time conv).
    """

    name: str
    kind: str  # "conv" | "attention" | "clip-attention" | "linear-attention"
    in_channels: int
    out_channels: int
    kernel: int = 1
    level: int = 0
    time_level: int = 0
    stride: int = 1
    skips_first_frame: bool = False
    cache_frames: int = 0


@dataclass(frozen=True)
class FrozenComponent:
    """A frozen part of a diffusion pipeline that training runs but never updates: the VAE or
    a text encoder, counted from its own config.

    `params` are every weight the component loads (a VAE's encoder and decoder halves);
    `forward_params` the weights a training step runs (a VAE's encoder and quant_conv; a text
    encoder's all). A VAE lists its encoder's `layers` in forward order; a text encoder carries
    its `text` layout (widths, heads, layers, as a ModelSpec) and `context_tokens`, the fixed
    length it always reads (CLIP's 77-token context; 0: the scenario's text length, less
    `text_offset`, the denoiser's text positions ahead of this encoder's: SD3's 77 CLIP positions
    before the T5 tokens), plus `template_tokens`, a prompt template it reads ahead of the prompt
    that the pipeline crops off its output (HunyuanVideo's 95).
    """

    name: str  # the pipeline folder: vae, text_encoder, text_encoder_2, text_encoder_3
    kind: str  # "vae" | "text"
    architecture: str  # the class that builds it: AutoencoderKL, CLIPTextModel, T5EncoderModel...
    params: int
    forward_params: int
    layers: tuple[EncoderLayer, ...] = ()
    text: ModelSpec | None = None
    context_tokens: int = 0
    text_offset: int = 0
    template_tokens: int = 0
    source: str = ""
    counted: bool = True  # False: known for its geometry only; its weights and FLOPs are not counted


@dataclass(frozen=True)
class ModelSpec:
    """A whole model. `hidden_size` is the residual width; blocks are in forward order."""

    name: str
    hidden_size: int
    vocab_size: int
    blocks: tuple[Block, ...]
    tied_embeddings: bool = False
    head_bias: bool = False
    norm: str = "rmsnorm"  # rmsnorm | rmsnorm-no-weight | layernorm | layernorm-no-bias | parameter-free
    final_norms: int = 1
    learned_positions: int = 0
    embedding_inputs: int = 1
    encoder_decoder: bool = False
    dropout: float = 0.0
    final_logit_softcap: bool = False
    extras: tuple[ExtraComponent, ...] = ()
    approximations: tuple[str, ...] = ()
    source: str = ""
    kind: str = "llm"  # one of MODEL_KINDS
    geometry: LatentGeometry | None = None
    family: str = ""
    modality: str = "text"
    notes: tuple[str, ...] = field(default=())
    frozen: tuple[FrozenComponent, ...] = ()  # a pipeline's VAE and text encoders, not in the counts
    # registered buffers on the GPU, not parameters: the sin-cos position table of SD3's and
    # PixArt's patch embedders (diffusers PatchEmbed), at the weights' dtype
    buffer_elements: int = 0
    embedding_size: int = 0  # token-embedding width where it is not hidden_size (ELECTRA, RoFormer)
    head_size: int = 0  # width the LM head reads where it is not the embedding's (RemBERT's untied head)
    residual_streams: int = 1  # copies of the hidden state the residual stream carries (hyper-connections)
    # the longest sequence the config's positions cover (max_position_embeddings, or the original
    # length times a rope_scaling factor); 0 where the config gives none
    context_window: int = 0

    @once
    def num_layers(self) -> int:
        """All transformer layers (encoder + decoder); counted once per spec."""
        return sum(block.count for block in self.blocks)

    @property
    def stream_width(self) -> int:
        """Width of the residual stream between layers: the hidden size, times the streams of
        hyper-connections (what a checkpointed layer keeps as its input)."""
        return self.hidden_size * self.residual_streams

    @property
    def embedding_width(self) -> int:
        """Width of the token embedding and of a head tied to it: `embedding_size` when the model
        factorises its embedding (projected to the hidden size), else the hidden size."""
        return self.embedding_size or self.hidden_size

    @property
    def head_width(self) -> int:
        """Width of the vectors the LM head maps to the vocabulary: the embedding width, or
        `head_size` where an untied head reads a width of its own (RemBERT)."""
        return self.head_size or self.embedding_width

    @property
    def norm_params(self) -> int:
        """Parameters of one hidden-size norm: weight, plus bias for LayerNorm; none when the norm
        has no affine parameters (OLMo's non-parametric LayerNorm)."""
        return norm_param_count(self.norm, self.hidden_size)

    @once
    def attention_heads(self) -> tuple[int, int]:
        """(heads, key/value heads) of the first attention layer, or of the first SSM mixer
        (Mamba-2 heads; Mamba's inner channels) or linear mixer (its value and key heads; the
        channels of RWKV's channel-wise recurrence) when the model has no attention: what tensor
        parallelism has to split evenly (found once per spec)."""
        for block in self.blocks:
            if block.attention is not None:
                return block.attention.num_heads, block.attention.num_kv_heads
        for block in self.blocks:
            if block.ssm is not None:
                heads = block.ssm.num_heads or block.ssm.inner_size
                return heads, heads
            if block.mixer is not None and block.mixer.kind == "rwkv":
                return block.mixer.value_size, block.mixer.value_size
            if block.mixer is not None:
                return block.mixer.num_heads, block.mixer.num_key_heads or block.mixer.num_heads
        raise AssertionError("a model has attention or SSM layers")


def hyper_connection_params(streams: int, hidden_size: int) -> int:
    """One hyper-connection mixer (transformers 5.24 models/hy_v4/modeling_hy_v4.py,
    HYV4HyperConnection): `fn` maps the N streams (N x h, flattened) to N input and N output
    weights (2N x N h), a bias `base` for each (2N) and two scales."""
    return 2 * streams * streams * hidden_size + 2 * streams + 2


def norm_param_count(norm: str, width: int) -> int:
    """Parameters of one norm over `width` channels: RMSNorm (and LayerNorm without bias) a
    weight, LayerNorm a weight and a bias, a parameter-free norm (and an RMSNorm without a
    weight) none."""
    return width * {"layernorm": 2, "parameter-free": 0, "rmsnorm-no-weight": 0}.get(norm, 1)


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


def derived(model: ModelSpec, compute: Callable[..., T], *args: Hashable, **kwargs: Hashable) -> T:
    """`compute(model, *args, **kwargs)`, worked out once per ModelSpec object and arguments. A spec
    is immutable, so what it derives never changes; the result is kept on the object itself (not
    in a table keyed by the spec, whose hash walks every block), and goes with it."""
    store: dict[Any, Any] = model.__dict__.setdefault("_derived", {})
    key = (compute, args, tuple(sorted(kwargs.items()))) if kwargs else (compute, args)
    if key not in store:
        store[key] = compute(model, *args, **kwargs)
    value: T = store[key]
    return value


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
