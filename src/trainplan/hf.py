"""Hugging Face config.json -> ModelSpec. The only module that knows Hugging Face key names.

Handles decoder-only families (Llama, Mistral, Qwen2/2.5/3, Gemma 1-3, Phi-3/4, OLMo 2, GPT-2,
Chameleon, Emu3, LlamaGen-style), mixture-of-experts (Mixtral, Qwen2-MoE, Qwen3-MoE,
DeepSeek-V3 with MLA), encoder-decoder T5/mT5/Flan-T5, and multimodal configs whose language
model sits under `text_config`/`language_config` with a ViT-style `vision_config`.
Unknown model types are read with the common Llama-style keys when those are present.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainplan.errors import ConfigError, shown_value
from trainplan.model import Attention, Block, ExtraComponent, Mlp, ModelSpec

_MISSING = object()
_SEED_MLP_RATIO = 3.5  # the seed calculator's fallback when the MLP width is not recorded
LLAMA_LIKE = {
    "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text", "olmo",
    "olmo2", "chameleon", "emu3", "emu3_text", "phi3", "mixtral", "qwen2_moe", "qwen3_moe",
    "deepseek_v3", "deepseek_v2", "granite", "starcoder2", "cohere", "internlm2", "yi",
}  # fmt: skip


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


# The largest structural value a config may give, by what the key means: about 10-30x the largest
# released model, so that a pasted config is bounded before any work is done (a config with 3e7
# layers or a width of 1e154 is refused, not computed). Keys not listed share the last bound.
_LIMITS: tuple[tuple[str, int, tuple[str, ...]], ...] = (
    ("layer count", 4_096, ("num_hidden_layers", "num_layers", "n_layers", "n_layer", "num_decoder_layers",
                            "first_k_dense_replace", "decoder_sparse_step", "moe_layer_freq")),
    ("width", 1_048_576, ("hidden_size", "d_model", "dim", "n_embd", "intermediate_size", "ffn_dim",
                          "ffn_hidden_size", "n_inner", "d_ff", "moe_intermediate_size",
                          "shared_expert_intermediate_size", "head_dim", "d_kv", "qk_rope_head_dim",
                          "qk_nope_head_dim", "v_head_dim", "q_lora_rank", "kv_lora_rank")),
    ("head count", 65_536, ("num_attention_heads", "num_heads", "n_heads", "n_head",
                            "num_key_value_heads", "num_kv_heads", "n_kv_heads")),
    ("vocabulary", 16_777_216, ("vocab_size", "padded_vocab_size")),
    ("expert count", 65_536, ("num_local_experts", "n_routed_experts", "num_experts", "n_shared_experts",
                              "num_experts_per_tok", "moe_top_k", "top_k")),
    ("image size", 65_536, ("image_size", "patch_size", "num_channels")),
    ("integer", 2**31, ()),
)  # fmt: skip
CONFIG_LIMITS: dict[str, tuple[str, int]] = {
    key: (meaning, bound) for meaning, bound, keys in _LIMITS for key in keys
}


def config_limit(key: str) -> tuple[str, int]:
    """(what the key means, its largest accepted value)."""
    return CONFIG_LIMITS.get(key, (_LIMITS[-1][0], _LIMITS[-1][1]))


def _int(cfg: Mapping[str, Any], *keys: str, default: Any = _MISSING, minimum: int = 1) -> int:
    """An integer config value, range-checked against `minimum` and its limit, the error naming the key."""
    found = next((key for key in keys if cfg.get(key) is not None), keys[0])
    value = _get(cfg, *keys, default=default)
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


# Values transformers fills in when a config.json omits them (its config classes' defaults);
# real configs rely on these, e.g. Gemma 3's text_config lists only what differs.
_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
    },
}


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
    defaults = _TYPE_DEFAULTS.get(model_type)
    return {**defaults, **text} if defaults else text


def spec_from_config(cfg: Mapping[str, Any], name: str, source: str = "") -> ModelSpec:
    """Build the ModelSpec of a Hugging Face config.json dict."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", "config.json must be a JSON object")
    model_type = str(cfg.get("model_type", "")).lower()
    if model_type in ("t5", "mt5", "umt5") or (cfg.get("is_encoder_decoder") and "d_model" in cfg):
        return _t5(cfg, name, source)
    if model_type == "gpt2" or ("n_embd" in cfg and "n_layer" in cfg):
        return _gpt2(cfg, name, source)
    text = language_config(cfg)
    spec = _decoder(text, name, source, str(text.get("model_type", model_type)).lower())
    extras = _vision_extras(cfg, spec.hidden_size)
    if extras:
        spec = _with_extras(spec, extras, modality="text+vision")
    return spec


def _with_extras(spec: ModelSpec, extras: list[ExtraComponent], modality: str) -> ModelSpec:
    from dataclasses import replace

    return replace(spec, extras=spec.extras + tuple(extras), modality=modality)


