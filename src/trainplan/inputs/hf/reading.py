"""A config.json read into a ModelSpec: the architecture family's dispatch (a refused type, a
forced reading, a reader of its own or the table-driven decoder), the decoder built from the
family's key rules, the vision tower and drafter a config adds, and the context window."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.architecture_families import (
    GENERIC,
    ArchitectureFamily,
    find_architecture_family,
    module_path_types,
    refusal,
    resolve,
    supported_model_types,
)
from trainplan.inputs.hf.additions import (
    GatedNorms,
    head_transform,
    hyper_head,
    hyper_streams,
    image_layer_weights,
    image_layers,
    layer_type_attention,
    layer_vectors,
    model_vectors,
    patch_projection,
    per_layer_attention,
    per_layer_inputs,
)
from trainplan.inputs.hf.bart import bart_spec
from trainplan.inputs.hf.bert import bert_spec
from trainplan.inputs.hf.layers import layer_kinds
from trainplan.inputs.hf.loops import hrm_spec
from trainplan.inputs.hf.modules import (
    attention_module,
    dense_mlp,
    linear_mixer,
    moe_mlp,
    short_conv_kernel,
    ssm_mixer,
)
from trainplan.inputs.hf.readers import gpt2_spec, t5_spec, vision_extras
from trainplan.inputs.hf.rwkv import rwkv_spec
from trainplan.inputs.hf.sharing import (
    drafter_text,
    kv_shared_layers,
    kv_shared_parts,
    with_drafter_projections,
)
from trainplan.inputs.hf.towers import ENCODER_MODALITIES, IMAGE_ENCODERS
from trainplan.inputs.hf.values import flag, get_int
from trainplan.inputs.hf.xlnet import xlnet_spec
from trainplan.inputs.hf.zamba import zamba2_spec
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, ExtraComponent, Mlp, ModelSpec

__all__ = [
    "architecture_family_of",
    "denoiser_classes",
    "denoiser_spec",
    "language_config",
    "spec_from_config",
]


def denoiser_classes() -> dict[str, Callable[[Mapping[str, Any], str, str], ModelSpec]]:
    """diffusers `_class_name` -> reader of that model's config.json (the diffusion readers are
    imported here, not with the package: a language model's estimate never loads them)."""
    from trainplan.inputs.hf.diffusers import TRANSFORMER_READERS
    from trainplan.inputs.hf.unet import unet_spec

    return {**TRANSFORMER_READERS, "UNet2DConditionModel": unet_spec}


def denoiser_spec(cfg: Mapping[str, Any], name: str, source: str = "") -> ModelSpec:
    """The ModelSpec of a diffusers denoiser config (`transformer/config.json`, `unet/config.json`)."""
    from trainplan.inputs.hf.pipeline import with_geometry

    class_name = str(cfg["_class_name"])
    readers = denoiser_classes()
    reader = readers.get(class_name)
    if reader is None:
        raise ConfigError(
            "_class_name",
            f"{shown_value(class_name)} is not modelled; modelled diffusers classes: " + ", ".join(readers),
        )
    return with_geometry(reader(cfg, name, source), cfg)


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
    family = find_architecture_family(model_type)
    defaults = family.row.get("defaults") if family else None
    text = {**defaults, **text} if defaults else text
    return _lifted(text, family.row.get("lift") or {}) if family else text


def _lifted(cfg: Mapping[str, Any], rule: Mapping[str, Mapping[str, str]]) -> Mapping[str, Any]:
    """The config with the values a family's `lift` rule reads from a sub-dict moved to the top
    level, where they win as the config class lets them (Kimi Linear's `linear_attn_config`)."""
    lifted = dict(cfg)
    for sub_key, names in rule.items():
        sub = cfg.get(sub_key)
        if isinstance(sub, Mapping):
            lifted.update(
                {target: sub[source] for source, target in names.items() if sub.get(source) is not None}
            )
    return lifted


