"""Hugging Face config.json -> ModelSpec. The only module that knows Hugging Face key names.

How a decoder's config maps to blocks is declared per `model_type` family in the architecture
table (`families.py`, `data/architectures.yaml`): key aliases, plain or gated MLP, biases, norms,
parallel blocks, MoE interleaving, and the attention / Mamba layer order of SSM hybrids.
Encoder-decoder T5/mT5/Flan-T5 and GPT-2 have readers of their own; multimodal configs whose
language model sits under `text_config`/`language_config` add a ViT-style `vision_config`.
A model type on the table's refusal list, or an unknown one whose config names a layout we do
not model, is refused with the field and value; other unknown types are read with the keys
Llama-style configs share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError
from trainplan.families import (
    ATTENTION_LAYER_KINDS,
    GENERIC,
    Family,
    find_family,
    refusal,
    resolve,
    supported_model_types,
)
from trainplan.model import Attention, Block, ExtraComponent, Mlp, ModelSpec, Ssm

_MISSING = object()
_SEED_MLP_RATIO = 3.5  # the seed calculator's fallback when the MLP width is not recorded


def _get(cfg: Mapping[str, Any], *keys: str, default: Any = _MISSING) -> Any:
    """First present key among `keys`; ConfigError naming the first key if none is and no default."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if default is _MISSING:
        raise ConfigError(
            keys[0], f"missing from config.json (also looked for: {', '.join(keys[1:]) or '-'})"
        )
    return default


