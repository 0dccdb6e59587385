"""Row-declared additions to a decoder read from its config: learned vectors per layer and
outside the layers, a BERT-style head transform, a wrapper's linear patch embedding, and the
attention of the layer types a row makes differ or a per-layer config overrides, Gemma 4's
per-layer inputs, A.X K2's gated norms (data/architectures.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily, resolve
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import Attention, Block, ExtraComponent, Linear, Mlp, ModelSpec, norm_param_count
from trainplan.specs.weights import gated_norm_linears

#: Glossary widths a row's `layer_vectors` may name.
_VECTOR_WIDTHS = ("hidden_size", "intermediate_size", "head_dim", "rope_head_dim", "num_heads")


def model_vectors(
    family: ArchitectureFamily,
    cfg: Mapping[str, Any],
    hidden: int,
    attention: Attention | None,
    dense: Mlp | None,
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


def head_transform(
    family: ArchitectureFamily, cfg: Mapping[str, Any], hidden: int
) -> tuple[ExtraComponent, ...]:
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
    family: ArchitectureFamily,
    cfg: Mapping[str, Any],
    hidden: int,
    attention: Attention | None,
    dense: Mlp | None,
    column: str = "layer_vectors",
) -> int:
    """Learned vectors each layer adds beyond its matrices and hidden-size norms, from the row's
    `layer_vectors` (width name -> how many: a count, a rule, or a sum of products of config keys
    as a list of lists): BitNet's sub-layer norms (one of hidden size, one of intermediate size),
    DiffLlama's four lambda vectors of head_dim."""
    rule: Mapping[str, int] = family.row.get(column) or {}
    widths = {
        "hidden_size": hidden,
        "intermediate_size": dense.intermediate_size if dense else 0,
        "head_dim": attention.head_dim if attention else 0,
        "rope_head_dim": attention.rope_head_dim if attention else 0,
        "num_heads": attention.num_heads if attention else 0,
    }
    for width in rule:
        if width not in _VECTOR_WIDTHS:
            raise RuntimeError(f"architectures.yaml {family.name}: {column} width {width!r} is unknown")
    counts = {width: _vector_count(count, cfg, width) for width, count in rule.items()}
    return sum(count * widths[width] for width, count in counts.items())


def _vector_count(count: Any, cfg: Mapping[str, Any], width: str) -> int:
    """A vector count: a literal or rule, or a list of products of config keys to sum (CPM-Ant's
    prompt rows: prompt_types x prompt_length)."""
    if not isinstance(count, list):
        return get_int({width: resolve(count, cfg)}, width, minimum=0)
    total = 0
    for term in count:
        product = 1
        for key in term:
            product *= get_int(cfg, key, minimum=0)
        total += product
    return total


def hyper_streams(cfg: Mapping[str, Any], family: ArchitectureFamily) -> int:
    """Residual streams of the row's `hyper_connections` (the config key of their count; Hy-V4's
    hc_mult), 0 without hyper-connections."""
    rule: Mapping[str, str] = family.row.get("hyper_connections") or {}
    return get_int(cfg, rule["streams"], minimum=1) if rule else 0


def hyper_head(streams: int, hidden: int) -> tuple[ExtraComponent, ...]:
    """The last hyper-connection, which folds the streams into one before the final norm
    (HYV4HyperHead: hc_fn N x N h, hc_base N, one hc_scale). Its activations are counted outside
    the layers (terms/variants.py `hyper_head_bytes`); its FLOPs, one layer mixer's worth, are not."""
    if not streams:
        return ()
    return (
        ExtraComponent(
            "hc_head",
            streams * streams * hidden + streams + 1,
            trainable=True,
            note=f"hyper-connection head: {streams} streams folded into one",
            in_layers=True,
        ),
    )


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
    cfg: Mapping[str, Any],
    family: ArchitectureFamily,
    per_layer: Mapping[int, Attention],
    attention: Attention | None,
) -> dict[int, Attention]:
    """Layer index -> its attention: a per-layer override where `per_layer` has one, changed as the
    row's `sliding_layers` / `unindexed_layers` rules say for the layer types of `layer_types`
    (MiMo-V2-Flash's sliding layers: twice the key/value heads and a sink per head; dots3's
    sliding layers: no indexer; Inkling's hybrid_sliding layers: the attention read again with their
    own keys, `keys`: key read -> key read in its place). Equal layers share one module."""
    kinds = cfg.get("layer_types")
    if attention is None or not isinstance(kinds, list):
        return dict(per_layer)
    from dataclasses import replace

    if (family.row.get("indexer") or {}).get("shared") and isinstance(cfg.get("indexer_types"), list):
        # Hy-V4: a layer whose indexer is shared has none of its own
        stripped: dict[int, Attention] = {}  # id of the layer's attention -> the same without an indexer
        unindexed: dict[int, Attention] = {}
        for index, kind in enumerate(cfg["indexer_types"]):
            base = per_layer.get(index, attention)
            if kind == "shared":
                if id(base) not in stripped:
                    stripped[id(base)] = replace(base, index_heads=0, index_head_dim=0)
                unindexed[index] = stripped[id(base)]
        per_layer = {**per_layer, **unindexed}

    sliding: Mapping[str, Any] = family.row.get("sliding_layers") or {}
    rules = {
        str(sliding.get("kind", "sliding_attention")): sliding,
        **{kind: {"indexer": False} for kind in family.row.get("unindexed_layers") or ()},
    }
    made: dict[tuple[int, str], Attention] = {}
    variants: dict[int, Attention] = dict(per_layer)
    for index, kind in enumerate(kinds):
        rule = rules.get(kind)
        if not rule:
            continue
        base = per_layer.get(index, attention)
        key = (id(base), kind)
        if key not in made and rule.get("keys"):
            made[key] = _reread_attention(cfg, family, rule["keys"])
        if key not in made:
            made[key] = replace(
                base,
                num_kv_heads=base.num_kv_heads * int(rule.get("kv_heads_factor", 1)),
                sinks=bool(rule.get("sinks", base.sinks)),
                index_heads=base.index_heads if rule.get("indexer", True) else 0,
                index_head_dim=base.index_head_dim if rule.get("indexer", True) else 0,
            )
        variants[index] = made[key]
    return variants


