"""BERT-style encoders run as causal LMs (`BertLMHeadModel` and its copies: RoBERTa, XLM-R, ERNIE...).

Module tree (transformers 5.24 models/bert/modeling_bert.py): word, position and token-type
embeddings and a LayerNorm; per layer q/k/v/output linears with biases and a LayerNorm after
attention, `intermediate.dense` and `output.dense` with biases and a LayerNorm after the MLP
(post-LN: same count as pre-LN); an optional cross-attention with its own LayerNorm; the LM head
`cls.predictions`: a transform (dense hidden x hidden + bias, activation, LayerNorm) and a decoder
tied to the word embedding with a vocab-sized bias. The causal-LM class builds the encoder without
its pooler, except where the table row says it keeps one (BigBird).

Variants the row declares: no token-type table and no head transform (BertGeneration); rotary
positions with a frozen sinusoidal table of `head_dim` columns instead of learned positions
(RoFormer); a factorised embedding of `embedding_size` columns projected to the hidden size, whose
head transform maps back to it (ELECTRA's generator, RoFormer: `embeddings_project`, the
transform's dense hidden x embedding_size and its LayerNorm; RemBERT's untied head reads an
output width of its own); per-language bottleneck adapters
after each layer's MLP (X-MOD: `adapter_modules`, hidden -> hidden / adapter_reduction_factor ->
hidden, both biased); pronunciation and shape embedding tables mapped with the word embedding
(RoCBert).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import Attention, Block, ExtraComponent, Linear, Mlp, ModelSpec

#: BERT's module names (attention.self.query, attention.output.dense, intermediate.dense, output.dense).
_ATTENTION_NAMES = ("query", "key", "value", "attention.output.dense")
_MLP_NAMES = ("intermediate.dense", "intermediate.dense", "output.dense")


def bert_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """A BERT-style decoder: biased q/k/v/o and up/down linears, two LayerNorms per layer (three
    with cross-attention), learned position and token-type embeddings, a tied LM head with a
    dense + LayerNorm transform and a vocab bias (each variant as its row declares)."""
    if cfg.get("use_task_id"):
        raise ConfigError(
            "use_task_id", "ERNIE's task-type embeddings are not modelled; set use_task_id: false"
        )
    hidden = get_int(cfg, "hidden_size")
    heads = get_int(cfg, "num_attention_heads")
    # a factorised embedding's width, and the width the head transform maps back to (RemBERT
    # decouples them: input_embedding_size, output_embedding_size)
    keys: Mapping[str, str] = family.row.get("embedding_widths") or {}
    width = get_int(cfg, keys.get("input", "embedding_size"), default=hidden)
    head_width = get_int(cfg, keys.get("output", "embedding_size"), default=hidden)
    tied = bool(cfg.get("tie_word_embeddings", True))
    if tied and head_width != width:
        raise ConfigError(
            "tie_word_embeddings",
            f"a head of width {head_width} cannot be tied to an embedding of width {width}",
        )
    attention = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        v_head_dim=hidden // heads,
        qkv_bias=True,
        out_bias=True,
        names=_ATTENTION_NAMES,
    )
    mlp = Mlp(
        intermediate_size=get_int(cfg, "intermediate_size"),
        gated=False,
        bias=True,
        names=_MLP_NAMES,
        activation=str(cfg.get("hidden_act", "gelu")),
    )
    cross = attention if cfg.get("add_cross_attention") else None
    adapters, other_languages = _language_adapters(cfg, family, hidden)
    block = Block(
        get_int(cfg, "num_hidden_layers"),
        attention,
        mlp,
        3 if cross else 2,
        cross_attention=cross,
        linears=adapters,
        extra_params=2 * hidden if adapters and cfg.get("adapter_layer_norm") else 0,
    )
    extras: list[ExtraComponent] = []
    if flag(family, "token_types", cfg, True):
        extras.append(
            ExtraComponent(
                "token_type_embeddings",
                get_int(cfg, "type_vocab_size", minimum=0) * width,
                trainable=True,
                note=f"type_vocab_size x {width}",
            )
        )
    if flag(family, "head_transform", cfg, True):
        extras.append(
            ExtraComponent(
                "lm_head_transform",
                hidden * head_width + head_width + 2 * head_width,
                trainable=True,
                note=f"cls.predictions.transform: dense hidden x {head_width} + bias, LayerNorm",
            )
        )
    final_norms = int(family.setting("final_norms", cfg, 1))
    if width != hidden:
        # the embedding LayerNorm is over the embedding width, before the projection
        final_norms -= 1
        extras.append(
            ExtraComponent(
                "embeddings_project",
                width * hidden + hidden + 2 * width,
                trainable=True,
                note=f"embedding LayerNorm over {width}, then dense {width} x hidden + bias",
            )
        )
    if other_languages:
        extras.append(other_languages)
    if flag(family, "glyph_embeddings", cfg):
        extras.append(_glyph_embeddings(cfg, hidden))
    sinusoidal_key = family.setting("sinusoidal_positions", cfg, None)
    if sinusoidal_key:
        rows = get_int(cfg, str(sinusoidal_key))
        extras.append(
            ExtraComponent(
                "embed_positions",
                rows * attention.head_dim,
                note=f"frozen sinusoidal table for rotary positions, {rows} x {attention.head_dim}",
            )
        )
    if flag(family, "pooler", cfg):
        extras.append(
            ExtraComponent(
                "pooler",
                hidden * hidden + hidden,
                trainable=True,
                note="dense hidden x hidden + bias; built by the causal-LM class, not on the LM loss path",
            )
        )
    positions_key = family.setting("positions", cfg, "max_position_embeddings")
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=(block,),
        tied_embeddings=tied,
        head_bias=True,
        norm="layernorm",
        final_norms=final_norms,
        learned_positions=get_int(cfg, str(positions_key)) if positions_key else 0,
        extras=tuple(extras),
        dropout=float(cfg.get("hidden_dropout_prob", 0.1) or 0.0),
        source=source,
        embedding_size=width if width != hidden else 0,
        head_size=head_width if head_width != width else 0,
    )


def _glyph_embeddings(cfg: Mapping[str, Any], hidden: int) -> ExtraComponent:
    """RoCBert's pronunciation and shape tables (always built), and with `concat_input` the
    biased linear that maps [word; pronunciation; shape] back to the hidden size."""
    pronunciation = get_int(cfg, "pronunciation_vocab_size") * get_int(cfg, "pronunciation_embed_dim")
    shape = get_int(cfg, "shape_vocab_size") * get_int(cfg, "shape_embed_dim")
    params = pronunciation + shape
    if cfg.get("concat_input", True):
        inputs = hidden
        inputs += get_int(cfg, "pronunciation_embed_dim") if cfg.get("enable_pronunciation", True) else 0
        inputs += get_int(cfg, "shape_embed_dim") if cfg.get("enable_shape", True) else 0
        params += inputs * hidden + hidden
    return ExtraComponent(
        "pronunciation_shape_embeddings",
        params,
        trainable=True,
        note="pronunciation and shape tables, and map_inputs_layer when concat_input",
    )


def _language_adapters(
    cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int
) -> tuple[tuple[Linear, ...], ExtraComponent | None]:
    """X-MOD's bottleneck adapters: a token runs its language's adapter, so one adapter is part of
    each layer and the other languages' adapters are weights outside the compute path."""
    if not flag(family, "language_adapters", cfg):
        return (), None
    languages = cfg.get("languages")
    if not isinstance(languages, list) or not languages:
        raise ConfigError("languages", "must list the languages the model has adapters for")
    factor = get_int(cfg, "adapter_reduction_factor")
    bottleneck = hidden // factor
    if bottleneck < 1:
        raise ConfigError("adapter_reduction_factor", f"must be at most hidden_size ({hidden}), got {factor}")
    adapters = (
        Linear("adapter_modules.dense1", "adapter", hidden, bottleneck, bias=True),
        Linear("adapter_modules.dense2", "adapter", bottleneck, hidden, bias=True),
    )
    if len(languages) == 1:
        return adapters, None
    per_layer = sum(linear.params for linear in adapters)
    layers = get_int(cfg, "num_hidden_layers")
    others = len(languages) - 1
    return adapters, ExtraComponent(
        "language_adapters",
        others * layers * per_layer,
        trainable=True,
        note=f"the adapters of {others} more languages in each of {layers} layers (a token runs one)",
    )
