"""Measured vs estimated: run a scenario's training step on fake tensors next to estimate().

A trace is one GPU's view of one micro-batch per step: no CUDA context, cuBLAS/cuDNN
workspaces, NCCL buffers, allocator fragmentation or reserved-but-unused memory, and no
in-kernel scratch. The estimate covers those with its overhead term, so the comparison is made
with the overhead set to zero and gradient accumulation off, and says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainplan.engine.estimate import estimate, resolved_base_weights, resolved_ema, sample_shape
from trainplan.engine.measure.fsdp import FsdpTrace
from trainplan.engine.measure.result import MeasuredStep
from trainplan.engine.per_replica import reference_copy_format
from trainplan.engine.result import Estimate
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.engine.terms.params import regex_targets, targeted
from trainplan.engine.terms.precisions import PRECISIONS
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.hf.pipeline import PIPELINE_KEY
from trainplan.inputs.resolve import model_config, resolve_model
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.presets import resolved_adapter_dtype
from trainplan.specs.rollout import resolved_rollout
from trainplan.specs.scenario import Scenario, is_pattern
from trainplan.specs.stages import (
    CRITIC_STAGES,
    LOGPROB_STAGES,
    PREFERENCE_LOSSES,
    SUPERVISED_STAGES,
    resolved_loss,
    resolved_reference,
)
from trainplan.specs.weights import block_linears

NOT_TRACED = (
    "A trace cannot see the CUDA context (~0.4 GiB), cuBLAS/cuDNN workspaces, NCCL buffers, "
    "allocator fragmentation or reserved-but-unused memory, or scratch inside kernels; the "
    "estimate's cache and overhead terms stand for those and are left out of this comparison "
    "(its allocated figure is compared)."
)
SSM_NOTE = (
    "SSM mixers run transformers' PyTorch path in a trace (mamba-ssm's kernels need CUDA), so the "
    "estimate is compared with ssm_kernel naive; the fused kernels keep only the in_proj output, "
    "the scan output and the norm's rstd per token and recompute the rest in backward"
)
MIXER_NOTE = (
    "Linear-attention and recurrent mixers run transformers' PyTorch path in a trace "
    "(flash-linear-attention and causal-conv1d need CUDA), so the estimate is compared with "
    "ssm_kernel naive; the fused kernels recompute the chunk matrices and states in backward"
)
TRACEABLE_OPTIMIZERS = ("adamw", "adamw-fused", "sgd", "sgd-momentum")
NO_ESTIMATE = "The estimate is not available for this model yet; the trace is shown alone"
SAMPLE_NOTE = (
    "diffusion, video and JEPA steps are traced on precomputed latents and text embeddings (the "
    "VAE and text encoders are not on the GPU), one micro-batch, as the diffusers and V-JEPA 2 "
    "training scripts run them"
)


#: Estimate terms that hold state; the others are compared together with the traced
#: activations and temporaries (the overhead term is what a trace cannot see).
STATE_TERMS = ("weights", "optimizer", "gradients", "ema")


@dataclass(frozen=True)
class Comparison:
    """A traced step and the estimate of the same scenario; `estimate` is None while trainplan
    does not estimate this kind of model yet (`notes` then says why), and the trace stands alone."""

    scenario: Scenario
    measured: MeasuredStep
    estimate: Estimate | None
    notes: tuple[str, ...]
    model_name: str = ""  # the model's display name (the estimate's, when there is one)

    @property
    def estimated_bytes(self) -> float | None:
        """The estimated peak a trace can see: without the blocks FSDP2's side streams keep
        reserved, which a trace (no streams) never allocates (`allocated_peak_bytes`)."""
        return None if self.estimate is None else self.estimate.allocated_peak_bytes

    @property
    def error(self) -> float | None:
        """estimated / measured - 1, on what a trace can see (None without an estimate)."""
        estimated = self.estimated_bytes
        return None if estimated is None else estimated / self.measured.peak_bytes - 1

    @property
    def reserved_error(self) -> float | None:
        """The estimate's reserved figure against the trace's replayed reserved peak, both on one
        stream (the side streams' pools left out): estimated / modelled - 1 (None without an
        estimate or a replay)."""
        if self.estimate is None or not self.measured.reserved_peak_bytes:
            return None
        one_stream = self.estimate.reserved_peak_bytes - self.estimate.stream_pool_bytes
        return one_stream / self.measured.reserved_peak_bytes - 1

    def terms(self) -> list[tuple[str, float, float | None]]:
        """(term, measured bytes, estimated bytes or None) at each one's peak moment.

        The traced categories are matched with the estimate's terms by name: weights (parameters
        and buffers), optimizer, gradients, and an EMA copy on its own row when the estimate
        has an `ema` term (inside weights when it does not); the traced activations and
        temporaries face the sum of the estimate's other terms (activations, logits,
        temporaries), the overhead left out. Under FSDP2 with bf16-mixed the fp32 shard is both
        the weight and the optimizer's master copy (trainplan counts 2 bytes as weights and 4
        as master), so the two are compared together. The estimate's side is its allocated
        peak moment (without FSDP2's reserved stream pools)."""
        m = self.measured
        peak: dict[str, float] = {}
        if self.estimate is not None:
            moment = self.estimate.allocated_peak or self.estimate.peak
            peak = {term.name: term.value for term in moment.terms}
        separate_ema = "ema" in peak or (self.estimate is None and m.ema_bytes > 0)
        weights = m.params_bytes + m.buffers_bytes + (0 if separate_ema else m.ema_bytes)
        # the cache, the memory outside the allocator and a rollout engine's are no trainer tensors
        rest = [
            name for name in peak if name not in STATE_TERMS and name not in ("rollout", "cache", "overhead")
        ]
        rest_label = " + ".join(rest) if self.estimate is not None else "activations + temporaries"
        rows: list[tuple[str, float, float | None]]
        if (
            self.scenario.zero_stage == 3
            and self.scenario.gpus > 1
            and self.scenario.precision == "bf16-mixed"
        ):
            rows = [("weights + optimizer", weights + m.optimizer_bytes, _sum(peak, "weights", "optimizer"))]
        else:
            rows = [
                ("weights", weights, peak.get("weights")),
                ("optimizer", m.optimizer_bytes, peak.get("optimizer")),
            ]
        rows.append(("gradients", m.grads_bytes, peak.get("gradients")))
        if separate_ema:
            rows.append(("ema", m.ema_bytes, peak.get("ema")))
        rows.append((rest_label, m.activations_bytes + m.temporaries_bytes, _sum(peak, *rest)))
        rows.append(("peak", m.peak_bytes, self.estimated_bytes))
        return rows

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract: `measured` next to the `estimate` JSON."""
        m = self.measured
        return {
            "measured": {
                "peak_bytes": m.peak_bytes,
                "peak_phase": m.peak_phase,
                "params_bytes": m.params_bytes + m.buffers_bytes,
                "grads_bytes": m.grads_bytes,
                "optimizer_bytes": m.optimizer_bytes,
                "activations_bytes": m.activations_bytes,
                "temporaries_bytes": m.temporaries_bytes,
                "ema_bytes": m.ema_bytes,
                "phase_peaks_bytes": m.phase_peaks_bytes,
                "reserved_peak_bytes": m.reserved_peak_bytes,
                "reserved_peak_expandable_bytes": m.reserved_peak_expandable_bytes,
                "notes": list(m.notes),
            },
            "estimate": None if self.estimate is None else self.estimate.to_dict(),
            "error": self.error,
            "reserved_error": self.reserved_error,
            "notes": list(self.notes),
        }


def _sum(terms: dict[str, float], *names: str) -> float | None:
    """The sum of the named estimate terms, or None without an estimate."""
    return sum(terms[name] for name in names) if terms else None


def _trace_precision(scenario: Scenario) -> str:
    """The PyTorch recipe a trace runs for this scenario (HF Trainer-style; under FSDP2 its
    MixedPrecisionPolicy for bf16-mixed)."""
    if _sharded(scenario):
        if scenario.precision in ("bf16-mixed", "bf16", "fp32"):
            return scenario.precision
        raise InputError("precision", "FSDP2 is traced with bf16-mixed, bf16 or fp32")
    if scenario.method == "full":
        if scenario.precision in ("amp-bf16", "bf16", "fp32"):
            return scenario.precision
        raise InputError(
            "precision",
            f"{scenario.precision} keeps an fp32 master copy inside a framework optimizer "
            "(Megatron/DeepSpeed) and cannot be traced here; measure amp-bf16, bf16 or fp32",
        )
    base = resolved_base_weights(scenario)
    if base == "bf16" and scenario.precision in ("bf16-mixed", "bf16", "amp-bf16"):
        return "bf16"
    if base == "fp32" and scenario.precision in ("amp-bf16", "fp32"):
        return scenario.precision
    raise InputError(
        "base_weights",
        f"a trace runs LoRA over a bf16 or fp32 base with bf16/amp-bf16/fp32 precision, not "
        f"{base} with {scenario.precision}",
    )


def _lora_targets(scenario: Scenario, config: dict[str, Any]) -> tuple[str, ...]:
    """peft target_modules for the scenario's LoRA targets, named as this model names them: the
    last part of a language model's module name (q_proj), a denoiser's module path inside its
    block (attn.to_out.0), since diffusers' last parts ("0", "proj") are not unique."""
    targets = scenario.lora.targets
    if targets == "all-linear":
        return ("all-linear",)
    if isinstance(targets, tuple):
        return targets
    model = spec_from_config(config, scenario.model)
    if is_pattern(targets):
        return tuple(sorted(regex_targets(model, str(targets))))
    whole = model.kind != "llm"
    names = {
        linear.name if whole else linear.name.rsplit(".", 1)[-1]
        for block in model.blocks
        for linear in block_linears(block, model.hidden_size)
        if targeted(linear, targets)
    }
    return tuple(sorted(names))


def check_traceable(scenario: Scenario, kind: str = "llm") -> None:
    """What a single-device fake-tensor trace can run; everything else is a clear error.
    `kind` is the model's (ModelSpec.kind): diffusion, video and JEPA steps run on one GPU
    without the language-model savers, on precomputed latents, and may keep LoRA adapters at
    the base dtype, as the diffusers LoRA scripts do."""
    if scenario.stage not in SUPERVISED_STAGES:
        if kind != "llm" or _sharded(scenario):
            raise InputError("stage", f"{scenario.stage}: a preference or reward step is traced on one GPU")
        if _reference_dtype(scenario) not in ("bf16", "fp32", None):
            raise InputError("reference_weights", "a trace keeps the reference copy in bf16 or fp32")
        if scenario.stage == "grpo" and resolved_loss(scenario) not in ("logprob", "selective"):
            raise InputError(
                "loss", "grpo is traced with logprob (TRL 1.16.0) or selective (TRL 1.10 and before)"
            )
        if scenario.stage in CRITIC_STAGES and _reward_dtype(scenario) not in ("bf16", "fp32"):
            raise InputError("base_weights", "a trace keeps PPO's reward model in bf16 or fp32")
    if scenario.method == "qlora":
        raise InputError(
            "method",
            "QLoRA cannot be traced: bitsandbytes' 4-bit kernels do not run on fake tensors. "
            "Measure lora with base_weights bf16 and compare the base weights by arithmetic",
        )
    if scenario.gpus != 1 and not _sharded(scenario):
        raise InputError(
            "gpus",
            "a trace measures one GPU, or rank 0 of FSDP2 (zero_stage 3 without tensor, pipeline "
            "or context parallelism or HSDP replicas): set gpus to 1 or zero_stage to 3",
        )
    if _sharded(scenario):
        if scenario.method != "full":
            raise InputError("method", "FSDP2 is traced for full fine-tuning: set method full")
        if scenario.fsdp_prefetch != 1:
            raise InputError("fsdp_prefetch", "a trace runs FSDP2's own prefetch of 1")
    if scenario.optimizer not in TRACEABLE_OPTIMIZERS:
        raise InputError("optimizer", f"a trace runs {', '.join(TRACEABLE_OPTIMIZERS)}")
    if scenario.activation_checkpointing == "selective":
        raise InputError("activation_checkpointing", "Hugging Face models offer none or full")
    if scenario.offload != "none":
        raise InputError("offload", "a trace runs without CPU offload")
    if kind != "llm":
        _check_sample_traceable(scenario)
    untraced = {
        "activation_checkpointing": scenario.activation_checkpointing not in ("none", "full", "op"),
        # TRL's fused log-prob head, and its full-logits scoring of TRL 1.10 and before, are
        # traced for the stages TRL scores through them; PPOTrainer's full logits (selective)
        "loss": resolved_loss(scenario) == "fused"
        or (
            resolved_loss(scenario) != "selective"
            if scenario.stage in CRITIC_STAGES
            else (resolved_loss(scenario) in PREFERENCE_LOSSES) != (scenario.stage in LOGPROB_STAGES)
        ),
        "activation_offload": scenario.activation_offload,
        "kbit_upcast": scenario.kbit_upcast,
        "compile": scenario.compile,
        "kernels": scenario.kernels != "eager",  # Triton kernels do not run on fake tensors
        "lora.dtype": kind == "llm"
        and scenario.method != "full"
        and resolved_adapter_dtype(kind, scenario, PRECISIONS[scenario.precision].compute)[0] != "fp32",
    }
    for name, asked in untraced.items():
        if asked:
            raise InputError(
                name,
                "measured mode traces a plain Hugging Face step, which does not run this setting "
                "yet: set it to its default to measure the rest",
            )


def _check_sample_traceable(scenario: Scenario) -> None:
    """The settings a diffusion, video or JEPA trace does not run (on top of check_traceable's)."""
    unsupported = {
        "gpus": (scenario.gpus != 1, "a diffusion, video or JEPA step is traced on one GPU: set gpus 1"),
        "frozen_encoders": (
            scenario.frozen_encoders != "precomputed",
            "the trace runs the denoiser on precomputed latents and text embeddings: set it to precomputed",
        ),
        "lora.dora": (scenario.lora.dora and scenario.method != "full", "DoRA is traced for language models"),
        "activation_checkpointing": (
            scenario.activation_checkpointing not in ("none", "full"),
            "diffusers and V-JEPA 2 models offer none or full (enable_gradient_checkpointing)",
        ),
        "loss": (
            resolved_loss(scenario) != "standard",
            "a denoiser or JEPA loss is traced as the scripts form it",
        ),
        "optimizer_in_backward": (scenario.optimizer_in_backward, "traced for language models only"),
    }
    for name, (asked, why) in unsupported.items():
        if asked:
            raise InputError(name, why)


def _reference_dtype(scenario: Scenario) -> str | None:
    """The dtype a frozen reference copy is loaded in (per_replica.reference_copy_format, or the
    policy's weights' dtype); None without a copy."""
    if resolved_reference(scenario) != "model":
        return None
    given = reference_copy_format(scenario)
    if given is not None:
        return given
    return "bf16" if PRECISIONS[scenario.precision].weight_bytes == 2 else "fp32"


def _reward_dtype(scenario: Scenario) -> str:
    """The dtype PPO's frozen reward model is loaded in: the reference copy's, else as the
    policy's weights are loaded (huggingface/trl@f2cd5771 examples/scripts/ppo/ppo.py loads the
    policy, the value, reward and reference models with one `model_kwargs`)."""
    given = _reference_dtype(scenario) or reference_copy_format(scenario)
    if given is not None:
        return given
    return "bf16" if PRECISIONS[scenario.precision].weight_bytes == 2 else "fp32"


def _sharded(scenario: Scenario) -> bool:
    """Whether the scenario runs FSDP2 over data-parallel ranks only (traced as rank 0)."""
    return (
        scenario.zero_stage == 3
        and scenario.gpus > 1
        and scenario.tensor_parallel == 1
        and scenario.pipeline_parallel == 1
        and scenario.context_parallel == 1
        and scenario.data_parallel_replicate == 1
    )


def measure_scenario(scenario: Scenario) -> Comparison:
    """Trace the scenario's training step and estimate it on the same terms."""
    spec = resolve_model(scenario.model)
    check_traceable(scenario, spec.kind)
    try:
        from trainplan.engine.measure.trace import measure_training_step
    except ImportError:
        raise InputError("measure", "needs PyTorch: pip install 'trainplan[measure]'") from None
    if spec.kind != "llm":
        return _measure_sample(scenario, spec)
    rollout = resolved_rollout(scenario)
    # one micro-batch a step on both sides; a GRPO step keeps its generation batch (a PPO step's
    # is micro_batch x grad_accum prompts, one micro-batch here)
    compared = dataclasses.replace(
        scenario,
        overhead_gib=0.0,
        grad_accum=1,
        steps_per_generation=rollout.steps_per_generation
        if rollout is not None and scenario.stage not in CRITIC_STAGES
        else None,
    )
    lora = scenario.lora
    config = model_config(scenario.model)[0]
    notes = [NOT_TRACED]
    spec = spec_from_config(config, scenario.model)
    has_attention = any(block.attention is not None for block in spec.blocks)
    if any(block.ssm is not None for block in spec.blocks):
        compared = dataclasses.replace(compared, ssm_kernel="naive")
        notes.append(SSM_NOTE)
    if any(block.mixer is not None for block in spec.blocks):
        compared = dataclasses.replace(compared, ssm_kernel="naive")
        notes.append(MIXER_NOTE)
    measured = measure_training_step(
        config,
        method="full" if scenario.method == "full" else ("dora" if lora.dora else "lora"),
        lora_rank=lora.rank,
        lora_alpha=int(lora.alpha),
        lora_targets=_lora_targets(scenario, config) if scenario.method != "full" else (),
        lora_dropout=lora.dropout if scenario.method != "full" else 0.0,
        precision=_trace_precision(scenario),
        optimizer=scenario.optimizer,
        micro_batch=scenario.micro_batch,
        seq_len=scenario.seq_len,
        gradient_checkpointing=scenario.activation_checkpointing in ("full", "op"),
        checkpoint_policy="op" if scenario.activation_checkpointing == "op" else "full",
        # transformers runs attention-free models (Mamba, Mamba-2) only with attention "eager"
        attention="eager" if scenario.attention == "eager" or not has_attention else "sdpa",
        loss=resolved_loss(scenario),
        loss_chunks=scenario.loss_chunks,
        optimizer_in_backward=scenario.optimizer_in_backward,
        fsdp=FsdpTrace(
            scenario.gpus,
            scenario.fsdp_wrap,
            scenario.fsdp_reduce_dtype == "fp32",
            scenario.reshard_after_forward,
        )
        if _sharded(scenario)
        else None,
        stage=scenario.stage,
        reference=resolved_reference(scenario),
        reference_dtype=_reference_dtype(scenario) or "bf16",
        completion_len=rollout.completion_len if rollout is not None else 0,
        reward_dtype=_reward_dtype(scenario) if scenario.stage in CRITIC_STAGES else "bf16",
    )
    if _sharded(scenario):
        notes.append(
            "FSDP2 traced as rank 0 of a fake process group (no GPUs, no communication); the "
            "blocks FSDP2's side streams keep reserved are left out of the estimate compared"
        )
    if scenario.grad_accum > 1:
        notes.append("traced with one micro-batch per step (grad_accum 1) on both sides")
    return Comparison(compared, measured, estimate(compared), tuple(notes))


def sample_trace(scenario: Scenario, spec: ModelSpec | None = None) -> MeasuredStep:
    """The traced step of a diffusion, video or JEPA scenario (`measure_sample_step`): the
    sample's geometry from its resolution, frames and text tokens, its LoRA, precision, EMA and
    mask settings mapped onto what the trace runs."""
    from trainplan.engine.measure.sample import measure_sample_step

    spec = spec or resolve_model(scenario.model)
    check_traceable(scenario, spec.kind)
    shape = sample_shape(spec, scenario)
    if shape is None:
        raise InputError(
            "resolution",
            f"a trace of {spec.name} needs the sample size: give resolution (and frames for clips)",
        )
    config = {key: value for key, value in model_config(scenario.model)[0].items() if key != PIPELINE_KEY}
    full = scenario.method == "full"
    if full:
        precision = _trace_precision(scenario)
        base = "bf16"
    else:
        base = str(resolved_base_weights(scenario))
        if base not in ("bf16", "fp32"):
            raise InputError("base_weights", f"a trace runs LoRA over a bf16 or fp32 base, not {base}")
        # accelerate's mixed_precision="bf16" (the diffusers LoRA scripts): autocast over the base
        precision = {"bf16-mixed": "amp-bf16"}.get(scenario.precision, scenario.precision)
    return measure_sample_step(
        config,
        shape,
        method=scenario.method,
        lora_rank=scenario.lora.rank,
        lora_alpha=int(scenario.lora.alpha),
        lora_targets=() if full else _lora_targets(scenario, config),
        lora_dropout=scenario.lora.dropout,
        base_weights=base,
        adapter_dtype="fp32"
        if resolved_adapter_dtype(spec.kind, scenario, PRECISIONS[scenario.precision].compute)[0] == "fp32"
        else base,
        precision=precision,
        optimizer=scenario.optimizer,
        micro_batch=scenario.micro_batch,
        gradient_checkpointing=scenario.activation_checkpointing == "full",
        ema=resolved_ema(spec, scenario),
        mask_ratios=_mask_ratios(spec, scenario),
        jepa_masks=_repo_masks(spec, scenario),
    )


def _repo_masks(spec: ModelSpec, scenario: Scenario) -> tuple[tuple[float, float, int], ...]:
    """An I-JEPA or V-JEPA model's generators as its trace runs them (measure/jepa_repo.py)."""
    if spec.kind != "jepa" or spec.geometry is None or spec.geometry.recipe == "vjepa2":
        return ()
    return tuple((mask.context, mask.target, mask.passes) for mask in jepa_masks(spec, scenario.mask_ratio))


def _mask_ratios(spec: ModelSpec, scenario: Scenario) -> tuple[float, ...]:
    """A JEPA's mask generators as the trace runs them (terms/jepa_masks.py: the published ones,
    or the scenario's one): one hidden share per generator, the predictor run once on each."""
    if spec.kind != "jepa" or spec.geometry is None or spec.geometry.recipe != "vjepa2":
        return ()
    masks = jepa_masks(spec, scenario.mask_ratio)
    if any(mask.passes != 1 or abs(mask.context + mask.target - 1) > 1e-9 for mask in masks):
        raise InputError(
            "mask_ratio",
            f"{spec.name}'s published masks ({masks[0].note}) are not traced yet: give mask_ratio "
            "for one generator the trace can run",
        )
    return tuple(mask.target for mask in masks)


def _measure_sample(scenario: Scenario, spec: ModelSpec) -> Comparison:
    """A diffusion, video or JEPA scenario's trace, with the estimate once trainplan makes one."""
    measured = sample_trace(scenario, spec)
    compared = dataclasses.replace(scenario, overhead_gib=0.0, grad_accum=1)
    notes = [NOT_TRACED, SAMPLE_NOTE]
    try:
        estimated: Estimate | None = estimate(compared, model=spec)
    except InputError as error:
        if error.field != "model":
            raise
        estimated = None
        notes.insert(0, f"{NO_ESTIMATE}: {error.message}")
    if scenario.grad_accum > 1:
        notes.append("traced with one micro-batch per step (grad_accum 1) on both sides")
    return Comparison(compared, measured, estimated, tuple(notes), spec.name)
