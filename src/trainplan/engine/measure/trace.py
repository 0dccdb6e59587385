"""Measured mode: run real Hugging Face training steps on fake tensors and track every storage.

No GPU and no weights are needed: `FakeTensorMode` gives every tensor its real shape, dtype and
storage size without allocating it, and `StorageTracker` follows the storages' lifetimes through
forward, backward and the optimizer step. The result approximates `torch.cuda.max_memory_allocated`
of the same step on a CUDA GPU (see `emulation` for what is patched to get CUDA behaviour).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Sequence
from typing import Any

from trainplan.engine.measure.fsdp import FSDP_WRAPS, FsdpTrace
from trainplan.engine.measure.result import MeasuredStep
from trainplan.specs.errors import InputError
from trainplan.specs.stages import (
    LOGPROB_STAGES,
    PREFERENCE_LOSSES,
    REFERENCES,
    STAGES,
    SUPERVISED_STAGES,
)

METHODS = ("full", "lora", "dora")
PRECISIONS = ("amp-bf16", "bf16", "fp32", "bf16-mixed")
OPTIMIZERS = ("adamw", "adamw-fused", "sgd", "sgd-momentum")
ATTENTIONS = ("sdpa", "eager")
LOSSES = ("standard", "chunked", *PREFERENCE_LOSSES)


def _check_choice(field: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise InputError(field, f"{value!r} is not supported; use one of {', '.join(allowed)}.")


def _check_positive(field: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise InputError(field, f"must be a positive integer, got {value!r}.")


def measure_training_step(
    hf_config: dict[str, Any],
    *,
    method: str = "full",
    lora_rank: int = 16,
    lora_alpha: int = 32,
    lora_targets: Sequence[str] = ("q_proj", "v_proj"),
    lora_dropout: float = 0.0,
    precision: str = "amp-bf16",
    optimizer: str = "adamw",
    micro_batch: int = 1,
    seq_len: int = 512,
    gradient_checkpointing: bool = False,
    attention: str = "sdpa",
    steps: int = 2,
    fake: bool = True,
    loss: str = "standard",
    loss_chunks: int = 8,
    optimizer_in_backward: bool = False,
    checkpoint_policy: str = "full",
    fsdp: FsdpTrace | None = None,
    stage: str = "sft",
    reference: str = "none",
    reference_dtype: str = "bf16",
    completion_len: int = 0,
    reward_dtype: str = "bf16",
) -> MeasuredStep:
    """Peak tracked memory of `steps` training steps of the model described by `hf_config`.

    Each step is: forward on `micro_batch` x `seq_len` random token ids with labels = input ids
    (causal-LM loss as HF computes it, on fp32-upcast logits), backward, `optimizer.step()`,
    `zero_grad(set_to_none=True)`. `precision="amp-bf16"` is HF Trainer `bf16=True` on an fp32
    model: fp32 weights, grads and optimizer state, forward under bf16 autocast, and
    accelerate's conversion of bf16 outputs to fp32. `"bf16"`: weights, grads and optimizer state in
    bf16 (peft keeps LoRA adapters in fp32, its default). `lora_targets` are module-name suffixes
    as peft `target_modules`, or `("all-linear",)`. Encoder-decoder configs (T5) use
    AutoModelForSeq2SeqLM with a decoder input of the same length (labels shifted right);
    configs with a nested `text_config` measure the text model only. `fake=False` runs real CPU
    tensors (tests only; small models). `loss="chunked"` runs the decoder, then torchtune's
    chunked cross-entropy (the head applied per chunk of hidden states, each chunk upcast and
    put through cross-entropy on its own, the logits deleted after the loss);
    `optimizer_in_backward` steps one optimizer per parameter in its post-accumulate-grad hook
    and frees the gradient there (torchtune's optimizer_in_bwd). `checkpoint_policy="op"` (with
    gradient checkpointing) applies torchtitan's op-level selective checkpointing to each layer.
    With `fsdp`, the model is sharded with FSDP2 over a fake process group of `fsdp.ranks` ranks
    and rank 0 is traced (measure/fsdp.py); `precision="bf16-mixed"` (FSDP2 only) keeps fp32
    sharded parameters and gathers them in bf16 (MixedPrecisionPolicy(param_dtype=bfloat16)).
    A `stage` other than sft/pt runs TRL 1.16.0's step for it (measure/preference.py):
    `micro_batch` counts pairs for the paired stages, `reference` is model (a frozen copy in
    `reference_dtype`), adapter, precomputed or none; for grpo the training round of a step is
    traced, its last `completion_len` tokens of each sequence scored. For ppo, one micro-step of
    the training round of TRL's PPOTrainer (huggingface/trl@f2cd5771): the model trained is
    PolicyAndValueWrapper(policy, value model), the value model an
    AutoModelForSequenceClassification(num_labels=1) of the same config and dtype, fully trained
    (LoRA adapts the policy only), gradient checkpointing on the policy only (the wrapper's
    `gradient_checkpointing_enable`), both with the config's use_cache (PPOTrainer never sets it);
    the reward model (one-label, in `reward_dtype`) and a reference copy are frozen weights.
    """
    _check_choice("method", method, METHODS)
    _check_choice("precision", precision, PRECISIONS)
    _check_choice("optimizer", optimizer, OPTIMIZERS)
    _check_choice("attention", attention, ATTENTIONS)
    _check_choice("loss", loss, LOSSES)
    _check_choice("checkpoint_policy", checkpoint_policy, ("full", "op"))
    _check_choice("stage", stage, STAGES)
    _check_choice("reference", reference, REFERENCES)
    _check_choice("reference_weights", reference_dtype, ("bf16", "fp32"))
    _check_choice("reward_dtype", reward_dtype, ("bf16", "fp32"))
    preference = stage not in SUPERVISED_STAGES
    if preference and (fsdp is not None or loss == "chunked" or optimizer_in_backward):
        raise InputError("stage", f"{stage} is traced on one GPU with TRL's own loss")
    if stage == "ppo":
        if loss != "selective":
            raise InputError(
                "loss",
                "ppo is traced with selective (PPOTrainer's full logits through selective_log_softmax)",
            )
        if reference not in ("model", "adapter"):
            raise InputError("reference", "ppo is traced with a frozen reference copy (model) or adapter")
    elif (loss in PREFERENCE_LOSSES) != (stage in LOGPROB_STAGES):
        raise InputError(
            "loss",
            "dpo, kto, orpo, simpo and grpo are traced with logprob (TRL's fused head), selective (TRL 1.10 "
            "and before) or logsoftmax (LLaMA-Factory); the other stages with standard or chunked",
        )
    if reference == "adapter" and method == "full":
        raise InputError("reference", "adapter: a full fine-tune has no adapters to disable")
    if fsdp is not None:
        _check_choice("fsdp_wrap", fsdp.wrap, FSDP_WRAPS)
        if fsdp.ranks < 2:
            raise InputError("gpus", "FSDP2 is traced over at least 2 ranks")
        if method != "full":
            raise InputError("method", "FSDP2 is traced for full fine-tuning")
    elif precision == "bf16-mixed":
        raise InputError("precision", "bf16-mixed is traced only under FSDP2 (zero_stage 3, gpus > 1)")
    for name, value in (
        ("micro_batch", micro_batch),
        ("seq_len", seq_len),
        ("steps", steps),
        ("loss_chunks", loss_chunks),
    ):
        _check_positive(name, value)
    if method != "full":
        _check_positive("lora_rank", lora_rank)
        if not lora_targets:
            raise InputError("lora_targets", "name at least one module suffix, or 'all-linear'.")

    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainplan.engine.measure.emulation import cuda_emulation
    from trainplan.engine.measure.fsdp import fake_process_group, shard_model
    from trainplan.engine.measure.loop import trace_steps
    from trainplan.engine.measure.model import build_model, make_optimizer
    from trainplan.engine.measure.preference import (
        cuda_logprob_kernels,
        fused_head,
        fused_head_with_entropy,
        preference_step,
    )

    policy_head = fused_head_with_entropy if stage == "grpo" else fused_head
    if stage == "grpo" and loss not in ("logprob", "selective"):
        raise InputError(
            "loss", "grpo is traced with logprob (TRL 1.16.0) or selective (TRL 1.10 and before)"
        )

    amp = precision == "amp-bf16"
    notes: list[str] = []
    fake_mode: contextlib.AbstractContextManager[Any] = FakeTensorMode() if fake else contextlib.nullcontext()
    group: contextlib.AbstractContextManager[Any] = (
        fake_process_group(fsdp.ranks) if fsdp is not None else contextlib.nullcontext()
    )
    kernels: contextlib.AbstractContextManager[Any] = (
        cuda_logprob_kernels() if loss == "logprob" else contextlib.nullcontext()
    )
    with (
        warnings.catch_warnings(),
        group as mesh,
        fake_mode,
        cuda_emulation(amp=amp) as emulation_notes,
        kernels,
    ):
        # transformers/peft warn about their own deprecations while building and running the
        # model; those are not the user's to act on
        for category in (FutureWarning, DeprecationWarning, UserWarning):
            warnings.filterwarnings("ignore", category=category, module=r"(transformers|peft|torch)\b")
        notes += emulation_notes
        built = build_model(
            hf_config,
            method=method,
            lora_rank=lora_rank,
            lora_alpha=lora_alpha,
            lora_targets=tuple(lora_targets),
            lora_dropout=lora_dropout,
            dtype=torch.bfloat16 if precision == "bf16" else torch.float32,
            attention=attention,
            gradient_checkpointing=gradient_checkpointing,
            checkpoint_policy=checkpoint_policy,
            head="score" if stage == "rm" else "lm",
            before_adapter=policy_head if loss == "logprob" else None,
        )
        notes += built.notes
        model = built.model
        reward_model = None
        if stage == "ppo":
            weights = torch.bfloat16 if precision == "bf16" else torch.float32
            reward_weights = torch.bfloat16 if reward_dtype == "bf16" else torch.float32
            model, reward_model = _ppo_models(hf_config, built.model, weights, reward_weights, attention)
            notes.append(
                "PolicyAndValueWrapper: the value model (AutoModelForSequenceClassification, 1 label, "
                f"the policy's dtype) fully trained beside the policy; frozen reward model in {reward_dtype}"
                + ("; gradient checkpointing on the policy only" if gradient_checkpointing else "")
            )
        step = None
        if preference:
            ref_model = None
            if reference == "model":
                ref_model = whole_model(
                    hf_config,
                    torch.bfloat16 if reference_dtype == "bf16" else torch.float32,
                    attention,
                    before_adapter=fused_head if loss == "logprob" else None,
                )
                ref_model.requires_grad_(False)
                ref_model.eval()
                notes.append(f"frozen reference copy in {reference_dtype}")
            step = preference_step(
                stage,
                reference,
                vocab=int(getattr(model, "config").vocab_size),  # noqa: B009 (a Module attribute)
                micro_batch=micro_batch,
                seq_len=seq_len,
                amp=amp,
                ref_model=ref_model,
                scoring=loss,
                completion_len=completion_len,
                reward_model=reward_model,
            )
            notes += step.notes
        if fsdp is not None:
            mixed = torch.bfloat16 if precision == "bf16-mixed" else None
            shard_model(model, mesh, fsdp, mixed)
            notes.append(
                f"FSDP2 over a fake process group of {fsdp.ranks} ranks (rank 0 traced), wrap "
                f"{fsdp.wrap}, reduce {'fp32' if fsdp.reduce_fp32 else 'at the parameter dtype'}"
                + ("" if fsdp.reshard_after_forward else ", no resharding after forward")
            )
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt, fused = make_optimizer(optimizer, trainable)
        in_backward = (
            {p: make_optimizer(optimizer, [p])[0] for p in trainable} if optimizer_in_backward else None
        )
        if loss == "chunked":
            notes.append(
                f"chunked cross-entropy over {loss_chunks} chunks (torchtune CEWithChunkedOutputLoss)"
            )
        if optimizer_in_backward:
            notes.append("optimizer step per parameter in its post-accumulate-grad hook, gradient freed")

        def loss_of(model: Any, batch: dict[str, Any]) -> Any:
            if loss == "chunked":
                return _chunked_loss(model, batch, loss_chunks, amp, torch)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                outputs = model(**batch)
            if amp:  # accelerate's ConvertOutputsToFp32 wraps the autocast forward
                upcast = [v.float() for v in outputs.values() if _is_low(v, torch)]
                del upcast
            return outputs.loss

        result = trace_steps(
            model,
            opt,
            fused=fused,
            make_batch=step.make_batch if step else lambda: built.make_batch(micro_batch, seq_len),
            loss_of=step.loss_of if step else loss_of,
            steps=steps,
            in_backward=in_backward,
            fsdp=fsdp is not None,
            frozen=step.frozen if step else (),
            after_step=step.after_step if step else None,
        )
        result["notes"] = tuple(notes) + result["notes"]
    return MeasuredStep(
        **result,
        model_type=built.model_type,
        model_class=type(model).__name__
        if stage != "ppo"
        else f"{type(model).__name__}({type(built.model).__name__}, {type(model.value_model).__name__})",
        method=method,
        lora_rank=lora_rank if method != "full" else 0,
        lora_alpha=lora_alpha if method != "full" else 0,
        lora_targets=tuple(lora_targets) if method != "full" else (),
        precision=precision,
        optimizer=optimizer,
        micro_batch=micro_batch,
        seq_len=seq_len,
        gradient_checkpointing=gradient_checkpointing,
        attention=attention,
        steps=steps,
    )


def _chunked_loss(model: Any, batch: dict[str, Any], chunks: int, amp: bool, torch: Any) -> Any:
    """torchtune's chunked cross-entropy on a Hugging Face causal LM: decoder, then the head per
    chunk of hidden states, each chunk upcast to fp32 on its own; the logits are dropped once the
    loss is formed."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(lm.config, "is_encoder_decoder", False) or getattr(lm.config, "final_logit_softcapping", None):
        raise InputError(
            "loss", "the chunked loss is traced for decoder-only models without logit soft-capping"
        )
    # the loss runs inside the autocast region, as the HF Trainer's compute_loss does
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        hidden = lm.get_decoder()(input_ids=batch["input_ids"]).last_hidden_state
        logits = [lm.lm_head(chunk) for chunk in hidden.tensor_split(chunks, dim=1)]
        del hidden
        labels = batch["labels"].tensor_split(chunks, dim=1)
        total = sum(
            torch.nn.functional.cross_entropy(c.float().flatten(0, 1), y.flatten(), reduction="sum")
            for c, y in zip(logits, labels, strict=True)
        )
        del logits
    return total / batch["labels"].numel()


