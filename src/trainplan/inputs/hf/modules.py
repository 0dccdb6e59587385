"""One layer's modules from a config: attention (MHA/GQA/MQA, MLA), dense and MoE MLPs, Mamba mixers,
linear-attention and short-convolution mixers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily, resolve
from trainplan.inputs.hf.layers import num_experts
from trainplan.inputs.hf.values import MISSING, flag, get, get_int, get_probability, key_tuple
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import DELTANET_PROJECTIONS, LINEAR_MIXER_KINDS, Attention, LinearMixer, Mlp, Ssm

_SEED_MLP_RATIO = 3.5  # the seed calculator's fallback when the MLP width is not recorded


# The model types whose routed experts peft adapts. transformers 5 stores routed experts as fused
# 3-D parameters (`@use_experts_implementation`), which no `target_modules` entry matches; peft's
# MoE conversion (peft 0.21 utils/transformers_weight_conversion.py: _MODEL_TO_CONVERSION_PATTERN
# entries mapped to the "mixtral" or "qwen2_moe" patterns of _MOE_TARGET_MODULE_MAPPING; qwen2_moe
# itself has no entry) turns
# "all-linear" and the old expert projection names into `target_parameters` for these types only.
# Elsewhere (gpt-oss, Qwen2-MoE, Llama 4, DBRX, JetMoE, Granite-MoE, ...) the experts stay frozen.
PEFT_EXPERT_ADAPTER_TYPES = frozenset(
    {
        "mixtral", "minimax", "minimax_m2", "afmoe", "deepseek_v2", "deepseek_v3", "deepseek_v32", "dots1",
        "ernie4_5_moe", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "glm4v_moe", "longcat_flash",
        "solar_open", "mellum", "qwen3_moe", "beam", "qwen3_omni_moe", "qwen3_omni_moe_thinker",
        "qwen3_omni_moe_text", "qwen3_next", "hunyuan_v1_moe", "flex_olmo", "olmoe", "sarvam_mla",
        "exaone_moe", "cohere2_moe",
    }
)  # fmt: skip


def attention_module(cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int) -> Attention:
    """The attention module: MHA/GQA/MQA (fused or separate q/k/v), DeepSeek's MLA or JetMoE's
    mixture of attention heads."""
    if family.row.get("attention") == "moa":
        return _mixture_of_heads(cfg, family)
    heads = get_int(cfg, *family.key("num_heads"))
    kv_heads = get_int(cfg, *family.key("num_kv_heads"), default=heads)
    if flag(family, "multi_query", cfg):
        kv_heads = 1
    if heads % kv_heads:
        raise ConfigError("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads={heads}")
    head_dim = get_int(cfg, *family.key("head_dim"), default=hidden // heads)
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = flag(family, "qkv_bias", cfg, attention_bias)
    out_bias = flag(family, "out_bias", cfg, attention_bias)
    gate: Mapping[str, Any] = family.row.get("output_gate") or {}
    gate_per = str(resolve(gate.get("per"), cfg))
    gate_bias = bool(resolve(gate.get("bias", False), cfg))
    gate_name = str(gate.get("name", "gate_proj"))
    # transformers' eager_attention_forward drops out the probabilities in training with
    # `attention_dropout` (Llama, Qwen, Mistral, Gemma, Granite, ...; 0.0 by default)
    dropout = get_probability(cfg, "attention_dropout")
    if family.row.get("attention") == "mla" and "kv_lora_rank" in cfg:
        rope = get_int(cfg, "qk_rope_head_dim")
        index_heads, index_dim = _indexer(cfg, family)
        v_dim = get_int(cfg, "v_head_dim")
        return Attention(
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=get_int(cfg, "qk_nope_head_dim") + rope,
            v_head_dim=v_dim,
            kind="mla",
            qkv_bias=qkv_bias,
            out_bias=out_bias,
            q_lora_rank=get_int(cfg, "q_lora_rank", default=0, minimum=0),
            kv_lora_rank=get_int(cfg, "kv_lora_rank"),
            rope_head_dim=rope,
            head_gate=flag(family, "attention_head_gate", cfg),
            query_gate=flag(family, "query_gate", cfg),
            sinks=flag(family, "attention_sinks", cfg),
            index_heads=index_heads,
            index_head_dim=index_dim,
            gate_size={"head": heads, "full": heads * v_dim}.get(gate_per, 0),
            gate_bias=gate_bias,
            gate_name=gate_name,
            dropout=dropout,
        )
    names = family.row.get("attention_names") or ("q_proj", "k_proj", "v_proj", "o_proj")
    _check_uniform_heads(cfg, family, heads)
    value_key = family.row.get("value_head_dim")  # values narrower than keys (MiMo-V2-Flash)
    relative: Mapping[str, Any] = family.row.get("relative_logits") or {}
    rel_width = get_int(cfg, relative["width"]) if relative else 0
    rel_extent = get_int(cfg, relative["extent"]) if relative else 0
    return Attention(
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=get_int(cfg, value_key, default=head_dim) if value_key else head_dim,
        qkv_bias=qkv_bias,
        out_bias=out_bias,
        fused_qkv=_optional_name(family.setting("fused_qkv", cfg, None)),
        qk_norm=str(family.setting("qk_norm", cfg, "none")),
        qk_norm_bias=flag(family, "qk_norm_bias", cfg),
        logit_softcap=bool(cfg.get("attn_logit_softcapping")),
        sinks=flag(family, "attention_sinks", cfg),
        output_gate=flag(family, "attention_output_gate", cfg),
        head_gate=flag(family, "attention_head_gate", cfg),
        dynamic_mask=flag(family, "dynamic_mask", cfg),
        relative_width=rel_width,
        relative_extent=rel_extent,
        relative_bias_params=rel_width * rel_extent,
        kv_conv_kernel=short_conv_kernel(cfg, family),
        names=tuple(names),
        gate_size={"head": heads, "full": heads * head_dim}.get(gate_per, 0),
        gate_bias=gate_bias,
        gate_name=gate_name,
        dropout=dropout,
    )


def short_conv_kernel(cfg: Mapping[str, Any], family: ArchitectureFamily) -> int:
    """Taps of the row's `short_convs` (Inkling's causal depthwise convolutions on keys, values and
    each sub-layer's output; the config key or keys of their kernel size), 0 where it has none."""
    rule: Mapping[str, Any] = family.row.get("short_convs") or {}
    return get_int(cfg, *key_tuple(rule["kernel"])) if rule else 0


