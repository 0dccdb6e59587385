# mypy: disable-error-code="no-untyped-call"
# (torch, diffusers and peft are only partly typed; their untyped calls are expected here.)
"""Measured mode for diffusion, video and JEPA models: their training step on fake tensors.

`measure_sample_step` is the counterpart of `trace.measure_training_step` for models that read
images or clips instead of token ids: a diffusers denoiser (`denoiser.py`) or V-JEPA 2
(`jepa.py`), traced by the same loop and tracker, with the EMA copy tracked as its own category.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from trainplan.engine.measure.result import MeasuredStep
from trainplan.engine.measure.trace import OPTIMIZERS, _check_choice, _check_positive
from trainplan.engine.terms.geometry import TokenShape
from trainplan.specs.errors import InputError

SAMPLE_METHODS = ("full", "lora")
SAMPLE_PRECISIONS = ("amp-bf16", "bf16", "fp32")
WEIGHT_DTYPES = ("bf16", "fp32")
EMA_CHOICES = ("none", "fp32", "bf16")
#: LoRA targets of the diffusers LoRA scripts (train_dreambooth_lora_flux.py's default).
DIFFUSERS_ATTENTION = ("to_k", "to_q", "to_v", "to_out.0")


def measure_sample_step(
    hf_config: dict[str, Any],
    shape: TokenShape,
    *,
    method: str = "full",
    lora_rank: int = 16,
    lora_alpha: int = 16,
    lora_targets: Sequence[str] = DIFFUSERS_ATTENTION,
    lora_dropout: float = 0.0,
    base_weights: str = "bf16",
    adapter_dtype: str = "bf16",
    precision: str = "amp-bf16",
    optimizer: str = "adamw",
    micro_batch: int = 1,
    gradient_checkpointing: bool = False,
    ema: str = "none",
    mask_ratios: Sequence[float] = (),
    jepa_masks: Sequence[tuple[float, float, int]] = (),
    steps: int = 2,
    fake: bool = True,
) -> MeasuredStep:
    """Peak tracked memory of `steps` training steps of a diffusers denoiser or V-JEPA 2 model.

    `hf_config` is the denoiser's config (with `_class_name`) or a `vjepa2` config; `shape` one
    sample's geometry (`terms.geometry.token_shape`). `precision`: "amp-bf16" runs the forward
    under bf16 autocast (accelerate's mixed_precision="bf16"), "bf16" and "fp32" without. Full
    fine-tuning trains weights in fp32 under amp-bf16 and fp32, in bf16 under bf16; LoRA freezes
    the base in `base_weights` and keeps the adapters in `adapter_dtype` (the diffusers LoRA
    scripts leave them at the base dtype unless they upcast). Latents and text embeddings come in
    bf16 (fp32 under fp32), as the scripts hold them at the frozen encoders' `weight_dtype`.
    `ema` keeps diffusers' EMAModel copy of the trainable weights (full fine-tuning; stepped after
    the optimizer); for a JEPA it is the target encoder's dtype ("none" means fp32) and
    `mask_ratios` lists one share of hidden tokens per mask generator. An I-JEPA (`ijepa`) or
    V-JEPA (`vjepa`) config runs on the original repos' module layout (measure/jepa_repo.py),
    its generators given as `jepa_masks`: (context share, target share, predictor passes) each.
    """
    _check_choice("method", method, SAMPLE_METHODS)
    _check_choice("precision", precision, SAMPLE_PRECISIONS)
    _check_choice("optimizer", optimizer, OPTIMIZERS)
    _check_choice("ema", ema, EMA_CHOICES)
    _check_choice("base_weights", base_weights, WEIGHT_DTYPES)
    _check_choice("lora.dtype", adapter_dtype, WEIGHT_DTYPES)
    for name, value in (("micro_batch", micro_batch), ("steps", steps)):
        _check_positive(name, value)
    model_type = str(hf_config.get("model_type", "")).lower()
    repo_jepa = model_type in ("ijepa", "vjepa")
    if repo_jepa:
        if method != "full":
            raise InputError("method", "a JEPA is traced pretraining: set method full")
        if not jepa_masks or any(
            round(c * shape.image_tokens) < 1 or round(t * shape.image_tokens) < 1 or p < 1
            for c, t, p in jepa_masks
        ):
            raise InputError("mask_ratio", "each mask generator must leave context and target tokens")
    jepa = model_type == "vjepa2"
    if jepa:
        if method != "full":
            raise InputError("method", "a JEPA is traced pretraining: set method full")
        if not mask_ratios:
            raise InputError(
                "mask_ratio",
                "a JEPA trace runs one mask generator per ratio (the published multi-block masks are "
                "not traced): give mask_ratio in (0, 1)",
            )
        for ratio in mask_ratios:
            if not 0.0 < ratio < 1.0 or round(ratio * shape.image_tokens) in (0, shape.image_tokens):
                raise InputError(
                    "mask_ratio",
                    f"{ratio} must be in (0, 1) and leave visible and hidden tokens among the "
                    f"{shape.image_tokens} patches",
                )
    elif mask_ratios and not repo_jepa:
        raise InputError("mask_ratio", "applies to JEPA models")
    if method != "full":
        _check_positive("lora.rank", lora_rank)
        if not lora_targets:
            raise InputError("lora.targets", "name at least one module (to_q, attn.to_k, to_out.0, ...).")
        if ema != "none":
            raise InputError("ema", "the EMA copy is traced for full fine-tuning (set method full)")

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainplan.engine.measure.emulation import cuda_emulation
    from trainplan.engine.measure.loop import trace_steps
    from trainplan.engine.measure.model import make_optimizer

    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    amp = precision == "amp-bf16"
    full_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    dtype = full_dtype if method == "full" else dtypes[base_weights]
    data_dtype = torch.float32 if precision == "fp32" else torch.bfloat16
    notes: list[str] = []
    fake_mode: contextlib.AbstractContextManager[Any] = FakeTensorMode() if fake else contextlib.nullcontext()
    with warnings.catch_warnings(), fake_mode, cuda_emulation(amp=amp) as emulation_notes:
        for category in (FutureWarning, DeprecationWarning, UserWarning):
            warnings.filterwarnings(
                "ignore", category=category, module=r"(transformers|diffusers|peft|torch)\b"
            )
        notes += emulation_notes
        if repo_jepa:
            from trainplan.engine.measure.jepa_repo import repo_jepa_step

            step = repo_jepa_step(
                hf_config,
                shape,
                micro_batch,
                jepa_masks,
                dtype,
                dtypes["fp32" if ema == "none" else ema],
                amp,
                gradient_checkpointing,
            )
        elif jepa:
            from trainplan.engine.measure.jepa import vjepa2_step

            target_dtype = dtypes["fp32" if ema == "none" else ema]
            step = vjepa2_step(
                hf_config, shape, micro_batch, mask_ratios, dtype, target_dtype, amp, gradient_checkpointing
            )
        else:
            step = _denoiser(
                hf_config,
                shape,
                micro_batch,
                dtype,
                data_dtype,
                amp,
                gradient_checkpointing,
                (method, lora_rank, lora_alpha, tuple(lora_targets), lora_dropout, dtypes[adapter_dtype]),
                dtypes.get(ema),
            )
        notes += step.notes
        model = step.model
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt, fused = make_optimizer(optimizer, trainable)
        result = trace_steps(
            model,
            opt,
            fused=fused,
            make_batch=step.make_batch,
            loss_of=step.loss_of,
            steps=steps,
            ema=step.ema,
            after_step=step.after_step,
        )
        result["notes"] = tuple(notes) + result["notes"]
    lora = method != "full"
    return MeasuredStep(
        **result,
        model_type=step.model_type,
        model_class=type(model).__name__,
        method=method,
        lora_rank=lora_rank if lora else 0,
        lora_alpha=lora_alpha if lora else 0,
        lora_targets=tuple(lora_targets) if lora else (),
        precision=precision,
        optimizer=optimizer,
        micro_batch=micro_batch,
        seq_len=shape.image_tokens,
        gradient_checkpointing=gradient_checkpointing,
        attention="eager" if model_type == "ijepa" else "sdpa",
        steps=steps,
        sample={key: int(value) for key, value in asdict(shape).items()},
        ema=("fp32" if ema == "none" else ema) if jepa or repo_jepa else ema,
        mask_ratios=tuple(t * p for _, t, p in jepa_masks) if repo_jepa else tuple(mask_ratios),
    )


def _denoiser(
    config: dict[str, Any],
    shape: TokenShape,
    micro_batch: int,
    dtype: Any,
    data_dtype: Any,
    amp: bool,
    gradient_checkpointing: bool,
    lora: tuple[str, int, int, tuple[str, ...], float, Any],
    ema_dtype: Any,
) -> Any:
    """The SampleStep of a diffusers denoiser: built, adapted, checkpointed, with its EMA copy."""
    from trainplan.engine.measure.denoiser import SampleStep, build_denoiser, denoiser_step

    method, rank, alpha, targets, dropout, adapter_dtype = lora
    built, name = build_denoiser(config, dtype)
    model: Any = built
    notes = [
        f"{name} on {micro_batch} x {shape.latent_frames} x {shape.latent_height} x "
        f"{shape.latent_width} latents ({shape.image_tokens} tokens) and {shape.text_tokens} text tokens"
    ]
    if gradient_checkpointing:
        model.enable_gradient_checkpointing()
    if method != "full":
        model.requires_grad_(False)
        _add_adapter(model, rank, alpha, targets, dropout, adapter_dtype)
        notes.append(f"LoRA adapters in {str(adapter_dtype).removeprefix('torch.')}")
    make_batch, loss_of = denoiser_step(model, name, config, shape, micro_batch, data_dtype, amp)
    step = SampleStep(model, name, make_batch, loss_of, notes)
    if ema_dtype is not None:
        from diffusers.training_utils import EMAModel

        ema_model = EMAModel(model.parameters())
        ema_model.to(dtype=ema_dtype)
        step.ema = list(ema_model.shadow_params)
        step.after_step = lambda: ema_model.step(model.parameters())
        notes.append(f"diffusers EMAModel copy in {str(ema_dtype).removeprefix('torch.')}, stepped per param")
    return step


def _add_adapter(
    model: Any, rank: int, alpha: int, targets: tuple[str, ...], dropout: float, adapter_dtype: Any
) -> None:
    """peft LoRA on diffusers module names, as the diffusers scripts' `add_adapter` does it."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model

    from trainplan.engine.measure.model import _data_assigning_to

    if targets == ("all-linear",):  # peft's "all-linear" needs a transformers model
        targets = tuple(name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear))
    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        target_modules=list(targets),
        lora_dropout=dropout,
        init_lora_weights="gaussian",
    )
    try:
        with _data_assigning_to():
            inject_adapter_in_model(config, model)
    except ValueError as error:
        raise InputError(
            "lora.targets", f"{list(targets)} match no module of this model ({error})"
        ) from error
    for name, param in model.named_parameters():
        if "lora_" in name:
            param.data = param.data.to(adapter_dtype)
            param.requires_grad_(True)