def spec_from_config(cfg: Mapping[str, Any], name: str, source: str = "", force: bool = False) -> ModelSpec:
    """Build the ModelSpec of a Hugging Face config.json dict.

    A config whose layout is not modelled is refused; with `force` it is read with the closest
    modelled reading instead, and the spec carries the refusal as an approximation note."""
    from dataclasses import replace

    try:
        spec, forced = _spec_and_notes(cfg, name, source, force)
    except ConfigError as error:
        if not force or error.field == "config":
            raise
        raise ConfigError(
            error.field,
            f"{error.message} (force: the closest modelled reading cannot read this config either)",
        ) from None
    if spec.kind == "llm":
        spec = replace(spec, context_window=context_window(language_config(cfg)))
    if not forced:
        return spec
    return replace(spec, approximations=(*forced, *spec.approximations))


WINDOW_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def context_window(cfg: Mapping[str, Any]) -> int:
    """The longest sequence a config's positions cover: its max_position_embeddings (or the
    older names of it), or, where rope_scaling stretches an original length by a factor (YaRN,
    linear, dynamic), that length times the factor if longer; 0 where the config gives none."""
    window = next((cfg[key] for key in WINDOW_KEYS if isinstance(cfg.get(key), int) and cfg[key] > 0), 0)
    scaling = cfg.get("rope_scaling")
    if isinstance(scaling, Mapping) and isinstance(scaling.get("factor"), int | float):
        original = scaling.get("original_max_position_embeddings") or window
        if isinstance(original, int) and original > 0:
            window = max(window, int(original * float(scaling["factor"])))
    return int(window)


def _spec_and_notes(
    cfg: Mapping[str, Any], name: str, source: str, force: bool
) -> tuple[ModelSpec, list[str]]:
    """The spec, and the notes of what `force` read in place of a refusal."""
    if not isinstance(cfg, Mapping):
        raise ConfigError("config", "config.json must be a JSON object")
    if "_class_name" in cfg:
        return denoiser_spec(cfg, name, source), []
    model_type = str(cfg.get("model_type", "")).lower()
    if model_type in ("vjepa2", "ijepa", "vjepa"):
        from trainplan.inputs.hf.jepa import ijepa_spec, vjepa2_spec, vjepa_spec

        jepa = {"vjepa2": vjepa2_spec, "ijepa": ijepa_spec, "vjepa": vjepa_spec}[model_type]
        return jepa(cfg, name, source), []
    listed = find_architecture_family(model_type) is not None or refusal(model_type) is not None
    t5_like = cfg.get("is_encoder_decoder") and "d_model" in cfg and not listed
    if model_type in ("t5", "mt5", "umt5") or t5_like:
        return t5_spec(cfg, name, source), []
    text = language_config(cfg)
    text_type = str(text.get("model_type", model_type)).lower()
    if text_type == "gemma3" and text is not cfg:
        text_type = "gemma3_text"
    if not text_type and "n_embd" in cfg and "n_layer" in cfg:
        text_type = "gpt2"  # GPT-2's own keys without a model_type
    forced: list[str] = []
    if refusal(model_type) is not None and text_type != model_type:
        # a multimodal wrapper we do not model: refused by its own type, or under force its
        # language model read alone
        _, why = forced_architecture_family(model_type, cfg, force)
        forced.append(f"force: {why}; its language model ({text_type or 'text_config'}) is read alone")
    family, why = forced_architecture_family(text_type, text, force)
    if why:
        reading = f"the {family.name} reading" if family is not GENERIC else "the Llama-style keys"
        forced.append(f"force: {why}; estimated with {reading}, so every figure is approximate")
    if family.row.get("reader") == "zamba2":
        return zamba2_spec(text, name, source, family), forced
    if family.row.get("reader") == "gpt2":
        return gpt2_spec(cfg, name, source, family), forced
    if family.row.get("reader") == "bert":
        return _with_image_encoder(bert_spec(text, name, source, family), cfg, family), forced
    if family.row.get("reader") == "bart":
        return bart_spec(text, name, source, family), forced
    if family.row.get("reader") == "rwkv":
        return rwkv_spec(text, name, source, family), forced
    if family.row.get("reader") == "hrm":
        return hrm_spec(text, name, source, family), forced
    if family.row.get("reader") == "xlnet":
        return xlnet_spec(text, name, source, family), forced
    wrapper = find_architecture_family(model_type)
    if text is not cfg:
        text = drafter_text(text, wrapper)
    spec = _decoder(text, name, source, family)
    if text_type in module_path_types():
        nested = any(isinstance(cfg.get(key), Mapping) for key in ("text_config", "language_config"))
        wrapped = nested and not flag(family, "text_only", cfg)
        path = "model.language_model.layers.{}" if wrapped else "model.layers.{}"
        spec = replace(spec, blocks=tuple(replace(block, path=path) for block in spec.blocks))
    if text is not cfg and flag(family, "text_only", cfg):
        return spec, forced  # the causal LM of this multimodal wrapper has no vision tower
    if wrapper is not None and wrapper.row.get("language_only") and text is not cfg:
        note = (
            f"{model_type}: transformers' causal-LM class builds the language model ({text_type}) alone; "
            "its other modalities' encoders (vision_config, audio_config) are not counted, though a "
            "multimodal fine-tune also holds them"
        )
        return _with_notes(spec, note), forced
    if wrapper is not None and wrapper.row.get("drafter") and text is not cfg:
        return _drafter(spec, cfg, wrapper), forced
    if wrapper is not None and wrapper.row.get("image_encoder"):
        return _with_image_encoder(spec, cfg, wrapper), forced
    patches = wrapper.row.get("patch_projection") if wrapper is not None and text is not cfg else None
    if patches:
        return _with_extras(spec, [patch_projection(cfg, patches, spec.hidden_size)], "text+vision"), forced
    extras = vision_extras(cfg, spec.hidden_size) if not forced else []
    if extras:
        spec = _with_extras(spec, extras, modality="text+vision")
    return spec, forced