def _mixture_of_heads(cfg: Mapping[str, Any], family: ArchitectureFamily) -> Attention:
    """JetMoE's attention (JetMoeConfig, JetMoeAttention): num_experts_per_tok of the
    num_local_experts query/output expert pairs run per token, each with num_key_value_heads heads
    of kv_channels, so the kernel sees kv heads x top-k query heads (JetMoeConfig sets
    num_attention_heads to that product; a config that says otherwise is refused)."""
    kv_heads = get_int(cfg, *family.key("num_kv_heads"))
    experts = get_int(cfg, "num_local_experts")
    top_k = get_int(cfg, "num_experts_per_tok")
    if top_k > experts:
        raise ConfigError("num_experts_per_tok", f"{top_k} experts per token exceeds the {experts} experts")
    heads = kv_heads * top_k
    stated = cfg.get("num_attention_heads")
    if stated is not None and stated != heads:
        raise ConfigError(
            "num_attention_heads",
            f"{shown_value(stated)}, but the mixture of attention heads runs num_key_value_heads x "
            f"num_experts_per_tok = {heads} heads per token",
        )
    names = family.row.get("attention_names") or ("q_proj", "k_proj", "v_proj", "o_proj")
    head_dim = get_int(cfg, *family.key("head_dim"))
    return Attention(heads, kv_heads, head_dim, head_dim, names=tuple(names), routed_experts=experts)


