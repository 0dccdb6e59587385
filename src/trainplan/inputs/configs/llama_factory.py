"""LLaMA-Factory training YAML (`llamafactory-cli train FILE.yaml`).

Keys: hiyouga/LLaMA-Factory src/llamafactory/hparams/{model_args,finetuning_args,data_args}.py
and examples/train_lora/llama3_lora_sft.yaml: finetuning_type lora | full (freeze and oft are not
modelled); lora_rank (default 8), lora_alpha (default 2 x lora_rank), lora_target "all" or module
names; quantization_bit 4 | 8 (bitsandbytes: QLoRA); cutoff_len; flash_attn auto | fa2 | sdpa |
disabled; enable_liger_kernel; use_unsloth (Unsloth's patches: its recipe); use_unsloth_gc
(offloaded checkpointing); disable_gradient_checkpointing; pure_bf16. The rest are the HF
TrainingArguments (per_device_train_batch_size is per GPU). LLaMA-Factory upcasts the trainable
parameters to fp32 unless pure_bf16 (src/llamafactory/model/adapter.py init_adapter:
cast_trainable_params_to_fp32; under ZeRO-3 they stay fp32 in DeepSpeed's master copy), so
bf16: true trains amp-bf16.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from trainplan.inputs.configs import deepspeed, hf_trainer
from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Default,
    Ignore,
    Rule,
    choice,
    ignored,
    on,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError
from trainplan.specs.stages import SUPERVISED_STAGES, resolved_loss

FORMAT = "llama-factory"
TITLE = "LLaMA-Factory YAML"
SYNTAX = "yaml"
WHOLE = ("deepspeed",)  # an inline DeepSpeed config (TrainingArguments takes a dict too)
EMITS = (
    "method", "micro_batch", "grad_accum", "activation_checkpointing", "activation_offload", "optimizer",
    "precision", "zero_stage", "offload", "loss", "kernels",
)  # fmt: skip


UNMODELLED_METHODS = ("freeze", "oft")


def _method(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    kind = choice(
        "finetuning_type",
        {"lora": "lora", "full": "full", **{name: Ignore("x") for name in UNMODELLED_METHODS}},
        value,
    )
    if isinstance(kind, Ignore):
        raise InputError("finetuning_type", f"{value} is {NOT_MODELLED}; use lora or full, or give --method")
    if kind == "lora" and flat.get("quantization_bit") is not None:
        return {"method": "qlora"}
    return {"method": kind}


def _bits(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    kind = str(flat.get("finetuning_type", "lora")).lower()
    if kind in UNMODELLED_METHODS:
        return Ignore(f"read with finetuning_type {kind}")
    if kind != "lora":
        raise InputError("quantization_bit", "a quantised base needs finetuning_type: lora")
    return {"base_weights": choice("quantization_bit", {4: "nf4", 8: "int8"}, value)}


# Megatron Bridge (USE_MEGATRON_BRIDGE=1): LLaMA-Factory hands the run to Megatron, whose
# MegatronBridgeArguments (hparams/megatron_bridge_args.py) replace the Trainer's precision and
# checkpointing; a file with these keys is one (the Trainer's parser refuses them otherwise).
MEGATRON_BRIDGE = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
    "context_parallel_size", "expert_model_parallel_size", "recompute_granularity", "recompute_method",
    "use_distributed_optimizer", "overlap_param_gather", "mixed_precision", "megatron_pretrained_checkpoint",
    "export_hf_on_finish",
)  # fmt: skip
_MEGATRON_OWNS = "Megatron Bridge: mixed_precision and recompute_granularity decide"


def megatron_bridge(flat: Mapping[str, Any]) -> bool:
    """Whether the file configures a Megatron Bridge run."""
    return any(key in flat for key in MEGATRON_BRIDGE)


def _precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if megatron_bridge(flat):
        return Ignore(_MEGATRON_OWNS)
    if not truthy("bf16", value):
        return Ignore("false")
    return {"precision": "bf16" if flat.get("pure_bf16") is True else "amp-bf16"}


def _fp16(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if megatron_bridge(flat):
        return Ignore(_MEGATRON_OWNS)
    return {"precision": "amp-fp16"} if truthy("fp16", value) else Ignore("false")


def _pure(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if megatron_bridge(flat):
        return Ignore(_MEGATRON_OWNS)
    if not truthy("pure_bf16", value):
        return Ignore("false")
    return Ignore("read with bf16") if "bf16" in flat else {"precision": "bf16"}


def _checkpointing(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if megatron_bridge(flat):
        return Ignore(_MEGATRON_OWNS)
    return {"activation_checkpointing": "none" if truthy("disable_gradient_checkpointing", value) else "full"}


def _mixed_precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """Megatron Bridge's precision recipes by name: bf16_mixed / fp16_mixed keep fp32 main
    parameters in the (distributed) optimizer; the fp8 ones add fp8 matmuls."""
    name = str(value).strip().lower()
    if "fp8" in name:
        return {"precision": "fp8-mixed"}
    found = choice("mixed_precision", {"bf16_mixed": "bf16-mixed", "fp16_mixed": "fp16-mixed"}, name)
    return found if isinstance(found, Ignore) else {"precision": found}


def _recompute(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """full: every layer's input kept and the layer rerun (recompute_method uniform or block over
    recompute_num_layers); selective: the core attention rerun (Korthikanti et al. 2022)."""
    found = choice("recompute_granularity", {"full": "full", "selective": "selective"}, value)
    if isinstance(found, Ignore):
        return found
    if found == "full" and str(flat.get("recompute_method", "")).lower() == "block":
        return Ignore(f"{NOT_MODELLED}: recompute_method block (only some layers recomputed)")
    return {"activation_checkpointing": found}


def _one_or_not_modelled(setting: str, what: str) -> Callable[[Any, Mapping[str, Any]], Ignore]:
    def convert(value: Any, flat: Mapping[str, Any]) -> Ignore:
        if positive_int(setting)(value) == 1:
            return Ignore(IRRELEVANT)
        return Ignore(f"{NOT_MODELLED}: {what}")

    return convert


MEGATRON_RULES: dict[str, Rule] = {
    "tensor_model_parallel_size": to(
        "tensor_parallel", "Megatron tensor-parallel ranks", positive_int("tensor_model_parallel_size")
    ),
    "pipeline_model_parallel_size": to(
        "pipeline_parallel", "Megatron pipeline stages", positive_int("pipeline_model_parallel_size")
    ),
    "virtual_pipeline_model_parallel_size": to(
        "virtual_stages",
        "model chunks per pipeline rank",
        positive_int("virtual_pipeline_model_parallel_size"),
    ),
    "sequence_parallel": to(
        "sequence_parallel", "Megatron sequence parallelism", lambda v: truthy("sequence_parallel", v)
    ),
    "context_parallel_size": Rule(
        "context parallelism", _one_or_not_modelled("context_parallel_size", "context parallelism"), sets=""
    ),
    "expert_model_parallel_size": Rule(
        "expert parallelism",
        _one_or_not_modelled("expert_model_parallel_size", "expert parallelism"),
        sets="",
    ),
    "recompute_granularity": Rule(
        "Megatron activation recomputation", _recompute, sets="activation_checkpointing"
    ),
    "recompute_method": ignored("read with recompute_granularity"),
    "recompute_num_layers": ignored(f"{NOT_MODELLED}: layers per recompute unit"),
    "use_distributed_optimizer": to(
        "zero_stage",
        "Megatron's distributed optimizer shards the fp32 main parameters and states (ZeRO 1)",
        lambda v: 1 if truthy("use_distributed_optimizer", v) else 0,
    ),
    "mixed_precision": Rule("Megatron Bridge's precision recipe", _mixed_precision, sets="precision"),
    "overlap_param_gather": ignored(f"{NOT_MODELLED}: trainplan's comm_overlap applies"),
    "overlap_grad_reduce": ignored(f"{NOT_MODELLED}: trainplan's comm_overlap applies"),
    "megatron_pretrained_checkpoint": ignored(IRRELEVANT),
    "export_hf_on_finish": ignored(IRRELEVANT),
    "use_packed_sequences": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "extra_config": ignored(f"{NOT_MODELLED}: Megatron overrides given as JSON are not read"),
    **{
        key: ignored(f"{NOT_MODELLED}: Megatron's fused kernels")
        for key in (
            "bias_activation_fusion",
            "apply_rope_fusion",
            "masked_softmax_fusion",
            "cross_entropy_loss_fusion",
            "moe_grouped_gemm",
            "moe_token_dispatcher_type",
        )
    },
}


def _targets(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "all":
        return "all-linear"
    return value


# flash_attn (hparams/model_args.py AttentionFunction: auto | disabled | sdpa | fa2 | fa3;
# model/model_utils/attention.py: auto sets no attn_implementation, so transformers' default,
# sdpa, applies); the v1 configs take transformers' own attn_implementation names.
ATTENTION = {
    "auto": "sdpa", "fa2": "flash", "fa3": "flash", "sdpa": "sdpa", "disabled": "eager",
    **hf_trainer.ATTENTION,
}  # fmt: skip


def _attention(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    return {"attention": choice("flash_attn", ATTENTION, value)}


def _predict(value: Any, flat: Mapping[str, Any]) -> Ignore:
    if truthy("do_predict", value) and not on(flat, "do_train"):
        raise InputError(
            "do_predict",
            "a prediction run (do_predict without do_train): nothing is trained, so nothing to size",
        )
    return Ignore(IRRELEVANT)


def _unsloth(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    return {"recipe": "unsloth"} if truthy("use_unsloth", value) else Ignore("false")


#: pref_loss (hparams/finetuning_args.py FinetuningArguments.pref_loss) -> the stage it runs
PREF_STAGES = {
    "sigmoid": "dpo",
    "hinge": "dpo",
    "ipo": "dpo",
    "kto_pair": "dpo",
    "orpo": "orpo",
    "simpo": "simpo",
}
#: DPO's (and ORPO's and SimPO's) trainer scores log-probs over the full fp32 logits
#: (train/dpo/trainer.py CustomDPOTrainer.concatenated_forward: `model(**batch).logits.to(
#: torch.float32)`, then get_batch_logps' log-softmax): loss logsoftmax
_OWN_LOGITS = (
    "LLaMA-Factory's own DPO trainer: the full fp32 logits' log-softmax, the policy's logits held "
    "while the reference is scored (loss logsoftmax)"
)
_KTO_LOGITS = (
    "LLaMA-Factory's own KTO trainer scores the full logits; its order is not modelled yet: the "
    "loss side is estimated as the standard loss's"
)
_VALUE_HEAD = (
    "LLaMA-Factory trains a value head on the causal LM (trl's AutoModelForCausalLMWithValueHead, "
    "train/rm/workflow.py): its LM head stays loaded and writes logits it does not train; "
    "estimated as a one-score sequence-classification model"
)


def _stage(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """FinetuningArguments.stage: pt and sft train one model; rm a reward model; dpo (with
    pref_loss orpo or simpo: those stages) and kto a policy against a reference. The reference
    (finetuning_args.py `use_ref_model`: dpo unless orpo or simpo; kto always, kto/workflow.py):
    `ref_model` names a frozen model (quantised by ref_model_quantization_bit); otherwise a
    LoRA policy disables its adapters and a full fine-tune loads the model again
    (train/trainer_utils.py create_ref_model), frozen at the compute dtype (load_model with
    is_trainable=False: no fp32 upcast)."""
    kind = str(value).strip().lower()
    if kind in SUPERVISED_STAGES:
        return {"stage": kind}
    if kind == "rm":
        return {"stage": "rm", "_note": _VALUE_HEAD}
    if kind == "ppo":
        # train/ppo/workflow.py at ff6d4d12: load_model(..., add_valuehead=True), TRL 0.8's
        # PPOTrainer: the value head shares the policy's backbone, unlike TRL's PPOTrainer (a
        # value model of its own) that stage ppo models
        return Ignore(
            f"{NOT_MODELLED}: LLaMA-Factory's PPO puts the value head on the policy's own backbone "
            "(TRL 0.8's PPOTrainer); trainplan's stage ppo is TRL's, with a value model of its own"
        )
    if kind not in ("dpo", "kto"):
        return Ignore(f"{NOT_MODELLED}: stage {kind} generates rollouts with reward and value models")
    stage = (
        PREF_STAGES.get(str(flat.get("pref_loss") or "sigmoid").strip().lower(), "dpo")
        if kind == "dpo"
        else kind
    )
    fields: dict[str, Any] = {"stage": stage}
    if stage == "kto":
        fields |= {"loss": "standard", "_note": _KTO_LOGITS}
    else:
        fields |= {"loss": "logsoftmax", "_note": _OWN_LOGITS}
    if stage in ("dpo", "kto"):
        fields |= _reference_model(flat)
    return fields


def _reference_model(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The reference of a dpo or kto stage (see `_stage`)."""
    bits = flat.get("ref_model_quantization_bit")
    if flat.get("ref_model") is not None:
        quantised = {4: "nf4", 8: "int8"}.get(bits) if isinstance(bits, int) else None
        return {"reference": "model"} | ({"reference_weights": quantised} if quantised else {})
    if str(flat.get("finetuning_type") or "lora").strip().lower() == "lora":
        return {"reference": "adapter"}
    compute = "bf16" if on(flat, "bf16") else "fp16" if on(flat, "fp16") else "fp32"
    return {"reference": "model", "reference_weights": compute}


