"""Layers that reuse keys and values, and the drafter that reads a backbone's (data/architectures.yaml).

Gemma 4 (transformers 5.24 models/gemma4/modeling_gemma4.py and models/gemma4_unified,
Gemma4TextAttention and Gemma4TextMLP): the last `num_kv_shared_layers` layers attend to the keys
and values of the last earlier layer of their `layer_types` kind, so they build q_proj, q_norm
and o_proj only (no k_proj, v_proj, k_norm or the weightless v_norm); with `use_double_wide_mlp`
their MLP is twice `intermediate_size` wide. Gemma4TextConfig.kv_sharing_modes requires every
layer kind among the shared layers to have an unshared producer, unless every layer is shared.

Gemma 4's assistant (models/gemma4_unified_assistant, Gemma4UnifiedAssistantForCausalLM): a
multi-token-prediction drafter whose text model has every layer KV-shared -- it attends to the
keys and values the Gemma 4 backbone passes in -- between pre_projection (the backbone's token
embedding and last hidden state, 2 x backbone_hidden_size -> hidden) and post_projection
(hidden -> backbone_hidden_size), with an LM head tied to its own embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.errors import ConfigError
from trainplan.families import Family
from trainplan.hf.values import get_int
from trainplan.model import Attention, ExtraComponent, Mlp


def kv_shared_layers(cfg: Mapping[str, Any], family: Family, layers: int) -> frozenset[int]:
    """Indices of the layers that reuse an earlier layer's keys and values: the last
    config[`count`] of the row's `kv_shared_layers` rule (none without one)."""
    rule: Mapping[str, str] = family.row.get("kv_shared_layers") or {}
    if not rule:
        return frozenset()
    shared = get_int(cfg, rule["count"], default=0, minimum=0)
    if shared > layers:
        raise ConfigError(rule["count"], f"{shared} exceeds the {layers} layers (num_hidden_layers)")
    first = layers - shared
    kinds = cfg.get("layer_types")
    if 0 < shared < layers and isinstance(kinds, list):
        missing = sorted(set(kinds[first:]) - set(kinds[:first]))
        if missing:
            raise ConfigError(
                rule["count"],
                f"{shared}: the shared layers' kinds {missing} have no earlier layer producing their "
                "keys and values (layer_types)",
            )
    return frozenset(range(first, layers))


def kv_shared_parts(
    cfg: Mapping[str, Any], family: Family, attention: Attention | None, mlp: Mlp | None
) -> tuple[Attention | None, Mlp | None]:
    """A KV-shared layer's attention (no key/value projections) and MLP (twice as wide where the
    rule's `double_wide_mlp` key is true)."""
    rule: Mapping[str, str] = family.row.get("kv_shared_layers") or {}
    shared = None if attention is None else replace(attention, kv_shared=True)
    double = "double_wide_mlp" in rule and bool(cfg.get(rule["double_wide_mlp"]))
    if mlp is not None and double:
        mlp = replace(mlp, intermediate_size=2 * mlp.intermediate_size)
    return shared, mlp


def drafter_projections(cfg: Mapping[str, Any], family: Family, hidden: int) -> tuple[ExtraComponent, ...]:
    """The assistant's pre_projection (2 x backbone -> hidden) and post_projection (hidden ->
    backbone), bias-free, from the wrapper row's `drafter` rule (none without one)."""
    rule: Mapping[str, Any] = family.row.get("drafter") or {}
    if not rule:
        return ()
    refuse: Mapping[str, str] = rule.get("refuse") or {}
    for key, why in refuse.items():
        if cfg.get(key):
            raise ConfigError(key, f"{cfg[key]!r}: {why} ({family.name})")
    backbone = get_int(cfg, rule["backbone"])
    return (
        ExtraComponent(
            "pre_projection",
            2 * backbone * hidden,
            trainable=True,
            note=f"the backbone's embedding and hidden state, 2 x {backbone} -> {hidden}",
        ),
        ExtraComponent(
            "post_projection",
            hidden * backbone,
            trainable=True,
            note=f"{hidden} -> the backbone's {backbone}",
        ),
    )