def _check_uniform_heads(cfg: Mapping[str, Any], family: ArchitectureFamily, heads: int) -> None:
    """A per-layer head-count list (the row's `heads_per_layer` key) must repeat the model's head
    count: layers of different widths are not modelled."""
    key = family.row.get("heads_per_layer")
    values = cfg.get(key) if key else None
    if not isinstance(values, list):
        return
    for index, value in enumerate(values):
        if value != heads:
            raise ConfigError(
                f"{key}[{index}]",
                f"{shown_value(value)} heads where num_attention_heads is {heads}: "
                "per-layer head counts are not modelled",
            )


_MLP_NAMES = ("gate_proj", "up_proj", "down_proj")


def dense_mlp(
    cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int, approximations: list[str]
) -> Mlp:
    """The dense feed-forward block: gated (3 matrices) or plain (2), with the family's names."""
    keys = family.key("intermediate_size")
    if any(key in cfg and cfg[key] is not None for key in keys):
        intermediate = get_int(cfg, *keys)
    elif "mlp_ratio" in family.row:
        intermediate = int(family.setting("mlp_ratio", cfg, 4)) * hidden
    else:
        intermediate = round(_SEED_MLP_RATIO * hidden)
        approximations.append(
            f"intermediate_size not in the config: approximated as {_SEED_MLP_RATIO} x hidden "
            f"= {intermediate}; MLP parameters and LoRA all-linear counts are approximate"
        )
    if "ffn_width" in family.row:
        intermediate = _adjusted_width(cfg, family.row["ffn_width"], intermediate)
    return Mlp(
        intermediate_size=intermediate,
        gated=family.setting("mlp", cfg, "gated") == "gated",
        bias=flag(family, "mlp_bias", cfg, bool(cfg.get("mlp_bias", False))),
        fused_gate_up=flag(family, "fused_gate_up", cfg),
        names=tuple(family.row.get("mlp_names") or _MLP_NAMES),
        activation=str(family.setting("activation", cfg, cfg.get("hidden_act", "silu"))),
        activation_params=int(family.setting("activation_params", cfg, 0)),
        output_scale=flag(family, "mlp_output_scale", cfg),
    )


def _adjusted_width(cfg: Mapping[str, Any], rule: Mapping[str, Any], width: int) -> int:
    """The MLP width a row's `ffn_width` rule derives from the config's: width // divisor
    (RecurrentGemmaMlp halves it), or LFM2's (Lfm2MLP): when config[adjust] is true,
    int(2/3 x width), and when a multiplier is set, int(multiplier x that) rounded up to a
    multiple of config[multiple_of]."""
    if "divisor" in rule:
        return width // int(rule["divisor"])
    if not cfg.get(rule["adjust"]):
        return width
    width = int(2 * width / 3)
    multiplier = cfg.get(rule["multiplier"])
    if multiplier is None:
        return width
    if not isinstance(multiplier, int | float) or isinstance(multiplier, bool) or multiplier <= 0:
        raise ConfigError(rule["multiplier"], f"must be a positive number, got {shown_value(multiplier)}")
    multiple = get_int(cfg, rule["multiple_of"])
    return multiple * -(-int(multiplier * width) // multiple)


def moe_mlp(
    cfg: Mapping[str, Any], family: ArchitectureFamily, dense: Mlp | None, approximations: list[str]
) -> Mlp:
    """The mixture-of-experts block: routed experts, shared experts, the router."""
    rule: Mapping[str, Any] = family.row.get("moe") or {}
    experts = num_experts(cfg)
    default_top_k = rule.get("default_top_k")
    top_k = get_int(
        cfg,
        "num_experts_per_tok",
        "moe_top_k",
        "top_k",
        "num_experts_per_token",
        "moe_k",
        "moe_topk",
        default=default_top_k or MISSING,
    )
    if top_k > experts:
        raise ConfigError("num_experts_per_tok", f"{top_k} experts per token exceeds the {experts} experts")
    if default_top_k and cfg.get("num_experts_per_tok") is None:
        approximations.append(
            f"num_experts_per_tok not in the config: {default_top_k} assumed ({rule['top_k_source']}); "
            "active parameters, FLOPs and MoE activations depend on it"
        )
    inner_keys = rule.get("expert_size_keys") or ("moe_intermediate_size",)
    if dense is not None:
        moe_inner = get_int(cfg, *inner_keys, default=dense.intermediate_size)
    else:
        moe_inner = get_int(cfg, *inner_keys, *family.key("intermediate_size"))
    shared_count = get_int(
        cfg, "n_shared_experts", "num_shared_experts", "moe_num_shared_experts", default=0, minimum=0
    )
    shared_inner = moe_inner
    shared_key = rule.get("shared_size_key", "shared_expert_intermediate_size")
    if cfg.get(shared_key):
        shared_count, shared_inner = max(shared_count, 1), get_int(cfg, shared_key)
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
        bias=bool(resolve(rule.get("expert_bias", False), cfg)),
        shared_bias=bool(resolve(rule.get("shared_bias", False), cfg)),
        router_bias=bool(resolve(rule.get("router_bias", False), cfg)),
        sorted_scatter=bool(rule.get("sorted_scatter", False)),
        zero_experts=get_int(cfg, rule["zero_experts"], default=0, minimum=0)
        if "zero_experts" in rule
        else 0,
        names=template.names if dense else tuple(family.row.get("mlp_names") or _MLP_NAMES),
        activation=template.activation
        if dense
        else str(family.setting("activation", cfg, cfg.get("hidden_act", "silu"))),
        shared_scores=bool(rule.get("shared_scores", False)) and shared_count > 0,
        output_scale=flag(family, "mlp_output_scale", cfg),
        expert_adapters=str(cfg.get("model_type", "")) in PEFT_EXPERT_ADAPTER_TYPES,
    )


