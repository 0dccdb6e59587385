"""The layer order of a decoder: which layers are attention, SSM, dense or MoE, per the family's rule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ATTENTION_LAYER_KINDS, ArchitectureFamily
from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError, shown_value


def layer_kinds(cfg: Mapping[str, Any], family: ArchitectureFamily) -> list[tuple[str, ...]]:
    """Per layer, in forward order, the parts it has: "attention", "ssm", "dense", "moe".

    The family's `layers` rule says where attention and SSM layers sit: all one kind
    (`mixer`), every `period` layers from `offset` (Jamba), an index list (Bamba), or a
    per-layer list of kinds (Nemotron-H, GraniteMoeHybrid, Zamba2), which a config without one
    may give as a list of attention layers (LFM2, Kimi Linear) or an interval (Qwen3-Next), or
    as a pattern cycled over the layers (RecurrentGemma). The MLP of each layer is dense or MoE
    by the family's `moe` rule; layer kinds the table does not map are refused.
    """
    rule: Mapping[str, Any] = family.row.get("layers") or {}
    listed = rule.get("list")
    if listed:
        values = cfg.get(listed["key"])
        pattern_key = listed.get("pattern_key")
        if values is None and pattern_key and isinstance(cfg.get(pattern_key), str):
            # one letter per layer (Nemotron-H's hybrid_override_pattern, "M-M*-...")
            letters: Mapping[str, str] = listed["letters"]
            pattern = str(cfg[pattern_key])
            unknown = sorted(set(pattern) - set(letters))
            if unknown:
                raise ConfigError(
                    pattern_key, f"layer letters {unknown} are not modelled; modelled: {', '.join(letters)}"
                )
            values = [letters[letter] for letter in pattern]
        if values is None and listed.get("indices"):
            values = _kinds_from_indices(cfg, family, listed["indices"])
        if values is None and listed.get("interval"):
            values = _kinds_from_interval(cfg, family, listed["interval"])
        if not isinstance(values, list) or not values:
            raise ConfigError(listed["key"], "must list the kind of every layer")
        if listed.get("cycle"):  # a pattern repeated over the layers (RecurrentGemma's block_types)
            values = [values[index % len(values)] for index in range(get_int(cfg, *family.key("num_layers")))]
        if listed.get("sublayers"):  # each config layer runs these sub-layers in turn (LongCat-Flash)
            values = list(values) * get_int(cfg, *family.key("num_layers"))
        layers = (
            len(values)
            if listed.get("sublayers")
            else get_int(cfg, *family.key("num_layers"), default=len(values))
        )
        if layers != len(values):
            raise ConfigError(listed["key"], f"lists {len(values)} layers, num_hidden_layers is {layers}")
        mapping: Mapping[str, str] = listed["map"]
        mixers = []
        for index, value in enumerate(values):
            if value not in mapping:
                raise ConfigError(
                    f"{listed['key']}[{index}]",
                    f"layer kind {shown_value(value)} is not modelled for {family.name}; modelled: "
                    + ", ".join(sorted(mapping)),
                )
            mixers.append(mapping[value])
    else:
        layers = get_int(cfg, *family.key("num_layers"))
        mixers = [_mixer_of(cfg, rule, index) for index in range(layers)]
    _check_layer_types(cfg, family, layers)
    kinds: list[tuple[str, ...]] = []
    for index, mixer in enumerate(mixers):
        parts = tuple(part for part in mixer.split("+") if part != "none")
        if rule.get("mlp", True) and "dense" not in parts and "moe" not in parts:
            parts += ("moe" if _is_moe_layer(cfg, family, index) else "dense",)
        kinds.append(parts)
    return kinds


def _kinds_from_indices(
    cfg: Mapping[str, Any], family: ArchitectureFamily, rule: Mapping[str, Any]
) -> list[str] | None:
    """Per-layer kinds from a list of the layers that are `rule["kind"]`, counted from
    `rule["base"]` (LFM2's full_attn_idxs from 0, Kimi Linear's full_attn_layers from 1), the
    rest `rule["other"]`; when the config has no list, every layer is `kind` if `rule["all"]`
    (as Lfm2Config does), else None (no layer order)."""
    layers = get_int(cfg, *family.key("num_layers"))
    base = int(rule.get("base", 0))
    chosen = cfg.get(rule["key"])
    if chosen is None:
        if not rule.get("all", True):
            return None
        chosen = list(range(base, layers + base))
    valid = isinstance(chosen, list) and all(isinstance(i, int) and base <= i < layers + base for i in chosen)
    if not valid:
        raise ConfigError(rule["key"], f"must list layer indices between {base} and {layers - 1 + base}")
    return [str(rule["kind"]) if index + base in chosen else str(rule["other"]) for index in range(layers)]


def _kinds_from_interval(
    cfg: Mapping[str, Any], family: ArchitectureFamily, rule: Mapping[str, Any]
) -> list[str]:
    """Per-layer kinds when every n-th layer is `rule["kind"]` (layers n-1, 2n-1, ...: Qwen3-Next's
    full_attention_interval, default n from the config class; a fixed n without a key), the rest
    `rule["other"]`."""
    layers = get_int(cfg, *family.key("num_layers"))
    every = get_int(cfg, rule["key"], default=rule["default"]) if "key" in rule else int(rule["default"])
    return [str(rule["kind"]) if (index + 1) % every == 0 else str(rule["other"]) for index in range(layers)]


def _mixer_of(cfg: Mapping[str, Any], rule: Mapping[str, Any], index: int) -> str:
    """The mixer of layer `index` under a non-list `layers` rule."""
    mixer = str(rule.get("mixer", "attention"))
    if "attention_period" in rule:
        period = get_int(cfg, rule["attention_period"])
        offset = get_int(cfg, rule["attention_offset"], minimum=0)
        return "attention" if index % period == offset else mixer
    if "attention_indices" in rule:
        indices = cfg.get(rule["attention_indices"]) or []
        return "attention" if index in indices else mixer
    return mixer


def _check_layer_types(cfg: Mapping[str, Any], family: ArchitectureFamily, layers: int) -> None:
    """`layer_types` may only name softmax attention (full, sliding, chunked) unless the family
    maps other kinds; anything else (linear, lightning attention...) is refused by name."""
    rule: Mapping[str, Any] = family.row.get("layers") or {}
    if (rule.get("list") or {}).get("key") == "layer_types":
        return
    values = cfg.get("layer_types")
    if not isinstance(values, list):
        return
    # a sparse-attention family's indexed layers are softmax attention over the selected keys
    modelled = ATTENTION_LAYER_KINDS + tuple((family.row.get("indexer") or {}).get("layer_kinds", ()))
    for index, value in enumerate(values):
        if value not in modelled:
            raise ConfigError(
                f"layer_types[{index}]",
                f"layer kind {shown_value(value)} is not modelled; modelled here: " + ", ".join(modelled),
            )
    if len(values) != layers:
        raise ConfigError("layer_types", f"lists {len(values)} layers, the model has {layers}")


def num_experts(cfg: Mapping[str, Any]) -> int:
    return get_int(
        cfg, "num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts", default=0, minimum=0
    )


#: `mlp_layer_types` values: is the layer's MLP the mixture of experts?
_MLP_KINDS = {"dense": False, "sparse": True, "moe": True}


def _is_moe_layer(cfg: Mapping[str, Any], family: ArchitectureFamily, index: int) -> bool:
    """Whether layer `index` has the MoE MLP: `mlp_layer_types` when the config lists it, else
    first-k-dense, a sparse step, mlp-only layers, an explicit MoE layer list or Llama 4's
    interleave step, or Jamba's expert period."""
    if num_experts(cfg) == 0:
        return False
    rule: Mapping[str, Any] = family.row.get("moe") or {}
    if "when" in rule and not cfg.get(rule["when"]):  # MoE only when a config switch says so (Doge)
        return False
    kinds = cfg.get("mlp_layer_types")
    if isinstance(kinds, list):  # a per-layer list, where the config gives one
        if index >= len(kinds) or kinds[index] not in _MLP_KINDS:
            value = kinds[index] if index < len(kinds) else "(missing)"
            raise ConfigError(
                f"mlp_layer_types[{index}]",
                f"MLP kind {shown_value(value)} is not modelled; modelled: " + ", ".join(_MLP_KINDS),
            )
        return _MLP_KINDS[kinds[index]]
    if "layers_key" in rule and isinstance(cfg.get(rule["layers_key"]), list):
        return index in cfg[rule["layers_key"]]
    if "range" in rule:  # ERNIE 4.5: every interval-th layer from the start index to the end index
        keys = rule["range"]
        start = get_int(cfg, keys["start"], minimum=0)
        end = get_int(cfg, keys["end"], minimum=0)
        return start <= index <= end and (index + 1) % get_int(cfg, keys["interval"]) == 0
    if "period" in rule:
        period = get_int(cfg, rule["period"])
        return index % period == get_int(cfg, rule["offset"], minimum=0)
    if "step" in rule:
        step = get_int(cfg, rule["step"])
        return (index + 1) % step == 0
    first_dense = get_int(cfg, rule.get("first_dense_key", "first_k_dense_replace"), default=0, minimum=0)
    step = get_int(cfg, "decoder_sparse_step", "moe_layer_freq", default=1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    return index >= first_dense and index not in mlp_only and (index + 1) % step == 0
