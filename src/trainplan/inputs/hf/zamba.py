"""Zamba and Zamba2: Mamba layers, some of which also run one of a few shared transformer blocks.

As transformers' Zamba2Model builds it (models/zamba2/modeling_zamba2.py): every layer is a
Mamba-2 mixer after an RMSNorm; a "hybrid" layer (`layers_block_type`) first runs shared block
`i % num_mem_blocks` -- attention over the hidden state concatenated with the embeddings
(`attention_hidden_size` = 2 x hidden wide), a gated MLP, and their norms -- with per-layer
LoRA-style adapters on the MLP's gate_up (and on q/k/v with `use_shared_attention_adapter`),
then a per-layer `linear` (hidden x hidden), then its Mamba-2 layer. The shared blocks' weights
exist once per block, however many layers run them.

Zamba (v1, models/zamba/modeling_zamba.py) has the same layout with one shared block: every
hybrid layer builds its own ZambaAttentionDecoderLayer, tied to the first one's weights; its MLP
has separate gate and up projections, there are no adapters, and its mixers are Zamba's
multi-head Mamba (`Ssm.num_heads`). The table row says which (`fused_gate_up`, `mlp_bias`,
`adapters`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.modules import ssm_mixer
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, ExtraComponent, Linear, Mlp, ModelSpec
from trainplan.specs.weights import attention_linears, mlp_linears

_MAMBA_KINDS = ("linear_attention", "mamba")


def zamba2_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """The ModelSpec of a Zamba2 config: its layers in order, the shared blocks as one extra."""
    hidden = get_int(cfg, "hidden_size")
    kinds = cfg.get("layers_block_type")
    if kinds is None and "attn_layer_period" in cfg:
        kinds = _period_kinds(cfg)
    if not isinstance(kinds, list) or not kinds:
        raise ConfigError("layers_block_type", "must list the kind of every layer (mamba or hybrid)")
    for index, kind in enumerate(kinds):
        if kind not in (*_MAMBA_KINDS, "hybrid"):
            raise ConfigError(
                f"layers_block_type[{index}]",
                f"layer kind {shown_value(kind)} is not modelled; modelled: mamba, hybrid",
            )
    ssm = ssm_mixer(cfg, family, hidden)
    # Zamba2: add_bias_linear is the MLP's and the Mamba projections' bias
    bias = bool(family.setting("mlp_bias", cfg, bool(cfg.get("add_bias_linear", False))))
    fused = bool(family.setting("fused_gate_up", cfg, True))
    heads = get_int(cfg, "num_attention_heads")
    width = get_int(cfg, "attention_hidden_size", default=2 * hidden)
    head_dim = get_int(cfg, "attention_head_dim", default=width // heads)
    attention = Attention(
        num_heads=heads,
        num_kv_heads=get_int(cfg, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        v_head_dim=head_dim,
        input_size=width,
    )
    inner = get_int(cfg, "intermediate_size")
    mlp = Mlp(
        intermediate_size=inner,
        bias=bias,
        fused_gate_up=fused,
        names=("gate_up_proj", "gate_up_proj", "down_proj")
        if fused
        else ("gate_proj", "up_proj", "down_proj"),
        activation=str(cfg.get("hidden_act", "gelu")),
    )
    hybrids = sum(kind == "hybrid" for kind in kinds)
    copies = min(get_int(cfg, "num_mem_blocks", default=1), hybrids)
    adapters = bool(family.setting("adapters", cfg, True))
    rank = get_int(cfg, "adapter_rank", default=128) if adapters else 0
    per_layer = [Linear("linear", "proj", hidden, hidden)]  # attention and this linear have no bias
    if adapters:
        per_layer += [
            Linear("gate_up_proj_adapter.0", "adapter", hidden, rank),
            Linear("gate_up_proj_adapter.1", "adapter", rank, 2 * inner),
        ]
    if adapters and cfg.get("use_shared_attention_adapter"):
        for part in "qkv":
            per_layer += [
                Linear(f"linear_{part}_adapter.0", "adapter", width, rank),
                Linear(f"linear_{part}_adapter.1", "adapter", rank, width),
            ]
    shared = Block(1, attention, mlp, norms=3, shared_copies=copies)
    mamba = Block(1, None, None, norms=1, ssm=ssm)
    output = Block(1, None, None, norms=1, ssm=ssm, linears=tuple(per_layer))
    order: list[Block] = []
    for kind in kinds:
        order += [mamba] if kind in _MAMBA_KINDS else [shared, output]
    blocks: list[Block] = []
    for block in order:
        if blocks and blocks[-1] == Block(**{**vars(block), "count": blocks[-1].count}):
            blocks[-1] = Block(**{**vars(block), "count": blocks[-1].count + 1})
        else:
            blocks.append(block)
    # one shared block: q, k, v, o and the MLP, an input norm over `width` and a pre-MLP norm
    matrices = sum(
        linear.params for linear in attention_linears(attention, hidden) + mlp_linears(mlp, hidden)
    )
    block_weights = matrices + width + hidden
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=tuple(blocks),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        extras=(
            ExtraComponent(
                "shared_transformer",
                copies * block_weights,
                trainable=True,
                note=f"{copies} shared attention + MLP block(s) run by {hybrids} hybrid layers",
                in_layers=True,
            ),
        ),
        approximations=(
            "LoRA all-linear: peft wraps a shared block's adapter list once per layer that runs the "
            "block, so adapters on the adapters exceed the one-per-layer count here",
        )
        if hybrids > copies and adapters
        else (),
        source=source,
    )


def _period_kinds(cfg: Mapping[str, Any]) -> list[str]:
    """ZambaConfig's layer kinds when a config lists none: two Mamba layers, a hybrid one, then a
    hybrid layer wherever i % attn_layer_period == attn_layer_offset over the remaining layers
    (models/zamba/configuration_zamba.py, ZambaConfig.__post_init__)."""
    period = get_int(cfg, "attn_layer_period")
    offset = get_int(cfg, "attn_layer_offset", default=4, minimum=0)
    rest = get_int(cfg, "num_hidden_layers") - 3
    if rest < 0:
        raise ConfigError("num_hidden_layers", "must be at least 3 (Zamba's first three layers are fixed)")
    return ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(rest)]