def _reread_attention(
    cfg: Mapping[str, Any], family: ArchitectureFamily, keys: Mapping[str, str]
) -> Attention:
    """The attention of a layer kind whose widths come from keys of its own (Inkling's sliding
    layers: swa_num_key_value_heads for num_key_value_heads, sliding_window_size for rel_extent)."""
    from trainplan.inputs.hf.modules import attention_module

    hidden = get_int(cfg, *family.key("hidden_size"))
    swapped = {key: cfg[other] for key, other in keys.items() if cfg.get(other) is not None}
    return attention_module({**cfg, **swapped}, family, hidden)


#: Keys a `per_layer_config` entry may override: the attention widths (Gemma 4's full-attention
#: layers have their own head_dim, dots3's MLA layers their own heads and latent). Any other
#: override is refused by name.
_PER_LAYER_KEYS = (
    "head_dim",
    "num_key_value_heads",
    "num_attention_heads",
    "kv_lora_rank",
    "qk_nope_head_dim",
)


def per_layer_attention(
    cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int, attention: Attention | None
) -> dict[int, Attention]:
    """Layer index -> its attention where `per_layer_config` overrides the attention widths of
    that layer (transformers' per-layer config; layers with equal overrides share one module)."""
    overrides = cfg.get("per_layer_config")
    if attention is None:
        return {}
    if "per_layer_config" not in cfg:  # an explicit null means none, as for transformers
        overrides = _full_layer_overrides(cfg, family)
    if not overrides:
        return {}
    from trainplan.inputs.hf.modules import attention_module

    if not isinstance(overrides, Mapping):
        raise ConfigError("per_layer_config", "must map layer indices to the settings they override")
    layers = get_int(cfg, *family.key("num_layers"))
    built: dict[tuple[tuple[str, Any], ...], Attention] = {}
    variants: dict[int, Attention] = {}
    for raw_index, values in overrides.items():
        where = f"per_layer_config.{raw_index}"
        index = int(raw_index) if str(raw_index).isdigit() else -1
        if not 0 <= index < layers or not isinstance(values, Mapping):
            raise ConfigError(where, f"must be a layer index below {layers} mapping to settings")
        for key in values:
            if key not in _PER_LAYER_KEYS:
                raise ConfigError(
                    f"{where}.{key}",
                    "a per-layer override not modelled; modelled: " + ", ".join(_PER_LAYER_KEYS),
                )
        signature = tuple(sorted(values.items()))
        if signature not in built:
            built[signature] = attention_module({**cfg, **values}, family, hidden)
        variants[index] = built[signature]
    return variants


def _full_layer_overrides(cfg: Mapping[str, Any], family: ArchitectureFamily) -> dict[str, dict[str, Any]]:
    """What transformers' config fills in when a config.json has no `per_layer_config`: the row's
    `full_layer_overrides` for each full-attention layer (Gemma 4: head_dim = global_head_dim,
    512 when absent)."""
    rule: Mapping[str, Any] = family.row.get("full_layer_overrides") or {}
    if not rule:
        return {}
    kinds = cfg.get("layer_types")
    if not isinstance(kinds, list):
        raise ConfigError("layer_types", "must list every layer's kind to place the full-attention layers")
    values = {key: resolve(value, cfg) for key, value in rule.items()}
    return {str(index): values for index, kind in enumerate(kinds) if kind == "full_attention"}