def _decoder(cfg: Mapping[str, Any], name: str, source: str, model_type: str) -> ModelSpec:
    """Decoder-only transformer with RMSNorm/LayerNorm, RoPE, GQA, dense or MoE MLPs."""
    hidden = _int(cfg, "hidden_size", "d_model", "dim")
    layers = _int(cfg, "num_hidden_layers", "num_layers", "n_layers")
    heads = _int(cfg, "num_attention_heads", "num_heads", "n_heads")
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", "n_kv_heads", default=heads)
    if heads % kv_heads:
        raise ConfigError("num_key_value_heads", f"{kv_heads} does not divide num_attention_heads={heads}")
    head_dim = _int(cfg, "head_dim", default=hidden // heads)
    vocab = _int(cfg, "vocab_size", "padded_vocab_size")
    approximations: list[str] = []
    if "intermediate_size" in cfg or "ffn_dim" in cfg or "ffn_hidden_size" in cfg:
        intermediate = _int(cfg, "intermediate_size", "ffn_dim", "ffn_hidden_size")
    else:
        intermediate = round(_SEED_MLP_RATIO * hidden)
        approximations.append(
            f"intermediate_size not in the config: approximated as {_SEED_MLP_RATIO} x hidden "
            f"= {intermediate}; MLP parameters and LoRA all-linear counts are approximate"
        )
    qk_norm, qk_norm_bias = "none", False
    norms = 2
    if model_type in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text"):
        qk_norm = "head"
    elif model_type == "olmo2":
        qk_norm = "full"
    elif model_type == "chameleon":
        qk_norm, qk_norm_bias = "full", True
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        norms = 4
    qwen2 = model_type in ("qwen2", "qwen2_moe")
    attention_bias = qwen2 or bool(cfg.get("attention_bias", False))
    fused_qkv = "qkv_proj" if model_type == "phi3" else None
    is_mla = model_type in ("deepseek_v3", "deepseek_v2") and "kv_lora_rank" in cfg
    if is_mla:
        rope = _int(cfg, "qk_rope_head_dim")
        attention = Attention(
            num_heads=heads,
            num_kv_heads=heads,
            head_dim=_int(cfg, "qk_nope_head_dim") + rope,
            v_head_dim=_int(cfg, "v_head_dim"),
            kind="mla",
            qkv_bias=attention_bias,
            q_lora_rank=_int(cfg, "q_lora_rank", default=0, minimum=0),
            kv_lora_rank=_int(cfg, "kv_lora_rank"),
            rope_head_dim=rope,
        )
    else:
        attention = Attention(
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            v_head_dim=head_dim,
            qkv_bias=attention_bias,
            out_bias=attention_bias and not qwen2,
            fused_qkv=fused_qkv,
            qk_norm=qk_norm,
            qk_norm_bias=qk_norm_bias,
            logit_softcap=bool(cfg.get("attn_logit_softcapping")),
        )
    dense = Mlp(
        intermediate_size=intermediate,
        gated=str(cfg.get("hidden_act", "silu")) not in ("gelu_new", "relu") or model_type in LLAMA_LIKE,
        bias=bool(cfg.get("mlp_bias", False)),
        fused_gate_up=model_type == "phi3",
        names=("gate_proj", "gate_up_proj" if model_type == "phi3" else "up_proj", "down_proj"),
    )
    blocks = _moe_blocks(cfg, model_type, layers, attention, dense, norms)
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=vocab,
        blocks=blocks,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", model_type.startswith("gemma"))),
        final_logit_softcap=bool(cfg.get("final_logit_softcapping")),
        approximations=tuple(approximations),
        source=source,
    )


def _moe_blocks(
    cfg: Mapping[str, Any],
    model_type: str,
    layers: int,
    attention: Attention,
    dense: Mlp,
    norms: int,
) -> tuple[Block, ...]:
    """Dense and MoE layer groups in forward order (first-k-dense, sparse step, mlp-only layers)."""
    experts = _int(cfg, "num_local_experts", "n_routed_experts", "num_experts", default=0, minimum=0)
    if experts == 0:
        return (Block(layers, attention, dense, norms),)
    top_k = _int(cfg, "num_experts_per_tok", "moe_top_k", "top_k")
    if top_k > experts:
        raise ConfigError("num_experts_per_tok", f"{top_k} experts per token exceeds the {experts} experts")
    moe_inner = _int(cfg, "moe_intermediate_size", default=dense.intermediate_size)
    shared_count = _int(cfg, "n_shared_experts", default=0, minimum=0)
    shared_inner = moe_inner
    shared_gate = False
    if cfg.get("shared_expert_intermediate_size"):
        shared_count, shared_inner = 1, _int(cfg, "shared_expert_intermediate_size")
        shared_gate = model_type == "qwen2_moe"
    moe = Mlp(
        intermediate_size=moe_inner,
        num_experts=experts,
        experts_per_token=top_k,
        num_shared_experts=shared_count,
        shared_intermediate_size=shared_inner,
        shared_expert_gate=shared_gate,
        names=dense.names,
    )
    first_dense = _int(cfg, "first_k_dense_replace", default=0, minimum=0)
    step = _int(cfg, "decoder_sparse_step", "moe_layer_freq", default=1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    kinds = [
        index >= first_dense and index not in mlp_only and (index + 1) % step == 0 for index in range(layers)
    ]
    blocks: list[Block] = []
    for is_moe in kinds:
        mlp = moe if is_moe else dense
        if blocks and blocks[-1].mlp is mlp:
            blocks[-1] = Block(blocks[-1].count + 1, attention, mlp, norms)
        else:
            blocks.append(Block(1, attention, mlp, norms))
    return tuple(blocks)


def _gpt2(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    """GPT-2: learned positions, LayerNorm with bias, fused c_attn, plain GELU MLP, tied head."""
    hidden = _int(cfg, "n_embd", "hidden_size")
    heads = _int(cfg, "n_head", "num_attention_heads")
    inner = _int(cfg, "n_inner", default=4 * hidden)
    attention = Attention(
        num_heads=heads,
        num_kv_heads=heads,
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


def _vision_extras(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """A ViT-style vision tower (SigLIP/CLIP) from `vision_config`, plus Gemma 3's projector."""
    vision = cfg.get("vision_config")
    if not isinstance(vision, Mapping) or "hidden_size" not in vision:
        return []
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