def ssm_mixer(cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int) -> Ssm:
    """A Mamba or Mamba-2 mixer from the keys the family's `ssm` rule names."""
    rule: Mapping[str, Any] = family.row["ssm"]
    kind = str(rule["kind"])
    if "inner_key" in rule and cfg.get(rule["inner_key"]):
        inner = get_int(cfg, rule["inner_key"])
    elif rule.get("inner") == "heads":
        inner = get_int(cfg, rule["num_heads"]) * get_int(cfg, rule["head_dim"])
    else:
        expand = get(cfg, rule["expand"])
        if not isinstance(expand, int | float) or expand <= 0 or int(expand * hidden) != expand * hidden:
            raise ConfigError(
                rule["expand"],
                f"must be a positive number giving an integer width, got {shown_value(expand)}",
            )
        inner = int(expand * hidden)
    state = get_int(cfg, rule["state_size"])
    kernel = get_int(cfg, rule["conv_kernel"])
    proj_bias = bool(resolve(rule["proj_bias"], cfg))
    conv_bias = bool(resolve(rule["conv_bias"], cfg))
    if kind == "mamba":
        dt_rank = get(cfg, rule["dt_rank"])
        if dt_rank == "auto":
            dt_rank = math.ceil(hidden / 16)  # transformers' MambaConfig / JambaConfig / ZambaConfig
        heads = get_int(cfg, rule["num_heads"]) if "num_heads" in rule else 0  # Zamba's Mamba heads
        if heads and inner % heads:
            raise ConfigError(rule["num_heads"], f"{heads} does not divide the {inner} inner channels")
        return Ssm(
            "mamba",
            inner,
            state,
            kernel,
            num_heads=heads,
            dt_rank=get_int({rule["dt_rank"]: dt_rank}, rule["dt_rank"]),
            proj_bias=proj_bias,
            conv_bias=conv_bias,
            gated_norm=False,
            dt_bc_norms=bool(rule.get("dt_bc_norms", False)),
        )
    heads = get_int(cfg, rule["num_heads"])
    groups = get_int(cfg, rule["n_groups"])
    if heads % groups:
        raise ConfigError(rule["n_groups"], f"{groups} does not divide the {heads} SSM heads")
    return Ssm(
        "mamba2",
        inner,
        state,
        kernel,
        num_heads=heads,
        n_groups=groups,
        chunk_size=get_int(cfg, *key_tuple(rule.get("chunk_size", "chunk_size")), default=256),
        proj_bias=proj_bias,
        conv_bias=conv_bias,
        gated_norm=bool(resolve(rule.get("gated_norm", True), cfg)),
    )


