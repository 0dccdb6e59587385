"""The frozen components of a diffusers pipeline -> FrozenComponent: the VAE (`hf/vae.py`) and the
text encoders, each counted from its own config (`text_encoder*/config.json`) as transformers
lays it out. Exact.

- `CLIPTextModel` / `CLIPTextModelWithProjection` (transformers `modeling_clip.py`; Radford et al.
  2021): token and position embeddings, pre-LayerNorm layers with biased q/k/v/out and fc1/fc2,
  a final LayerNorm, and the bias-free `text_projection` of the second.
- `T5EncoderModel` / `UMT5EncoderModel` (transformers `modeling_t5.py`, `modeling_umt5.py`): the
  encoder stack of the T5 reader (`readers.t5_spec`) with one shared embedding.
- `Gemma2Model` (Sana's Gemma-2 2B) / `LlamaModel` (HunyuanVideo's LLaVA-LLaMA-3-8B text model;
  transformers `modeling_gemma2.py`, `modeling_llama.py`): a decoder run as an encoder, its last
  hidden states the output. The decoder reader of the architecture table (`spec_from_config`)
  lays it out: embedding, the layers, the final norm, and no LM head (the base model has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.hf.readers import t5_spec
from trainplan.inputs.hf.vae import component_int, vae_component
from trainplan.specs.errors import ConfigError, shown_value
from trainplan.specs.model import Attention, Block, ExtraComponent, FrozenComponent, Mlp, ModelSpec
from trainplan.specs.weights import total_params

__all__ = ["TEXT_ENCODER_FOLDERS", "UNCOUNTED_TEXT_ENCODERS", "frozen_components", "text_encoder_component"]

#: Pipeline folders that hold text encoders, in the order diffusers pipelines name them.
TEXT_ENCODER_FOLDERS = ("text_encoder", "text_encoder_2", "text_encoder_3")


def _clip_text(cfg: Mapping[str, Any], where: str, projection: bool) -> ModelSpec:
    """CLIP's text transformer (transformers' CLIPTextConfig defaults where a key is absent)."""

    def value(key: str, default: int) -> int:
        return component_int(cfg, where, key, default)

    hidden, heads = value("hidden_size", 512), value("num_attention_heads", 8)
    if hidden % heads:
        raise ConfigError(f"{where}.num_attention_heads", f"{heads} heads do not divide hidden_size {hidden}")
    head_dim = hidden // heads
    names = ("q_proj", "k_proj", "v_proj", "out_proj")
    attention = Attention(heads, heads, head_dim, head_dim, qkv_bias=True, out_bias=True, names=names)
    activation = str(cfg.get("hidden_act", "quick_gelu"))
    mlp = Mlp(
        value("intermediate_size", 2048),
        gated=False,
        bias=True,
        names=("fc1", "fc1", "fc2"),
        activation=activation,
    )
    layers = Block(value("num_hidden_layers", 12), attention, mlp, 2, role="encoder")
    extras = (ExtraComponent("text_projection", hidden * value("projection_dim", 512)),) if projection else ()
    return ModelSpec(
        name=where,
        hidden_size=hidden,
        vocab_size=value("vocab_size", 49408),
        blocks=(layers,),
        tied_embeddings=True,  # no LM head: the last hidden states are the output
        norm="layernorm",
        learned_positions=value("max_position_embeddings", 77),
        extras=extras,
    )


def _decoder_encoder(cfg: Mapping[str, Any], where: str, model_type: str) -> ModelSpec:
    # a late import: the package's reader imports this module (hf/__init__.py -> pipeline.py)
    from trainplan.inputs.hf import spec_from_config

    try:
        spec = spec_from_config({**cfg, "model_type": model_type}, where)
    except ConfigError as error:
        raise ConfigError(f"{where}.{error.field}", error.message) from None
    return replace(spec, tied_embeddings=True)  # the base model: no LM head, whatever the tying


def _t5_encoder(cfg: Mapping[str, Any], where: str, model_type: str) -> ModelSpec:
    try:
        spec = t5_spec({**cfg, "model_type": model_type}, where, "")
    except ConfigError as error:
        raise ConfigError(f"{where}.{error.field}", error.message) from None
    encoder = tuple(block for block in spec.blocks if block.role == "encoder")
    return replace(spec, blocks=encoder, final_norms=1, encoder_decoder=False, tied_embeddings=True)


#: transformers text-encoder class -> the model type its config is read as.
TEXT_ENCODER_CLASSES = {
    "CLIPTextModel": "clip_text_model",
    "CLIPTextModelWithProjection": "clip_text_model",
    "T5EncoderModel": "t5",
    "UMT5EncoderModel": "umt5",
    "Gemma2Model": "gemma2",
    "LlamaModel": "llama",
}


#: Text encoders a pipeline may name whose weights are not counted yet: they would stand in the
#: pipeline as uncounted components, so running them each step (frozen_encoders gpu / offload) is
#: refused rather than costed at zero. Every text encoder of the catalog is counted.
UNCOUNTED_TEXT_ENCODERS: tuple[str, ...] = ()


def text_encoder_component(folder: str, cfg: Mapping[str, Any], source: str = "") -> FrozenComponent:
    """A text encoder from its `config.json`; `architectures` (or model_index.json's class)
    names the transformers class."""
    architectures = cfg.get("architectures")
    if not isinstance(architectures, list) or len(architectures) != 1:
        raise ConfigError(
            f"{folder}.architectures", f"{shown_value(architectures)}: name one transformers class"
        )
    architecture = str(architectures[0])
    if architecture in UNCOUNTED_TEXT_ENCODERS:
        return FrozenComponent(folder, "text", architecture, 0, 0, source=source, counted=False)
    model_type = TEXT_ENCODER_CLASSES.get(architecture)
    if model_type is None:
        raise ConfigError(
            f"{folder}.architectures",
            f"{shown_value(architecture)} is not modelled; modelled: " + ", ".join(TEXT_ENCODER_CLASSES),
        )
    if model_type == "clip_text_model":
        text = _clip_text(cfg, folder, projection=architecture.endswith("WithProjection"))
        context = text.learned_positions  # the tokenizer pads every prompt to this length
    elif model_type in ("t5", "umt5"):
        text, context = _t5_encoder(cfg, folder, model_type), 0
    else:
        text, context = _decoder_encoder(cfg, folder, model_type), 0
    params = total_params(text)
    return FrozenComponent(
        folder, "text", architecture, params, params, text=text, context_tokens=context, source=source
    )


_PIPELINE_KEYS = {"vae", "text_tokens", "text_encoders"}


def frozen_components(
    pipeline: Mapping[str, Any], source: str = "", text_offset: int = 0, template_tokens: int = 0
) -> tuple[FrozenComponent, ...]:
    """The VAE and text encoders a pipeline's settings describe (`vae`, `text_encoders`: folder
    -> config.json), VAE first; unknown pipeline keys are refused. `text_offset`: the denoiser's
    text positions ahead of the variable-length encoder's (pipeline.JOINED_CLIP_TOKENS);
    `template_tokens`: the prompt template that encoder reads ahead of the prompt and the
    pipeline crops off (pipeline.PROMPT_TEMPLATE_TOKENS)."""
    unknown = sorted(set(pipeline) - _PIPELINE_KEYS)
    if unknown:
        raise ConfigError(
            f"pipeline.{unknown[0]}", f"is not a pipeline setting; known: {', '.join(sorted(_PIPELINE_KEYS))}"
        )
    components = []
    vae = pipeline.get("vae")
    if isinstance(vae, Mapping):
        components.append(vae_component(vae, source))
    encoders = pipeline.get("text_encoders") or {}
    if not isinstance(encoders, Mapping):
        raise ConfigError("pipeline.text_encoders", "must map pipeline folders to their config.json")
    for folder, cfg in encoders.items():
        if folder not in TEXT_ENCODER_FOLDERS or not isinstance(cfg, Mapping):
            raise ConfigError(
                f"pipeline.text_encoders.{folder}",
                f"must be one of {', '.join(TEXT_ENCODER_FOLDERS)}, mapped to its config.json",
            )
        component = text_encoder_component(str(folder), cfg, source)
        if not component.context_tokens:
            component = replace(component, text_offset=text_offset, template_tokens=template_tokens)
        components.append(component)
    return tuple(components)