def _with_image_encoder(spec: ModelSpec, cfg: Mapping[str, Any], family: ArchitectureFamily) -> ModelSpec:
    """The spec with the image encoder the row's `image_encoder` names (GIT's CLIP, GOT-OCR 2.0's
    SAM; MOSS-Transcribe-Diarize's audio encoder), which the causal-LM class holds beside the text
    layers; a `tied` rule of the wrapper's row reads the wrapper's config, not its text_config."""
    encoder = family.row.get("image_encoder")
    if not encoder:
        return spec
    if encoder not in IMAGE_ENCODERS:
        raise RuntimeError(f"architectures.yaml {family.name}: image_encoder {encoder!r} is unknown")
    if "tied" in family.row:  # the wrapper's own tie_word_embeddings wins over its text_config's
        spec = replace(spec, tied_embeddings=flag(family, "tied", cfg, spec.tied_embeddings))
    modality = ENCODER_MODALITIES.get(str(encoder), "text+vision")
    return _with_extras(spec, IMAGE_ENCODERS[str(encoder)](cfg, spec.hidden_size), modality)


def _drafter(spec: ModelSpec, cfg: Mapping[str, Any], family: ArchitectureFamily) -> ModelSpec:
    """A drafter's text model with its projections from and to the backbone (hf/sharing.py), its
    LM head tied as the wrapper's tie_word_embeddings says."""
    note = (
        f"{family.name}: a drafter trained beside its backbone; the backbone's weights, forward and the "
        "keys and values it passes to every layer are not counted"
    )
    return replace(
        spec,
        blocks=with_drafter_projections(spec.blocks, cfg, family, spec.hidden_size),
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", True))),
        approximations=(*spec.approximations, note),
    )


def _with_notes(spec: ModelSpec, note: str) -> ModelSpec:
    from dataclasses import replace

    return replace(spec, notes=(*spec.notes, note))


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


