"""LLaMA-Factory's v1 trainer YAML (`llamafactory-cli v1 train FILE.yaml`, examples/v1/).

Keys: hiyouga/LLaMA-Factory src/llamafactory/v1/config/{model_args,training_args}.py: `model`;
`peft_config` (name lora with r, lora_alpha, lora_dropout, target_modules "all"; none: the full
model), `quant_config` (name bnb or auto, quantization_bit 4 or 8: QLoRA), `dist_config` (name
fsdp2 or fsdpturbo: FSDP2 full sharding; deepspeed with its config_file; none: DDP);
micro_batch_size per GPU and global_batch_size over all of them (default: no accumulation);
cutoff_len; bf16 (default true: the checkpoint's dtype, dtype="auto" in core/model_engine.py,
under FSDP2's bf16 policy; DeepSpeed's own bf16 block otherwise); enable_activation_checkpointing
(default true); flash_attn eager | sdpa | flash_attention_2; torch.optim.AdamW (foreach) unless
optim_config names another (core/base_trainer.py _init_optimizer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.configs import hf_trainer
from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Default,
    Ignore,
    Rule,
    choice,
    ignored,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError

FORMAT = "llama-factory-v1"
TITLE = "LLaMA-Factory v1 YAML"
SYNTAX = "yaml"


def _peft(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    kind = choice("peft_config.name", {"lora": "lora", "freeze": "freeze"}, value)
    if kind == "freeze":
        raise InputError(
            "peft_config.name", f"freeze is {NOT_MODELLED}; use lora or no peft_config, or give --method"
        )
    return {"method": "qlora" if flat.get("quant_config.quantization_bit") is not None else "lora"}


def _bits(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    if flat.get("peft_config.name") is None:
        raise InputError("quant_config.quantization_bit", "a quantised base needs peft_config: lora")
    return {"base_weights": choice("quant_config.quantization_bit", {4: "nf4", 8: "int8"}, value)}


def _dist(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    kind = choice(
        "dist_config.name",
        {"fsdp2": "fsdp", "fsdpturbo": "fsdp", "deepspeed": "deepspeed", "ddp": "ddp"},
        value,
    )
    if kind == "fsdp":
        # v1/plugins/trainer_plugins/distributed/fsdp2.py: each decoder layer its own unit, the
        # input embedding only when untied and the head never (:262-271), so the head stays in
        # the root; gradients reduced in fp32 for bf16 and fp32 alike (get_mp_policy, :206-213)
        return {"zero_stage": 3, "_backend": "FSDP", "fsdp_wrap": "root", "fsdp_reduce_dtype": "fp32"}
    if kind == "deepspeed":
        return Ignore("read with dist_config.config_file")
    return {"zero_stage": 0}


def _precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if str(flat.get("dist_config.name", "")).lower() == "deepspeed":
        return Ignore("DeepSpeed's config decides (its bf16 block)")
    return {"precision": "bf16" if truthy("bf16", value) else "fp32"}


def _targets(value: Any) -> Any:
    return "all-linear" if isinstance(value, str) and value.strip().lower() == "all" else value


RULES: dict[str, Rule] = {
    "model": to("model", "catalog name, Hub id or local path"),
    "model_class": ignored(f"{IRRELEVANT}: the model's own classes decide"),
    "peft_config.name": Rule("lora (with quant_config: QLoRA); none: the full model", _peft, sets="method"),
    "peft_config.r": to("lora.rank", "LoRA rank", positive_int("peft_config.r")),
    "peft_config.lora_alpha": to("lora.alpha", "LoRA alpha"),
    "peft_config.lora_dropout": to("lora.dropout", "LoRA dropout"),
    "peft_config.target_modules": to("lora.targets", "all = every linear layer, or module names", _targets),
    "peft_config.*": ignored(IRRELEVANT),
    "quant_config.quantization_bit": Rule(
        "4 = NF4, 8 = LLM.int8() base (bitsandbytes)", _bits, sets="base_weights"
    ),
    "quant_config.*": ignored(f"{NOT_MODELLED}: bitsandbytes assumed"),
    "dist_config.name": Rule("fsdp2 = ZeRO 3; deepspeed: its config file", _dist, sets="zero_stage"),
    "dist_config.config_file": to("_reference", "a DeepSpeed JSON file", lambda value: value),
    "dist_config.*": ignored(IRRELEVANT),
    "micro_batch_size": to("micro_batch", "per GPU", positive_int("micro_batch_size")),
    "global_batch_size": to(
        "_global_batch",
        "all GPUs: micro x data-parallel GPUs x accumulation",
        positive_int("global_batch_size"),
    ),
    "cutoff_len": to("seq_len", "tokens per sequence", positive_int("cutoff_len")),
    "max_steps": to("steps", "optimizer steps", positive_int("max_steps")),
    "bf16": Rule(
        "bf16 weights (the checkpoint's dtype) under FSDP2's bf16 policy", _precision, sets="precision"
    ),
    "enable_activation_checkpointing": to(
        "activation_checkpointing",
        "every block",
        lambda v: "full" if truthy("enable_activation_checkpointing", v) else "none",
    ),
    "flash_attn": to(
        "attention", "attention kernel", lambda value: choice("flash_attn", hf_trainer.ATTENTION, value)
    ),
    "optim_config.name": ignored(f"{NOT_MODELLED}: the v1 optimizer plugins (muon, ...)"),
    "optim_config.*": ignored(IRRELEVANT),
    "kernel_config*": ignored(f"{NOT_MODELLED}: the v1 kernel plugins"),
    "cp_size": Rule(
        "context parallelism",
        lambda value, flat: Ignore("1: none" if value == 1 else f"{NOT_MODELLED}: context parallelism"),
        sets="",
    ),
    "cp_mode": ignored(f"{NOT_MODELLED}: context parallelism"),
    "dp_size": ignored("the GPUs left after the other degrees"),
    "mp_replicate_size": ignored(f"{NOT_MODELLED}: the replicas of hybrid sharding (HSDP)"),
    "mp_shard_size": ignored(f"{NOT_MODELLED}: the shard group of hybrid sharding (HSDP)"),
    "batching_strategy": ignored(f"{IRRELEVANT}: trainplan counts every sequence as cutoff_len tokens"),
    "batching_workers": ignored(IRRELEVANT),
    "train_dataset": ignored(IRRELEVANT),
    "eval_dataset": ignored(IRRELEVANT),
    "init_config*": ignored(IRRELEVANT),
    "sample_*": ignored(IRRELEVANT),
    "max_new_tokens": ignored(IRRELEVANT),
    "dist_timeout": ignored(IRRELEVANT),
    "full_determinism": ignored(IRRELEVANT),
    "save_ckpt_as_hf": ignored(IRRELEVANT),
    "num_train_epochs": ignored(f"{NOT_MODELLED}: trainplan does not read the dataset; give dataset_tokens"),
}
V1_KEYS = ("peft_config", "quant_config", "dist_config", "kernel_config", "model_class", "micro_batch_size")


def detect(data: Mapping[str, Any]) -> bool:
    """A `model` key with the v1 trainer's own (v0 and the HF Trainer name it model_name_or_path)."""
    return "model" in data and not isinstance(data["model"], Mapping) and any(key in data for key in V1_KEYS)


