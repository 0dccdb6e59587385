"""axolotl YAML configs.

Keys: axolotl docs, "Config Reference" (docs/config-reference.qmd) and examples/llama-3/*.yml:
micro_batch_size is per GPU; adapter lora | qlora (qlora needs load_in_4bit); lora_target_linear
adapts every linear layer; gradient_checkpointing true | "offload" (activations to the CPU);
bf16 / bfloat16 load the model in bf16 (src/axolotl/utils/config/__init__.py: normalize_config
sets torch_dtype to bfloat16 when either is on, and the loader passes it to from_pretrained), so
the Trainer steps bf16 weights and states; fp16 loads it in fp16; flash_attention /
sdp_attention / eager_attention; deepspeed: a JSON path; fsdp_config: the fsdp_* keys; plugins
with liger_fused_linear_cross_entropy or cut_cross_entropy replace the cross-entropy with a
fused one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.configs import hf_trainer
from trainplan.configs.accelerate import fsdp_rules
from trainplan.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Convert,
    Ignore,
    Rule,
    choice,
    ignored,
    positive_int,
    to,
    truthy,
)
from trainplan.errors import InputError

FORMAT = "axolotl"
TITLE = "axolotl YAML"
SYNTAX = "yaml"
EMITS = (
    "method", "micro_batch", "grad_accum", "activation_checkpointing", "activation_offload", "optimizer",
    "precision", "zero_stage", "offload", "loss", "kernels", "compile",
)  # fmt: skip


def _adapter(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    kind = choice("adapter", {"lora": "lora", "qlora": "qlora"}, value)
    if kind == "lora" and (flat.get("load_in_4bit") is True or flat.get("load_in_8bit") is True):
        return {"method": "qlora"}  # LoRA over a quantised base, prepared for k-bit training
    return {"method": kind}


def _quantised(bits: str, dtype: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if not truthy(f"load_in_{bits}", value):
            return Ignore("false")
        if flat.get("adapter") is None:
            raise InputError(f"load_in_{bits}", "a quantised base needs adapter: lora or qlora")
        return {"base_weights": dtype}

    return convert


def _precision(setting: str, result: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return {
                "precision": result
            }  # auto: bf16 where the GPU has it (every GPU trainplan sizes for bf16)
        return {"precision": result} if truthy(setting, value) else Ignore("false")

    return convert


def _checkpointing(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if isinstance(value, str) and value.strip().lower() in ("offload", "unsloth"):
        return {"activation_checkpointing": "full", "activation_offload": True}
    if isinstance(value, str) and value.strip().lower() == "offload_disk":
        raise InputError("gradient_checkpointing", "offload_disk is not modelled yet; use true or offload")
    return {"activation_checkpointing": "full" if truthy("gradient_checkpointing", value) else "none"}


def _attention(kind: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        return {"attention": kind} if truthy(f"{kind}_attention", value) else Ignore("false")

    return convert


def _fused_loss(setting: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        return {"loss": "fused"} if truthy(setting, value) else Ignore("false")

    return convert


def _liger_kernels(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if not truthy("liger_glu_activation", value):
        return Ignore("false")
    if not truthy("liger_rms_norm", flat.get("liger_rms_norm", False)):
        return Ignore("kernels: liger counts Liger's RMSNorm and GLU kernels together; liger_rms_norm is off")
    return {"kernels": "liger"}


def _targets_linear(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    return {"lora.targets": "all-linear"} if truthy("lora_target_linear", value) else Ignore("false")


def _target_modules(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if flat.get("lora_target_linear") is True:
        return Ignore("lora_target_linear adapts every linear layer already")
    return {"lora.targets": value}


FSDP_STRATEGY_KEYS = tuple(
    f"fsdp_config.{prefix}{key}"
    for prefix in ("", "fsdp_")
    for key in ("sharding_strategy", "reshard_after_forward")
)


def _fsdp(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if any(path in flat for path in FSDP_STRATEGY_KEYS):
        return Ignore("read with fsdp_config")
    return hf_trainer.fsdp_option("fsdp", value)


RULES: dict[str, Rule] = {
    "base_model": to("model", "catalog name, Hub id or local path"),
    "base_model_config": ignored(f"{IRRELEVANT}: base_model names the model"),
    "model_type": ignored(IRRELEVANT),
    "tokenizer_type": ignored(IRRELEVANT),
    "is_llama_derived_model": ignored(IRRELEVANT),
    "adapter": Rule("lora | qlora (LoRA over a 4/8-bit base is QLoRA)", _adapter, sets="method"),
    "load_in_4bit": Rule("4-bit NF4 base", _quantised("4bit", "nf4"), sets="base_weights"),
    "load_in_8bit": Rule("8-bit LLM.int8() base", _quantised("8bit", "int8"), sets="base_weights"),
    "lora_r": to("lora.rank", "LoRA rank", positive_int("lora_r")),
    "lora_alpha": to("lora.alpha", "LoRA alpha"),
    "lora_dropout": to("lora.dropout", "LoRA dropout"),
    "lora_target_modules": Rule("module names", _target_modules, sets="lora.targets"),
    "lora_target_linear": Rule("every linear layer", _targets_linear, sets="lora.targets"),
    "peft_use_dora": to("lora.dora", "DoRA", lambda value: truthy("peft_use_dora", value)),
    "lora_modules_to_save": ignored(f"{NOT_MODELLED}: fully trained extra modules"),
    "lora_fan_in_fan_out": ignored(IRRELEVANT),
    "peft_use_rslora": ignored(f"{IRRELEVANT} (a scaling rule)"),
    "bnb_config_kwargs*": ignored(f"{NOT_MODELLED}: nf4 is counted with double quantisation"),
    "sequence_len": to("seq_len", "tokens per sequence", positive_int("sequence_len")),
    "sample_packing": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "eval_sample_packing": ignored(IRRELEVANT),
    "pad_to_sequence_len": ignored(f"{IRRELEVANT}: sequences are counted at seq_len"),
    "micro_batch_size": to("micro_batch", "per GPU", positive_int("micro_batch_size")),
    "gradient_accumulation_steps": to(
        "grad_accum", "micro-batches per step", positive_int("gradient_accumulation_steps")
    ),
    "batch_size": ignored(
        f"{NOT_MODELLED}: a per-GPU total (micro x accumulation); give gradient_accumulation_steps"
    ),
    "gradient_checkpointing": Rule(
        "true = every block; offload = also move activations to the CPU",
        _checkpointing,
        sets="activation_checkpointing, activation_offload",
    ),
    "gradient_checkpointing_kwargs*": ignored(f"{IRRELEVANT} (use_reentrant)"),
    "activation_offloading": to(
        "activation_offload", "saved activations on the CPU", lambda v: truthy("activation_offloading", v)
    ),
    "optimizer": hf_trainer.optimizer("optimizer"),
    "bf16": Rule(
        "bf16 weights (torch_dtype), so bf16 grads and states", _precision("bf16", "bf16"), sets="precision"
    ),
    "bfloat16": Rule("pure bf16, no autocast", _precision("bfloat16", "bf16"), sets="precision"),
    "fp16": Rule("fp16 weights with loss scaling", _precision("fp16", "fp16-mixed"), sets="precision"),
    "float16": ignored(f"{NOT_MODELLED}: pure fp16"),
    "tf32": ignored(f"{NOT_MODELLED}: TF32 matmuls for fp32 work"),
    "flash_attention": Rule("FlashAttention-2", _attention("flash"), sets="attention"),
    "sdp_attention": Rule("PyTorch sdpa", _attention("sdpa"), sets="attention"),
    "eager_attention": Rule("eager attention (scores materialised)", _attention("eager"), sets="attention"),
    "xformers_attention": ignored(f"{NOT_MODELLED}: xformers"),
    "flash_attn_cross_entropy": ignored(NOT_MODELLED),
    "flash_attn_rms_norm": ignored(NOT_MODELLED),
    "flash_attn_fuse_qkv": ignored(NOT_MODELLED),
    "flash_attn_fuse_mlp": ignored(NOT_MODELLED),
    "deepspeed": hf_trainer.RULES["deepspeed"],
    "fsdp": Rule("FSDP options", _fsdp, sets="zero_stage, offload"),
    "fsdp_version": ignored(f"{IRRELEVANT}: FSDP1 and FSDP2 shard the same states"),
    **fsdp_rules("fsdp_config."),
    "fsdp_config.*": ignored(IRRELEVANT),
    "plugins": ignored("read through the settings each plugin adds"),
    "liger_fused_linear_cross_entropy": Rule(
        "Liger fused linear + cross-entropy", _fused_loss("liger_fused_linear_cross_entropy"), sets="loss"
    ),
    "cut_cross_entropy": Rule("Cut Cross-Entropy", _fused_loss("cut_cross_entropy"), sets="loss"),
    "liger_cross_entropy": ignored(f"{NOT_MODELLED}: Liger's unfused cross-entropy"),
    "liger_rope": ignored(f"{NOT_MODELLED}: small fused kernels"),
    "liger_rms_norm": ignored("read with liger_glu_activation (kernels: liger counts both)"),
    "liger_glu_activation": Rule("Liger's RMSNorm and GLU kernels", _liger_kernels, sets="kernels"),
    "liger_layer_norm": ignored(f"{NOT_MODELLED}: small fused kernels"),
    "torch_compile": to("compile", "torch.compile", lambda value: truthy("torch_compile", value)),
    "torch_compile_backend": ignored(IRRELEVANT),
    "max_steps": to("steps", "optimizer steps", positive_int("max_steps")),
    "num_epochs": ignored(f"{NOT_MODELLED}: trainplan does not read the dataset; give dataset_tokens"),
    "dataset_prepared_path": ignored(IRRELEVANT),
    "evals_per_epoch": ignored(IRRELEVANT),
    "saves_per_epoch": ignored(IRRELEVANT),
    "eval_table_size": ignored(IRRELEVANT),
    "eval_max_new_tokens": ignored(IRRELEVANT),
    "xformers_attention_*": ignored(NOT_MODELLED),
    "gptq": ignored(f"{NOT_MODELLED}: GPTQ bases"),
    "unfrozen_parameters": ignored(f"{NOT_MODELLED}: partly frozen full fine-tunes"),
}


def detect(data: Mapping[str, Any]) -> bool:
    """axolotl's own keys."""
    markers = ("base_model", "sequence_len", "adapter", "lora_target_linear")
    return "micro_batch_size" in data or sum(key in data for key in markers) >= 2