def _int(cfg: Mapping[str, Any], *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
    """An integer config value, range-checked, the error naming the key."""
    value = _get(cfg, *keys, default=default)
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ConfigError(keys[0], f"must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(keys[0], f"must be >= {minimum}, got {value}")
    return int(value)


def language_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language-model part of a (possibly multimodal) config, with its type's defaults."""
    text = cfg
    for key in ("text_config", "language_config"):
        sub = cfg.get(key)
        if isinstance(sub, Mapping) and ("hidden_size" in sub or "num_hidden_layers" in sub):
            text = sub
            break
    model_type = str(text.get("model_type", ""))
    if model_type == "gemma3" and text is not cfg:
        model_type = "gemma3_text"
    family = find_family(model_type)
    defaults = family.row.get("defaults") if family else None
    return {**defaults, **text} if defaults else text


def spec_from_config(cfg: Mapping[str, Any], name: str, source: str = "") -> ModelSpec:
    """Build the ModelSpec of a Hugging Face config.json dict."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", "config.json must be a JSON object")
    model_type = str(cfg.get("model_type", "")).lower()
    if model_type in ("t5", "mt5", "umt5") or (cfg.get("is_encoder_decoder") and "d_model" in cfg):
        return _t5(cfg, name, source)
    if refusal(model_type) is not None:
        family_of(model_type, cfg)  # a multimodal wrapper we do not model: refused by its own type
    text = language_config(cfg)
    text_type = str(text.get("model_type", model_type)).lower()
    if text_type == "gemma3" and text is not cfg:
        text_type = "gemma3_text"
    if not text_type and "n_embd" in cfg and "n_layer" in cfg:
        text_type = "gpt2"  # GPT-2's own keys without a model_type
    family = family_of(text_type, text)
    if family.row.get("reader") == "gpt2":
        return _gpt2(cfg, name, source, family)
    spec = _decoder(text, name, source, family)
    extras = _vision_extras(cfg, spec.hidden_size)
    if extras:
        spec = _with_extras(spec, extras, modality="text+vision")
    return spec


def _with_extras(spec: ModelSpec, extras: list[ExtraComponent], modality: str) -> ModelSpec:
    from dataclasses import replace

    return replace(spec, extras=spec.extras + tuple(extras), modality=modality)


#: Config keys that name a layout the generic reading does not model (SSM mixers, hybrid layer
#: orders, linear attention, parallel blocks, GPT-style key names): an unknown model type that
#: has one is refused rather than read as a Llama.
_UNMODELLED_SIGNALS = (
    "state_size", "ssm_state_size", "mamba_d_state", "d_state", "layers_block_type",
    "attn_layer_period", "attn_layer_indices", "hybrid_layer_ids", "hybrid_override_pattern",
    "block_types", "linear_attn_config", "parallel_attn", "use_parallel_residual",
    "new_decoder_architecture", "multi_query", "n_embd", "n_layer", "n_head", "attention_heads",
    "ffn_dim", "d_model", "interleave_moe_layer_step", "num_mem_blocks", "shared_expert_intermediate_size",
)  # fmt: skip


def family_of(model_type: str, cfg: Mapping[str, Any]) -> Family:
    """The architecture family that reads this config; ConfigError when it is not modelled."""
    family = find_family(model_type)
    if family is not None:
        return family
    refused = refusal(model_type)
    if refused is not None:
        raise ConfigError(
            "model_type",
            f"{model_type!r} is not modelled: {refused.reason}. Supported model types: "
            + ", ".join(supported_model_types()),
        )
    for key in _UNMODELLED_SIGNALS:
        if cfg.get(key) not in (None, False):
            raise ConfigError(
                key,
                f"{key}={cfg[key]!r} in a config of unknown model_type {model_type or '(none)'!r} "
                "names a layout the generic (Llama-style) reading does not model; supported model "
                "types: " + ", ".join(supported_model_types()),
            )
    return GENERIC


def _flag(family: Family, name: str, cfg: Mapping[str, Any], default: Any = False) -> bool:
    return bool(family.setting(name, cfg, default))


def _decoder(cfg: Mapping[str, Any], name: str, source: str, family: Family) -> ModelSpec:
    """A decoder-only model: attention (MHA/GQA/MQA or MLA) and/or Mamba mixers, dense or MoE
    MLPs, in the layer order the family's table row declares."""
    hidden = _int(cfg, *family.key("hidden_size"))
    vocab = _int(cfg, *family.key("vocab_size"))
    kinds = _layer_kinds(cfg, family)
    approximations: list[str] = []
    if family is GENERIC:
        approximations.append(
            f"model_type {str(cfg.get('model_type', '')) or '(none)'!r} is not in the architecture table: "
            "read with the Llama-style keys (gated MLP, RMSNorm), unverified for this model"
        )
    uses = {part for kind in kinds for part in kind}
    attention = _attention(cfg, family, hidden) if "attention" in uses else None
    ssm = _ssm(cfg, family, hidden) if "ssm" in uses else None
    dense = _dense_mlp(cfg, family, hidden, approximations) if "dense" in uses else None
    moe = _moe_mlp(cfg, family, dense, approximations) if "moe" in uses else None
    norms = int(family.setting("norms_per_layer", cfg, 2))
    parallel = _flag(family, "parallel", cfg)
    blocks: list[Block] = []
    for kind in kinds:
        block = Block(
            1,
            attention=attention if "attention" in kind else None,
            mlp=dense if "dense" in kind else moe if "moe" in kind else None,
            norms=norms,
            ssm=ssm if "ssm" in kind else None,
            parallel=parallel,
        )
        if blocks and _same_layer(blocks[-1], block):
            blocks[-1] = Block(blocks[-1].count + 1, block.attention, block.mlp, block.norms,
                               ssm=block.ssm, parallel=parallel)  # fmt: skip
        else:
            blocks.append(block)
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=vocab,
        blocks=tuple(blocks),
        tied_embeddings=_flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", False))),
        head_bias=_flag(family, "head_bias", cfg),
        norm=str(family.setting("norm", cfg, "rmsnorm")),
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=_positions(cfg, family),
        final_logit_softcap=bool(cfg.get("final_logit_softcapping")),
        approximations=tuple(approximations),
        source=source,
    )


def _same_layer(a: Block, b: Block) -> bool:
    return a.attention is b.attention and a.mlp is b.mlp and a.ssm is b.ssm and a.norms == b.norms


def _positions(cfg: Mapping[str, Any], family: Family) -> int:
    key = family.setting("positions", cfg, None)
    if not key:
        return 0
    return _int(cfg, str(key)) + int(family.row.get("position_offset", 0))


def _layer_kinds(cfg: Mapping[str, Any], family: Family) -> list[tuple[str, ...]]:
    """Per layer, in forward order, the parts it has: "attention", "ssm", "dense", "moe".

    The family's `layers` rule says where attention and SSM layers sit: all one kind
    (`mixer`), every `period` layers from `offset` (Jamba), an index list (Bamba), or a
    per-layer list of kinds (Nemotron-H, GraniteMoeHybrid, Zamba2). The MLP of each layer is
    dense or MoE by the family's `moe` rule; layer kinds the table does not map are refused.
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
        if not isinstance(values, list) or not values:
            raise ConfigError(listed["key"], "must list the kind of every layer")
        layers = _int(cfg, *family.key("num_layers"), default=len(values))
        if layers != len(values):
            raise ConfigError(listed["key"], f"lists {len(values)} layers, num_hidden_layers is {layers}")
        mapping: Mapping[str, str] = listed["map"]
        mixers = []
        for index, value in enumerate(values):
            if value not in mapping:
                raise ConfigError(
                    f"{listed['key']}[{index}]",
                    f"layer kind {value!r} is not modelled for {family.name}; modelled: "
                    + ", ".join(sorted(mapping)),
                )
            mixers.append(mapping[value])
    else:
        layers = _int(cfg, *family.key("num_layers"))
        mixers = [_mixer_of(cfg, rule, index) for index in range(layers)]
    _check_layer_types(cfg, family, layers)
    kinds: list[tuple[str, ...]] = []
    for index, mixer in enumerate(mixers):
        parts = tuple(part for part in mixer.split("+") if part != "none")
        if rule.get("mlp", True) and "dense" not in parts and "moe" not in parts:
            parts += ("moe" if _is_moe_layer(cfg, family, index) else "dense",)
        kinds.append(parts)
    return kinds


def _mixer_of(cfg: Mapping[str, Any], rule: Mapping[str, Any], index: int) -> str:
    """The mixer of layer `index` under a non-list `layers` rule."""
    mixer = str(rule.get("mixer", "attention"))
    if "attention_period" in rule:
        period = _int(cfg, rule["attention_period"])
        offset = _int(cfg, rule["attention_offset"], minimum=0)
        return "attention" if index % period == offset else mixer
    if "attention_indices" in rule:
        indices = cfg.get(rule["attention_indices"]) or []
        return "attention" if index in indices else mixer
    return mixer


def _check_layer_types(cfg: Mapping[str, Any], family: Family, layers: int) -> None:
    """`layer_types` may only name softmax attention (full, sliding, chunked) unless the family
    maps other kinds; anything else (linear, lightning attention...) is refused by name."""
    rule: Mapping[str, Any] = family.row.get("layers") or {}
    if (rule.get("list") or {}).get("key") == "layer_types":
        return
    values = cfg.get("layer_types")
    if not isinstance(values, list):
        return
    for index, value in enumerate(values):
        if value not in ATTENTION_LAYER_KINDS:
            raise ConfigError(
                f"layer_types[{index}]",
                f"layer kind {value!r} is not modelled; modelled here: " + ", ".join(ATTENTION_LAYER_KINDS),
            )
    if len(values) != layers:
        raise ConfigError("layer_types", f"lists {len(values)} layers, the model has {layers}")


def _experts(cfg: Mapping[str, Any]) -> int:
    return _int(cfg, "num_local_experts", "n_routed_experts", "num_experts", default=0, minimum=0)


def _is_moe_layer(cfg: Mapping[str, Any], family: Family, index: int) -> bool:
    """Whether layer `index` has the MoE MLP: first-k-dense, a sparse step, mlp-only layers,
    an explicit MoE layer list or Llama 4's interleave step, or Jamba's expert period."""
    if _experts(cfg) == 0:
        return False
    rule: Mapping[str, Any] = family.row.get("moe") or {}
    if "layers_key" in rule and isinstance(cfg.get(rule["layers_key"]), list):
        return index in cfg[rule["layers_key"]]
    if "period" in rule:
        period = _int(cfg, rule["period"])
        return index % period == _int(cfg, rule["offset"], minimum=0)
    if "step" in rule:
        step = _int(cfg, rule["step"])
        return (index + 1) % step == 0
    first_dense = _int(cfg, "first_k_dense_replace", default=0, minimum=0)
    step = _int(cfg, "decoder_sparse_step", "moe_layer_freq", default=1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    return index >= first_dense and index not in mlp_only and (index + 1) % step == 0


def _attention(cfg: Mapping[str, Any], family: Family, hidden: int) -> Attention:
    """The attention module: MHA/GQA/MQA (fused or separate q/k/v) or DeepSeek's MLA."""
    heads = _int(cfg, *family.key("num_heads"))
    kv_heads = _int(cfg, *family.key("num_kv_heads"), default=heads)
    if _flag(family, "multi_query", cfg):
        kv_heads = 1
    if heads % kv_heads:
        raise ConfigError("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads={heads}")
    head_dim = _int(cfg, *family.key("head_dim"), default=hidden // heads)
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = _flag(family, "qkv_bias", cfg, attention_bias)
    out_bias = _flag(family, "out_bias", cfg, attention_bias)
    if family.row.get("attention") == "mla" and "kv_lora_rank" in cfg:
        rope = _int(cfg, "qk_rope_head_dim")
        return Attention(
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=_int(cfg, "qk_nope_head_dim") + rope,
            v_head_dim=_int(cfg, "v_head_dim"),
            kind="mla",
            qkv_bias=qkv_bias,
            out_bias=out_bias,
            q_lora_rank=_int(cfg, "q_lora_rank", default=0, minimum=0),
            kv_lora_rank=_int(cfg, "kv_lora_rank"),
            rope_head_dim=rope,
        )
    names = family.row.get("attention_names") or ("q_proj", "k_proj", "v_proj", "o_proj")
    return Attention(
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=head_dim,
        qkv_bias=qkv_bias,
        out_bias=out_bias,
        fused_qkv=family.row.get("fused_qkv"),
        qk_norm=str(family.setting("qk_norm", cfg, "none")),
        qk_norm_bias=_flag(family, "qk_norm_bias", cfg),
        logit_softcap=bool(cfg.get("attn_logit_softcapping")),
        sinks=_flag(family, "attention_sinks", cfg),
        names=tuple(names),
    )


_MLP_NAMES = ("gate_proj", "up_proj", "down_proj")


def _dense_mlp(cfg: Mapping[str, Any], family: Family, hidden: int, approximations: list[str]) -> Mlp:
    """The dense feed-forward block: gated (3 matrices) or plain (2), with the family's names."""
    keys = family.key("intermediate_size")
    if any(key in cfg and cfg[key] is not None for key in keys):
        intermediate = _int(cfg, *keys)
    elif "mlp_ratio" in family.row:
        intermediate = int(family.setting("mlp_ratio", cfg, 4)) * hidden
    else:
        intermediate = round(_SEED_MLP_RATIO * hidden)
        approximations.append(
            f"intermediate_size not in the config: approximated as {_SEED_MLP_RATIO} x hidden "
            f"= {intermediate}; MLP parameters and LoRA all-linear counts are approximate"
        )
    return Mlp(
        intermediate_size=intermediate,
        gated=family.setting("mlp", cfg, "gated") == "gated",
        bias=_flag(family, "mlp_bias", cfg, bool(cfg.get("mlp_bias", False))),
        fused_gate_up=_flag(family, "fused_gate_up", cfg),
        names=tuple(family.row.get("mlp_names") or _MLP_NAMES),
        activation=str(family.setting("activation", cfg, cfg.get("hidden_act", "silu"))),
    )


def _moe_mlp(cfg: Mapping[str, Any], family: Family, dense: Mlp | None, approximations: list[str]) -> Mlp:
    """The mixture-of-experts block: routed experts, shared experts, the router."""
    rule: Mapping[str, Any] = family.row.get("moe") or {}
    experts = _experts(cfg)
    default_top_k = rule.get("default_top_k")
    top_k = _int(cfg, "num_experts_per_tok", "moe_top_k", "top_k", default=default_top_k or _MISSING)
    if default_top_k and cfg.get("num_experts_per_tok") is None:
        approximations.append(
            f"num_experts_per_tok not in the config: {default_top_k} assumed ({rule['top_k_source']}); "
            "active parameters, FLOPs and MoE activations depend on it"
        )
    inner_keys = rule.get("expert_size_keys") or ("moe_intermediate_size",)
    if dense is not None:
        moe_inner = _int(cfg, *inner_keys, default=dense.intermediate_size)
    else:
        moe_inner = _int(cfg, *inner_keys, *family.key("intermediate_size"))
    shared_count = _int(cfg, "n_shared_experts", default=0, minimum=0)
    shared_inner = moe_inner
    shared_key = rule.get("shared_size_key", "shared_expert_intermediate_size")
    if cfg.get(shared_key):
        shared_count, shared_inner = max(shared_count, 1), _int(cfg, shared_key)
    if "shared_experts" in rule:
        shared_count = int(resolve(rule["shared_experts"], cfg))
    template = dense or Mlp(0)
    return Mlp(
        intermediate_size=moe_inner,
        gated=family.setting("mlp", cfg, "gated") == "gated",
        num_experts=experts,
        experts_per_token=top_k,
        num_shared_experts=shared_count,
        shared_intermediate_size=shared_inner,
        shared_expert_gate=bool(rule.get("shared_expert_gate", False)) and shared_count > 0,
        names=template.names if dense else tuple(family.row.get("mlp_names") or _MLP_NAMES),
        activation=template.activation if dense else str(cfg.get("hidden_act", "silu")),
    )


def _keys(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _ssm(cfg: Mapping[str, Any], family: Family, hidden: int) -> Ssm:
    """A Mamba or Mamba-2 mixer from the keys the family's `ssm` rule names."""
    rule: Mapping[str, Any] = family.row["ssm"]
    kind = str(rule["kind"])
    if "inner_key" in rule and cfg.get(rule["inner_key"]):
        inner = _int(cfg, rule["inner_key"])
    elif rule.get("inner") == "heads":
        inner = _int(cfg, rule["num_heads"]) * _int(cfg, rule["head_dim"])
    else:
        expand = _get(cfg, rule["expand"])
        if not isinstance(expand, int | float) or expand <= 0 or int(expand * hidden) != expand * hidden:
            raise ConfigError(
                rule["expand"], f"must be a positive number giving an integer width, got {expand!r}"
            )
        inner = int(expand * hidden)
    state = _int(cfg, rule["state_size"])
    kernel = _int(cfg, rule["conv_kernel"])
    proj_bias = bool(resolve(rule["proj_bias"], cfg))
    conv_bias = bool(resolve(rule["conv_bias"], cfg))
    if kind == "mamba":
        dt_rank = _get(cfg, rule["dt_rank"])
        if dt_rank == "auto":
            dt_rank = math.ceil(hidden / 16)  # transformers' MambaConfig / JambaConfig
        return Ssm(
            "mamba",
            inner,
            state,
            kernel,
            dt_rank=_int({rule["dt_rank"]: dt_rank}, rule["dt_rank"]),
            proj_bias=proj_bias,
            conv_bias=conv_bias,
            gated_norm=False,
            dt_bc_norms=bool(rule.get("dt_bc_norms", False)),
        )
    heads = _int(cfg, rule["num_heads"])
    groups = _int(cfg, rule["n_groups"])
    if heads % groups:
        raise ConfigError(rule["n_groups"], f"{groups} does not divide the {heads} SSM heads")
    return Ssm(
        "mamba2",
        inner,
        state,
        kernel,
        num_heads=heads,
        n_groups=groups,
        chunk_size=_int(cfg, *_keys(rule.get("chunk_size", "chunk_size")), default=256),
        proj_bias=proj_bias,
        conv_bias=conv_bias,
        gated_norm=bool(resolve(rule.get("gated_norm", True), cfg)),
    )


def _gpt2(cfg: Mapping[str, Any], name: str, source: str, family: Family) -> ModelSpec:
    """GPT-2 and its kin: learned positions, LayerNorm with bias, fused c_attn (one key/value
    head under StarCoder's multi-query), plain GELU MLP, tied head."""
    hidden = _int(cfg, "n_embd", "hidden_size")
    heads = _int(cfg, "n_head", "num_attention_heads")
    inner = _int(cfg, "n_inner", default=4 * hidden)
    attention = Attention(
        num_heads=heads,
        num_kv_heads=1 if _flag(family, "multi_query", cfg) else heads,
        head_dim=hidden // heads,
        v_head_dim=hidden // heads,
        qkv_bias=True,
        out_bias=True,
        fused_qkv="c_attn",
        names=("c_attn", "c_attn", "c_attn", "c_proj"),
    )
    mlp = Mlp(
        intermediate_size=inner,
        gated=False,
        bias=True,
        names=("c_fc", "c_fc", "c_proj"),
        activation=str(cfg.get("activation_function", "gelu_new")),
    )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=_int(cfg, "vocab_size"),
        blocks=(Block(_int(cfg, "n_layer", "num_hidden_layers"), attention, mlp, 2),),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        norm="layernorm",
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=_int(cfg, "n_positions", "max_position_embeddings"),
        dropout=float(cfg.get("attn_pdrop", 0.1) or 0.0),
        source=source,
    )


def _t5(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """T5/mT5/Flan-T5: shared embedding, relative position bias in each stack's first layer,
    RMS-style LayerNorm without bias, ReLU (2 matrices) or gated-GELU (3 matrices) FFN."""
    hidden = _int(cfg, "d_model")
    heads = _int(cfg, "num_heads")
    d_kv = _int(cfg, "d_kv")
    buckets = _int(cfg, "relative_attention_num_buckets", default=32)
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    names = ("wi_0", "wi_1", "wo") if gated else ("wi", "wi", "wo")
    activation = str(cfg.get("feed_forward_proj", "relu")).removeprefix("gated-")
    mlp = Mlp(intermediate_size=_int(cfg, "d_ff"), gated=gated, names=names, activation=activation)
    t5_names = ("q", "k", "v", "o")

    def attn(bias_params: int) -> Attention:
        return Attention(heads, heads, d_kv, d_kv, relative_bias_params=bias_params, names=t5_names)

    encoder_layers = _int(cfg, "num_layers")
    decoder_layers = _int(cfg, "num_decoder_layers", default=encoder_layers)
    first_bias = buckets * heads
    blocks = (
        Block(1, attn(first_bias), mlp, 2, role="encoder"),
        Block(encoder_layers - 1, attn(0), mlp, 2, role="encoder"),
        Block(1, attn(first_bias), mlp, 3, cross_attention=attn(0), role="decoder"),
        Block(decoder_layers - 1, attn(0), mlp, 3, cross_attention=attn(0), role="decoder"),
    )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=_int(cfg, "vocab_size"),
        blocks=tuple(block for block in blocks if block.count > 0),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        final_norms=2,
        encoder_decoder=True,
        dropout=float(cfg.get("dropout_rate", 0.1) or 0.0),
        source=source,
    )


#: Vision-tower model types read as a ViT (patch embedding, pre-norm layers, post-norm).
_VISION_TYPES = {"siglip_vision_model", "janus_vision_model", "clip_vision_model"}


def _vision_extras(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """A ViT-style vision tower (SigLIP/CLIP) from `vision_config`, plus Gemma 3's projector."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping) or "hidden_size" not in vision:
        return []
    vision_type = str(vision.get("model_type", "siglip_vision_model"))
    if vision_type not in _VISION_TYPES:
        raise ConfigError(
            "vision_config.model_type",
            f"{vision_type!r} is not modelled; modelled vision towers: " + ", ".join(sorted(_VISION_TYPES)),
        )
    hidden = _int(vision, "hidden_size")
    if "intermediate_size" not in vision and "mlp_ratio" in vision:
        inner = round(float(vision["mlp_ratio"]) * hidden)  # Janus' SigLIP config
    else:
        inner = _int(vision, "intermediate_size")
    layers = _int(vision, "num_hidden_layers")
    patch = _int(vision, "patch_size")
    image = _int(vision, "image_size")
    channels = _int(vision, "num_channels", default=3)
    patches = (image // patch) ** 2
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 2 * 2 * hidden
    tower = channels * patch * patch * hidden + hidden + patches * hidden + layers * per_layer + 2 * hidden
    if vision_type == "siglip_vision_model" and vision.get("vision_use_head", True):
        # SigLIP's attention-pooling head: probe, in/out projections, LayerNorm, MLP
        tower += hidden + 4 * (hidden * hidden + hidden) + 2 * hidden + 2 * hidden * inner + inner + hidden
    extras = [
        ExtraComponent(
            "vision_tower",
            tower,
            trainable=False,
            note=f"ViT: {layers} layers x {hidden} hidden, {patches} patches (SigLIP layout)",
        )
    ]
    model_type = str(cfg.get("model_type", ""))
    if model_type == "gemma3":
        extras.append(ExtraComponent("multi_modal_projector", hidden * text_hidden + hidden, note="Gemma 3"))
    return extras
