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
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainplan.specs.frozen import once

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
    # outputs of the head where it does not map to the vocabulary: a reward model's one score
    # (a sequence-classification head with num_labels 1); 0 for an LM head
    head_outputs: int = 0
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
    def head_rows(self) -> int:
        """Outputs of the head: the vocabulary, or `head_outputs` (a reward model's score)."""
        return self.head_outputs or self.vocab_size

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


def norm_param_count(norm: str, width: int) -> int:
    """Parameters of one norm over `width` channels: RMSNorm (and LayerNorm without bias) a
    weight, LayerNorm a weight and a bias, a parameter-free norm (and an RMSNorm without a
    weight) none."""
    return width * {"layernorm": 2, "parameter-free": 0, "rmsnorm-no-weight": 0}.get(norm, 1)


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