def forced_architecture_family(
    model_type: str, cfg: Mapping[str, Any], force: bool
) -> tuple[ArchitectureFamily, str]:
    """The family that reads this config, and "" -- or, when the layout is refused and `force`
    is set, the closest modelled family and why the config was refused."""
    try:
        return architecture_family_of(model_type, cfg), ""
    except ConfigError as error:
        if not force:
            raise
        refused = refusal(model_type)
        closest = str(resolve(refused.closest, cfg) or "") if refused else model_type
        family = find_architecture_family(closest) or GENERIC
        if refused is not None:
            why = f"model_type {shown_value(model_type)} is not modelled ({refused.reason})"
        elif family is not GENERIC:  # a modelled family's setting that it does not model
            why = f"{error.field}={error.message.removesuffix(f'. Or {FORCE_HINT}')}"
        else:
            shown = shown_value(cfg.get(error.field))
            why = f"{error.field}={shown} names a layout the generic reading does not model"
        return family, why


#: How a refusal tells the user the way around it (the scenario's `force` field).
FORCE_HINT = "set force to estimate it with the closest modelled reading, labelled approximate"


def architecture_family_of(model_type: str, cfg: Mapping[str, Any]) -> ArchitectureFamily:
    """The architecture family that reads this config; ConfigError when it is not modelled."""
    family = find_architecture_family(model_type)
    if family is not None:
        for key, why in (family.row.get("refuse_when") or {}).items():
            if cfg.get(key):  # a setting of a modelled family that changes its layout
                raise ConfigError(key, f"{shown_value(cfg[key])}: {why} ({family.name}). Or {FORCE_HINT}")
        return family
    refused = refusal(model_type)
    if refused is not None:
        raise ConfigError(
            "model_type",
            f"{shown_value(model_type)} is not modelled: {refused.reason}. Supported model types: "
            + ", ".join(supported_model_types())
            + f". Or {FORCE_HINT}",
        )
    for key in _UNMODELLED_SIGNALS:
        if cfg.get(key) not in (None, False):
            raise ConfigError(
                key,
                f"{key}={shown_value(cfg[key])} in a config of unknown model_type "
                f"{shown_value(model_type or '(none)')} "
                "names a layout the generic (Llama-style) reading does not model; supported model "
                "types: " + ", ".join(supported_model_types()) + f". Or {FORCE_HINT}",
            )
    return GENERIC


