"""BERT-style encoders run as causal LMs (`BertLMHeadModel` and its copies: RoBERTa, XLM-R, ERNIE...).

Module tree (transformers 5.24 models/bert/modeling_bert.py): word, position and token-type
embeddings and a LayerNorm; per layer q/k/v/output linears with biases and a LayerNorm after
attention, `intermediate.dense` and `output.dense` with biases and a LayerNorm after the MLP
(post-LN: same count as pre-LN); an optional cross-attention with its own LayerNorm; the LM head
`cls.predictions`: a transform (dense hidden x hidden + bias, activation, LayerNorm) and a decoder
tied to the word embedding with a vocab-sized bias. The causal-LM class builds the encoder without
its pooler, except where the table row says it keeps one (BigBird).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError
from trainplan.families import Family
from trainplan.hf.values import flag, get_int
from trainplan.model import Attention, Block, ExtraComponent, Mlp, ModelSpec

#: BERT's module names (attention.self.query, attention.output.dense, intermediate.dense, output.dense).
_ATTENTION_NAMES = ("query", "key", "value", "attention.output.dense")
_MLP_NAMES = ("intermediate.dense", "intermediate.dense", "output.dense")


def bert_spec(cfg: Mapping[str, Any], name: str, source: str, family: Family) -> ModelSpec:
    """A BERT-style decoder: biased q/k/v/o and up/down linears, two LayerNorms per layer (three
    with cross-attention), learned position and token-type embeddings, a tied LM head with a
    dense + LayerNorm transform and a vocab bias."""
    if cfg.get("use_task_id"):
        raise ConfigError(
            "use_task_id", "ERNIE's task-type embeddings are not modelled; set use_task_id: false"
        )
    hidden = get_int(cfg, "hidden_size")
    heads = get_int(cfg, "num_attention_heads")
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
    block = Block(get_int(cfg, "num_hidden_layers"), attention, mlp, 3 if cross else 2, cross_attention=cross)
    layernorm = 2 * hidden
    extras = [
        ExtraComponent(
            "token_type_embeddings",
            get_int(cfg, "type_vocab_size", minimum=0) * hidden,
            trainable=True,
            note="type_vocab_size x hidden",
        ),
        ExtraComponent(
            "lm_head_transform",
            hidden * hidden + hidden + layernorm,
            trainable=True,
            note="cls.predictions.transform: dense hidden x hidden + bias, LayerNorm",
        ),
    ]
    if flag(family, "pooler", cfg):
        extras.append(
            ExtraComponent(
                "pooler",
                hidden * hidden + hidden,
                trainable=True,
                note="dense hidden x hidden + bias; built by the causal-LM class, not on the LM loss path",
            )
        )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=(block,),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        head_bias=True,
        norm="layernorm",
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=get_int(cfg, "max_position_embeddings"),
        extras=tuple(extras),
        dropout=float(cfg.get("hidden_dropout_prob", 0.1) or 0.0),
        source=source,
    )
