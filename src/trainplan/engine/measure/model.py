# mypy: disable-error-code="no-untyped-call"
# (torch, transformers and peft are only partly typed; their untyped calls are expected here.)
"""Build the Hugging Face model (optionally with a peft adapter) and the optimizer to trace."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainplan.specs.errors import ConfigError, InputError

#: config.json keys that would make `from_config` try to quantise or load something.
_DROPPED_KEYS = ("quantization_config", "auto_map")


@dataclass
class BuiltModel:
    """The model to train, its HF model type, how to make a batch, and notes on what was built."""

    model: torch.nn.Module
    model_type: str
    make_batch: Callable[[int, int], dict[str, torch.Tensor]]
    notes: list[str] = field(default_factory=list)


def _config(hf_config: dict[str, Any], notes: list[str]) -> Any:
    """A transformers config object for the (text) model described by `hf_config`."""
    from transformers import AutoConfig

    raw = copy.deepcopy(dict(hf_config))
    if isinstance(raw.get("text_config"), dict) and raw.get("model_type") not in (None, ""):
        text = raw["text_config"]
        if "model_type" not in text:
            raise ConfigError(
                "hf_config.text_config",
                "has no model_type; add the text model's type (e.g. 'gemma3_text').",
            )
        notes.append(f"multimodal config {raw['model_type']!r}: measured the text model only")
        raw = copy.deepcopy(text)
    model_type = raw.pop("model_type", None)
    if not model_type:
        raise ConfigError("hf_config.model_type", "is missing; copy it from the model's config.json.")
    for key in _DROPPED_KEYS:
        if raw.pop(key, None) is not None:
            notes.append(f"ignored {key} (weights are traced unquantised)")
    for key in ("torch_dtype", "dtype"):
        raw.pop(key, None)
    try:
        config = AutoConfig.for_model(model_type, **raw)
    except (KeyError, ValueError) as error:
        raise ConfigError(
            "hf_config.model_type", f"transformers cannot build {model_type!r}: {error}"
        ) from error
    config.use_cache = False  # HF Trainer sets use_cache = TrainingArguments.use_cache (False)
    return config


def build_model(
    hf_config: dict[str, Any],
    *,
    method: str,
    lora_rank: int,
    lora_alpha: int,
    lora_targets: tuple[str, ...],
    lora_dropout: float,
    dtype: torch.dtype,
    attention: str,
    gradient_checkpointing: bool,
    checkpoint_policy: str = "full",
    head: str = "lm",
    before_adapter: Callable[[torch.nn.Module], None] | None = None,
) -> BuiltModel:
    """Instantiate the model from its config (random init; fake tensors if a FakeTensorMode is on).

    `head="score"` builds the sequence-classification model with one label that TRL's
    RewardTrainer trains (its pad token set, as the trainer sets it from the tokenizer);
    `before_adapter` patches the model before peft wraps it (TRL's fused log-prob head)."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    notes: list[str] = []
    config = _config(hf_config, notes)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    auto: Any = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    if head == "score":
        auto = AutoModelForSequenceClassification
        config.num_labels = 1
        if getattr(config, "pad_token_id", None) is None:
            eos = getattr(config, "eos_token_id", None)
            config.pad_token_id = (eos[0] if isinstance(eos, list) else eos) or 0
    if seq2seq:
        notes.append("encoder-decoder: decoder input = labels shifted right, same length as input")
    if seq2seq and getattr(config, "decoder_start_token_id", None) is None:
        # Token ids do not change memory; T5's shift-right needs one (T5 config.json uses 0 = pad).
        config.decoder_start_token_id = getattr(config, "pad_token_id", None) or 0
        config.pad_token_id = config.decoder_start_token_id
        notes.append("decoder_start_token_id/pad_token_id absent: set to 0 (ids do not change memory)")
    try:
        model = auto.from_config(config, dtype=dtype, attn_implementation=attention)
    except ValueError as error:
        if attention == "sdpa" and "scaled_dot_product_attention" in str(error):
            raise InputError(
                "attention",
                f"transformers cannot run {config.model_type!r} with sdpa; use attention='eager'.",
            ) from error
        raise
    if gradient_checkpointing:
        kwargs: dict[str, Any] = {"use_reentrant": False}
        if checkpoint_policy == "op":
            kwargs["context_fn"] = op_sac_context_fn()
            notes.append(
                "op-level selective checkpointing: torchtitan's policy (mm and SDPA outputs saved, "
                "every second mm recomputed)"
            )
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if before_adapter is not None:
        before_adapter(model)
    if method != "full":
        task = None if head == "score" else ("SEQ_2_SEQ_LM" if seq2seq else "CAUSAL_LM")
        model = _add_adapter(model, method, lora_rank, lora_alpha, lora_targets, lora_dropout, task)
        if head == "score":
            # peft's SEQ_CLS task trains the score head as a module to save, a deep copy that
            # fake parameters do not survive; training the head in place keeps the same bytes
            # (but for the frozen original's one row)
            wrapped: Any = model
            wrapped.get_base_model().score.requires_grad_(True)
            notes.append("score head trained in place (peft's modules_to_save copy: one row more)")
        notes.append("peft adapters in fp32 (peft autocast_adapter_dtype default)")
    model.train()
    vocab = int(config.vocab_size)

    def make_batch(batch: int, seq: int) -> dict[str, torch.Tensor]:
        input_ids = torch.randint(0, vocab, (batch, seq))
        return {"input_ids": input_ids, "labels": input_ids.clone()}

    return BuiltModel(model, str(config.model_type), make_batch, notes)


def op_sac_context_fn() -> Callable[[], Any]:
    """torchtitan's op-level SAC policy (torchtitan/distributed/activation_checkpoint.py at
    cfb93265, `_apply_op_sac`) for torch.utils.checkpoint: save the outputs of mm, the SDPA
    kernels (and their CPU variant, which a fake-tensor trace dispatches to) and max, except every
    second mm, counted per checkpointed block and per pass."""
    from collections import defaultdict

    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    mm = torch.ops.aten.mm.default
    save = {
        mm,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
        torch.ops.aten.max.default,
    }

    def context() -> Any:
        counts: dict[str, int] = defaultdict(int)

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            mode = "recompute" if ctx.is_recompute else "forward"
            if func == mm:
                counts[mode] += 1
            keep = func in save and not (func == mm and counts[mode] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    return context


def _add_adapter(
    model: torch.nn.Module,
    method: str,
    rank: int,
    alpha: int,
    targets: tuple[str, ...],
    dropout: float,
    task: str | None,
) -> torch.nn.Module:
    """Wrap with a peft LoRA/DoRA adapter. Fake parameters cannot be moved with `.to()`, so peft's
    device/dtype moves are made by assigning `.data` instead."""
    from peft import LoraConfig, get_peft_model

    target: str | list[str] = "all-linear" if targets == ("all-linear",) else list(targets)
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=target,
        lora_dropout=dropout,
        use_dora=method == "dora",
        task_type=task,
    )
    try:
        with _data_assigning_to():
            return get_peft_model(model, config)
    except ValueError as error:
        if "not found in the base model" in str(error) or "Target modules" in str(error):
            raise InputError(
                "lora_targets", f"{list(targets)} match no module of this model ({error})"
            ) from error
        raise


class _data_assigning_to:
    """Context: `nn.Module.to`/`_apply` on fake params replaced by `.data` assignment (dtype only)."""

    def __enter__(self) -> None:
        self._original = torch.nn.Module._apply

        def _apply(module: torch.nn.Module, fn: Callable[..., Any], recurse: bool = True) -> Any:
            if recurse:
                for child in module.children():
                    _apply(child, fn, recurse)
            for param in module._parameters.values():
                if param is not None:
                    moved = fn(param.data)
                    if moved.dtype != param.dtype or moved.shape != param.shape:
                        param.data = moved
            for key, buf in module._buffers.items():
                if buf is not None:
                    module._buffers[key] = fn(buf)
            return module

        setattr(torch.nn.Module, "_apply", _apply)  # noqa: B010 (a method, restored on exit)

    def __exit__(self, *exc: object) -> None:
        setattr(torch.nn.Module, "_apply", self._original)  # noqa: B010


def make_optimizer(name: str, params: list[torch.nn.Parameter]) -> tuple[torch.optim.Optimizer, bool]:
    """The optimizer as a CUDA run would get it; returns (optimizer, fused?).

    torch picks foreach by default only for CUDA tensors, so foreach is set explicitly here.
    """
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-5, foreach=True), False
    if name == "adamw-fused":
        return torch.optim.AdamW(params, lr=1e-5, fused=True), True
    momentum = 0.9 if name == "sgd-momentum" else 0.0
    return torch.optim.SGD(params, lr=1e-3, momentum=momentum, foreach=True), False
