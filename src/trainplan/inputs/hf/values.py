"""Reading config.json values: the first present key of several, range-checked, the error naming it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Any

from trainplan.inputs.architecture_families import DEFAULT_KEYS, ArchitectureFamily, architecture_families
from trainplan.specs.errors import ConfigError, shown_value

MISSING = object()


def get(cfg: Mapping[str, Any], *keys: str, default: Any = MISSING) -> Any:
    """First present key among `keys`; ConfigError naming the first key if none is and no default."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if default is MISSING:
        raise ConfigError(
            keys[0], f"missing from config.json (also looked for: {', '.join(keys[1:]) or '-'})"
        )
    return default


# The largest structural value a config may give, by what the key means: about 10-30x the largest
# released model, so that a pasted config is bounded before any work is done (a config with 3e7
# layers or a width of 1e154 is refused, not computed). A glossary field's bound covers every key
# any family reads it from; keys not listed share the last bound.
_LIMITS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("layer count", 4_096, ("num_layers", "num_decoder_layers", "first_k_dense_replace", "num_dense_layers",
                            "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval",
                            "decoder_sparse_step", "moe_layer_freq", "num_single_layers",
                            "layers_per_block", "num_res_blocks", "pred_num_hidden_layers")),
    ("width", 1_048_576, ("hidden_size", "intermediate_size", "head_dim", "n_inner", "d_ff", "d_kv",
                          "moe_intermediate_size", "shared_expert_intermediate_size", "qk_rope_head_dim",
                          "qk_nope_head_dim", "v_head_dim", "q_lora_rank", "kv_lora_rank")),
    ("head count", 65_536, ("num_heads", "num_kv_heads")),
    ("vocabulary", 16_777_216, ("vocab_size",)),
    ("expert count", 65_536, ("num_local_experts", "n_routed_experts", "num_experts", "n_shared_experts",
                              "num_experts_per_tok", "moe_top_k", "top_k",
                              "moe_num_experts", "moe_k", "moe_topk", "moe_num_shared_experts")),
    ("image size", 65_536, ("image_size", "patch_size", "num_channels")),
    ("integer", 2**31, ()),
)  # fmt: skip


@cache
def config_limits() -> dict[str, tuple[str, int]]:
    """Config key -> (what it means, its largest accepted value), over every family's key names."""
    limits: dict[str, tuple[str, int]] = {}
    for meaning, bound, names in _LIMITS:
        for name in names:
            keys = set(DEFAULT_KEYS.get(name, ())) | {name}
            for family in architecture_families():
                if name in DEFAULT_KEYS:
                    keys.update(family.key(name))
            for key in keys:
                limits.setdefault(key, (meaning, bound))
    return limits


def config_limit(key: str) -> tuple[str, int]:
    """(what the key means, its largest accepted value)."""
    return config_limits().get(key, (_LIMITS[-1][0], _LIMITS[-1][1]))


def get_int(cfg: Mapping[str, Any], *keys: str, default: Any = MISSING, minimum: int = 1) -> int:
    """An integer config value, range-checked against `minimum` and its limit, the error naming the
    key it came from."""
    found = next((key for key in keys if cfg.get(key) is not None), keys[0])
    value = get(cfg, *keys, default=default)
    finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
    if isinstance(value, bool) or not finite or int(value) != value:
        too_large = isinstance(value, float) and math.isinf(value)
        shown = "a number beyond float range" if too_large else shown_value(value)
        raise ConfigError(found, f"must be an integer, got {shown}")
    meaning, bound = config_limit(found)
    if not minimum <= value <= bound:
        raise ConfigError(
            found, f"must be between {minimum:,} and {bound:,} ({meaning}), got {shown_value(value)}"
        )
    return int(value)


def get_probability(cfg: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """A dropout probability: a number from 0 to 1 (absent or null: `default`), the error naming
    the key (torch's dropout refuses any other)."""
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(key, f"must be a probability between 0 and 1, got {shown_value(value)}")
    return float(value)


def flag(family: ArchitectureFamily, name: str, cfg: Mapping[str, Any], default: Any = False) -> bool:
    return bool(family.setting(name, cfg, default))


def key_tuple(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)