def recipe(flat: Mapping[str, Any]) -> str:
    """axolotl's defaults."""
    return "axolotl"


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """No adapter: axolotl trains the full model."""
    return {} if flat.get("adapter") else {"method": ("full", "no adapter: a full fine-tune")}


OPTIMIZERS = {value: key for key, value in reversed(hf_trainer.OPTIM.items()) if isinstance(value, str)}
OPTIMIZERS |= {"adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused", "adamw-8bit": "adamw_bnb_8bit"}


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan as axolotl keys; a DeepSpeed stage or FSDP block when the plan shards."""
    notes: list[str] = []
    data: dict[str, Any] = {}
    if scenario.method != "full":
        data["adapter"] = scenario.method
        if scenario.method == "qlora":
            data["load_in_4bit" if scenario.base_weights in (None, "nf4") else "load_in_8bit"] = True
    data["micro_batch_size"] = scenario.micro_batch
    data["gradient_accumulation_steps"] = scenario.grad_accum
    checkpointing = scenario.activation_checkpointing
    if checkpointing in ("full", "none"):
        data["gradient_checkpointing"] = (
            "offload" if checkpointing == "full" and scenario.activation_offload else checkpointing == "full"
        )
    else:
        data["gradient_checkpointing"] = True
        notes.append(f"activation_checkpointing {checkpointing}: axolotl checkpoints every block")
    if scenario.activation_offload and checkpointing != "full":
        data["activation_offloading"] = True
    if scenario.optimizer in OPTIMIZERS:
        data["optimizer"] = OPTIMIZERS[scenario.optimizer]
    else:
        notes.append(f"optimizer {scenario.optimizer}: no axolotl name")
    if scenario.precision == "bf16":
        data["bf16"] = True
    elif scenario.precision == "fp16-mixed":
        data["fp16"] = True
    else:
        notes.append(f"precision {scenario.precision}: axolotl trains bf16 (bf16: true) or fp16")
    if scenario.loss == "fused" or scenario.kernels == "liger":
        data["plugins"] = ["axolotl.integrations.liger.LigerPlugin"]
    if scenario.loss == "fused":
        data["liger_fused_linear_cross_entropy"] = True
    elif scenario.loss != "standard":
        notes.append(f"loss {scenario.loss}: no axolotl switch")
    if scenario.kernels == "liger":
        data.update(liger_rope=True, liger_rms_norm=True, liger_glu_activation=True)
    elif scenario.kernels == "unsloth":
        notes.append("kernels unsloth: axolotl has no switch for Unsloth's kernels")
    if scenario.compile:
        data["torch_compile"] = True
    if scenario.zero_stage in (2, 3):
        data["fsdp"] = ["full_shard" if scenario.zero_stage == 3 else "shard_grad_op", "auto_wrap"]
        if scenario.offload == "optimizer+params":
            data["fsdp"].append("offload")
        elif scenario.offload == "optimizer":
            notes.append("offload optimizer: FSDP offloads parameters too; use --emit deepspeed")
    elif scenario.zero_stage == 1 or scenario.offload != "none":
        notes.append(f"zero_stage {scenario.zero_stage}, offload {scenario.offload}: use --emit deepspeed")
    for name in ("tensor_parallel", "pipeline_parallel"):
        if getattr(scenario, name) > 1:
            notes.append(
                f"{name} {getattr(scenario, name)}: not written (axolotl: data parallel and sharding)"
            )
    return data, notes
