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

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, Linear, Mlp


def kv_shared_layers(cfg: Mapping[str, Any], family: ArchitectureFamily, layers: int) -> frozenset[int]:
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
    cfg: Mapping[str, Any], family: ArchitectureFamily, attention: Attention | None, mlp: Mlp | None
) -> tuple[Attention | None, Mlp | None]:
    """A KV-shared layer's attention (no key/value projections) and MLP (twice as wide where the
    rule's `double_wide_mlp` key is true)."""
    rule: Mapping[str, str] = family.row.get("kv_shared_layers") or {}
    shared = None if attention is None else replace(attention, kv_shared=True)
    double = "double_wide_mlp" in rule and bool(cfg.get(rule["double_wide_mlp"]))
    if mlp is not None and double:
        mlp = replace(mlp, intermediate_size=2 * mlp.intermediate_size)
    return shared, mlp


def drafter_text(text: Mapping[str, Any], wrapper: ArchitectureFamily | None) -> Mapping[str, Any]:
    """A drafter's text config as its config class completes it: a falsy value of the rule's
    `shares_all` key (num_kv_shared_layers) becomes every layer
    (Gemma4UnifiedAssistantConfig.__post_init__); other configs unchanged."""
    rule: Mapping[str, Any] = (wrapper.row.get("drafter") or {}) if wrapper is not None else {}
    key = rule.get("shares_all")
    if not key or text.get(key):
        return text
    return {**text, key: text.get("num_hidden_layers")}


def with_drafter_projections(
    blocks: tuple[Block, ...], cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int
) -> tuple[Block, ...]:
    """The layers with the assistant's bias-free pre_projection (2 x backbone -> hidden, run before
    the first layer) and post_projection (hidden -> backbone, after the last), from the wrapper
    row's `drafter` rule: each a linear of the first / last layer's block, split off to one layer,
    so its weights, FLOPs, LoRA adapter (peft's all-linear takes it) and input count once."""
    rule: Mapping[str, Any] = family.row.get("drafter") or {}
    refuse: Mapping[str, str] = rule.get("refuse") or {}
    for key, why in refuse.items():
        if cfg.get(key):
            raise ConfigError(key, f"{shown_value(cfg[key])}: {why} ({family.name})")
    backbone = get_int(cfg, rule["backbone"])
    pre = Linear("pre_projection", "proj", 2 * backbone, hidden)
    post = Linear("post_projection", "proj", hidden, backbone)
    layers = _split(_split(blocks, 0), -1)
    if len(layers) == 1:  # a single layer runs both
        (only,) = layers
        return (replace(only, linears=(pre, *only.linears, post)),)
    first = replace(layers[0], linears=(pre, *layers[0].linears))
    last = replace(layers[-1], linears=(*layers[-1].linears, post))
    return (first, *layers[1:-1], last)


def _split(blocks: tuple[Block, ...], end: int) -> tuple[Block, ...]:
    """`blocks` with the first (end 0) or last (end -1) layer split off into a block of its own."""
    block = blocks[end]
    if block.count == 1:
        return blocks
    one, others = replace(block, count=1), replace(block, count=block.count - 1)
    if end == 0:
        return (one, others, *blocks[1:])
    return (*blocks[:-1], others, one)