def linear_mixer(cfg: Mapping[str, Any], family: ArchitectureFamily, hidden: int) -> LinearMixer:
    """A linear-attention, recurrent or short-convolution mixer from the family's `mixer` rule:
    each width names its config key (or keys, the first present wins; or is a literal or a rule);
    a head width the config leaves out is hidden / heads, as for attention."""
    rule: Mapping[str, Any] = family.row["mixer"]
    kind = str(rule["kind"])
    if kind not in LINEAR_MIXER_KINDS:
        raise RuntimeError(f"architectures.yaml {family.name}: mixer kind {kind!r} is unknown")

    def width(name: str, default: Any = MISSING) -> int:
        value = rule.get(name, default)
        if isinstance(value, list):  # the first key the config sets
            return get_int(cfg, *value)
        if isinstance(value, str):
            return get_int(cfg, value) if cfg.get(value) is not None or default is MISSING else int(default)
        return int(resolve(value, cfg))

    heads = width("num_heads")
    head_dim = width("head_dim", 0) or hidden // heads
    if "width" in rule:  # the whole recurrence width, split into heads (RG-LRU's gate blocks)
        total = width("width")
        if total % heads:
            raise ConfigError(
                str(key_tuple(rule["width"])[0]), f"{total} is not a multiple of the {heads} heads"
            )
        head_dim = total // heads
    key_heads = width("num_key_heads", 0)
    if key_heads and heads % key_heads:
        raise ConfigError(str(rule["num_key_heads"]), f"{key_heads} does not divide the {heads} value heads")
    return LinearMixer(
        kind,
        num_heads=heads,
        head_dim=head_dim,
        num_key_heads=key_heads,
        key_head_dim=width("key_head_dim", 0),
        conv_kernel=width("conv_kernel", 0),
        conv_bias=bool(resolve(rule.get("conv_bias", False), cfg)),
        projections=_projections(rule, cfg),
        gate_rank=width("gate_rank", 0),
        chunk_size=width("chunk_size", 64),
    )


def _projections(rule: Mapping[str, Any], cfg: Mapping[str, Any]) -> str:
    value = str(resolve(rule.get("projections", "fused"), cfg))
    if value not in DELTANET_PROJECTIONS:
        raise RuntimeError(f"architectures.yaml: mixer projections {value!r} is unknown")
    return value


def _indexer(cfg: Mapping[str, Any], family: ArchitectureFamily) -> tuple[int, int]:
    """(heads, head_dim) of the DSA indexer the row's `indexer` rule names, (0, 0) without one.
    Every layer must have its own indexer, unless the rule allows `shared` ones (Hy-V4: a layer of
    `indexer_types: shared` has none and reuses the top-k keys of the last full one, so the first
    must be full); any other kind is refused by name."""
    rule: Mapping[str, Any] | None = family.row.get("indexer")
    if not rule:
        return 0, 0
    kinds = cfg.get("indexer_types")
    modelled = ("full", "shared") if rule.get("shared") else ("full",)
    if isinstance(kinds, list):
        for index, kind in enumerate(kinds):
            if kind not in modelled or (index == 0 and kind != "full"):
                allowed = "full" if index == 0 else ", ".join(modelled)
                raise ConfigError(
                    f"indexer_types[{index}]",
                    f"indexer kind {shown_value(kind)} is not modelled here; modelled: {allowed}",
                )
    if not get_int(cfg, "q_lora_rank", default=0, minimum=0):
        raise ConfigError("q_lora_rank", "the sparse-attention indexer reads the query latent: must be >= 1")
    return get_int(cfg, rule["heads"]), get_int(cfg, rule["head_dim"])


def _optional_name(value: object) -> str | None:
    """A module name from a family setting (a literal or a rule's result), or None."""
    return str(value) if value else None