def _implied_alpha(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """lora_alpha unset: 2 x lora_rank (hparams/finetuning_args.py __post_init__)."""
    if str(flat.get("finetuning_type") or "lora").lower() != "lora" or flat.get("lora_alpha") is not None:
        return {}
    rank = flat.get("lora_rank") or 8
    if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0:
        return {"lora.alpha": (2 * rank, "LLaMA-Factory default: lora_alpha = 2 x lora_rank")}
    return {}


RULES: dict[str, Rule] = {
    **hf_trainer.RULES,
    "finetuning_type": Rule("lora | full (a quantised base: QLoRA)", _method, sets="method"),
    "quantization_bit": Rule("4 = NF4, 8 = LLM.int8() base (bitsandbytes)", _bits, sets="base_weights"),
    "quantization_method": ignored(f"{NOT_MODELLED}: bitsandbytes assumed (HQQ, EETQ, GPTQ not modelled)"),
    "quantization_type": ignored(f"{NOT_MODELLED}: nf4 and fp4 take the same bytes"),
    "double_quantization": ignored(f"{NOT_MODELLED}: nf4 is counted with double quantisation"),
    "lora_rank": to("lora.rank", "LoRA rank", positive_int("lora_rank")),
    "lora_target": to("lora.targets", "all = every linear layer, or module names", _targets),
    "additional_target": ignored(f"{NOT_MODELLED}: fully trained extra modules"),
    "use_dora": to("lora.dora", "DoRA", lambda value: truthy("use_dora", value)),
    "use_rslora": ignored(f"{IRRELEVANT} (a scaling rule)"),
    "loraplus_lr_ratio": ignored(IRRELEVANT),
    "pissa_init": ignored(IRRELEVANT),
    "pissa_convert": ignored(IRRELEVANT),
    "cutoff_len": to("seq_len", "tokens per sequence", positive_int("cutoff_len")),
    "bf16": Rule(
        "trainable parameters upcast to fp32 under bf16 autocast (pure_bf16: no upcast)",
        _precision,
        sets="precision",
    ),
    "fp16": Rule("fp16 autocast over fp32 trainable parameters", _fp16, sets="precision"),
    "pure_bf16": Rule("bf16 weights, grads and states", _pure, sets="precision"),
    "flash_attn": Rule("attention kernel", _attention, sets="attention"),
    "enable_liger_kernel": Rule(
        "Liger's fused linear + cross-entropy and its RMSNorm, RoPE and SwiGLU kernels",
        lambda value, flat: (
            # the preference trainers call the model without labels: Liger's loss does not run
            (
                {"kernels": "liger"}
                if str(flat.get("stage") or "sft").lower() in ("dpo", "kto", "rm")
                else {"loss": "fused", "kernels": "liger"}
            )
            if truthy("enable_liger_kernel", value)
            else Ignore("false")
        ),
        sets="loss, kernels",
    ),
    "use_unsloth": Rule("Unsloth's kernels and defaults (its recipe)", _unsloth, sets="recipe"),
    "use_unsloth_gc": to(
        "activation_offload", "Unsloth's offloaded checkpointing", lambda v: truthy("use_unsloth_gc", v)
    ),
    "disable_gradient_checkpointing": Rule("true = none", _checkpointing, sets="activation_checkpointing"),
    "upcast_layernorm": ignored(f"{NOT_MODELLED}: small fp32 norms"),
    "upcast_lmhead_output": ignored(f"{NOT_MODELLED}: an fp32 copy of the logits"),
    "stage": Rule("training stage", _stage, sets="stage, loss, reference, reference_weights"),
    "do_predict": Rule("a prediction run without training is refused", _predict, sets=""),
    "packing": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "neat_packing": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "freeze_vision_tower": ignored(NOT_MODELLED),
    "freeze_multi_modal_projector": ignored(NOT_MODELLED),
    "image_max_pixels": ignored(NOT_MODELLED),
    "infer_backend": ignored(IRRELEVANT),
    "shift_attn": ignored(NOT_MODELLED),
    "rope_scaling": ignored(NOT_MODELLED),
    "mix_of_reasoning": ignored(IRRELEVANT),
    "streaming": ignored(IRRELEVANT),
    "buffer_size": ignored(IRRELEVANT),
    "tokenized_path": ignored(IRRELEVANT),
    "pref_beta": ignored(IRRELEVANT),
    "pref_loss": ignored("read with stage: orpo and simpo are stages of their own, the others dpo"),
    "ref_model": ignored("read with stage: a frozen reference model"),
    "ref_model_quantization_bit": ignored("read with stage: the frozen reference's format"),
    "ref_model_adapters": ignored(f"{IRRELEVANT}: merged into the frozen reference"),
    # RayArguments (hparams/training_args.py): under USE_RAY=1 run_exp starts ray_num_workers
    # training workers, one GPU each (train/tuner.py)
    "ray_num_workers": to("gpus", "Ray workers under USE_RAY=1, a GPU each", positive_int("ray_num_workers")),
    "ray_*": ignored(IRRELEVANT),
    **MEGATRON_RULES,
}


def detect(data: Mapping[str, Any]) -> bool:
    """LLaMA-Factory's own keys."""
    return "finetuning_type" in data or "cutoff_len" in data or ("stage" in data and "template" in data)


def recipe(flat: Mapping[str, Any]) -> str:
    """LLaMA-Factory's defaults; Megatron's for a Megatron Bridge run."""
    return "megatron" if megatron_bridge(flat) else "llama-factory"


DEFAULTS = {
    "finetuning_type": Default("lora", "llama_factory", "FinetuningArguments.finetuning_type"),
    "disable_gradient_checkpointing": Default(
        False, "llama_factory", "BaseModelArguments.disable_gradient_checkpointing"
    ),
    "flash_attn": Default("auto", "llama_factory", "BaseModelArguments.flash_attn"),
    "cutoff_len": Default(2048, "llama_factory", "DataArguments.cutoff_len"),
}
LORA_DEFAULTS = {
    "lora_rank": Default(8, "llama_factory", "LoraArguments.lora_rank"),
    "lora_dropout": Default(0.0, "llama_factory", "LoraArguments.lora_dropout"),
    "lora_target": Default("all", "llama_factory", "LoraArguments.lora_target"),
}


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """LLaMA-Factory's hparams defaults (its LoRA ones for a LoRA run) over the Trainer's own
    (LLaMA-Factory's training arguments are transformers' Seq2SeqTrainingArguments), whose
    gradient_checkpointing LLaMA-Factory replaces with disable_gradient_checkpointing."""
    trainer = {
        key: value for key, value in hf_trainer.TRAINER_DEFAULTS.items() if key != "gradient_checkpointing"
    }
    lora = str(flat.get("finetuning_type") or "lora").lower() == "lora"
    mine = dict(DEFAULTS)
    if on(flat, "use_unsloth"):
        del mine["flash_attn"]  # Unsloth patches the attention itself (its recipe)
    if megatron_bridge(flat):
        del mine["disable_gradient_checkpointing"]
        mine |= MEGATRON_DEFAULTS
    return {**trainer, **mine, **(LORA_DEFAULTS if lora else {})}


MEGATRON_DEFAULTS = {
    name: Default(value, "llama_factory", f"MegatronBridgeArguments.{name}")
    for name, value in (("mixed_precision", "bf16_mixed"), ("use_distributed_optimizer", True))
}


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """LLaMA-Factory's rule for the LoRA alpha; a Megatron Bridge run without
    recompute_granularity recomputes nothing (MegatronBridgeArguments.recompute_granularity None)."""
    found = _implied_alpha(flat)
    if megatron_bridge(flat) and flat.get("recompute_granularity") is None:
        found["activation_checkpointing"] = ("none", "no recompute_granularity: Megatron recomputes nothing")
    return found


# The layouts `emit` can write (plan --emit llama-factory searches only these): data
# parallelism and DeepSpeed ZeRO, every block checkpointed or none.
PLAN_AXES: dict[str, tuple[Any, ...]] = {
    "tensor_parallel": (1,), "pipeline_parallel": (1,), "context_parallel": (1,),
    "checkpointing": ("none", "full"),
}  # fmt: skip


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan as LLaMA-Factory keys; sharding as an inline DeepSpeed config."""
    notes: list[str] = []
    data: dict[str, Any] = {"finetuning_type": "full" if scenario.method == "full" else "lora"}
    if scenario.method == "qlora":
        data["quantization_bit"] = 8 if scenario.base_weights == "int8" else 4
    data["per_device_train_batch_size"] = scenario.micro_batch
    data["gradient_accumulation_steps"] = scenario.grad_accum
    data["disable_gradient_checkpointing"] = scenario.activation_checkpointing == "none"
    if scenario.activation_checkpointing not in ("none", "full"):
        notes.append(
            f"activation_checkpointing {scenario.activation_checkpointing}: LLaMA-Factory checkpoints "
            "every block"
        )
    if scenario.activation_offload:
        data["use_unsloth_gc"] = True
    if scenario.optimizer in hf_trainer.OPTIM_NAMES:
        data["optim"] = hf_trainer.OPTIM_NAMES[scenario.optimizer]
    else:
        notes.append(f"optimizer {scenario.optimizer}: no optim name")
    sharded = bool(scenario.zero_stage) or scenario.offload != "none"
    if sharded and scenario.precision in ("bf16-mixed", "fp16-mixed"):
        data[scenario.precision[:4]] = True  # DeepSpeed keeps the fp32 master
    elif not sharded and scenario.precision in ("amp-bf16", "bf16", "amp-fp16"):
        data["fp16" if scenario.precision == "amp-fp16" else "bf16"] = True
        if scenario.precision == "bf16":
            data["pure_bf16"] = True
    else:
        where = (
            "under DeepSpeed: bf16-mixed or fp16-mixed"
            if sharded
            else "amp-bf16, bf16 (pure_bf16) or amp-fp16"
        )
        notes.append(f"precision {scenario.precision}: LLaMA-Factory trains {where}")
    if resolved_loss(scenario) == "fused" or scenario.kernels == "liger":
        data["enable_liger_kernel"] = True
        together = "enable_liger_kernel turns on Liger's fused loss and its layer kernels together"
        if resolved_loss(scenario) != "fused":
            notes.append(f"loss {resolved_loss(scenario)}: {together}")
        if scenario.kernels == "eager":
            notes.append(f"kernels eager: {together}")
    elif resolved_loss(scenario) != "standard":
        notes.append(f"loss {resolved_loss(scenario)}: no LLaMA-Factory switch")
    if scenario.kernels == "unsloth":
        notes.append("kernels unsloth: set use_unsloth")
    if scenario.zero_stage or scenario.offload != "none":
        config, ds_notes = deepspeed.emit(scenario)
        for key in (
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "optimizer",
            "bf16",
            "fp16",
        ):
            config.pop(key, None)
        data["deepspeed"] = config
        notes += [note for note in ds_notes if not note.startswith(("precision", "optimizer"))]
    for name in ("tensor_parallel", "pipeline_parallel"):
        if getattr(scenario, name) > 1:
            notes.append(
                f"{name} {getattr(scenario, name)}: not written (LLaMA-Factory: data parallel and ZeRO)"
            )
    return data, notes