def _decoder(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """A decoder-only model: attention (MHA/GQA/MQA or MLA), Mamba or linear mixers, dense or
    MoE MLPs, in the layer order the family's table row declares."""
    hidden = get_int(cfg, *family.key("hidden_size"))
    vocab = get_int(cfg, *family.key("vocab_size"))
    kinds = layer_kinds(cfg, family)
    approximations: list[str] = []
    if family is GENERIC:
        approximations.append(
            f"model_type {shown_value(str(cfg.get('model_type', '')) or '(none)')} "
            "is not in the architecture table: "
            "read with the Llama-style keys (gated MLP, RMSNorm), unverified for this model"
        )
    uses = {part for kind in kinds for part in kind}
    attention = attention_module(cfg, family, hidden) if "attention" in uses else None
    if attention is not None and attention.index_heads:
        approximations.append(
            "DeepSeek sparse attention: the indexer's weights are counted exactly; it runs under no_grad "
            "(transformers), so it saves no activations, and its projections are counted at training "
            "FLOPs while its key scoring is left out; attention is counted over all keys, as the "
            "masked eager/SDPA path computes it"
        )
    if attention is not None and attention.dynamic_mask:
        approximations.append(
            "Doge's dynamic mask: its weights are counted exactly; the score bias it materialises is "
            "counted as the masked SDPA kernel keeps it (heads x keys per token), the top-k window's "
            "masks past keep_window_size keys are not counted, and attention FLOPs count the causal "
            "half where the masked kernel computes every key"
        )
    ssm = ssm_mixer(cfg, family, hidden) if "ssm" in uses else None
    mixer = linear_mixer(cfg, family, hidden) if "mixer" in uses else None
    dense = dense_mlp(cfg, family, hidden, approximations) if "dense" in uses else None
    moe = moe_mlp(cfg, family, dense, approximations) if "moe" in uses else None
    if moe is not None and moe.zero_experts:
        approximations.append(
            f"zero-computation experts: the router picks {moe.experts_per_token} per token among "
            f"{moe.num_experts} experts and {moe.zero_experts} identity ones; active parameters, FLOPs and "
            f"MoE activations count {moe.experts_per_token} real experts per token, an upper bound (the "
            "weights are exact)"
        )
    norms = int(family.setting("norms_per_layer", cfg, 2))
    parallel = flag(family, "parallel", cfg)
    vectors = layer_vectors(family, cfg, hidden, attention, dense)
    moe_rule: Mapping[str, Any] = family.row.get("moe") or {}
    moe_norms = int(moe_rule.get("extra_norms", 0))  # A.X-K1's post_mlp_layernorm
    # a learned score-correction bias per expert (ERNIE 4.5; a buffer, not a parameter, elsewhere)
    moe_vectors = moe.num_experts if moe is not None and moe_rule.get("score_bias") else 0
    variants = layer_type_attention(
        cfg, family, per_layer_attention(cfg, family, hidden, attention), attention
    )
    inputs_linears, inputs_norms, inputs_extras = per_layer_inputs(cfg, family, hidden)
    gated = GatedNorms.of(cfg, family, hidden)
    skipped = image_layers(family, cfg)  # layers a text-only step skips: weights only, as extras
    kv_shared = kv_shared_layers(cfg, family, len(kinds))
    shared_parts: dict[tuple[int, int], tuple[Attention | None, Mlp | None]] = {}
    sublayer_conv = short_conv_kernel(cfg, family)
    hyper = hyper_streams(cfg, family)
    blocks: list[Block] = []
    for index, kind in enumerate(kinds):
        if index in skipped:
            continue
        layer_attention = variants.get(index, attention) if "attention" in kind else None
        layer_mlp = dense if "dense" in kind else moe if "moe" in kind else None
        if index in kv_shared:  # one shared variant per module, so equal layers still merge
            parts = (id(layer_attention), id(layer_mlp))
            if parts not in shared_parts:
                shared_parts[parts] = kv_shared_parts(cfg, family, layer_attention, layer_mlp)
            layer_attention, layer_mlp = shared_parts[parts]
        block = Block(
            1,
            attention=layer_attention,
            mlp=layer_mlp,
            norms=norms + inputs_norms + (moe_norms if "moe" in kind else 0),
            ssm=ssm if "ssm" in kind else None,
            mixer=mixer if "mixer" in kind else None,
            parallel=parallel,
            linears=inputs_linears + gated.linears(kind),
            extra_params=vectors + (moe_vectors if "moe" in kind else 0),
            gated_norms=gated.count(kind),
            gated_norm_rank=gated.rank,
            sublayer_conv_kernel=sublayer_conv,
            hyper_streams=hyper,
        )
        if blocks and _same_layer(blocks[-1], block):
            blocks[-1] = replace(blocks[-1], count=blocks[-1].count + 1)
        else:
            blocks.append(block)
    spec = ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=vocab,
        blocks=tuple(blocks),
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", False))),
        head_bias=flag(family, "head_bias", cfg),
        norm=str(family.setting("norm", cfg, "rmsnorm")),
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=_positions(cfg, family),
        final_logit_softcap=bool(cfg.get("final_logit_softcapping")),
        extras=model_vectors(family, cfg, hidden, attention, dense)
        + head_transform(family, cfg, hidden)
        + inputs_extras
        + hyper_head(hyper, hidden),
        residual_streams=max(hyper, 1),
        approximations=tuple(approximations),
        source=source,
    )
    if not skipped:
        return spec
    return _with_extras(spec, list(image_layer_weights(family, cfg, spec, attention, dense, norms)), "text")


def _same_layer(a: Block, b: Block) -> bool:
    return (a.attention is b.attention and a.mlp is b.mlp and a.ssm is b.ssm and a.mixer is b.mixer
            and a.norms == b.norms and a.linears == b.linears
            and a.extra_params == b.extra_params)  # fmt: skip


def _positions(cfg: Mapping[str, Any], family: ArchitectureFamily) -> int:
    key = family.setting("positions", cfg, None)
    if not key:
        return 0
    return get_int(cfg, str(key)) + int(family.row.get("position_offset", 0))
