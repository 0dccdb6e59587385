"""Hugging Face `TrainingArguments` / TRL `SFTConfig` (and TRL's `ModelConfig` keys) as YAML or JSON.

Field names: transformers src/transformers/training_args.py (per_device_train_batch_size is per
GPU; optim names from its OptimizerNames enum), TRL trl/trainer/sft_config.py (max_length, formerly
max_seq_length; activation_offloading; use_liger_kernel) and trl/trainer/model_config.py
(model_name_or_path, use_peft, lora_r, load_in_4bit, attn_implementation, torch_dtype).
The optimizer names, the precision rule and the attention names live here once; axolotl and
LLaMA-Factory use the same TrainingArguments underneath and import them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Convert,
    Default,
    Ignore,
    Rule,
    choice,
    fraction,
    ignored,
    on,
    onto,
    onto_where,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.offload import FSDP_OFFLOAD

FORMAT = "hf"
TITLE = "Hugging Face TrainingArguments / TRL SFTConfig"
SYNTAX = "yaml"
WHOLE = ("deepspeed",)  # an inline DeepSpeed config (TrainingArguments takes a dict too)

# transformers OptimizerNames (transformers 5.24 training_args.py, every member) -> scenario
# optimizer, by the state each keeps per parameter (memory and time only: paging and the 32-bit
# paged variants hold the same state as their plain twins; one fp32 state of Adagrad or RMSprop
# is SGD-with-momentum's one buffer). An optimizer with a state of its own kind is read as not
# modelled: the optimizer stays the default, named in the ignored settings.
_NO_STATE_MODEL = f"{NOT_MODELLED}: no state model for it; give --optimizer for the closest"
_GALORE = (
    "galore_adamw", "galore_adamw_8bit", "galore_adafactor", "galore_adamw_layerwise",
    "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise",
)  # fmt: skip
OPTIM: dict[str, str | Ignore] = {
    "adamw_torch": "adamw",
    "adamw_hf": "adamw",
    "adamw_torch_xla": "adamw",
    "adamw_torch_fused": "adamw-fused",
    "adamw_torch_npu_fused": "adamw-fused",
    "adamw_apex_fused": "adamw-fused",
    "adamw_bnb_8bit": "adamw-8bit",
    "adamw_8bit": "adamw-8bit",
    "adamw_torch_8bit": "adamw-8bit",  # torchao AdamW8bit: blocks of 256, as bitsandbytes
    "adamw_torch_4bit": "adamw-4bit",
    "paged_adamw_8bit": "paged-adamw-8bit",
    "paged_adamw_32bit": "adamw",
    "paged_adamw": "adamw",
    "stable_adamw": "adamw",
    "adafactor": "adafactor",
    "sgd": "sgd",
    "adagrad": "sgd-momentum",
    "rmsprop": "sgd-momentum",
    "rmsprop_bnb": "sgd-momentum",
    "rmsprop_bnb_32bit": "sgd-momentum",
    "lion_32bit": "lion",
    "paged_lion_32bit": "lion",
    "lion_8bit": Ignore(f"{NOT_MODELLED}: 8-bit Lion"),
    "paged_lion_8bit": Ignore(f"{NOT_MODELLED}: 8-bit Lion"),
    "rmsprop_bnb_8bit": Ignore(f"{NOT_MODELLED}: 8-bit RMSprop"),
    "ademamix": Ignore(f"{NOT_MODELLED}: AdEMAMix's three states"),
    "ademamix_8bit": Ignore(f"{NOT_MODELLED}: AdEMAMix's three states"),
    "paged_ademamix_32bit": Ignore(f"{NOT_MODELLED}: AdEMAMix's three states"),
    "paged_ademamix_8bit": Ignore(f"{NOT_MODELLED}: AdEMAMix's three states"),
    "adamw_anyprecision": Ignore(_NO_STATE_MODEL),
    "grokadamw": Ignore(_NO_STATE_MODEL),
    "schedule_free_radam": Ignore(f"{NOT_MODELLED}: schedule-free states"),
    "schedule_free_adamw": Ignore(f"{NOT_MODELLED}: schedule-free states"),
    "schedule_free_sgd": Ignore(f"{NOT_MODELLED}: schedule-free states"),
    "lomo": Ignore(f"{NOT_MODELLED}: LOMO's fused update (no gradients kept)"),
    "adalomo": Ignore(f"{NOT_MODELLED}: LOMO's fused update (no gradients kept)"),
    **{name: Ignore(f"{NOT_MODELLED}: GaLore projections") for name in _GALORE},
    **{
        name: Ignore(f"{NOT_MODELLED}: APOLLO projections")
        for name in ("apollo_adamw", "apollo_adamw_layerwise")
    },
}
# The name written for each scenario optimizer (`plan --emit`): the plain member of its kind.
OPTIM_NAMES = {
    "adamw": "adamw_torch", "adamw-fused": "adamw_torch_fused", "adamw-8bit": "adamw_bnb_8bit",
    "paged-adamw-8bit": "paged_adamw_8bit", "adamw-4bit": "adamw_torch_4bit", "adafactor": "adafactor",
    "sgd": "sgd", "lion": "lion_32bit",
}  # fmt: skip
OPTIM_NOTE = "transformers OptimizerNames; paged 32-bit AdamW holds AdamW's states"

# attn_implementation -> scenario attention (flash and sdpa keep no seq x seq scores).
ATTENTION = {"flash_attention_2": "flash", "flash_attention_3": "flash", "sdpa": "sdpa", "eager": "eager"}

BF16_DTYPES = ("bfloat16", "bf16", "torch.bfloat16")
FP16_DTYPES = ("float16", "fp16", "torch.float16", "half")


def optimizer(setting: str) -> Rule:
    """The `optim` rule (shared by the readers built on TrainingArguments)."""
    return to("optimizer", OPTIM_NOTE, lambda value: choice(setting, OPTIM, value))


def precision(bf16: Any, fp16: Any, model_dtype: Any) -> str | Ignore:
    """The precision recipe of the Trainer's flags over a model loaded in `model_dtype`.

    transformers Trainer: bf16/fp16 turn on torch.autocast over the model's own weights. A model
    loaded in fp32 (from_pretrained's default) trains amp-bf16 / amp-fp16 (fp32 weights, grads and
    states); loaded in bf16, the Trainer steps bf16 weights with bf16 states: pure bf16."""
    dtype = str(model_dtype).strip().lower() if model_dtype is not None else None
    if truthy("bf16", bf16) if bf16 is not None else False:
        return "bf16" if dtype in BF16_DTYPES else "amp-bf16"
    if truthy("fp16", fp16) if fp16 is not None else False:
        if dtype in FP16_DTYPES:
            raise InputError("fp16", "pure fp16 weights cannot be trained with the GradScaler; load in fp32")
        return "amp-fp16"
    if dtype in BF16_DTYPES:
        return "bf16"
    return (
        "fp32"
        if dtype in (None, "float32", "fp32", "auto")
        else Ignore(f"torch_dtype {dtype}: {NOT_MODELLED}")
    )


def _model_dtype(flat: Mapping[str, Any]) -> Any:
    return flat.get("torch_dtype", flat.get("dtype", flat.get("model_init_kwargs.torch_dtype")))


def _precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if not truthy("bf16", value) and flat.get("fp16") is True:
        return Ignore("false; fp16 decides")
    result = precision(flat.get("bf16"), flat.get("fp16"), _model_dtype(flat))
    return result if isinstance(result, Ignore) else {"precision": result}


def _fp16(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if "bf16" in flat and (truthy("bf16", flat["bf16"]) or not truthy("fp16", value)):
        return Ignore("read with bf16")
    result = precision(None, value, _model_dtype(flat))
    return result if isinstance(result, Ignore) else {"precision": result}


def _checkpointing(value: Any) -> str:
    return "full" if truthy("gradient_checkpointing", value) else "none"


#: TRL's PPOTrainer never enables gradient checkpointing: it does not run Trainer.__init__ or
#: Trainer.train, and nothing calls its PolicyAndValueWrapper.gradient_checkpointing_enable
#: (huggingface/trl@f2cd5771 trl/experimental/ppo/ppo_trainer.py)
PPO_NO_CHECKPOINTING = "TRL's PPOTrainer never enables gradient checkpointing (none is applied)"


def _checkpointing_rule(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """gradient_checkpointing: every block or none; ignored under PPO (PPO_NO_CHECKPOINTING)."""
    setting = _checkpointing(value)
    if _ppo(flat):
        return Ignore(PPO_NO_CHECKPOINTING)
    return {"activation_checkpointing": setting}


def fsdp_option(setting: str, value: Any) -> dict[str, Any] | Ignore:
    """TrainingArguments `fsdp`: "full_shard auto_wrap offload" (a string or a list) -> ZeRO
    stage (full_shard = 3, shard_grad_op = 2, the hybrid ones the same within each node,
    replicated across the nodes) and offload."""
    words = value.split() if isinstance(value, str) else list(value) if isinstance(value, list) else None
    if words is None or not all(isinstance(word, str) for word in words):
        raise InputError(setting, "must be a string or list of FSDP options (full_shard, offload, ...)")
    words = [word.strip().lower() for word in words]
    if not words or words == ["false"]:
        return Ignore("no FSDP")
    stages = {"full_shard": 3, "hybrid_shard": 3, "shard_grad_op": 2, "hybrid_shard_zero2": 2, "no_shard": 0}
    found = [stages[word] for word in words if word in stages]
    if not found:
        raise InputError(setting, f"names no sharding strategy; allowed: {', '.join(stages)}")
    fields: dict[str, Any] = {"zero_stage": found[0], "_backend": "FSDP"}
    hybrid = [word for word in words if word.startswith("hybrid_shard")]
    if hybrid:
        fields["_hybrid_nodes"] = hybrid[0]
    if "offload" in words:  # FSDP1 CPUOffload(offload_params=True): parameters and gradients
        fields["offload"] = FSDP_OFFLOAD
    return fields


def _max_steps(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        return Ignore("not positive: the epochs decide")
    return positive_int("max_steps")(value)


def _save_strategy(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """TrainingArguments.save_strategy (default "steps", every save_steps = 500: transformers
    5.24 training_args.py lines 1177-1191): "epoch" saves at each epoch's end and "no" never
    within training (the example scripts' final save_model is the one write), both read as
    checkpoint_every 0; "steps" is read with save_steps; "best" depends on the evaluation."""
    strategy = str(value if value is not None else "steps").strip().lower()
    if strategy in ("epoch", "no"):
        return {"checkpoint_every": 0}
    if strategy == "steps":
        return Ignore("read with save_steps")
    if strategy == "best":
        return Ignore(f"{NOT_MODELLED}: saves when the evaluation improves; the default interval applies")
    raise InputError("save_strategy", f"must be steps, epoch, no or best (got {value!r})")


def _save_steps(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """save_steps under the "steps" strategy: an integer is the interval; a float below 1 is a
    share of the total steps (read where max_steps gives them)."""
    strategy = str(flat.get("save_strategy") or "steps").strip().lower()
    if strategy != "steps":
        return Ignore("read with save_strategy")
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InputError(
            "save_steps", f"must be a positive number of steps or a share below 1 (got {value!r})"
        )
    if value < 1:
        steps = flat.get("max_steps")
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            return {"checkpoint_every": max(1, math.ceil(value * steps))}
        return Ignore("a share of the total steps, which the epochs decide: the default interval applies")
    return {"checkpoint_every": int(value)}


def _peft(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if not truthy("use_peft", value):
        return {"method": "full"}
    quantised = flat.get("load_in_4bit") is True or flat.get("load_in_8bit") is True
    return {"method": "qlora" if quantised else "lora"}


def _reference(value: Any) -> Any:
    if isinstance(value, str | Mapping):
        return value
    raise InputError("deepspeed", "must be a path to a DeepSpeed JSON file or its contents")


def _fsdp_rules() -> dict[str, Rule]:
    from trainplan.inputs.configs.accelerate import fsdp_rules

    return {**fsdp_rules("fsdp_config."), "fsdp_config.*": ignored(IRRELEVANT)}


# TRL's preference and RL trainers (DPOConfig, ORPOConfig, KTOConfig, CPOConfig, RewardConfig,
# GRPOConfig): their own keys. The stage is the `trl` command the file is run with, else what
# only one trainer's config has (`implied`); the objective's weights are irrelevant to memory.
PREFERENCE_KEYS = (
    "rpo_alpha", "ref_model_init_kwargs",
    "desirable_weight", "undesirable_weight", "simpo_gamma", "cpo_alpha", "reference_free", "sync_ref_model",
    "center_rewards_coefficient",
)  # fmt: skip
#: GRPOConfig's rollout settings (trl/trainer/grpo_config.py); RLOOConfig shares some of them
GRPO_KEYS = (
    "num_generations", "use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size",
    "vllm_enable_sleep_mode", "steps_per_generation", "num_iterations", "generation_batch_size",
    "vllm_importance_sampling_correction",
)  # fmt: skip
#: PPOConfig's own settings (huggingface/trl@f2cd5771 trl/experimental/ppo/ppo_config.py, the
#: last TRL with a PPO trainer): the value model's loss weights and PPO's rollout sizes
PPO_KEYS = (
    "num_ppo_epochs", "response_length", "local_rollout_forward_batch_size", "vf_coef", "cliprange_value",
    "whiten_rewards", "kl_estimator", "sft_model_path", "reward_model_path", "num_mini_batches",
    "missing_eos_penalty", "ds3_gather_for_generation",
)  # fmt: skip
_PREFERENCE = f"{IRRELEVANT}: a preference objective's weight (the stage is read from the file)"
#: `trl <command>` -> the stage it trains (trl/cli.py; cpo trains SimPO with loss_type simpo)
TRL_STAGES = {
    "sft": "sft", "dpo": "dpo", "kto": "kto", "orpo": "orpo", "reward": "rm", "grpo": "grpo", "ppo": "ppo",
}  # fmt: skip
#: `trl <command>`s whose trainers trainplan does not model (their rollout differs from GRPO's)
TRL_UNMODELLED = ("rloo",)
#: keys of one trainer's config only (TRL 1.16.0 trl/trainer/*_config.py, trl/experimental/cpo;
#: PPOConfig at f2cd5771: the value model's and PPO's own, which no GRPO or RLOO config has)
PPO_ONLY = (
    "num_ppo_epochs",
    "vf_coef",
    "cliprange_value",
    "local_rollout_forward_batch_size",
    "response_length",
)
KTO_ONLY = ("desirable_weight", "undesirable_weight")
DPO_ONLY = (
    "rpo_alpha", "reference_free", "ref_model_init_kwargs", "sync_ref_model", "precompute_ref_log_probs",
)  # fmt: skip
#: DPOConfig.loss_type values no other trainer takes (CPOConfig shares sigmoid, hinge and ipo)
DPO_LOSSES = (
    "robust", "bco_pair", "sppo_hard", "nca_pair", "aot", "aot_pair", "apo_zero", "apo_down", "exo_pair",
)  # fmt: skip


def trl_stage(flat: Mapping[str, Any]) -> tuple[str, str] | None:
    """(stage, why) of a TRL config: its `trl` command line, else the keys only KTOConfig,
    CPOConfig with loss_type simpo, or DPOConfig has; None for a supervised (or unknown) one."""
    command = flat.get(TRL_CLI)
    if isinstance(command, str) and command in TRL_STAGES:
        return TRL_STAGES[command], f"run with `trl {command}`"
    if command in TRL_UNMODELLED:
        return None
    if any(key in flat for key in PPO_ONLY):
        return "ppo", f"PPOConfig's {next(k for k in PPO_ONLY if k in flat)}"
    if any(key in flat for key in GRPO_KEYS):
        return "grpo", f"GRPOConfig's {next(k for k in GRPO_KEYS if k in flat)}"
    if command == "cpo" or any(key in flat for key in ("simpo_gamma", "cpo_alpha")):
        if str(flat.get("loss_type") or "").lower() == "simpo":
            return "simpo", "CPOConfig with loss_type simpo"
        return None
    if any(key in flat for key in KTO_ONLY):
        return "kto", f"KTOConfig's {next(k for k in KTO_ONLY if k in flat)}"
    if any(key in flat for key in DPO_ONLY):
        return "dpo", f"DPOConfig's {next(k for k in DPO_ONLY if k in flat)}"
    if str(flat.get("loss_type") or "").lower() in DPO_LOSSES:
        return "dpo", f"DPOConfig's loss_type {flat['loss_type']}"
    return None


def _precompute(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """precompute_ref_log_probs (DPOConfig, KTOConfig): one pass of the reference before training."""
    if truthy("precompute_ref_log_probs", value):
        return {"reference": "precomputed"}
    return Ignore("false: the reference scores each step")


def _grpo(flat: Mapping[str, Any]) -> bool:
    """Whether the file trains GRPO (`trl_stage`)."""
    stage = trl_stage(flat)
    return stage is not None and stage[0] == "grpo"


def _ppo(flat: Mapping[str, Any]) -> bool:
    """Whether the file trains PPO (`trl_stage`)."""
    stage = trl_stage(flat)
    return stage is not None and stage[0] == "ppo"


_NOT_PPO = f"{NOT_MODELLED}: a setting of TRL's PPO trainer in a file for another trainer"


def _ppo_count(setting: str, target: str) -> Convert:
    """A PPOConfig count onto `target`."""
    return onto_where(_ppo, _NOT_PPO, target, positive_int(setting))


def _model_path(setting: str, value: Any) -> str:
    """A PPOConfig model setting's name or path, or an InputError naming the setting."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(setting, f"{shown_value(value)} is not a model name or path")
    return value.strip()


def _sft_model_path(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """PPOConfig.sft_model_path: the policy (and reference) PPO's script loads
    (examples/scripts/ppo/ppo.py at f2cd5771: model_name_or_path names only the tokenizer)."""
    if not _ppo(flat):
        return Ignore(_NOT_PPO)
    return {"model": _model_path("sft_model_path", value)}


def _reward_model_path(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """PPOConfig.reward_model_path: examples/scripts/ppo/ppo.py at f2cd5771 loads the value model
    and the reward model from it (AutoModelForSequenceClassification, num_labels 1)."""
    if not _ppo(flat):
        return Ignore(_NOT_PPO)
    path = _model_path("reward_model_path", value)
    return {"critic_model": path, "reward_model": path}


def _mini_batches(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """PPOConfig.num_mini_batches: the generation batch is shuffled into this many mini-batches,
    but accelerate steps the optimizer every gradient_accumulation_steps micro-batches whatever
    the mini-batch (ppo_trainer.py's `accelerator.accumulate`), so neither memory nor the work of
    a step changes."""
    count = positive_int("num_mini_batches")(value)
    if isinstance(count, Ignore):
        return count
    return Ignore(f"{IRRELEVANT}: micro-batches and optimizer steps are the same for any {count}")


def _model_name(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """model_name_or_path: the model; under PPO with sft_model_path given, only the tokenizer
    (PPO's script loads the policy from sft_model_path)."""
    if _ppo(flat) and "sft_model_path" in flat:
        return Ignore(
            f"{IRRELEVANT}: PPO's script loads only the tokenizer from it (the policy: sft_model_path)"
        )
    return onto("model", value)


PPO_RULES: dict[str, Rule] = {
    "response_length": Rule(
        "tokens generated per completion",
        _ppo_count("response_length", "completion_len"),
        sets="completion_len",
    ),
    "num_ppo_epochs": Rule(
        "passes over each generation batch",
        _ppo_count("num_ppo_epochs", "num_iterations"),
        sets="num_iterations",
    ),
    "local_rollout_forward_batch_size": Rule(
        "prompts generated and scored at once",
        _ppo_count("local_rollout_forward_batch_size", "rollout_forward_batch"),
        sets="rollout_forward_batch",
    ),
    "sft_model_path": Rule("the policy's weights (PPO's script)", _sft_model_path, sets="model"),
    "reward_model_path": Rule(
        "the value and the reward model (PPO's script loads both from it, one-score heads)",
        _reward_model_path,
        sets="critic_model, reward_model",
    ),
    "num_mini_batches": Rule("mini-batches of a generation batch", _mini_batches),
    **{
        key: ignored(f"{IRRELEVANT}: a PPO objective's weight or clip")
        for key in ("vf_coef", "cliprange_value", "whiten_rewards", "kl_estimator", "missing_eos_penalty")
    },
    "ds3_gather_for_generation": ignored(
        f"{NOT_MODELLED}: ZeRO-3's weights are taken to be gathered for generation (TRL's default true)"
    ),
}


def _vllm_colocated(flat: Mapping[str, Any]) -> bool:
    """GRPO with vLLM in each training process (use_vllm, vllm_mode colocate: GRPOConfig's
    default mode)."""
    return _grpo(flat) and on(flat, "use_vllm") and str(flat.get("vllm_mode") or "colocate") == "colocate"


_NOT_GRPO = f"{NOT_MODELLED}: a rollout setting of a trainer other than GRPO's"


#: GRPOConfig.vllm_mode -> rollout_placement (server: `trl vllm-serve` on GPUs of its own)
VLLM_MODES = {"colocate": "colocate", "server": "separate"}


def _vllm_mode(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """vllm_mode: colocate (an engine in each process) or server (`trl vllm-serve` on GPUs of its
    own: give gpus, the trainer's and the engine's together, and rollout_gpus)."""
    if not (_grpo(flat) and on(flat, "use_vllm")):
        return Ignore("without use_vllm: transformers' generate")
    placement = choice("vllm_mode", VLLM_MODES, value)
    return {"rollout_placement": placement}


def _colocated_only(setting: str, target: str, convert: Callable[[Any], Any]) -> Convert:
    """A setting GRPOTrainer reads for a colocated engine only (server mode takes vllm-serve's own)."""
    reason = f"applies to a colocated vLLM engine (use_vllm, vllm_mode colocate); {setting} is unused"
    return onto_where(_vllm_colocated, reason, target, convert)


def _grpo_count(setting: str, target: str, reason: str = _NOT_GRPO) -> Convert:
    """A GRPOConfig count onto `target` (another trainer's setting of that name is not read)."""
    return onto_where(_grpo, reason, target, positive_int(setting))


def _use_vllm(value: Any) -> str:
    return "vllm" if truthy("use_vllm", value) else "hf"


def _sleep(value: Any) -> Any:
    return True if truthy("vllm_enable_sleep_mode", value) else Ignore("false: the engine stays awake")


def _beta(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """GRPOConfig.beta: a KL term against a reference (GRPOTrainer loads a frozen copy for a
    full fine-tune, disables a peft policy's adapters otherwise) when it is not 0, TRL's
    default; a preference objective's weight for the other trainers."""
    if not _grpo(flat):
        return Ignore(_PREFERENCE)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError("beta", f"{shown_value(value)} is not a number")
    if value == 0:
        return Ignore("0: no reference model (TRL's default)")
    return {"reference": "adapter" if on(flat, "use_peft") else "model"}


#: GRPOConfig.max_prompt_length's default through TRL 0.26 (trl/trainer/grpo_config.py at
#: huggingface/trl@5fab47204; None in 0.27, 0e0cb5f15; removed in 0.28, 89070d241, since when
#: the prompts are the dataset's, untruncated)
GRPO_PROMPT_DEFAULT = 512
#: GRPOConfig.max_completion_length's default (TRL 1.16.0 and f2cd5771)
GRPO_COMPLETION_DEFAULT = 512


def _completion_of(flat: Mapping[str, Any]) -> int:
    value = flat.get("max_completion_length")
    return value if isinstance(value, int) and not isinstance(value, bool) else GRPO_COMPLETION_DEFAULT


def _prompt(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """max_prompt_length (GRPOConfig through TRL 0.27): prompts truncated to it, so a sequence
    is it plus the completion; a preference trainer's truncation otherwise."""
    if not _grpo(flat):
        return Ignore(_PREFERENCE)
    prompt = positive_int("max_prompt_length")(value)
    if isinstance(prompt, Ignore):
        return prompt
    return {"seq_len": prompt + _completion_of(flat)}


_GENERATION_BATCH = (
    f"{NOT_MODELLED}: a generation batch in completions over every process; give steps_per_generation "
    "(the batch over micro_batch x data-parallel replicas)"
)
GRPO_RULES: dict[str, Rule] = {
    "num_generations": Rule(
        "completions per prompt", _grpo_count("num_generations", "generations"), sets="generations"
    ),
    # a preference trainer's truncation length otherwise, which trainplan does not read
    "max_completion_length": Rule(
        "tokens generated per completion",
        _grpo_count("max_completion_length", "completion_len", _PREFERENCE),
        sets="completion_len",
    ),
    "use_vllm": Rule(
        "vLLM generates (else transformers' generate)",
        onto_where(_grpo, _NOT_GRPO, "rollout_engine", _use_vllm),
        sets="rollout_engine",
    ),
    "vllm_mode": Rule("colocate or server (trl vllm-serve)", _vllm_mode, sets="rollout_placement"),
    "vllm_gpu_memory_utilization": Rule(
        "the colocated engine's share of each GPU",
        _colocated_only(
            "vllm_gpu_memory_utilization",
            "rollout_memory_fraction",
            fraction("vllm_gpu_memory_utilization"),
        ),
        sets="rollout_memory_fraction",
    ),
    "vllm_tensor_parallel_size": Rule(
        "the colocated engine's tensor-parallel size",
        _colocated_only(
            "vllm_tensor_parallel_size", "rollout_tensor_parallel", positive_int("vllm_tensor_parallel_size")
        ),
        sets="rollout_tensor_parallel",
    ),
    "vllm_enable_sleep_mode": Rule(
        "the colocated engine sleeps (level 2) while training",
        _colocated_only("vllm_enable_sleep_mode", "rollout_sleep", _sleep),
        sets="rollout_sleep",
    ),
    "beta": Rule("GRPO's KL weight: a reference model when not 0", _beta, sets="reference"),
    "max_prompt_length": Rule("prompt tokens (TRL 0.27 and before)", _prompt, sets="seq_len"),
    "steps_per_generation": Rule(
        "micro-steps one generation batch serves",
        _grpo_count("steps_per_generation", "steps_per_generation"),
        sets="steps_per_generation",
    ),
    "num_iterations": Rule(
        "passes over each generation batch",
        _grpo_count("num_iterations", "num_iterations"),
        sets="num_iterations",
    ),
    "generation_batch_size": ignored(_GENERATION_BATCH),
    "vllm_importance_sampling_correction": ignored(
        f"{NOT_MODELLED}: with vLLM the policy's old log-probs are taken to be scored (TRL's default true)"
    ),
}


SFT_LOSSES = {"chunked_nll": "fused", "nll": "standard", "dft": "standard"}


def _loss_type(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """SFTConfig.loss_type: chunked_nll runs lm_head and the cross-entropy a chunk of tokens at a
    time, each chunk's logits alive only in its own checkpointed forward and backward (the fused
    class: sft_trainer.py _chunked_cross_entropy_loss at huggingface/trl@f2cd5771, TRL 1.4+); nll
    and dft take the model's full logits. A preference trainer's loss_type names its objective."""
    if isinstance(value, str) and value in SFT_LOSSES:
        return {"loss": SFT_LOSSES[value]}
    return Ignore(f"{IRRELEVANT}: a preference trainer's objective")


RULES: dict[str, Rule] = {
    "model_name_or_path": Rule("catalog name, Hub id or local path", _model_name, sets="model"),
    "per_device_train_batch_size": to("micro_batch", "per GPU", positive_int("per_device_train_batch_size")),
    "gradient_accumulation_steps": to(
        "grad_accum", "micro-batches per step", positive_int("gradient_accumulation_steps")
    ),
    "gradient_checkpointing": Rule(
        "every block (true) or none", _checkpointing_rule, sets="activation_checkpointing"
    ),
    "gradient_checkpointing_kwargs*": ignored(f"{IRRELEVANT} (use_reentrant)"),
    "bf16": Rule("autocast over the model's dtype (fp32 by default: amp-bf16)", _precision, sets="precision"),
    "fp16": Rule("autocast with a GradScaler over fp32 weights", _fp16, sets="precision"),
    "tf32": ignored(f"{NOT_MODELLED}: TF32 matmuls for fp32 work"),
    "bf16_full_eval": ignored(IRRELEVANT),
    "fp16_full_eval": ignored(IRRELEVANT),
    "torch_dtype": ignored("read with bf16/fp16 (the weights' dtype)"),
    "dtype": ignored("read with bf16/fp16 (the weights' dtype)"),
    "model_init_kwargs.torch_dtype": ignored("read with bf16/fp16 (the weights' dtype)"),
    "model_init_kwargs*": ignored(IRRELEVANT),
    "optim": optimizer("optim"),
    "max_seq_length": to("seq_len", "tokens per sequence (TRL before 0.20)", positive_int("max_seq_length")),
    "max_length": to("seq_len", "tokens per sequence", positive_int("max_length")),
    "packing": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "padding_free": ignored(f"{IRRELEVANT}: trainplan counts every sequence as seq_len tokens"),
    "max_steps": to("steps", "optimizer steps", _max_steps),
    "save_strategy": Rule("checkpoint writes: steps, epoch or no", _save_strategy, sets="checkpoint_every"),
    "save_steps": Rule("steps between checkpoint writes", _save_steps, sets="checkpoint_every"),
    "num_train_epochs": ignored(f"{NOT_MODELLED}: trainplan does not read the dataset; give dataset_tokens"),
    "deepspeed": to("_reference", "a DeepSpeed JSON file (beside this one) or its contents", _reference),
    "fsdp": Rule("FSDP options", lambda value, flat: fsdp_option("fsdp", value), sets="zero_stage, offload"),
    **_fsdp_rules(),
    "fsdp_config": ignored(f"{NOT_MODELLED}: an FSDP config file; write its fsdp_* keys inline"),
    "torch_compile": to("compile", "torch.compile", lambda value: truthy("torch_compile", value)),
    "torch_compile_backend": ignored(IRRELEVANT),
    "torch_compile_mode": ignored(IRRELEVANT),
    "use_liger_kernel": Rule(
        "Liger's fused linear + cross-entropy and its RMSNorm, RoPE and SwiGLU kernels",
        lambda value, flat: (
            {"loss": "fused", "kernels": "liger"} if truthy("use_liger_kernel", value) else Ignore("false")
        ),
        sets="loss, kernels",
    ),
    "liger_kernel_config*": ignored(f"{NOT_MODELLED}: per-kernel Liger switches (all are taken as on)"),
    "activation_offloading": to(
        "activation_offload",
        "TRL's offload of saved activations",
        lambda v: truthy("activation_offloading", v),
    ),
    "loss_type": Rule(
        "SFTConfig.loss_type: chunked_nll is checkpointed chunks, nll the full logits",
        _loss_type,
        sets="loss",
    ),
    **{key: ignored(_PREFERENCE) for key in PREFERENCE_KEYS},
    **GRPO_RULES,
    **PPO_RULES,
    "precompute_ref_log_probs": Rule(
        "the reference's log-probs computed before training", _precompute, sets="reference"
    ),
    "completion_only_loss": ignored(IRRELEVANT),
    "assistant_only_loss": ignored(IRRELEVANT),
    "dataset_text_field": ignored(IRRELEVANT),
    "use_peft": Rule("LoRA through peft (4/8-bit base: QLoRA)", _peft, sets="method"),
    "lora_r": to("lora.rank", "LoRA rank", positive_int("lora_r")),
    "lora_alpha": to("lora.alpha", "LoRA alpha"),
    "lora_dropout": to("lora.dropout", "LoRA dropout"),
    "lora_target_modules": to("lora.targets", "module names or all-linear"),
    "use_dora": to("lora.dora", "DoRA", lambda value: truthy("use_dora", value)),
    "load_in_4bit": Rule(
        "4-bit base",
        lambda v, f: {"base_weights": "nf4"} if truthy("load_in_4bit", v) else Ignore("false"),
        sets="base_weights",
    ),
    "load_in_8bit": Rule(
        "8-bit base",
        lambda v, f: {"base_weights": "int8"} if truthy("load_in_8bit", v) else Ignore("false"),
        sets="base_weights",
    ),
    "bnb_4bit_quant_type": ignored(f"{NOT_MODELLED}: nf4 and fp4 take the same bytes"),
    "use_bnb_nested_quant": ignored(f"{NOT_MODELLED}: nf4 is counted with double quantisation"),
    "attn_implementation": to(
        "attention", "attention kernel", lambda value: choice("attn_implementation", ATTENTION, value)
    ),
    "model_revision": ignored(IRRELEVANT),
    "lora_task_type": ignored(IRRELEVANT),
    "lora_modules_to_save": ignored(f"{NOT_MODELLED}: fully trained extra modules"),
    "use_rslora": ignored(f"{IRRELEVANT} (a scaling rule)"),
}

TRL_KEYS = (
    "max_seq_length", "max_length", "packing", "dataset_text_field", "completion_only_loss",
    "assistant_only_loss", "use_peft", "lora_r", "activation_offloading", "padding_free", "loss_type",
    *PREFERENCE_KEYS, *GRPO_KEYS, *PPO_KEYS, "beta", "max_completion_length", "max_prompt_length",
    "precompute_ref_log_probs",
)  # fmt: skip
MARKERS = (
    "per_device_train_batch_size", "optim", "gradient_checkpointing", "output_dir", "model_name_or_path",
    "dataset_name", *TRL_KEYS,
)  # fmt: skip


def detect(data: Mapping[str, Any]) -> bool:
    """TrainingArguments keys at the top level."""
    return sum(key in data for key in MARKERS) >= 2


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """The stage of a TRL config (`trl_stage`); the model's own cross-entropy over full logits
    where TRL's chunked loss does not run: a config with max_seq_length is for TRL 0.19 or
    older (renamed max_length in 0.20, trl e102ac8df), before chunked_nll (TRL 1.4, 9bcf72943);
    the preference trainers of the TRL read here (f2cd5771) take the model's full logits and
    selective_log_softmax (trl/trainer/dpo_trainer.py _compute_loss)."""
    found: dict[str, tuple[Any, str]] = {}
    stage = trl_stage(flat) if recipe(flat) == "trl" else None
    if stage is not None:
        found["stage"] = stage
    if recipe(flat) != "trl" or flat.get("loss_type") in SFT_LOSSES:
        return found
    if "max_seq_length" in flat:
        return found | {
            "loss": ("standard", "max_seq_length: a TRL 0.19 config, the model's own cross-entropy")
        }
    if stage is not None and stage[0] in ("dpo", "kto"):
        return found | {"loss": ("selective", "DPO's and KTO's full logits through selective_log_softmax")}
    if stage is not None and stage[0] == "ppo":
        return found | {
            "loss": ("selective", "PPOTrainer scores the policy's full logits (selective_log_softmax)"),
            "activation_checkpointing": ("none", PPO_NO_CHECKPOINTING),
        }
    if stage is not None and stage[0] == "grpo":
        # the loss: the TRL read here (f2cd5771) scores the completion's full logits; the
        # sequence: the prompts are the dataset's (untruncated since TRL 0.28)
        found["loss"] = (
            "selective",
            "TRL 1.10's GRPO scores the completion's full logits (selective_log_softmax)",
        )
        prompt = (
            f"{GRPO_PROMPT_DEFAULT} prompt tokens assumed (GRPOConfig's max_prompt_length default "
            "through TRL 0.26; newer TRL keeps the dataset's prompts whole: give seq_len as prompt + "
            "completion) and the completion"
        )
        return found | {"seq_len": (GRPO_PROMPT_DEFAULT + _completion_of(flat), prompt)}
    preference = (*PREFERENCE_KEYS, "beta", "max_completion_length", "max_prompt_length")
    if (stage is not None and stage[0] != "sft") or any(key in flat for key in preference):
        return found | {"loss": ("standard", "a preference trainer's log-probabilities over the full logits")}
    return found


# A config for TRL's command line (`trl sft --config FILE`, trl/cli.py): its comments name it.
TRL_CLI = "<trl command line>"
_TRL_COMMAND = re.compile(r"^#.*\btrl\s+(sft|dpo|grpo|kto|orpo|cpo|reward|rloo|ppo)\b", re.MULTILINE)


def hints(text: str) -> dict[str, Any]:
    """A file its comments say is run with `trl sft` (or another TRL command) is a TRL config."""
    found = _TRL_COMMAND.search(text)
    return {TRL_CLI: found.group(1)} if found else {}


def recipe(flat: Mapping[str, Any]) -> str:
    """TRL's SFTConfig defaults when the file has TRL's own keys or is run with TRL's command
    line; the plain Trainer's otherwise."""
    return "trl" if TRL_CLI in flat or any(key in flat for key in TRL_KEYS) else "hf-trainer"


# transformers TrainingArguments' own defaults, under TRL's configs and LLaMA-Factory's too.
TRAINER_DEFAULTS = {
    "per_device_train_batch_size": Default(
        8, "transformers", "TrainingArguments.per_device_train_batch_size"
    ),
    "gradient_accumulation_steps": Default(
        1, "transformers", "TrainingArguments.gradient_accumulation_steps"
    ),
    "gradient_checkpointing": Default(
        False,
        "transformers",
        "TrainingArguments.gradient_checkpointing",
        "None in the signature, false once __post_init__ has run",
    ),
    "optim": Default(
        "adamw_torch_fused",
        "transformers",
        "TrainingArguments.optim",
        "default_optim: adamw_torch_fused with torch 2.8 or newer (adamw_torch before)",
    ),
}
# TRL's SFTConfig and ModelConfig over them (trl/trainer/base_config.py, sft_config.py,
# model_config.py): the full model unless use_peft, checkpointing on, bf16 unless fp16.
TRL_DEFAULTS = {
    **TRAINER_DEFAULTS,
    "use_peft": Default(False, "trl", "ModelConfig.use_peft"),
    "gradient_checkpointing": Default(True, "trl", "_BaseConfig.gradient_checkpointing"),
    "bf16": Default(
        True, "trl", "_BaseConfig.bf16", "None in the signature; __post_init__ sets it to not fp16"
    ),
    "max_length": Default(1024, "trl", "SFTConfig.max_length"),
    "activation_offloading": Default(False, "trl", "SFTConfig.activation_offloading"),
}
TRL_PEFT_DEFAULTS = {
    "lora_r": Default(16, "trl", "ModelConfig.lora_r"),
    "lora_alpha": Default(32, "trl", "ModelConfig.lora_alpha"),
    "lora_dropout": Default(0.05, "trl", "ModelConfig.lora_dropout"),
}


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """TRL's defaults for a file with TRL's own keys (its LoRA ones with use_peft), the plain
    Trainer's otherwise."""
    if recipe(flat) != "trl":
        return TRAINER_DEFAULTS
    peft = on(flat, "use_peft")
    fp16 = on(flat, "fp16")
    bf16 = Default(not fp16, "trl", "_BaseConfig.bf16", TRL_DEFAULTS["bf16"].effective)
    found = {**TRL_DEFAULTS, "bf16": bf16, **(TRL_PEFT_DEFAULTS if peft else {})}
    if _grpo(flat):  # GRPOConfig has no max_length: its sequences are prompt + completion
        found.pop("max_length")
    return found
