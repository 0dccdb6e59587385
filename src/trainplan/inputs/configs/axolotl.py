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

from collections.abc import Callable, Mapping
from typing import Any

from trainplan.inputs.configs import hf_trainer
from trainplan.inputs.configs.accelerate import fsdp_rules, fsdp_wrap
from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Convert,
    Default,
    Ignore,
    Rule,
    choice,
    fraction,
    fsdp_offload_note,
    ignored,
    on,
    onto,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError
from trainplan.specs.offload import FSDP_OFFLOAD, PARAM_OFFLOADS
from trainplan.specs.stages import resolved_loss

FORMAT = "axolotl"
TITLE = "axolotl YAML"
SYNTAX = "yaml"
EMITS = (
    "method", "micro_batch", "grad_accum", "activation_checkpointing", "activation_offload", "optimizer",
    "precision", "zero_stage", "offload", "loss", "kernels", "compile",
)  # fmt: skip


def _adapter(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    kind = choice("adapter", {"lora": "lora", "qlora": "qlora"}, value)
    if kind == "lora" and (on(flat, "load_in_4bit") or on(flat, "load_in_8bit")):
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


FSDP_VERSIONS = ("fsdp_version", "fsdp_config.version", "fsdp_config.fsdp_version")


def _fsdp_version(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """axolotl pins FSDP1 when no version is given (check_fsdp_version_in_fsdp_config,
    utils/schemas/validation.py:1106-1124), and accelerate's FSDP1 prepare upcasts the trainable
    parameters of a bf16-loaded model to an fp32 master. Under FSDP2 axolotl replaces accelerate's
    fsdp2_prepare_model with its own (loaders/patch_manager.py:343-351,
    monkeypatch/accelerate/fsdp2.py:539), which has no such upcast: the bf16 weights are sharded
    as loaded and the optimizer's states follow them (axolotl-ai-cloud/axolotl@067b021c)."""
    if str(value).strip() == "2":
        return {"_keeps_dtype": "axolotl's FSDP2 prepare shards the weights as loaded"}
    return Ignore("FSDP1: accelerate upcasts the trainable parameters to an fp32 master")


FSDP_CHECKPOINTING = ("fsdp_config.activation_checkpointing", "fsdp_config.fsdp_activation_checkpointing")


def _checkpointing(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """axolotl's gradient_checkpointing (schemas/validation.py check_gradient_checkpointing_w_offload:
    "offload" and "offload_disk" are checkpointing plus activation offloading, to the CPU or the
    disk; both take the activations off the GPU). Off while fsdp_config checkpoints the wrapped
    blocks itself (its examples pair the two: "don't use with fsdp_activation_checkpointing")."""
    if isinstance(value, str) and value.strip().lower() in ("offload", "offload_disk", "unsloth"):
        return {"activation_checkpointing": "full", "activation_offload": True}
    if truthy("gradient_checkpointing", value):
        return {"activation_checkpointing": "full"}
    if any(on(flat, key) for key in FSDP_CHECKPOINTING):
        return Ignore("false: fsdp_config's activation checkpointing checkpoints every wrapped block")
    return {"activation_checkpointing": "none"}


# axolotl schemas/config.py activation_offloading: Literal["legacy", "disk", "hidden_states"] |
# bool. true and "legacy" (the earlier stream implementation) move the saved activations to the
# CPU, "disk" to the disk (TRL's offloader), "hidden_states" the checkpointed blocks' inputs,
# which under full checkpointing are what is saved: each takes them off the GPU.
ACTIVATION_OFFLOADING = {"legacy": True, "disk": True, "hidden_states": True, "true": True, "false": False}


def _activation_offloading(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    on = value if isinstance(value, bool) else choice("activation_offloading", ACTIVATION_OFFLOADING, value)
    return {"activation_offload": bool(on)}


def _attention(setting: str, kind: str) -> Convert:
    """A legacy attention flag (flash_attention: true ...), read as the attn_implementation it
    stands for (schemas/config.py LEGACY_ATTN_FLAG_TO_IMPL)."""

    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if flat.get("attn_implementation") is not None:
            return Ignore("attn_implementation decides")
        return {"attention": kind} if truthy(setting, value) else Ignore("false")

    return convert


# attn_implementation (axolotl schemas/config.py: "eager, sdpa, flash_attention_2,
# flash_attention_3, flex_attention, xformers, sage, fp8"; a Hub kernel path otherwise). The
# fused kernels keep no seq x seq scores: their memory is flash attention's.
FUSED_ATTENTION = ("flex_attention", "xformers", "sage", "fp8")
ATTENTION = {**hf_trainer.ATTENTION, **dict.fromkeys(FUSED_ATTENTION, "flash")}


def _attn_implementation(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if isinstance(value, str) and "/" in value:
        return {"attention": "flash"}  # a Hub kernel (kernels-community/flash-attn3): a fused kernel
    return {"attention": choice("attn_implementation", ATTENTION, value)}


def _fused_loss(setting: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        return {"loss": "fused"} if truthy(setting, value) else Ignore("false")

    return convert


CUT_CROSS_ENTROPY = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"


def _plugins(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """The Cut Cross-Entropy plugin replaces the loss with Apple's fused linear + cross-entropy
    unless cut_cross_entropy is false (integrations/cut_cross_entropy/args.py:
    `cut_cross_entropy: Optional[bool] = True`); the other plugins act through their own keys."""
    names = value if isinstance(value, list) else [value]
    if CUT_CROSS_ENTROPY in names and ("cut_cross_entropy" not in flat or flat["cut_cross_entropy"] is None):
        return {"loss": "fused"}
    return Ignore("read through the settings each plugin adds")


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


#: rl (utils/schemas/enums.py RLType) -> the stage; ipo is DPO with loss_type ipo; gdpo is
#: GRPO's trainer with another advantage normalisation (core/builders/rl.py: GRPOStrategy and
#: multi_objective_aggregation normalize_then_sum), the same memory and time
AXOLOTL_RL = {
    "dpo": "dpo",
    "ipo": "dpo",
    "kto": "kto",
    "orpo": "orpo",
    "simpo": "simpo",
    "grpo": "grpo",
    "gdpo": "grpo",
}


def _rl(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """rl: the preference stage (core/builders/rl.py picks TRL's DPO, KTO, ORPO or CPO trainer).
    The reference (train.py setup_reference_model): an adapter without rl_adapter_ref_model
    passes none, so TRL disables the adapters; otherwise the model is loaded again and frozen
    (dpo, ipo; KTO's trainer loads its own). precompute_ref_log_probs (DPO's arguments only,
    core/trainers/dpo/__init__.py) computes the reference's log-probs before training."""
    kind = str(value).strip().lower()
    stage = AXOLOTL_RL.get(kind)
    if stage is None:
        return Ignore(
            f"{NOT_MODELLED}: rl {kind} (generated rollouts); the policy's supervised step is estimated"
        )
    fields: dict[str, Any] = {"stage": stage}
    if stage == "grpo":
        # core/builders/rl.py: trl.beta, else rl_beta, else TRL's 0 (no reference); a reference
        # is the policy with its adapters disabled, or a frozen copy of a full model
        beta = flat.get("trl.beta", flat.get("rl_beta"))
        if isinstance(beta, int | float) and not isinstance(beta, bool) and beta != 0:
            fields["reference"] = "adapter" if flat.get("adapter") else "model"
        return fields
    if stage == "dpo" and on(flat, "precompute_ref_log_probs"):
        fields["reference"] = "precomputed"
    elif stage in ("dpo", "kto"):
        adapter = bool(flat.get("adapter")) and not on(flat, "rl_adapter_ref_model")
        fields["reference"] = "adapter" if adapter else "model"
    return fields


def _grpo(flat: Mapping[str, Any]) -> bool:
    return AXOLOTL_RL.get(str(flat.get("rl") or "").strip().lower()) == "grpo"


def _sequence_parallel_degree(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """The deprecated name, taken only without context_parallel_size (utils/schemas/
    validation.py check_context_parallel_size at axolotl-ai-cloud/axolotl@067b021c)."""
    if flat.get("context_parallel_size") is not None:
        return Ignore("context_parallel_size is set, and axolotl takes it")
    return {"context_parallel": positive_int("sequence_parallel_degree")(value)}


def _replicas(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """dp_replicate_size: HSDP's replicas under FSDP; without FSDP they are plain data-parallel
    ranks (utils/distributed.py _get_parallel_config_kwargs at axolotl-ai-cloud/axolotl@067b021c)."""
    replicas = positive_int("dp_replicate_size")(value)
    if not (flat.get("fsdp") is not None or any(path.startswith("fsdp_config.") for path in flat)):
        return Ignore("without FSDP the replicas are plain data parallelism")
    return {"data_parallel_replicate": replicas}


def _vllm_colocate_set(flat: Mapping[str, Any]) -> bool:
    """core/trainers/grpo/__init__.py set_training_args_kwargs passes vllm.gpu_memory_utilization,
    vllm.tensor_parallel_size and trl.vllm_enable_sleep_mode only when trl.vllm_mode is stated
    as colocate (left unset, TRL's own colocate defaults apply)."""
    return _grpo(flat) and on(flat, "trl.use_vllm") and flat.get("trl.vllm_mode") == "colocate"


def _grpo_setting(target: str, convert: Callable[[Any], Any], colocate: bool = False) -> Convert:
    """A GRPO setting of `trl:` or `vllm:` onto `target` (for rl grpo only; `colocate`: only
    where axolotl passes it, a stated colocate vllm_mode)."""

    def apply(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if not _grpo(flat):
            return Ignore(f"{NOT_MODELLED}: a rollout setting outside rl grpo")
        if colocate and not _vllm_colocate_set(flat):
            return Ignore("axolotl passes it with trl.use_vllm and trl.vllm_mode colocate only")
        return onto(target, value, convert)

    return apply


def _vllm_mode(value: Any) -> Any:
    return choice("trl.vllm_mode", hf_trainer.VLLM_MODES, value)


def _sleep(value: Any) -> Any:
    return True if truthy("trl.vllm_enable_sleep_mode", value) else Ignore("false")


def _reward_model(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """reward_model: true trains a Bradley-Terry reward model with TRL's RewardTrainer
    (core/builders/causal.py) on a one-label sequence-classification model."""
    return {"stage": "rm"} if truthy("reward_model", value) else Ignore("false")


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
    "activation_offloading": Rule(
        "saved activations off the GPU: true, legacy, disk or hidden_states",
        _activation_offloading,
        sets="activation_offload",
    ),
    "optimizer": to(
        "optimizer", hf_trainer.OPTIM_NOTE, lambda value: choice("optimizer", OPTIMIZER_NAMES, value)
    ),
    "bf16": Rule(
        "bf16 weights (torch_dtype), so bf16 grads and states", _precision("bf16", "bf16"), sets="precision"
    ),
    "bfloat16": Rule("pure bf16, no autocast", _precision("bfloat16", "bf16"), sets="precision"),
    "fp16": Rule("fp16 weights with loss scaling", _precision("fp16", "fp16-mixed"), sets="precision"),
    "float16": ignored(f"{NOT_MODELLED}: pure fp16"),
    "tf32": ignored(f"{NOT_MODELLED}: TF32 matmuls for fp32 work"),
    "attn_implementation": Rule("attention kernel", _attn_implementation, sets="attention"),
    "flash_attention": Rule("FlashAttention-2", _attention("flash_attention", "flash"), sets="attention"),
    "sdp_attention": Rule("PyTorch sdpa", _attention("sdp_attention", "sdpa"), sets="attention"),
    "eager_attention": Rule(
        "eager attention (scores materialised)", _attention("eager_attention", "eager"), sets="attention"
    ),
    "xformers_attention": Rule(
        "xformers (a fused kernel, as flash)", _attention("xformers_attention", "flash"), sets="attention"
    ),
    "flex_attention": Rule(
        "FlexAttention (a fused kernel, as flash)", _attention("flex_attention", "flash"), sets="attention"
    ),
    "sage_attention": Rule(
        "SageAttention (a fused kernel, as flash)", _attention("sage_attention", "flash"), sets="attention"
    ),
    "flash_attn_cross_entropy": ignored(NOT_MODELLED),
    "flash_attn_rms_norm": ignored(NOT_MODELLED),
    "flash_attn_fuse_qkv": ignored(NOT_MODELLED),
    "flash_attn_fuse_mlp": ignored(NOT_MODELLED),
    "deepspeed": hf_trainer.RULES["deepspeed"],
    "save_strategy": hf_trainer.RULES["save_strategy"],
    "save_steps": hf_trainer.RULES["save_steps"],
    "fsdp": Rule("FSDP options", _fsdp, sets="zero_stage, offload"),
    **fsdp_rules("fsdp_config."),
    **{
        key: Rule(
            "FSDP2 keeps the loaded dtype; FSDP1 upcasts to an fp32 master", _fsdp_version, sets="precision"
        )
        for key in FSDP_VERSIONS
    },
    "fsdp_config.*": ignored(IRRELEVANT),
    "plugins": Rule(
        "the Cut Cross-Entropy plugin is a fused loss; the others act through their keys",
        _plugins,
        sets="loss",
    ),
    "chunked_cross_entropy": Rule(
        "chunked cross-entropy",
        lambda v, f: {"loss": "chunked"} if truthy("chunked_cross_entropy", v) else Ignore("false"),
        sets="loss",
    ),
    "chunked_cross_entropy_num_chunks": ignored(f"{NOT_MODELLED}: the loss's chunk count (loss_chunks)"),
    "tensor_parallel_size": to(
        "tensor_parallel", "tensor-parallel ranks (DeepSpeed AutoTP)", positive_int("tensor_parallel_size")
    ),
    "context_parallel_size": to(
        "context_parallel",
        "ranks each sequence is split over (ring-flash-attn; counted with torch's all-gather buffers)",
        positive_int("context_parallel_size"),
    ),
    "sequence_parallel_degree": Rule(
        "context_parallel_size's older name", _sequence_parallel_degree, sets="context_parallel"
    ),
    "dp_shard_size": ignored(
        "read with the GPU count (dp_shard_size x dp_replicate_size x tensor_parallel_size x "
        "context_parallel_size); more GPUs than that make HSDP replicas only with dp_replicate_size"
    ),
    "dp_replicate_size": Rule(
        "replicas of hybrid sharding (HSDP) under FSDP", _replicas, sets="data_parallel_replicate"
    ),
    "rl": Rule("preference or RL stage (dpo, ipo, kto, orpo, simpo, grpo)", _rl, sets="stage, reference"),
    "trl.num_generations": Rule(
        "completions per prompt",
        _grpo_setting("generations", positive_int("trl.num_generations")),
        sets="generations",
    ),
    "trl.max_completion_length": Rule(
        "tokens generated per completion",
        _grpo_setting("completion_len", positive_int("trl.max_completion_length")),
        sets="completion_len",
    ),
    "trl.use_vllm": Rule(
        "vLLM generates (else transformers' generate)",
        _grpo_setting("rollout_engine", lambda v: "vllm" if truthy("trl.use_vllm", v) else "hf"),
        sets="rollout_engine",
    ),
    "trl.vllm_mode": Rule(
        "colocate or server (trl vllm-serve)",
        _grpo_setting("rollout_placement", _vllm_mode),
        sets="rollout_placement",
    ),
    "vllm.gpu_memory_utilization": Rule(
        "the colocated engine's share of each GPU",
        _grpo_setting("rollout_memory_fraction", fraction("vllm.gpu_memory_utilization"), colocate=True),
        sets="rollout_memory_fraction",
    ),
    "vllm.tensor_parallel_size": Rule(
        "the colocated engine's tensor-parallel size",
        _grpo_setting("rollout_tensor_parallel", positive_int("vllm.tensor_parallel_size"), colocate=True),
        sets="rollout_tensor_parallel",
    ),
    "trl.vllm_enable_sleep_mode": Rule(
        "the colocated engine sleeps while training",
        _grpo_setting("rollout_sleep", _sleep, colocate=True),
        sets="rollout_sleep",
    ),
    "trl.beta": ignored("read with rl (grpo: a reference model when not 0)"),
    "rl_beta": ignored("read with rl (grpo: a reference model when not 0)"),
    "reward_model": Rule("a reward model (stage rm)", _reward_model, sets="stage"),
    "rl_adapter_ref_model": ignored("read with rl: the reference is the base loaded again"),
    "precompute_ref_log_probs": ignored("read with rl: the reference's log-probs before training"),
    "num_labels": ignored(f"{IRRELEVANT}: a reward model's one score"),
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
    "saves_per_epoch": ignored(
        f"{NOT_MODELLED}: a share of an epoch's steps per write; the default interval applies"
    ),
    "eval_table_size": ignored(IRRELEVANT),
    "eval_max_new_tokens": ignored(IRRELEVANT),
    "xformers_attention_*": ignored(NOT_MODELLED),
    "gptq": ignored(f"{NOT_MODELLED}: GPTQ bases"),
    "unfrozen_parameters": ignored(f"{NOT_MODELLED}: partly frozen full fine-tunes"),
}


# axolotl schemas/training.py `optimizer` takes transformers OptimizerNames and its own
# CustomSupportedOptimizers (schemas/enums.py); default adamw_torch_fused.
OPTIMIZER_NAMES: dict[str, str | Ignore] = {
    **hf_trainer.OPTIM,
    "ao_adamw_4bit": "adamw-4bit",
    "ao_adamw_8bit": "adamw-8bit",
    "ao_adamw_fp8": "adamw-8bit",  # fp8 states: one byte each and a scale per 256, as 8-bit
    "adopt_adamw": "adamw",  # ADOPT: AdamW's two states
    **{
        name: Ignore(f"{NOT_MODELLED}: no state model for {name}; give --optimizer for the closest")
        for name in (
            "optimi_adamw",
            "came_pytorch",
            "muon",
            "dion",
            "sinkgd",
            "flash_adamw",
            "flash_adam",
            "flash_sgd",
            "flash_sgdw",
            "flash_lion",
            "q_galore_adamw8bit",
        )
    },
}


def detect(data: Mapping[str, Any]) -> bool:
    """axolotl's own keys: `base_model` (the others name the model model_name_or_path or
    model._component_), or two of its other keys."""
    markers = ("sequence_len", "adapter", "lora_target_linear")
    return "base_model" in data or "micro_batch_size" in data or sum(key in data for key in markers) >= 2


def recipe(flat: Mapping[str, Any]) -> str:
    """axolotl's defaults."""
    return "axolotl"


_BF16 = {
    "framework": "axolotl",
    "where": "AxolotlInputConfig.bf16",
    "effective": "utils/config/__init__.py resolve_dtype: auto is true on a GPU with bf16 unless fp16 is on",
}
DEFAULTS = {
    "micro_batch_size": Default(1, "axolotl", "HyperparametersConfig.micro_batch_size"),
    "gradient_accumulation_steps": Default(1, "axolotl", "HyperparametersConfig.gradient_accumulation_steps"),
    "sequence_len": Default(512, "axolotl", "AxolotlInputConfig.sequence_len"),
    "gradient_checkpointing": Default(False, "axolotl", "AxolotlInputConfig.gradient_checkpointing"),
    "activation_offloading": Default(False, "axolotl", "AxolotlInputConfig.activation_offloading"),
    "optimizer": Default("adamw_torch_fused", "axolotl", "HyperparametersConfig.optimizer"),
    "bf16": Default("auto", **_BF16),
}
ADAPTER_DEFAULTS = {"lora_dropout": Default(0.0, "axolotl", "LoraConfig.lora_dropout")}


#: axolotl's vLLM section's memory share, which it hands a stated colocate engine
VLLM_FRACTION = Default(0.9, "axolotl", "VllmConfig.gpu_memory_utilization")


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """axolotl's own defaults for what a file leaves out (its pydantic schemas); the LoRA ones
    with an adapter only."""
    bf16 = DEFAULTS if not on(flat, "fp16") else {**DEFAULTS, "bf16": Default(False, **_BF16)}
    return {**bf16, **(ADAPTER_DEFAULTS if flat.get("adapter") else {})}


ATTENTION_SETTINGS = ("attn_implementation", "flash_attention", "sdp_attention", "eager_attention",
                      "xformers_attention", "flex_attention", "sage_attention")  # fmt: skip


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """No adapter: axolotl trains the full model. rl dpo, ipo, kto or grpo: TRL 1.8's scoring of
    the full logits (loss selective; GRPO's of the completion's positions). No attention
    setting: the model loads with transformers' default attention, sdpa (axolotl
    loaders/model.py passes no attn_implementation)."""
    found: dict[str, tuple[Any, str]] = {}
    if not flat.get("adapter"):
        found["method"] = ("full", "no adapter: a full fine-tune")
    if AXOLOTL_RL.get(str(flat.get("rl") or "").strip().lower()) in ("dpo", "kto"):
        # the TRL axolotl pins (v1.8.0): the full logits through selective_log_softmax
        found["loss"] = ("selective", "TRL 1.8's DPO and KTO score the full logits (selective_log_softmax)")
    if _grpo(flat):
        found["loss"] = (
            "selective",
            "TRL 1.8's GRPO scores the completion's full logits (selective_log_softmax)",
        )
    if _vllm_colocate_set(flat) and flat.get("vllm.gpu_memory_utilization") is None:
        found["rollout_memory_fraction"] = (
            VLLM_FRACTION.value,
            f"trl.vllm_mode colocate: axolotl passes vllm.gpu_memory_utilization, {VLLM_FRACTION.note()}",
        )
    if all(flat.get(key) is None for key in ATTENTION_SETTINGS):
        found["attention"] = ("sdpa", "no attn_implementation: transformers' default, sdpa")
    degrees = [flat.get(key) for key in ("dp_shard_size", "dp_replicate_size", "tensor_parallel_size",
                                         "context_parallel_size")]  # fmt: skip
    fsdp = flat.get("fsdp") is not None or any(path.startswith("fsdp_config.") for path in flat)
    if fsdp and str(flat.get("adapter", "")).lower() == "qlora":
        # loaders/model.py:162-165, :1003-1009: QLoRA under FSDP skips
        # prepare_model_for_kbit_training (the norms and embeddings stay at the load dtype)
        found["kbit_upcast"] = (False, "QLoRA under FSDP: axolotl skips prepare_model_for_kbit_training")
    if any(path.startswith("fsdp_config.") for path in flat):
        # FSDP1 wraps the decoder layers only; axolotl's own FSDP2 prepare does not carve the
        # embedding and the head out (monkeypatch/accelerate/fsdp2.py:759-768): root in both
        found |= fsdp_wrap(flat, "fsdp_config.", carves=False)
    if isinstance(degrees[0], int) and degrees[0] > 0:  # shard size given: the GPUs are its product
        gpus = 1
        for degree in degrees:
            gpus *= degree if isinstance(degree, int) and not isinstance(degree, bool) and degree > 0 else 1
        found["gpus"] = (
            gpus,
            "dp_shard_size x dp_replicate_size x tensor_parallel_size x context_parallel_size",
        )
    return found


# The layouts `emit` can write (plan --emit axolotl searches only these): data parallelism with
# FSDP (ZeRO 2, 3) or none, every block checkpointed or none, offload with FSDP's parameters.
PLAN_AXES: dict[str, tuple[Any, ...]] = {
    "tensor_parallel": (1,), "pipeline_parallel": (1,), "context_parallel": (1,), "zero_stages": (0, 2, 3),
    "checkpointing": ("none", "full"), "offloads": ("none", FSDP_OFFLOAD),
}  # fmt: skip


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
    if scenario.optimizer in hf_trainer.OPTIM_NAMES:
        data["optimizer"] = hf_trainer.OPTIM_NAMES[scenario.optimizer]
    else:
        notes.append(f"optimizer {scenario.optimizer}: no axolotl name")
    sharded = scenario.zero_stage in (2, 3)
    if scenario.precision == "bf16" or (sharded and scenario.precision == "bf16-mixed"):
        data["bf16"] = True
    elif scenario.precision == "fp16-mixed":
        data["fp16"] = True
    else:
        notes.append(f"precision {scenario.precision}: axolotl trains bf16 (bf16: true) or fp16")
    if resolved_loss(scenario) == "fused" or scenario.kernels == "liger":
        data["plugins"] = ["axolotl.integrations.liger.LigerPlugin"]
    if resolved_loss(scenario) == "fused":
        data["liger_fused_linear_cross_entropy"] = True
    elif resolved_loss(scenario) != "standard":
        notes.append(f"loss {resolved_loss(scenario)}: no axolotl switch")
    if scenario.kernels == "liger":
        data.update(liger_rope=True, liger_rms_norm=True, liger_glu_activation=True)
    elif scenario.kernels == "unsloth":
        notes.append("kernels unsloth: axolotl has no switch for Unsloth's kernels")
    if scenario.compile:
        data["torch_compile"] = True
    if sharded:
        # FSDP2 shards the bf16 weights as loaded; FSDP1 upcasts them to an fp32 master (_fsdp_version)
        data["fsdp_version"] = 1 if scenario.precision == "bf16-mixed" else 2
        data["fsdp_config"] = {
            "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "reshard_after_forward": scenario.zero_stage == 3,
            "offload_params": scenario.offload in PARAM_OFFLOADS,
        }
        if scenario.offload == "optimizer":
            notes.append("offload optimizer: FSDP offloads parameters too; use --emit deepspeed")
        notes += fsdp_offload_note(scenario.offload)
    elif scenario.zero_stage == 1 or scenario.offload != "none":
        notes.append(f"zero_stage {scenario.zero_stage}, offload {scenario.offload}: use --emit deepspeed")
    for name in ("tensor_parallel", "pipeline_parallel"):
        if getattr(scenario, name) > 1:
            notes.append(
                f"{name} {getattr(scenario, name)}: not written (axolotl: data parallel and sharding)"
            )
    return data, notes
