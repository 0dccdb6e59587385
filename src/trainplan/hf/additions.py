"""Row-declared additions to a decoder read from its config: learned vectors per layer and
outside the layers, a BERT-style head transform, a wrapper's linear patch embedding, and the
attention of the layer types a row makes differ (data/architectures.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.families import Family, resolve
from trainplan.hf.values import flag, get_int
from trainplan.model import Attention, ExtraComponent, Mlp, norm_param_count

#: Glossary widths a row's `layer_vectors` may name.
_VECTOR_WIDTHS = ("hidden_size", "intermediate_size", "head_dim")


def model_vectors(
    family: Family, cfg: Mapping[str, Any], hidden: int, attention: Attention | None, dense: Mlp | None
) -> tuple[ExtraComponent, ...]:
    """Learned vectors outside the layer groups, from the row's `model_vectors` (width name -> how
    many): GPT-NeoX-Japanese's attention output bias, which only its last layer has; XLM's
    language embeddings."""
    if not family.row.get("model_vectors"):
        return ()
    params = layer_vectors(family, cfg, hidden, attention, dense, "model_vectors")
    if not params:
        return ()
    return (
        ExtraComponent(
            "learned_vectors", params, trainable=True, note=f"{family.name}: {params} learned values"
        ),
    )


def head_transform(family: Family, cfg: Mapping[str, Any], hidden: int) -> tuple[ExtraComponent, ...]:
    """A BERT-style LM-head transform before the tied decoder, where the row declares one
    (ModernBERT's decoder: dense hidden x hidden, its bias by `head_transform_bias`, a norm)."""
    if not flag(family, "head_transform", cfg):
        return ()
    bias = flag(family, "head_transform_bias", cfg)
    norm = norm_param_count(str(family.setting("norm", cfg, "rmsnorm")), hidden)
    return (
        ExtraComponent(
            "lm_head_transform",
            hidden * hidden + (hidden if bias else 0) + norm,
            trainable=True,
            note="lm_head: dense hidden x hidden, activation, norm",
        ),
    )


def layer_vectors(
    family: Family,
    cfg: Mapping[str, Any],
    hidden: int,
    attention: Attention | None,
    dense: Mlp | None,
    column: str = "layer_vectors",
) -> int:
    """Learned vectors each layer adds beyond its matrices and hidden-size norms, from the row's
    `layer_vectors` (width name -> how many, a count or a rule): BitNet's sub-layer norms (one of
    hidden size, one of intermediate size), DiffLlama's four lambda vectors of head_dim."""
    rule: Mapping[str, int] = family.row.get(column) or {}
    widths = {
        "hidden_size": hidden,
        "intermediate_size": dense.intermediate_size if dense else 0,
        "head_dim": attention.head_dim if attention else 0,
    }
    for width in rule:
        if width not in _VECTOR_WIDTHS:
            raise RuntimeError(f"architectures.yaml {family.name}: {column} width {width!r} is unknown")
    counts = {width: get_int({width: resolve(count, cfg)}, width, minimum=0) for width, count in rule.items()}
    return sum(count * widths[width] for width, count in counts.items())


def patch_projection(cfg: Mapping[str, Any], keys: Mapping[str, str], hidden: int) -> ExtraComponent:
    """Fuyu's image input: one biased linear from a flattened patch (patch x patch x channels) to
    the hidden size, the patches then read by the decoder as tokens (transformers' FuyuModel)."""
    patch = get_int(cfg, keys["patch"])
    channels = get_int(cfg, keys["channels"])
    inputs = patch * patch * channels
    return ExtraComponent(
        "vision_embed_tokens",
        inputs * hidden + hidden,
        trainable=True,
        note=f"linear patch embedding {inputs} -> {hidden} ({patch} x {patch} x {channels} pixels per token)",
    )


def layer_type_attention(
    cfg: Mapping[str, Any], family: Family, attention: Attention | None
) -> dict[int, Attention]:
    """Layer index -> its attention where the row's `sliding_layers` rule makes the
    sliding-window layers of `layer_types` differ (MiMo-V2-Flash: twice the key/value heads and a
    sink per head)."""
    rule: Mapping[str, Any] = family.row.get("sliding_layers") or {}
    kinds = cfg.get("layer_types")
    if not rule or attention is None or not isinstance(kinds, list):
        return {}
    from dataclasses import replace

    variant = replace(
        attention,
        num_kv_heads=attention.num_kv_heads * int(rule.get("kv_heads_factor", 1)),
        sinks=bool(rule.get("sinks", attention.sinks)),
    )
    return {index: variant for index, kind in enumerate(kinds) if kind == "sliding_attention"}
