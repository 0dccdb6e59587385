"""The model spec: a transformer described by the shapes of its weights.

A model is an embedding, groups of identical blocks (each an attention, an MLP and norms) and a
head. Every weight matrix is listed as a `Linear` with the name Hugging Face gives that module,
so parameter counts, LoRA targets and activation sizes all derive from one description.
Hugging Face config keys never appear here: `hf.py` is the only adapter that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Roles of linear layers; LoRA target presets select by role.
ATTENTION_ROLES = frozenset({"q", "k", "v", "qkv", "o", "q_a", "q_b", "kv_a", "kv_b"})
QUERY_VALUE_ROLES = frozenset({"q", "v", "qkv", "q_b", "kv_b"})
MLP_ROLES = frozenset({"gate", "up", "gate_up", "down"})


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

    @property
    def params(self) -> int:
        """in x out (+ out for the bias), times copies."""
        return (self.in_features * self.out_features + (self.out_features if self.bias else 0)) * (
            self.copies
        )


@dataclass(frozen=True)
class Attention:
    """Self- or cross-attention. `kind` is "mha" (covers GQA/MQA) or "mla" (DeepSeek-V2/V3)."""

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
    names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj")

    @property
    def q_size(self) -> int:
        """Width of all query heads."""
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        """Width of all key heads (= value heads for MHA/GQA)."""
        return self.num_kv_heads * self.head_dim


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
    router_bias: bool = False
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    activation: str = "silu"

    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts block."""
        return self.num_experts > 0


@dataclass(frozen=True)
class Block:
    """`count` identical transformer layers."""

    count: int
    attention: Attention
    mlp: Mlp
    norms: int = 2
    cross_attention: Attention | None = None
    role: str = "decoder"


@dataclass(frozen=True)
class ExtraComponent:
    """Parameters outside the transformer stack (vision tower, VQ tokenizer, class embedding)."""

    name: str
    params: int
    trainable: bool = False
    note: str = ""


@dataclass(frozen=True)
class ModelSpec:
    """A whole model. `hidden_size` is the residual width; blocks are in forward order."""

    name: str
    hidden_size: int
    vocab_size: int
    blocks: tuple[Block, ...]
    tied_embeddings: bool = False
    norm: str = "rmsnorm"
    final_norms: int = 1
    learned_positions: int = 0
    embedding_inputs: int = 1
    encoder_decoder: bool = False
    dropout: float = 0.0
    final_logit_softcap: bool = False
    extras: tuple[ExtraComponent, ...] = ()
    approximations: tuple[str, ...] = ()
    source: str = ""
    family: str = ""
    modality: str = "text"
    notes: tuple[str, ...] = field(default=())

    @property
    def num_layers(self) -> int:
        """All transformer layers (encoder + decoder)."""
        return sum(block.count for block in self.blocks)

    @property
    def norm_params(self) -> int:
        """Parameters of one hidden-size norm: weight, plus bias for LayerNorm."""
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)


def attention_linears(attention: Attention, hidden_size: int) -> list[Linear]:
    """The weight matrices of one attention module, named as Hugging Face names them."""
    bias, q, kv = attention.qkv_bias, attention.q_size, attention.kv_size
    q_name, k_name, v_name, o_name = attention.names
    if attention.kind == "mla":
        heads, rope = attention.num_heads, attention.rope_head_dim
        nope, v_dim = attention.head_dim - rope, attention.v_head_dim
        linears: list[Linear] = []
        if attention.q_lora_rank:
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
        return linears
    out = Linear(o_name, "o", q, hidden_size, attention.out_bias)
    if attention.fused_qkv:
        return [Linear(attention.fused_qkv, "qkv", hidden_size, q + 2 * kv, bias), out]
    return [
        Linear(q_name, "q", hidden_size, q, bias),
        Linear(k_name, "k", hidden_size, kv, bias),
        Linear(v_name, "v", hidden_size, kv, bias),
        out,
    ]


def attention_extra_params(attention: Attention) -> int:
    """Non-matrix attention parameters: q/k norms, MLA's latent norms, relative position bias."""
    params = attention.relative_bias_params
    per_norm = 2 if attention.qk_norm_bias else 1
    if attention.qk_norm == "head":
        params += 2 * attention.head_dim * per_norm
    elif attention.qk_norm == "full":
        params += (attention.q_size + attention.kv_size) * per_norm
    if attention.kind == "mla":
        params += attention.kv_lora_rank + attention.q_lora_rank
    return params


def mlp_linears(mlp: Mlp, hidden_size: int) -> list[Linear]:
    """The weight matrices of one MLP: experts (with copies), shared experts, the router."""
    gate_name, up_name, down_name = mlp.names
    if not mlp.is_moe:
        return _ffn(mlp, hidden_size, mlp.intermediate_size, 1, False, (gate_name, up_name, down_name))
    linears = _ffn(mlp, hidden_size, mlp.intermediate_size, mlp.num_experts, True, mlp.names)
    linears.append(Linear("gate", "router", hidden_size, mlp.num_experts, mlp.router_bias))
    if mlp.num_shared_experts:
        shared = mlp.shared_intermediate_size * mlp.num_shared_experts
        names = ("shared_experts.gate_proj", "shared_experts.up_proj", "shared_experts.down_proj")
        linears += _ffn(mlp, hidden_size, shared, 1, False, names)
    if mlp.shared_expert_gate:
        linears.append(Linear("shared_expert_gate", "router", hidden_size, 1))
    return linears


def _ffn(
    mlp: Mlp, hidden: int, inner: int, copies: int, expert: bool, names: tuple[str, str, str]
) -> list[Linear]:
    gate_name, up_name, down_name = names
    down = Linear(down_name, "down", inner, hidden, mlp.bias, copies, expert)
    if not mlp.gated:
        return [Linear(up_name, "up", hidden, inner, mlp.bias, copies, expert), down]
    if mlp.fused_gate_up:
        return [Linear(up_name, "gate_up", hidden, 2 * inner, mlp.bias, copies, expert), down]
    return [
        Linear(gate_name, "gate", hidden, inner, mlp.bias, copies, expert),
        Linear(up_name, "up", hidden, inner, mlp.bias, copies, expert),
        down,
    ]


def block_linears(block: Block, hidden_size: int) -> list[Linear]:
    """All weight matrices of one layer of `block`."""
    linears = attention_linears(block.attention, hidden_size)
    if block.cross_attention is not None:
        linears += attention_linears(block.cross_attention, hidden_size)
    return linears + mlp_linears(block.mlp, hidden_size)