def _is_low(value: Any, torch: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16)


def whole_model(
    hf_config: dict[str, Any], dtype: Any, attention: str, head: str = "lm", before_adapter: Any = None
) -> Any:
    """A whole model of `hf_config` in `dtype`, unadapted and not checkpointed: a frozen
    reference copy, or PPO's value and reward models (`head` score)."""
    from trainplan.engine.measure.model import build_model

    return build_model(
        hf_config,
        method="full",
        lora_rank=0,
        lora_alpha=0,
        lora_targets=(),
        lora_dropout=0.0,
        dtype=dtype,
        attention=attention,
        gradient_checkpointing=False,
        head=head,
        before_adapter=before_adapter,
    ).model


def _ppo_models(
    hf_config: dict[str, Any], policy: Any, dtype: Any, reward_dtype: Any, attention: str
) -> tuple[Any, Any]:
    """PPO's trained PolicyAndValueWrapper and its frozen reward model, as
    huggingface/trl@f2cd5771 examples/scripts/ppo/ppo.py loads them and PPOTrainer.__init__
    prepares them: the value and reward models AutoModelForSequenceClassification(num_labels=1)
    of the policy's config (the value model in the policy's dtype, trained, never checkpointed:
    the wrapper's gradient_checkpointing_enable reaches the policy only), dropout disabled in
    every model (ppo_trainer.py lines 489-493), the wrapper's `config` the policy's. The
    checkpoint's `use_cache` (True unless the config says otherwise) is restored on the policy
    and the value model: PPOTrainer, unlike the HF Trainer, never sets it, so their forwards
    build a KV cache (transformers drops it under gradient checkpointing)."""
    from trainplan.engine.measure.preference import PolicyAndValueWrapper, disable_dropout

    value = whole_model(hf_config, dtype, attention, head="score")
    reward = whole_model(hf_config, reward_dtype, attention, head="score")
    reward.requires_grad_(False)
    reward.eval()
    use_cache = bool(hf_config.get("use_cache", True))
    base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
    base.config.use_cache = use_cache
    value.config.use_cache = use_cache
    model = PolicyAndValueWrapper(policy, value)
    model.config = base.config
    for module in (model, reward):
        disable_dropout(module)
    return model, reward