def per_layer_inputs(
    cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int
) -> tuple[tuple[Linear, ...], int, tuple[ExtraComponent, ...]]:
    """Gemma 4's per-layer inputs (transformers' Gemma4TextModel): a second token table of
    layers x hidden_size_per_layer_input columns and a projection of the hidden state to the same
    width, with a norm, feed each layer's per_layer_input_gate (hidden -> size) and
    per_layer_projection (size -> hidden), then one more hidden-size norm. Returns the per-layer
    linears, the extra norms per layer and the model-level weights; nothing where the row or the
    config has none."""
    rule: Mapping[str, str] = family.row.get("per_layer_inputs") or {}
    size = get_int(cfg, rule["size"], default=0, minimum=0) if rule else 0
    if not size:
        return (), 0, ()
    layers = get_int(cfg, *family.key("num_layers"))
    rows = get_int(cfg, rule["vocab"])
    per_layer = (
        Linear("per_layer_input_gate", "proj", hidden, size),
        Linear("per_layer_projection", "proj", size, hidden),
    )
    width = layers * size
    extras = (
        ExtraComponent(
            "embed_tokens_per_layer",
            rows * width,
            trainable=True,
            note=f"per-layer token table, {rows} x {width}",
        ),
        ExtraComponent(
            "per_layer_model_projection",
            hidden * width + size,
            trainable=True,
            note=f"hidden -> {layers} x {size} projection and its norm",
        ),
    )
    return per_layer, 1, extras


@dataclass(frozen=True)
class GatedNorms:
    """A row's `gated_norms`: which norms of a dense and of an MoE layer are gated RMSNorms with a
    low-rank gate of config[`rank`] (A.X K2: the input norm of every layer, the post-attention
    norm of MoE layers; transformers 5.24 models/axk2/modeling_axk2.py, AXK2DecoderLayer)."""

    rank: int = 0
    dense: tuple[str, ...] = ()
    moe: tuple[str, ...] = ()
    hidden: int = 0

    @classmethod
    def of(cls, cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int) -> GatedNorms:
        rule: Mapping[str, Any] = family.row.get("gated_norms") or {}
        if not rule:
            return cls()
        return cls(get_int(cfg, rule["rank"]), tuple(rule["dense"]), tuple(rule["moe"]), hidden)

    def names(self, kind: tuple[str, ...]) -> tuple[str, ...]:
        return self.moe if "moe" in kind else self.dense

    def count(self, kind: tuple[str, ...]) -> int:
        return len(self.names(kind))

    def linears(self, kind: tuple[str, ...]) -> tuple[Linear, ...]:
        return gated_norm_linears(self.names(kind), self.rank, self.hidden)


def image_layers(family: ArchitectureFamily, cfg: Mapping[str, Any]) -> frozenset[int]:
    """Indices of the layers the row's `image_layers` rule names (Mllama's cross_attention_layers):
    layers a text-only step skips, so they leave the layer stack (see `image_layer_weights`)."""
    rule: Mapping[str, Any] | None = family.row.get("image_layers")
    if not rule:
        return frozenset()
    layers = get_int(cfg, *family.key("num_layers"))
    value = cfg.get(rule["key"])  # the row's defaults give the config class's list
    indices: list[int] = value if isinstance(value, list) else []
    valid = isinstance(value, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in indices
    )
    if not valid or len(set(indices)) != len(indices) or len(indices) == layers:
        raise ConfigError(
            rule["key"], f"must list distinct layer indices between 0 and {layers - 1}, not all"
        )
    return frozenset(indices)


def image_layer_weights(
    family: ArchitectureFamily,
    cfg: Mapping[str, Any],
    spec: ModelSpec,
    attention: Attention | None,
    dense: Mlp | None,
    norms: int,
) -> tuple[ExtraComponent, ...]:
    """The weights of the skipped image layers, counted frozen: each a cross-attention over the
    image features (projected to the hidden size, so its k/v read that width) with the row's q/k
    norms, a tanh gate per sub-layer (`gates` scalars), the layer's MLP and norms
    (MllamaCrossAttentionDecoderLayer). MllamaTextModel skips these layers when a step has no
    cross_attention_states, so they hold no activations, FLOPs, gradients or optimizer states."""
    from dataclasses import replace

    from trainplan.specs.weights import block_params

    indices = image_layers(family, cfg)
    if not indices:
        return ()
    rule: Mapping[str, Any] = family.row["image_layers"]
    if attention is None or dense is None:
        raise ConfigError(
            rule["key"], "image layers are modelled beside attention layers with a dense MLP only"
        )
    cross = replace(attention, qk_norm=str(rule.get("qk_norm", "none")))
    layer = Block(1, None, dense, norms, cross_attention=cross, extra_params=int(rule.get("gates", 0)))
    return (
        ExtraComponent(
            "image_cross_attention_layers",
            len(indices) * block_params(layer, spec),
            trainable=False,
            note=(
                f"{len(indices)} cross-attention layers ({rule['key']} {sorted(indices)}) that run only "
                "on image features: a text-only step skips them (no activations, FLOPs or adapters)"
            ),
        ),
    )
