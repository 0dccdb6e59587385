"""Architecture families: how each Hugging Face `model_type` maps its config.json to blocks.

The table is data (`data/architectures.yaml`, one row per family, each with its source and date),
read by the adapter in the `hf` package. A row declares key aliases, plain or gated MLP, biases, norms,
parallel attention + MLP, fused module names, the layer pattern (MoE interleaving, hybrid
attention/SSM/linear-mixer order), the linear mixer's keys and the config values transformers
fills in when a config.json omits them.
Model types transformers ships but that we do not model are listed under `refused` with the
reason, so a config of theirs is refused by name instead of read with a Llama-shaped guess.

A setting is either a literal or a rule read from the config:
`{key: K, default: D}` takes config[K] (D when absent or null); `map: {value: result}` translates
the value (a result may itself be a rule); `unless: K2` yields false when config[K2] is true;
`negate: true` inverts a boolean.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

#: Glossary name -> Hugging Face keys tried in order, unless a family row overrides them.
DEFAULT_KEYS: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "d_model", "dim"),
    "num_layers": ("num_hidden_layers", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "num_heads", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads"),
    "intermediate_size": ("intermediate_size", "ffn_dim", "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "head_dim": ("head_dim",),
}

#: `layer_types` values that are plain softmax attention (same weights, different masks).
ATTENTION_LAYER_KINDS = ("full_attention", "sliding_attention", "chunked_attention")

_FIELDS = {
    "family", "model_types", "source", "as_of", "keys", "mlp", "activation", "norm",
    "norms_per_layer", "final_norms", "parallel", "qkv_bias", "out_bias", "mlp_bias",
    "head_bias", "qk_norm", "qk_norm_bias", "fused_qkv", "fused_gate_up", "attention_names",
    "mlp_names", "tied", "positions", "position_offset", "multi_query", "attention", "moe",
    "layers", "ssm", "defaults", "notes", "reader", "mlp_ratio", "attention_sinks", "activation_params",
    "pooler", "cross_attention", "sinusoidal_positions",
    "layer_vectors",
    "mixer", "ffn_width", "attention_output_gate", "attention_head_gate", "text_only", "lift",
    "model_vectors", "indexer", "output_gate", "heads_per_layer",  # variant rows
    "token_types", "head_transform", "language_adapters", "glyph_embeddings",  # BERT-style variants
    "embedding_widths",
    "k_bias", "language_only", "head_transform_bias", "refuse_when", "patch_projection",
    "value_head_dim", "sliding_layers", "per_layer_inputs", "full_layer_overrides", "unindexed_layers",
    "dynamic_mask", "query_gate", "gated_norms", "adapters", "image_layers", "image_encoder",
    "kv_shared_layers", "drafter", "relative_logits", "short_convs", "mlp_output_scale", "hyper_connections",
}  # fmt: skip
_REQUIRED = ("family", "model_types", "source", "as_of")


@dataclass(frozen=True)
class ArchitectureFamily:
    """One row of the architecture table (see the module docstring for the rule syntax)."""

    name: str
    model_types: tuple[str, ...]
    source: str
    as_of: str
    row: Mapping[str, Any]

    def key(self, name: str) -> tuple[str, ...]:
        """The config keys that hold glossary field `name`, in order of preference."""
        keys = self.row.get("keys") or {}
        if name in keys:
            value = keys[name]
            return (value,) if isinstance(value, str) else tuple(value)
        return DEFAULT_KEYS[name]

    def setting(self, name: str, cfg: Mapping[str, Any], default: Any) -> Any:
        """The value of setting `name` for this config (the row's literal or rule, else `default`)."""
        if name not in self.row:
            return default
        return resolve(self.row[name], cfg)


@dataclass(frozen=True)
class Refusal:
    """A model type transformers ships whose layout is not modelled, and why; `closest` is the
    modelled model type whose reading stands in for it under `force` (a rule; "" for the
    Llama-style keys)."""

    model_type: str
    reason: str
    closest: Any = ""


def resolve(rule: Any, cfg: Mapping[str, Any]) -> Any:
    """Evaluate a setting rule against a config (literals pass through)."""
    if not isinstance(rule, Mapping) or "key" not in rule:
        return rule
    if rule.get("unless") and cfg.get(rule["unless"]):
        return False
    value = cfg.get(rule["key"])
    if value is None:
        value = rule.get("default")
    if "map" in rule:
        mapping = rule["map"]
        if value not in mapping:
            return resolve(rule.get("otherwise"), cfg)
        value = resolve(mapping[value], cfg)
    if rule.get("negate"):
        value = not value
    return value


@cache
def _table() -> tuple[dict[str, ArchitectureFamily], dict[str, Refusal]]:
    from trainplan.specs.loader import load_yaml
    from trainplan.specs.loader import require as _require

    data = load_yaml("architectures.yaml")
    families: dict[str, ArchitectureFamily] = {}
    for index, raw in enumerate(data["families"]):
        _require(raw, _REQUIRED, _FIELDS, f"architectures.yaml families[{index}]")
        family = ArchitectureFamily(
            name=str(raw["family"]),
            model_types=tuple(str(t) for t in raw["model_types"]),
            source=str(raw["source"]),
            as_of=str(raw["as_of"]),
            row=raw,
        )
        for model_type in family.model_types:
            if model_type in families:
                raise RuntimeError(f"architectures.yaml: {model_type!r} is in two families")
            families[model_type] = family
    refusals: dict[str, Refusal] = {}
    for index, raw in enumerate(data["refused"]):
        _require(raw, ("reason", "model_types"), {"reason", "model_types", "closest"}, f"refused[{index}]")
        for model_type in raw["model_types"]:
            if model_type in families or model_type in refusals:
                raise RuntimeError(f"architectures.yaml: {model_type!r} is listed twice")
            refusals[model_type] = Refusal(str(model_type), str(raw["reason"]), raw.get("closest") or "")
    for item in refusals.values():  # every stand-in a rule can name must be a modelled type
        rule = item.closest
        named = [rule] if isinstance(rule, str) else [*rule.get("map", {}).values(), rule.get("otherwise")]
        for name in named:
            if name and name not in families:
                raise RuntimeError(
                    f"architectures.yaml: {item.model_type!r} closest {name!r} is not modelled"
                )
    return families, refusals


@cache
def module_path_types() -> frozenset[str]:
    """The model types whose decoder layers' module paths are modelled (architectures.yaml
    `module_paths`)."""
    from trainplan.specs.loader import load_yaml
    from trainplan.specs.loader import require as _require

    section = load_yaml("architectures.yaml")["module_paths"]
    _require(section, ("source", "as_of", "model_types"), {"source", "as_of", "model_types"}, "module_paths")
    unknown = [name for name in section["model_types"] if name not in _table()[0]]
    if unknown:
        raise RuntimeError(f"architectures.yaml module_paths: {unknown} are not modelled types")
    return frozenset(str(name) for name in section["model_types"])


def find_architecture_family(model_type: str) -> ArchitectureFamily | None:
    """The family row of `model_type`, or None when the table does not name it."""
    return _table()[0].get(model_type)


def refusal(model_type: str) -> Refusal | None:
    """Why `model_type` is refused, or None when it is not on the refusal list."""
    return _table()[1].get(model_type)


def architecture_families() -> list[ArchitectureFamily]:
    """Every family row, once each."""
    return list({family.name: family for family in _table()[0].values()}.values())


def supported_model_types() -> list[str]:
    """Every model type the table reads, sorted."""
    return sorted(_table()[0])


def refused_model_types() -> dict[str, str]:
    """Refused model type -> reason."""
    return {name: item.reason for name, item in _table()[1].items()}


GENERIC = ArchitectureFamily(
    name="generic decoder",
    model_types=(),
    source="the keys Llama-style configs share",
    as_of="",
    row={},
)