def recipe(flat: Mapping[str, Any]) -> None:
    """The v1 trainer's defaults are its own arguments' (`defaults`), not a recipe's."""
    return None


DEFAULTS = {
    "micro_batch_size": Default(1, "llama_factory_v1", "TrainingArguments.micro_batch_size"),
    "cutoff_len": Default(2048, "llama_factory_v1", "TrainingArguments.cutoff_len"),
    "bf16": Default(True, "llama_factory_v1", "TrainingArguments.bf16"),
    "enable_activation_checkpointing": Default(
        True, "llama_factory_v1", "TrainingArguments.enable_activation_checkpointing"
    ),
    "flash_attn": Default("sdpa", "llama_factory_v1", "ModelArguments.flash_attn"),
}


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """The v1 trainer's argument defaults (v1/config/*.py)."""
    return DEFAULTS


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """No peft_config: the full model; no global_batch_size: no accumulation; no optim_config:
    torch's AdamW."""
    found: dict[str, tuple[Any, str]] = {}
    if flat.get("peft_config.name") is None:
        found["method"] = ("full", "no peft_config: the full model is trained")
    if flat.get("global_batch_size") is None:
        found["grad_accum"] = (1, "no global_batch_size: micro-batch x data-parallel GPUs, no accumulation")
    if flat.get("optim_config.name") is None:
        found["optimizer"] = ("adamw", "no optim_config: torch.optim.AdamW (core/base_trainer.py)")
    return found
