"""Write src/trainplan/data/framework_defaults.yaml: each training framework's own defaults and the meaning
of its settings, read from the framework's source at a pinned commit.

The sources are bare git mirrors (one folder per repository, `OWNER+NAME/repo`) or, for transformers, an
installed copy of the package. Nothing is imported: every file is parsed with `ast`. For each named class the
table keeps, per field, the default (a literal; an expression is kept as text and marked as such), the type
annotation, the help text (dataclass `metadata={"help": ...}`, pydantic `description=` or
`json_schema_extra={"description": ...}`, an attribute docstring, or the class docstring's Args entry), the
line, and the assignments made after construction (`__post_init__`, pydantic validators, the framework's
config normalisation) that change the value in effect. torchtune's recipes are read for their
`cfg.get(name, default)` and `cfg.name` reads; DeepSpeed's top-level keys come from its constants module.

    python scripts/framework_defaults.py [--mirrors DIR] [--transformers DIR] [--ref KEY=REF]
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "trainplan" / "data" / "framework_defaults.yaml"
MIRRORS = Path(os.environ.get("TRAINPLAN_MIRRORS", "mirrors"))  # OWNER+NAME/repo git mirrors
SITE = ROOT / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"

HELP_CHARS = 200
TEXT_CHARS = 160
SET_LATER_MAX = 6
EFFECTS_MAX = 30

Data = dict[str, Any]

# Field names that bear on memory, time or the readers' settings; applied to the large classes only.
RELEVANT = re.compile(
    r"batch|accum|checkpoint|offload|bf16|fp16|fp8|fp32|tf32|float|dtype|precision|mixed|optim|lora|peft|dora"
    r"|adapter|quant|bnb|4bit|8bit|attn|attention|liger|cross_entropy|loss|pack|length|seq_len|cutoff|fsdp"
    r"|deepspeed|zero|shard|replicate|compile|steps|epoch|parallel|degree|stage|prefetch|wrap|upcast|unsloth"
    r"|kernel|finetuning|target|rank|alpha|dropout|padding|flash|sdp|xformers|flex|sage_|fused|implementation"
    r"|cpu|memory|empty_cache|tiled|chunk|expert|moe|freeze|frozen|trainable|use_cache|device|world|dynamo"
    r"|master|reduce|overlap|bucket|pin_memory|nvme|model_name|base_model|torch_empty"
)
IRRELEVANT = re.compile(
    r"^(eval_|hub_|push_|save_|logging_|log_|report_|resume_|wandb|mlflow|comet|swanlab|trackio|ray_|profil"
    r"|tpu_|sagemaker|export_|vllm_|sglang_|kt_|generation_|dataloader_|dataset|include_|metric_|greater_"
    r"|load_best|label_|length_column|otel|gradio|lisa_|relora|jagged|badam|apollo|galore|ppo_|kto_|dpo_"
    r"|simpo|orpo|cpo|rl_|reward|ref_model|mics|zeropp|zenflow|use_all_reduce|ebft|restore_|enable_jit"
    r"|prediction_|batch_eval|default_system|auto_resume|num_dataset|loss_watchdog|plot_loss|early_stopping)"
)

# Statements that change a field after construction: these methods of a config class, and these receivers.
LATE_METHODS = ("__post_init__",)
LATE_DECORATORS = ("model_validator", "root_validator")
LATE_RECEIVERS = ("self", "data", "values")


# --- Sources ------------------------------------------------------------------------------------------------


class Tree(Protocol):
    """A source tree at one pinned state."""

    def read(self, path: str) -> str: ...

    def files(self, prefix: str) -> list[str]: ...


def git(git_dir: Path, *args: str) -> str:
    """Run git on a bare repository and return its standard output."""
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True, check=True
    )
    return done.stdout


@dataclass
class GitTree:
    """A bare git repository at one commit."""

    git_dir: Path
    commit: str
    cache: dict[str, str] = field(default_factory=dict)

    def read(self, path: str) -> str:
        if path not in self.cache:
            self.cache[path] = git(self.git_dir, "show", f"{self.commit}:{path}")
        return self.cache[path]

    def files(self, prefix: str) -> list[str]:
        listing = git(self.git_dir, "ls-tree", "-r", "--name-only", self.commit, "--", prefix)
        return [line for line in listing.splitlines() if line]

    def exists(self, path: str) -> bool:
        done = subprocess.run(
            ["git", "--git-dir", str(self.git_dir), "cat-file", "-e", f"{self.commit}:{path}"],
            capture_output=True,
        )
        return done.returncode == 0


@dataclass
class FolderTree:
    """A plain folder (an installed package) standing for the repository folder `strip`."""

    root: Path
    strip: str = ""

    def read(self, path: str) -> str:
        return (self.root / path.removeprefix(self.strip)).read_text(encoding="utf-8")

    def files(self, prefix: str) -> list[str]:
        base = self.root / prefix.removeprefix(self.strip)
        return sorted(self.strip + str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file())


# --- What to read -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassSpec:
    """One class to extract. `name` may be dotted for a nested class ("Trainer.Config")."""

    path: str
    name: str
    every_field: bool = True  # False: only the fields RELEVANT picks, plus the wanted settings
    inherit: tuple[str, ...] = ()  # other extracted classes whose fields this one inherits


@dataclass(frozen=True)
class FunctionSpec:
    """A function or method whose signature defaults and effects (assignments, returns) are recorded."""

    path: str
    name: str  # "func" or "Class.method"
    effects: bool = True


@dataclass(frozen=True)
class Marker:
    """A statement located by a piece of its source text, with its guards and (optionally) its history."""

    key: str
    path: str
    needle: str
    note: str
    history: bool = False


@dataclass(frozen=True)
class Scan:
    """Assignments to `receiver.field` / `receiver["field"]` in a file's functions (config normalisation)."""

    path: str
    receivers: tuple[str, ...]
    functions: tuple[str, ...] = ()  # only these functions; empty: every function


@dataclass(frozen=True)
class Constant:
    """A DeepSpeed-style setting whose key and default are module constants."""

    setting: str
    default: str  # name of the default constant
    key: str = ""  # name of the key constant, whose value must end the setting


@dataclass(frozen=True)
class Framework:
    key: str
    repo: str
    mirror: str  # folder under the mirrors ("" for an installed package)
    version_file: str
    version_pattern: str  # a regex whose group "v" is the version
    note: str
    ref: str = "HEAD"
    classes: tuple[ClassSpec, ...] = ()
    enums: tuple[str, ...] = ()  # files whose Enum classes resolve defaults such as `Names.AUTO`
    scans: tuple[Scan, ...] = ()
    functions: tuple[FunctionSpec, ...] = ()
    markers: tuple[Marker, ...] = ()
    constants_file: str = ""
    constants: tuple[Constant, ...] = ()
    tables: tuple[tuple[str, str], ...] = ()  # (file, NAME) of module-level literal tables
    recipes: tuple[str, ...] = ()  # torchtune recipe files
    recipe_configs: str = ""  # folder of torchtune recipe configs, for the loss components they name
    wanted: tuple[str, ...] = ()  # the settings trainplan's reader of this framework reads
    sections: Mapping[str, str] = field(default_factory=dict)  # first key of a dotted setting -> class
    aliases: Mapping[str, str] = field(default_factory=dict)  # setting leaf -> field name
    inherits_from: tuple[str, ...] = ()  # frameworks whose fields these classes inherit
    reasons: Mapping[str, str] = field(default_factory=dict)  # why a wanted setting is absent


def words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


HF_SETTINGS = words(
    "activation_offloading assistant_only_loss attn_implementation bf16 bf16_full_eval bnb_4bit_quant_type"
    " completion_only_loss dataset_text_field deepspeed dtype fp16 fp16_full_eval fsdp fsdp_config"
    " gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs liger_kernel_config"
    " load_in_4bit load_in_8bit lora_alpha lora_dropout lora_modules_to_save lora_r lora_target_modules"
    " lora_task_type loss_type max_length max_seq_length max_steps model_init_kwargs model_name_or_path"
    " model_revision num_train_epochs optim packing padding_free per_device_train_batch_size tf32"
    " torch_compile torch_compile_backend torch_compile_mode torch_dtype use_bnb_nested_quant use_dora"
    " use_liger_kernel use_peft use_rslora"
    # GRPOConfig: the rollout
    " num_generations max_completion_length use_vllm vllm_mode vllm_gpu_memory_utilization"
    " vllm_tensor_parallel_size vllm_enable_sleep_mode beta steps_per_generation num_iterations"
    " generation_batch_size vllm_importance_sampling_correction"
)
FSDP_KEYS = words(
    "activation_checkpointing auto_wrap_policy backward_prefetch cpu_ram_efficient_loading forward_prefetch"
    " min_num_params offload_params reshard_after_forward sharding_strategy state_dict_type"
    " sync_module_states transformer_layer_cls_to_wrap use_orig_params version"
)
FSDP_SETTINGS = tuple(f"fsdp_config.{k}" for k in FSDP_KEYS) + tuple(
    f"fsdp_config.fsdp_{k}" for k in FSDP_KEYS
)
LLAMA_FACTORY_SETTINGS = words(
    "additional_target buffer_size cutoff_len disable_gradient_checkpointing double_quantization"
    " enable_liger_kernel finetuning_type flash_attn freeze_multi_modal_projector freeze_vision_tower"
    " image_max_pixels infer_backend lora_rank lora_target loraplus_lr_ratio mix_of_reasoning neat_packing"
    " pissa_convert pissa_init pref_beta pref_loss pure_bf16 quantization_bit quantization_method"
    " quantization_type rope_scaling shift_attn stage streaming tokenized_path upcast_layernorm"
    " upcast_lmhead_output use_unsloth use_unsloth_gc"
    " tensor_model_parallel_size pipeline_model_parallel_size virtual_pipeline_model_parallel_size"
    " sequence_parallel context_parallel_size expert_model_parallel_size recompute_granularity"
    " recompute_method recompute_num_layers use_distributed_optimizer mixed_precision"
)
AXOLOTL_SETTINGS = words(
    "activation_offloading adapter base_model base_model_config batch_size bf16 bfloat16 bnb_config_kwargs"
    " cut_cross_entropy deepspeed eager_attention flash_attention flash_attn_cross_entropy"
    " flash_attn_fuse_mlp flash_attn_fuse_qkv flash_attn_rms_norm float16 fp16 fsdp fsdp_version gptq"
    " gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs"
    " is_llama_derived_model liger_cross_entropy liger_fused_linear_cross_entropy liger_glu_activation"
    " liger_layer_norm liger_rms_norm liger_rope load_in_4bit load_in_8bit lora_alpha lora_dropout"
    " lora_fan_in_fan_out lora_modules_to_save lora_r lora_target_linear lora_target_modules max_steps"
    " micro_batch_size model_type num_epochs optimizer pad_to_sequence_len peft_use_dora peft_use_rslora"
    " plugins sample_packing saves_per_epoch sdp_attention sequence_len tf32 tokenizer_type torch_compile"
    " torch_compile_backend unfrozen_parameters xformers_attention attn_implementation flex_attention"
    " sage_attention chunked_cross_entropy tensor_parallel_size context_parallel_size dp_shard_size"
    " dp_replicate_size sequence_parallel_degree expert_parallel_size tiled_mlp"
    # GRPO (TRLConfig under `trl:`, VllmConfig under `vllm:`)
    " rl rl_beta beta num_generations max_completion_length use_vllm vllm_mode vllm_enable_sleep_mode"
    " gpu_memory_utilization"
)
TORCHTITAN_SETTINGS = words(
    "activation_checkpoint.mode activation_checkpoint.selective_ac_option compile.enable compile.components"
    " float8.enable_float8_linear quantize.linear.float8.enable_fsdp_float8_all_gather model.converters"
    " model.flavor model.name optimizer.implementation optimizer.name parallelism.context_parallel_degree"
    " parallelism.data_parallel_replicate_degree parallelism.data_parallel_shard_degree"
    " parallelism.enable_async_tensor_parallel parallelism.fsdp_reshard_after_forward"
    " parallelism.mixed_precision_param parallelism.mixed_precision_reduce"
    " parallelism.pipeline_parallel_degree parallelism.pipeline_parallel_microbatch_size"
    " parallelism.pipeline_parallel_schedule parallelism.tensor_parallel_degree"
    " parallelism.expert_parallel_degree training.batch_size training.compile"
    " training.data_parallel_replicate_degree training.data_parallel_shard_degree"
    " training.enable_cpu_offload training.global_batch_size training.local_batch_size training.max_norm"
    " training.mixed_precision_param training.mixed_precision_reduce training.pipeline_parallel_degree"
    " training.seq_len training.steps training.tensor_parallel_degree training.dtype"
)
TORCHTITAN_LEGACY = {
    "training.batch_size": "the pre-typed (argparse) JobConfig name, renamed training.local_batch_size when"
    " the typed JobConfig came (c1c2f55d1, 2025-04-18, '[PoC] Typed JobConfig')",
    "training.compile": "a Training field up to 34d815c02 (2025-07-22); now compile.enable",
    "training.data_parallel_replicate_degree": "the argparse-era name; now"
    " parallelism.data_parallel_replicate_degree",
    "training.data_parallel_shard_degree": "the argparse-era name; now"
    " parallelism.data_parallel_shard_degree",
    "training.tensor_parallel_degree": "the argparse-era name (removed in 785c34c99, 2025-03-18); now"
    " parallelism.tensor_parallel_degree",
    "training.pipeline_parallel_degree": "the argparse-era name; now parallelism.pipeline_parallel_degree",
    "float8.enable_float8_linear": "the [float8] section of 2024 configs (removed in 57387af0e, 2025-02-14,"
    " 'generic ModelConverter'); float8 is now model.converters = ['float8'] with quantize.linear.float8.*",
    "parallelism.mixed_precision_param": "lives in training.mixed_precision_param in this JobConfig",
    "parallelism.mixed_precision_reduce": "lives in training.mixed_precision_reduce in this JobConfig",
}
TORCHTUNE_SETTINGS = words(
    "activation_offloading_use_streams batch_size clip_grad_norm compile cudnn_deterministic_mode"
    " custom_sharded_layers data_parallel_replicate_dim data_parallel_shard_dim device dtype"
    " enable_activation_checkpointing enable_activation_offloading epochs fsdp_cpu_offload"
    " fsdp_reshard_after_forward gradient_accumulation_steps log_every_n_steps log_level"
    " log_peak_memory_stats max_steps_per_epoch optimizer_in_bwd output_dir save_adapter_weights_only"
    " shuffle tensor_parallel_dim tensor_parallel_plan loss model optimizer tokenizer checkpointer"
)
DEEPSPEED_SETTINGS = words(
    "bf16.enabled bf16.bf16_master_weights_and_grads bf16.bf16_optimizer_states communication_data_type"
    " fp16.enabled fp16.loss_scale fp16.initial_scale_power gradient_accumulation_steps gradient_clipping"
    " optimizer.type prescale_gradients steps_per_print train_batch_size train_micro_batch_size_per_gpu"
    " wall_clock_breakdown zero_allow_untested_optimizer zero_optimization.stage"
    " zero_optimization.contiguous_gradients zero_optimization.overlap_comm"
    " zero_optimization.round_robin_gradients zero_optimization.offload_optimizer.device"
    " zero_optimization.offload_optimizer.nvme_path zero_optimization.offload_optimizer.pin_memory"
    " zero_optimization.offload_param.device zero_optimization.offload_param.nvme_path"
    " zero_optimization.offload_param.pin_memory zero_optimization.stage3_gather_16bit_weights_on_model_save"
    " zero_optimization.reduce_bucket_size zero_optimization.stage3_prefetch_bucket_size"
    " zero_optimization.stage3_param_persistence_threshold zero_optimization.stage3_max_live_parameters"
    " zero_optimization.sub_group_size"
)
ACCELERATE_FSDP = words(
    "fsdp_activation_checkpointing fsdp_auto_wrap_policy fsdp_backward_prefetch"
    " fsdp_cpu_ram_efficient_loading fsdp_forward_prefetch fsdp_min_num_params fsdp_offload_params"
    " fsdp_reshard_after_forward fsdp_sharding_strategy fsdp_state_dict_type fsdp_sync_module_states"
    " fsdp_transformer_layer_cls_to_wrap fsdp_use_orig_params fsdp_version"
)
ACCELERATE_SETTINGS = (
    words(
        "compute_environment distributed_type downcast_bf16 dynamo_config dynamo_config.dynamo_backend"
        " enable_cpu_affinity gpu_ids machine_rank main_process_ip main_process_port main_training_function"
        " mixed_precision num_machines num_processes rdzv_backend same_network use_cpu"
        " deepspeed_config.deepspeed_config_file deepspeed_config.gradient_accumulation_steps"
        " deepspeed_config.offload_optimizer_device deepspeed_config.offload_param_device"
        " deepspeed_config.zero_stage deepspeed_config.zero3_init_flag"
    )
    + tuple(f"fsdp_config.{k}" for k in ACCELERATE_FSDP)
    + tuple(f"fsdp_config.{k.removeprefix('fsdp_')}" for k in ACCELERATE_FSDP)
)
FSDP_ALIASES = {
    "offload_params": "cpu_offload",
    "transformer_layer_cls_to_wrap": "transformer_cls_names_to_wrap",
    "version": "fsdp_version",
}

TRANSFORMERS = "src/transformers"
TRL = "trl/trainer"
AXOLOTL = "src/axolotl/utils/schemas"
LLAMA_FACTORY = "src/llamafactory/hparams"
ACCELERATE = "src/accelerate/utils/dataclasses.py"

FRAMEWORKS: tuple[Framework, ...] = (
    Framework(
        key="transformers",
        repo="huggingface/transformers",
        mirror="huggingface+transformers",
        version_file="src/transformers/__init__.py",
        version_pattern=r'__version__ = "(?P<v>[^"]+)"',
        note="TrainingArguments, the base of TRL's configs and of LLaMA-Factory's TrainingArguments",
        classes=(ClassSpec(f"{TRANSFORMERS}/training_args.py", "TrainingArguments", every_field=False),),
        enums=(f"{TRANSFORMERS}/training_args.py", f"{TRANSFORMERS}/trainer_utils.py"),
        wanted=HF_SETTINGS,
        inherits_from=("trl",),
    ),
    Framework(
        key="trl",
        repo="huggingface/trl",
        mirror="huggingface+trl",
        version_file="VERSION",
        version_pattern=r"(?P<v>\S+)",
        note="SFTConfig, DPOConfig and GRPOConfig subclass _BaseConfig, which subclasses transformers"
        " TrainingArguments; ModelConfig holds the model, PEFT and quantisation flags of the TRL scripts",
        classes=(
            ClassSpec(f"{TRL}/model_config.py", "ModelConfig"),
            ClassSpec(f"{TRL}/base_config.py", "_BaseConfig"),
            ClassSpec(f"{TRL}/sft_config.py", "SFTConfig", inherit=("_BaseConfig",)),
            ClassSpec(f"{TRL}/dpo_config.py", "DPOConfig", every_field=False, inherit=("_BaseConfig",)),
            ClassSpec(f"{TRL}/grpo_config.py", "GRPOConfig", every_field=False, inherit=("_BaseConfig",)),
        ),
        wanted=HF_SETTINGS,
        inherits_from=("transformers",),
    ),
    Framework(
        key="axolotl",
        repo="axolotl-ai-cloud/axolotl",
        mirror="axolotl-ai-cloud+axolotl",
        version_file="VERSION",
        version_pattern=r"(?P<v>\S+)",
        note="AxolotlInputConfig (utils/schemas/config.py) is the union of the mixins below; Liger, Cut Cross"
        " Entropy and expert parallelism are plugins whose args merge into the same schema when listed in"
        " `plugins`",
        classes=(
            ClassSpec(f"{AXOLOTL}/config.py", "AxolotlInputConfig", every_field=False),
            ClassSpec(f"{AXOLOTL}/model.py", "ModelInputConfig", every_field=False),
            ClassSpec(f"{AXOLOTL}/training.py", "HyperparametersConfig", every_field=False),
            ClassSpec(f"{AXOLOTL}/training.py", "SelectiveCheckpointingConfig"),
            ClassSpec(f"{AXOLOTL}/peft.py", "LoraConfig"),
            ClassSpec(f"{AXOLOTL}/fsdp.py", "FSDPConfig"),
            ClassSpec(f"{AXOLOTL}/deprecated.py", "DeprecatedParameters", every_field=False),
            ClassSpec(f"{AXOLOTL}/deprecated.py", "RemappedParameters"),
            ClassSpec("src/axolotl/integrations/liger/args.py", "LigerArgs"),
            ClassSpec("src/axolotl/integrations/cut_cross_entropy/args.py", "CutCrossEntropyArgs"),
            ClassSpec("src/axolotl/integrations/expert_parallel/args.py", "ExpertParallelArgs"),
            ClassSpec(f"{AXOLOTL}/trl.py", "TRLConfig", every_field=False),
            ClassSpec(f"{AXOLOTL}/vllm.py", "VllmConfig"),
        ),
        enums=(f"{AXOLOTL}/enums.py",),
        scans=(
            Scan(f"{AXOLOTL}/validation.py", LATE_RECEIVERS),
            Scan("src/axolotl/utils/config/__init__.py", ("cfg",), ("normalize_config", "resolve_dtype")),
        ),
        functions=(
            FunctionSpec(
                "src/axolotl/core/builders/base.py", "TrainerBuilderBase._configure_gradient_checkpointing"
            ),
        ),
        tables=((f"{AXOLOTL}/enums.py", "LEGACY_ATTN_FLAG_TO_IMPL"),),
        markers=(
            Marker(
                "legacy_attention_flags",
                f"{AXOLOTL}/config.py",
                "set_flags = [f for f in LEGACY_ATTN_FLAG_TO_IMPL if data.get(f)]",
                "the boolean attention flags (flash_attention, sdp_attention, ...) are mapped onto"
                " attn_implementation (LEGACY_ATTN_FLAG_TO_IMPL, first set flag wins) and removed; with none"
                " set and no attn_implementation, the transformers default applies",
            ),
            Marker(
                "activation_offloading_modes",
                "src/axolotl/core/trainers/mixins/activation_checkpointing.py",
                'use_streams = self.args.activation_offloading != "legacy"',
                "activation_offloading: true/'disk' use the TRL offloader with CUDA streams, 'legacy' the"
                " synchronous one (fewer activations resident), 'hidden_states' offloads the checkpointed"
                " layer inputs (and keeps gradient checkpointing on)",
            ),
            Marker(
                "fsdp_config_prefix",
                f"{AXOLOTL}/validation.py",
                'if key.startswith("fsdp_") and key != "fsdp_version"',
                "fsdp_config keys may carry the accelerate-style fsdp_ prefix; it is dropped before"
                " validation",
            ),
        ),
        wanted=AXOLOTL_SETTINGS + FSDP_SETTINGS,
        aliases=FSDP_ALIASES,
        reasons={
            "flash_attn_fuse_qkv": "no longer in the schema (not a field of any class read here)",
        },
    ),
    Framework(
        key="torchtitan",
        repo="pytorch/torchtitan",
        mirror="pytorch+torchtitan",
        ref="v0.2.2",
        version_file="assets/version.txt",
        version_pattern=r"(?P<v>\S+)",
        note="pinned at tag v0.2.2, the last release whose run configuration is the TOML-backed JobConfig"
        " (torchtitan/config/job_config.py) that trainplan's reader reads; see torchtitan_head for the"
        " Python-dataclass configs that replaced it (9810191bb, 2026-02-23)",
        classes=tuple(
            ClassSpec("torchtitan/config/job_config.py", name)
            for name in (
                "JobConfig",
                "Model",
                "Optimizer",
                "Training",
                "Parallelism",
                "ActivationCheckpoint",
                "Compile",
                "Float8Linear",
                "QuantizedLinear",
                "Quantize",
                "MemoryEstimation",
            )
        ),
        markers=(
            Marker(
                "global_batch_size_default",
                "torchtitan/train.py",
                "global_batch_size = job_config.training.local_batch_size * batch_degree",
                "global_batch_size < 0 (the default -1) means local_batch_size x the data-parallel degree,"
                " i.e. one gradient-accumulation step",
            ),
            Marker(
                "gradient_accumulation_steps",
                "torchtitan/train.py",
                "self.gradient_accumulation_steps = global_batch_size // (",
                "gradient accumulation = global_batch_size / (local_batch_size x data-parallel degree)",
            ),
            Marker(
                "batch_degree",
                "torchtitan/train.py",
                "batch_degree, batch_rank = batch_mesh.size()",
                "the data-parallel degree is the size of the 'batch' mesh",
            ),
            Marker(
                "batch_mesh",
                "torchtitan/distributed/parallel_dims.py",
                '"batch": self.dp_replicate * self.dp_shard',
                "the 'batch' mesh is data_parallel_replicate_degree x data_parallel_shard_degree",
            ),
        ),
        wanted=TORCHTITAN_SETTINGS,
        reasons=TORCHTITAN_LEGACY,
    ),
    Framework(
        key="torchtitan_head",
        repo="pytorch/torchtitan",
        mirror="pytorch+torchtitan",
        version_file="assets/version.txt",
        version_pattern=r"(?P<v>\S+)",
        note="torchtitan after the move from TOML to Python dataclass configs: token budgets"
        " (num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step, max_context_length) replace"
        " local_batch_size / global_batch_size / seq_len",
        classes=(
            ClassSpec("torchtitan/trainer.py", "Trainer.Config"),
            ClassSpec("torchtitan/config/configs.py", "TrainingConfig"),
            ClassSpec("torchtitan/config/configs.py", "ParallelismConfig"),
            ClassSpec("torchtitan/config/configs.py", "CompileConfig"),
            ClassSpec("torchtitan/distributed/activation_checkpoint.py", "ActivationCheckpointing.Config"),
            ClassSpec(
                "torchtitan/distributed/activation_checkpoint.py",
                "SelectiveAC.Config",
                inherit=("ActivationCheckpointing.Config",),
            ),
            ClassSpec(
                "torchtitan/distributed/activation_checkpoint.py",
                "FullAC.Config",
                inherit=("ActivationCheckpointing.Config",),
            ),
            ClassSpec("torchtitan/components/optimizer/optimizer.py", "OptimizersContainer.Config"),
        ),
        markers=(
            Marker(
                "num_tokens_per_train_step_default",
                "torchtitan/trainer.py",
                "num_tokens_per_train_step = num_tokens_per_dp_rank * dp_degree",
                "num_tokens_per_train_step < 0 (the default -1) means one gradient-accumulation step",
            ),
            Marker(
                "gradient_accumulation_steps",
                "torchtitan/trainer.py",
                "self.gradient_accumulation_steps = num_tokens_per_train_step // (",
                "gradient accumulation = num_tokens_per_train_step / (tokens per dp rank x dp degree)",
            ),
        ),
        sections={"activation_checkpoint": "SelectiveAC.Config", "optimizer": "OptimizersContainer.Config"},
    ),
    Framework(
        key="torchtune",
        repo="pytorch/torchtune",
        mirror="pytorch+torchtune",
        version_file="version.txt",
        version_pattern=r"(?P<v>\S+)",
        note="torchtune recipes read their YAML config with cfg.get(name, default) (optional) and cfg.name"
        " (required: OmegaConf raises on a missing key); LoRA settings are arguments of the model builder"
        " named by model._component_, and the loss is the class named by loss._component_",
        functions=(
            FunctionSpec(
                "torchtune/modules/loss/cross_entropy_loss.py", "LinearCrossEntropyLoss.__init__", False
            ),
            FunctionSpec(
                "torchtune/modules/loss/ce_chunked_output_loss.py", "CEWithChunkedOutputLoss.__init__", False
            ),
            FunctionSpec("torchtune/models/llama3/_model_builders.py", "lora_llama3_8b", False),
            FunctionSpec("torchtune/models/llama3_2/_model_builders.py", "lora_llama3_2_1b", False),
            FunctionSpec("torchtune/models/llama3/_model_builders.py", "llama3_tokenizer", False),
        ),
        recipes=tuple(
            f"recipes/{name}.py"
            for name in (
                "full_finetune_single_device",
                "full_finetune_distributed",
                "lora_finetune_single_device",
                "lora_finetune_distributed",
                "qat_single_device",
                "qat_distributed",
                "qat_lora_finetune_distributed",
                "full_dpo_distributed",
                "lora_dpo_single_device",
                "lora_dpo_distributed",
            )
        ),
        recipe_configs="recipes/configs",
        wanted=TORCHTUNE_SETTINGS,
    ),
    Framework(
        key="deepspeed",
        repo="deepspeedai/DeepSpeed",
        mirror="deepspeedai+DeepSpeed",
        version_file="version.txt",
        version_pattern=r"(?P<v>\S+)",
        note="a config with no bf16/fp16 block gets DeepSpeedBF16Config()/DeepSpeedFP16Config() defaults"
        " (enabled: false), i.e. fp32 training; top-level batch keys default to None and are completed by"
        " DeepSpeedConfig._set_batch_related_parameters",
        classes=(
            ClassSpec("deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config"),
            ClassSpec("deepspeed/runtime/precision_config.py", "DeepSpeedFP16Config"),
            ClassSpec("deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig"),
            ClassSpec("deepspeed/runtime/zero/offload_config.py", "DeepSpeedZeroOffloadParamConfig"),
            ClassSpec("deepspeed/runtime/zero/offload_config.py", "DeepSpeedZeroOffloadOptimizerConfig"),
        ),
        enums=("deepspeed/runtime/zero/config.py", "deepspeed/runtime/zero/offload_config.py"),
        functions=(
            FunctionSpec("deepspeed/runtime/config.py", "DeepSpeedConfig._set_batch_related_parameters"),
            FunctionSpec("deepspeed/runtime/config.py", "DeepSpeedConfig._batch_assertion"),
            FunctionSpec("deepspeed/runtime/precision_config.py", "get_bfloat16_config"),
            FunctionSpec("deepspeed/runtime/precision_config.py", "get_float16_config"),
            FunctionSpec("deepspeed/runtime/zero/config.py", "get_zero_config"),
        ),
        markers=(
            Marker(
                "world_size",
                "deepspeed/runtime/config.py",
                "self.world_size = dist.get_world_size()",
                "world size used by the batch relation (data-parallel ranks; divided by"
                " sequence_parallel_size when the config names one)",
            ),
            Marker(
                "bf16_zero1_optimizer",
                "deepspeed/runtime/engine.py",
                "return BFLOAT16",
                "bf16 with ZeRO stage 1 (no CPU offload) and fp32 grad accumulation uses the BF16_Optimizer"
                " (fp32 master weights); other ZeRO stages use the ZeRO optimizers' own fp32 partitions",
            ),
        ),
        constants_file="deepspeed/runtime/constants.py",
        constants=(
            Constant("train_batch_size", "TRAIN_BATCH_SIZE_DEFAULT", "TRAIN_BATCH_SIZE"),
            Constant(
                "train_micro_batch_size_per_gpu",
                "TRAIN_MICRO_BATCH_SIZE_PER_GPU_DEFAULT",
                "TRAIN_MICRO_BATCH_SIZE_PER_GPU",
            ),
            Constant(
                "gradient_accumulation_steps",
                "GRADIENT_ACCUMULATION_STEPS_DEFAULT",
                "GRADIENT_ACCUMULATION_STEPS",
            ),
            Constant("gradient_clipping", "GRADIENT_CLIPPING_DEFAULT", "GRADIENT_CLIPPING"),
            Constant("steps_per_print", "STEPS_PER_PRINT_DEFAULT", "STEPS_PER_PRINT"),
            Constant("prescale_gradients", "PRESCALE_GRADIENTS_DEFAULT", "PRESCALE_GRADIENTS"),
            Constant("communication_data_type", "COMMUNICATION_DATA_TYPE_DEFAULT", "COMMUNICATION_DATA_TYPE"),
            Constant("wall_clock_breakdown", "WALL_CLOCK_BREAKDOWN_DEFAULT", "WALL_CLOCK_BREAKDOWN"),
            Constant(
                "zero_allow_untested_optimizer",
                "ZERO_ALLOW_UNTESTED_OPTIMIZER_DEFAULT",
                "ZERO_ALLOW_UNTESTED_OPTIMIZER",
            ),
            Constant("optimizer.type", "OPTIMIZER_TYPE_DEFAULT", "TYPE"),
            Constant("scheduler.type", "SCHEDULER_TYPE_DEFAULT", "TYPE"),
            Constant("bf16.enabled", "BFLOAT16_ENABLED_DEFAULT", "BFLOAT16_ENABLED"),
            Constant(
                "bf16.immediate_grad_update",
                "BFLOAT16_IMMEDIATE_GRAD_UPDATE_DEFAULT",
                "BFLOAT16_IMMEDIATE_GRAD_UPDATE",
            ),
            Constant(
                "bf16.bf16_master_weights_and_grads",
                "BFLOAT16_MASTER_WEIGHTS_AND_GRADS_DEFAULT",
                "BFLOAT16_MASTER_WEIGHTS_AND_GRADS",
            ),
            Constant(
                "bf16.bf16_optimizer_states", "BFLOAT16_OPTIMIZER_STATES_DEFAULT", "BFLOAT16_OPTIMIZER_STATES"
            ),
            Constant("fp16.enabled", "FP16_ENABLED_DEFAULT", "FP16_ENABLED"),
            Constant("fp16.loss_scale", "FP16_LOSS_SCALE_DEFAULT", "FP16_LOSS_SCALE"),
            Constant("amp.enabled", "AMP_ENABLED_DEFAULT", "AMP_ENABLED"),
            Constant("torch_autocast.enabled", "TORCH_AUTOCAST_ENABLED_DEFAULT", "TORCH_AUTOCAST_ENABLED"),
        ),
        wanted=DEEPSPEED_SETTINGS,
        sections={
            "zero_optimization": "DeepSpeedZeroConfig",
            "bf16": "DeepSpeedBF16Config",
            "fp16": "DeepSpeedFP16Config",
        },
    ),
    Framework(
        key="llama_factory",
        repo="hiyouga/LLaMA-Factory",
        mirror="hiyouga+LLaMA-Factory",
        version_file="src/llamafactory/extras/env.py",
        version_pattern=r'VERSION = "(?P<v>[^"]+)"',
        note="ModelArguments, DataArguments, FinetuningArguments are unions of the mixins below;"
        " TrainingArguments subclasses transformers Seq2SeqTrainingArguments (its fields are transformers'"
        " TrainingArguments ones); hparams/parser.py derives compute_dtype, packing and model_max_length",
        classes=(
            ClassSpec(f"{LLAMA_FACTORY}/model_args.py", "BaseModelArguments", every_field=False),
            ClassSpec(f"{LLAMA_FACTORY}/model_args.py", "QuantizationArguments"),
            ClassSpec(f"{LLAMA_FACTORY}/model_args.py", "ProcessorArguments", every_field=False),
            ClassSpec(f"{LLAMA_FACTORY}/model_args.py", "ModelArguments"),
            ClassSpec(f"{LLAMA_FACTORY}/data_args.py", "DataArguments", every_field=False),
            ClassSpec(f"{LLAMA_FACTORY}/finetuning_args.py", "FreezeArguments"),
            ClassSpec(f"{LLAMA_FACTORY}/finetuning_args.py", "LoraArguments"),
            ClassSpec(f"{LLAMA_FACTORY}/finetuning_args.py", "RLHFArguments", every_field=False),
            ClassSpec(f"{LLAMA_FACTORY}/finetuning_args.py", "FinetuningArguments", every_field=False),
            ClassSpec(f"{LLAMA_FACTORY}/training_args.py", "Fp8Arguments"),
            ClassSpec(f"{LLAMA_FACTORY}/training_args.py", "TrainingArguments"),
            ClassSpec(f"{LLAMA_FACTORY}/megatron_bridge_args.py", "MegatronBridgeArguments"),
        ),
        enums=("src/llamafactory/extras/constants.py",),
        scans=(
            Scan(
                f"{LLAMA_FACTORY}/parser.py",
                ("model_args", "data_args", "training_args", "finetuning_args"),
                (
                    "get_train_args",
                    "_set_transformers_logging",
                    "_verify_model_args",
                    "_check_extra_dependencies",
                ),
            ),
        ),
        markers=(
            Marker(
                "gradient_checkpointing_on_by_default",
                "src/llamafactory/model/model_utils/checkpointing.py",
                "if not model_args.disable_gradient_checkpointing:",
                "gradient checkpointing is enabled unless disable_gradient_checkpointing is true (and the"
                " model supports it), whatever TrainingArguments.gradient_checkpointing says",
            ),
            Marker(
                "flash_attn_auto",
                "src/llamafactory/model/model_utils/attention.py",
                "if model_args.flash_attn == AttentionFunction.AUTO:",
                "flash_attn 'auto' sets no attn_implementation: the transformers default applies",
            ),
            Marker(
                "upcast_layernorm",
                "src/llamafactory/model/model_utils/checkpointing.py",
                "if model_args.upcast_layernorm:",
                "upcast_layernorm casts the 1-D layer-norm weights to fp32",
            ),
        ),
        wanted=LLAMA_FACTORY_SETTINGS + HF_SETTINGS,
        inherits_from=("transformers",),
        reasons={
            "mix_of_reasoning": "not an argument at this commit (not a field of any class read here)",
        },
    ),
    Framework(
        key="llama_factory_v1",
        repo="hiyouga/LLaMA-Factory",
        mirror="hiyouga+LLaMA-Factory",
        version_file="src/llamafactory/extras/env.py",
        version_pattern=r'VERSION = "(?P<v>[^"]+)"',
        note="the v1 trainer's arguments (llamafactory-cli v1 train; examples/v1): a model, peft/quant/dist"
        " plugin configs, micro_batch_size and global_batch_size; torch.optim.AdamW unless optim_config",
        classes=(
            ClassSpec("src/llamafactory/v1/config/model_args.py", "ModelArguments"),
            ClassSpec("src/llamafactory/v1/config/training_args.py", "TrainingArguments"),
        ),
        enums=("src/llamafactory/v1/utils/types.py", "src/llamafactory/v1/config/arg_utils.py"),
    ),
    Framework(
        key="accelerate",
        repo="huggingface/accelerate",
        mirror="huggingface+accelerate",
        version_file="src/accelerate/__init__.py",
        version_pattern=r'__version__ = "(?P<v>[^"]+)"',
        note="the `accelerate config` YAML is ClusterConfig (config_args.py; process_config fills missing"
        " keys); `accelerate launch` turns its fsdp_config/deepspeed_config keys into FSDP_* /"
        " ACCELERATE_DEEPSPEED_* environment variables, which the plugins' __post_init__ read when a field"
        " is None (set_later below)",
        classes=(
            ClassSpec("src/accelerate/commands/config/config_args.py", "BaseConfig"),
            ClassSpec(
                "src/accelerate/commands/config/config_args.py",
                "ClusterConfig",
                every_field=False,
                inherit=("BaseConfig",),
            ),
            ClassSpec(ACCELERATE, "FullyShardedDataParallelPlugin"),
            ClassSpec(ACCELERATE, "DeepSpeedPlugin"),
            ClassSpec(ACCELERATE, "TorchDynamoPlugin"),
            ClassSpec(ACCELERATE, "GradientAccumulationPlugin"),
        ),
        enums=(ACCELERATE,),
        scans=(
            Scan(
                "src/accelerate/commands/config/config_args.py",
                ("config_dict",),
                ("BaseConfig.process_config",),
            ),
        ),
        markers=(
            Marker(
                "fsdp1_upcast",
                "src/accelerate/accelerator.py",
                "param.data = param.data.to(torch.float32)  # upcasting",
                "FSDP1: with mixed_precision != 'no', every FSDP unit's FlatParameter that requires grad and"
                " is not fp32 is cast to fp32 (DeepSpeed-style fp32 master weights); MixedPrecision casts to"
                " bf16/fp16 for compute",
                history=True,
            ),
            Marker(
                "fsdp2_upcast",
                "src/accelerate/utils/fsdp_utils.py",
                "param.data = param.data.to(torch.float32)",
                "FSDP2: with mixed_precision != 'no' and no bitsandbytes Params4bit, each parameter that"
                " requires grad and is not fp32 is cast to fp32 before fully_shard; MixedPrecisionPolicy"
                " param_dtype casts for compute",
                history=True,
            ),
            Marker(
                "fsdp2_upcast_whole_model",
                "src/accelerate/utils/fsdp_utils.py",
                "model = model.to(torch.float32)",
                "the earlier FSDP2 form: the whole model (frozen parameters too) cast to fp32 after sharding",
                history=True,
            ),
            Marker(
                "fsdp2_upcast_noop",
                "src/accelerate/utils/fsdp_utils.py",
                "param = param.to(torch.float32)",
                "a form that rebinds a local name and leaves the parameter in its dtype (no upcast)",
                history=True,
            ),
        ),
        wanted=ACCELERATE_SETTINGS,
        sections={
            "fsdp_config": "FullyShardedDataParallelPlugin",
            "deepspeed_config": "DeepSpeedPlugin",
            "dynamo_config": "TorchDynamoPlugin",
        },
        aliases={
            **FSDP_ALIASES,
            "dynamo_backend": "backend",
            "deepspeed_config_file": "hf_ds_config",
        },
    ),
)


# --- Small helpers ------------------------------------------------------------------------------------------


def squash(text: str, limit: int = HELP_CHARS) -> str:
    """One line, at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3].rstrip() + "..."


def plain(value: Any) -> tuple[bool, Any]:
    """(True, value) with tuples as lists, if `value` is data YAML can hold."""
    if value is None or isinstance(value, bool | int | str):
        return True, value
    if isinstance(value, float):
        return True, value
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else list(value)
        converted = [plain(item) for item in items]
        return all(ok for ok, _ in converted), [item for _, item in converted]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            ok, converted_item = plain(item)
            if not ok:
                return False, None
            out[str(key)] = converted_item
        return True, out
    return False, None


def literal(node: ast.AST | None) -> tuple[bool, Any]:
    """(True, value) when `node` is a literal expression."""
    if node is None:
        return False, None
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return plain(value)


def text_of(node: ast.AST) -> str:
    return ast.unparse(node)


def call_name(node: ast.AST) -> str:
    """The called name of a Call node's function ("field", "Field", "pp_int"), else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def doc_paragraph(node: ast.AST) -> str:
    """The first paragraph of a class or function docstring."""
    if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Module):
        return ""
    doc = ast.get_docstring(node)
    if not doc:
        return ""
    return squash(doc.strip().split("\n\n")[0])


ARG_LINE = re.compile(r"^(?P<indent>\s*)(?P<name>[A-Za-z_][A-Za-z0-9_]*) \((?P<type>.*)\):\s*(?P<rest>.*)$")
DOC_DEFAULT = re.compile(r"defaults? to `+([^`]+)`+|defaults? to (\S+?)[),]")


def docstring_args(node: ast.ClassDef) -> dict[str, tuple[str, str]]:
    """The class docstring's Args entries: name -> (parenthetical, description)."""
    doc = ast.get_docstring(node)
    entries: dict[str, tuple[str, str]] = {}
    if not doc:
        return entries
    current: str | None = None
    indent = 0
    parts: list[str] = []
    paren = ""
    for line in inspect.cleandoc(doc).splitlines():
        match = ARG_LINE.match(line)
        if match and (current is None or len(match["indent"]) <= indent):
            if current is not None:
                entries.setdefault(current, (paren, " ".join(parts)))
            current, indent, paren = match["name"], len(match["indent"]), match["type"]
            parts = [match["rest"]] if match["rest"] else []
        elif current is not None and line.strip() and len(line) - len(line.lstrip()) > indent:
            parts.append(line.strip())
        elif current is not None and line.strip():
            entries.setdefault(current, (paren, " ".join(parts)))
            current = None
    if current is not None:
        entries.setdefault(current, (paren, " ".join(parts)))
    return entries


# --- Parsed modules -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    value: ast.expr
    line: int
    when: str


@dataclass
class Module:
    path: str
    text: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    names: dict[str, list[Binding]] = field(default_factory=dict)

    @classmethod
    def parse(cls, path: str, text: str) -> Module:
        module = cls(path, text, ast.parse(text, filename=path))
        module.index(module.tree.body, "")
        module.names = bindings(module.tree.body)
        return module

    def segment(self, node: ast.AST) -> str:
        """The node's source text on one line (its unparsed form when the source has none)."""
        text = ast.get_source_segment(self.text, node)
        return " ".join(text.split()) if text else ast.unparse(node)

    def index(self, body: Sequence[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                self.classes[prefix + stmt.name] = stmt
                self.index(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions[prefix + stmt.name] = stmt
            elif isinstance(stmt, ast.If | ast.Try):
                self.index([*stmt.body, *getattr(stmt, "orelse", [])], prefix)


def bindings(body: Sequence[ast.stmt], when: str = "") -> dict[str, list[Binding]]:
    """Simple `name = value` bindings of a module or class body, through if-blocks."""
    found: dict[str, list[Binding]] = {}

    def visit(stmts: Sequence[ast.stmt], cond: str) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, []).append(Binding(stmt.value, stmt.lineno, cond))
            elif isinstance(stmt, ast.If):
                test = text_of(stmt.test)
                visit(stmt.body, join(cond, test))
                visit(stmt.orelse, join(cond, f"not ({test})"))
            elif isinstance(stmt, ast.Try):
                visit(stmt.body, cond)

    visit(body, when)
    return found


def join(left: str, right: str) -> str:
    return f"{left} and {right}" if left else right


def enum_values(modules: Iterable[Module]) -> dict[str, dict[str, Any]]:
    """Enum class name -> member -> value, for classes with an Enum among their bases."""
    table: dict[str, dict[str, Any]] = {}
    for module in modules:
        for name, node in module.classes.items():
            if not any("Enum" in text_of(base) for base in node.bases):
                continue
            members: dict[str, Any] = {}
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                ):
                    ok, value = literal(stmt.value)
                    if ok:
                        members[stmt.targets[0].id] = value
            table[name.rsplit(".", 1)[-1]] = members
    return table


# --- Defaults -----------------------------------------------------------------------------------------------

TRANSPARENT: dict[str, Callable[[Any], Any]] = {"pp_int": int, "int": int, "float": float}
FACTORIES: dict[str, Any] = {"list": [], "dict": {}, "set": [], "tuple": []}


@dataclass
class Scope:
    """What a default expression may refer to."""

    module: Module
    class_names: dict[str, list[Binding]]
    enums: dict[str, dict[str, Any]]


def describe_default(node: ast.expr, scope: Scope) -> Data:
    """{default} when literal, else {default_expr, default_kind[, default][, default_candidates]}."""
    ok, value = literal(node)
    if ok:
        return {"default": value}
    expr = scope.module.segment(node)
    if isinstance(node, ast.Call) and call_name(node.func) in TRANSPARENT and len(node.args) == 1:
        ok, value = literal(node.args[0])
        if ok:
            try:
                converted = TRANSPARENT[call_name(node.func)](value)
            except (TypeError, ValueError):
                converted = None
            if converted is not None:
                return {"default": converted, "default_expr": expr, "default_kind": "call on a literal"}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        members = scope.enums.get(node.value.id, {})
        if node.attr in members:
            return {"default": members[node.attr], "default_expr": expr, "default_kind": "enum member"}
    if isinstance(node, ast.Name):
        found = scope.class_names.get(node.id) or scope.module.names.get(node.id) or []
        candidates: list[Data] = []
        for binding in found:
            ok, value = literal(binding.value)
            entry: Data = {"value": value} if ok else {"expr": scope.module.segment(binding.value)}
            entry["line"] = binding.line
            if binding.when:
                entry["when"] = squash(binding.when, TEXT_CHARS)
            candidates.append(entry)
        if len(candidates) == 1 and "value" in candidates[0] and "when" not in candidates[0]:
            return {
                "default": candidates[0]["value"],
                "default_expr": expr,
                "default_kind": f"name bound at line {candidates[0]['line']}",
            }
        if candidates:
            return {
                "default_expr": expr,
                "default_kind": "name bound in the source",
                "default_candidates": candidates,
            }
    return {"default_expr": squash(expr, TEXT_CHARS), "default_kind": "expression"}


def describe_factory(node: ast.expr, scope: Scope) -> Data:
    """A default_factory: its value when it builds a literal, else the call's text."""
    if isinstance(node, ast.Name) and node.id in FACTORIES:
        return {
            "default": copy.deepcopy(FACTORIES[node.id]),
            "default_expr": f"{node.id}()",
            "default_kind": "default_factory",
        }
    if isinstance(node, ast.Lambda):
        ok, value = literal(node.body)
        if ok:
            return {
                "default": value,
                "default_expr": scope.module.segment(node),
                "default_kind": "default_factory",
            }
    return {
        "default_expr": squash(scope.module.segment(node), TEXT_CHARS) + "()",
        "default_kind": "default_factory",
    }


def dict_entries(node: ast.AST | None) -> dict[str, ast.expr]:
    """The string-keyed entries of a dict display."""
    if not isinstance(node, ast.Dict):
        return {}
    entries: dict[str, ast.expr] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            entries[key.value] = value
    return entries


def string_of(node: ast.expr | None) -> str | None:
    """A help text: a literal string, else the expression's text (an f-string)."""
    if node is None:
        return None
    ok, value = literal(node)
    if ok and isinstance(value, str):
        return value
    return text_of(node)


def alias_names(node: ast.expr) -> list[str]:
    ok, value = literal(node)
    if ok and isinstance(value, str):
        return [value]
    if isinstance(node, ast.Call):
        return [v for arg in node.args for v in alias_names(arg)]
    return []


def field_record(
    stmt: ast.AnnAssign, following: ast.stmt | None, scope: Scope, doc_args: Mapping[str, tuple[str, str]]
) -> Data:
    """One field of a dataclass or pydantic model."""
    assert isinstance(stmt.target, ast.Name)
    name = stmt.target.id
    record: Data = {}
    help_text: str | None = None
    extra: Data = {}
    value = stmt.value
    if isinstance(value, ast.Call) and call_name(value.func) in ("field", "Field"):
        keywords = {kw.arg: kw.value for kw in value.keywords if kw.arg}
        if (
            call_name(value.func) == "Field"
            and value.args
            and not (isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis)
        ):
            record.update(describe_default(value.args[0], scope))
        elif "default" in keywords:
            record.update(describe_default(keywords["default"], scope))
        elif "default_factory" in keywords:
            record.update(describe_factory(keywords["default_factory"], scope))
        else:
            record["required"] = True
        metadata = dict_entries(keywords.get("metadata"))
        help_text = string_of(metadata.get("help")) or string_of(keywords.get("description"))
        if help_text is None:
            help_text = string_of(dict_entries(keywords.get("json_schema_extra")).get("description"))
        ok, choices = literal(metadata.get("choices"))
        if ok and choices is not None:
            extra["choices"] = choices
        aliases = [
            a for key in ("alias", "validation_alias") if key in keywords for a in alias_names(keywords[key])
        ]
        if aliases:
            extra["aliases"] = list(dict.fromkeys(aliases))
        if "deprecated" in keywords:
            extra["deprecated"] = string_of(keywords["deprecated"])
        ok, init = literal(keywords.get("init"))
        if ok and init is False:
            extra["init"] = False
    elif value is not None:
        record.update(describe_default(value, scope))
    else:
        record["required"] = True
    record["type"] = squash(text_of(stmt.annotation), TEXT_CHARS)
    record["line"] = stmt.lineno
    if (
        help_text is None
        and isinstance(following, ast.Expr)
        and isinstance(following.value, ast.Constant)
        and isinstance(following.value.value, str)
    ):
        help_text = following.value.value
    paren, described = doc_args.get(name, ("", ""))
    if help_text is None and described:
        help_text = described
    if help_text:
        record["help"] = squash(help_text.replace("%%", "%"))
    match = DOC_DEFAULT.search(paren)
    if match:
        record["doc_default"] = (match[1] or match[2]).strip("\"'")
    record.update(extra)
    return record


def class_record(
    node: ast.ClassDef, module: Module, enums: dict[str, dict[str, Any]], pick: Callable[[str], bool]
) -> Data:
    scope = Scope(module, bindings(node.body), enums)
    doc_args = docstring_args(node)
    fields: Data = {}
    body = node.body
    for index, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        name = stmt.target.id
        if name.startswith("_") or text_of(stmt.annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        if name == "model_config" or not pick(name):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        fields[name] = field_record(stmt, following, scope, doc_args)
    record: Data = {"source": module.path, "line": node.lineno}
    bases = [text_of(base) for base in node.bases]
    if bases:
        record["bases"] = bases
    for stmt in node.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == "model_config" for t in targets) and stmt.value:
                record["model_config"] = squash(module.segment(stmt.value), TEXT_CHARS)
    doc = doc_paragraph(node)
    if doc:
        record["doc"] = doc
    record["fields"] = fields
    return record


# --- Statements with their guards ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    stmt: ast.stmt
    guards: tuple[str, ...]
    function: str


def walk_statements(body: Sequence[ast.stmt], guards: tuple[str, ...], function: str) -> Iterator[Located]:
    """Every statement under `body` with the if-tests that guard it ("elif"/"else" marked)."""
    for stmt in body:
        yield Located(stmt, guards, function)
        if isinstance(stmt, ast.If):
            yield from walk_if(stmt, guards, function, "if")
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from walk_statements(stmt.body, (), f"{function}.{stmt.name}" if function else stmt.name)
        else:
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    yield from walk_statements(inner, guards, function)
            for handler in getattr(stmt, "handlers", []):
                yield from walk_statements(handler.body, guards, function)
            for case in getattr(stmt, "cases", []):
                yield from walk_statements(case.body, (*guards, f"case {text_of(case.pattern)}"), function)


def walk_if(stmt: ast.If, guards: tuple[str, ...], function: str, word: str) -> Iterator[Located]:
    test = text_of(stmt.test)
    yield from walk_statements(stmt.body, (*guards, f"{word} {test}"), function)
    if len(stmt.orelse) == 1 and isinstance(stmt.orelse[0], ast.If):
        yield Located(stmt.orelse[0], guards, function)
        yield from walk_if(stmt.orelse[0], guards, function, "elif")
    elif stmt.orelse:
        negated = f"({test})" if isinstance(stmt.test, ast.BoolOp | ast.Compare | ast.NamedExpr) else test
        label = "else (no branch above)" if word == "elif" else f"else (not {negated})"
        yield from walk_statements(stmt.orelse, (*guards, label), function)


def when_text(guards: Sequence[str]) -> str:
    return squash(" / ".join(guards), TEXT_CHARS)


@dataclass(frozen=True)
class Assignment:
    name: str
    value: str
    when: str
    where: str
    function: str
    owner: str  # the class whose method made it ("" outside a class)


def late_methods(node: ast.ClassDef) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for stmt in node.body:
        if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        decorators = {call_name(d.func if isinstance(d, ast.Call) else d) for d in stmt.decorator_list}
        if stmt.name in LATE_METHODS or decorators & set(LATE_DECORATORS):
            yield stmt


def assignments_in(
    body: Sequence[ast.stmt], path: str, function: str, owner: str, receivers: Sequence[str]
) -> Iterator[Assignment]:
    for located in walk_statements(body, (), function):
        stmt = located.stmt
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = list(stmt.targets), stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr == "setdefault"
            and isinstance(stmt.value.func.value, ast.Name)
            and stmt.value.func.value.id in receivers
            and len(stmt.value.args) == 2
        ):
            key = stmt.value.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield Assignment(
                    key.value,
                    squash(text_of(stmt.value.args[1]), TEXT_CHARS),
                    when_text([*located.guards, "when absent"]),
                    f"{path}:{stmt.lineno}",
                    located.function,
                    owner,
                )
            continue
        if value is None:
            continue
        for target in targets:
            name = assigned_name(target, receivers)
            if name:
                yield Assignment(
                    name,
                    squash(text_of(value), TEXT_CHARS),
                    when_text(located.guards),
                    f"{path}:{stmt.lineno}",
                    located.function,
                    owner,
                )


def assigned_name(target: ast.expr, receivers: Sequence[str]) -> str:
    if (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id in receivers
    ):
        return target.attr
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id in receivers
        and isinstance(target.slice, ast.Constant)
        and isinstance(target.slice.value, str)
    ):
        return target.slice.value
    return ""


def late_assignments(module: Module) -> Iterator[Assignment]:
    """Assignments to fields in the config classes' __post_init__ and validators."""
    for qualname, node in module.classes.items():
        for method in late_methods(node):
            yield from assignments_in(
                method.body, module.path, f"{qualname}.{method.name}", qualname, LATE_RECEIVERS
            )


def scanned_assignments(module: Module, scan: Scan) -> Iterator[Assignment]:
    for qualname, node in module.functions.items():
        if scan.functions and qualname not in scan.functions:
            continue
        owner = qualname.rsplit(".", 1)[0] if "." in qualname else ""
        yield from assignments_in(node.body, module.path, qualname, owner, scan.receivers)


# --- Functions ----------------------------------------------------------------------------------------------


def signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Data:
    """Parameter -> default (a literal, or {expr}), or "required"."""
    args = node.args
    out: Data = {}
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = [*zip(positional, defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    for arg, default in pairs:
        if arg.arg in ("self", "cls"):
            continue
        if default is None:
            out[arg.arg] = "required"
            continue
        ok, value = literal(default)
        out[arg.arg] = value if ok else {"expr": text_of(default)}
    return out


def function_record(module: Module, spec: FunctionSpec) -> Data:
    node = module.functions[spec.name]
    record: Data = {"source": module.path, "line": node.lineno, "end_line": node.end_lineno}
    doc = doc_paragraph(node)
    owner = spec.name.rsplit(".", 1)[0]
    if spec.name.endswith(".__init__") and owner in module.classes:
        doc = doc_paragraph(module.classes[owner]) or doc
    if doc:
        record["doc"] = doc
    params = signature(node)
    if params:
        record["signature"] = params
    if spec.effects:
        effects: list[Data] = []
        for located in walk_statements(node.body, (), spec.name):
            stmt = located.stmt
            if isinstance(
                stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Return | ast.Assert | ast.Raise
            ):
                entry: Data = {"line": stmt.lineno}
                if located.guards:
                    entry["when"] = when_text(located.guards)
                entry["do"] = squash(text_of(stmt), HELP_CHARS)
                effects.append(entry)
        record["effects"] = effects[:EFFECTS_MAX]
    return record


def marker_record(module: Module, marker: Marker, history: Data | None) -> Data:
    record: Data = {"source": marker.path, "note": marker.note}
    hits: list[Data] = []
    lines = module.text.splitlines()
    for located in walk_statements(module.tree.body, (), ""):
        stmt = located.stmt
        if isinstance(
            stmt, ast.If | ast.For | ast.While | ast.With | ast.Try | ast.FunctionDef | ast.ClassDef
        ):
            first = lines[stmt.lineno - 1]
            if marker.needle not in first:
                continue
        else:
            segment = "\n".join(lines[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)])
            if marker.needle not in segment:
                continue
        hit: Data = {"line": stmt.lineno, "function": located.function}
        if located.guards:
            hit["guards"] = [squash(g, TEXT_CHARS) for g in located.guards]
        hits.append(hit)
    record["found"] = hits
    if history is not None:
        record["history"] = history
    return record


# --- torchtune recipes --------------------------------------------------------------------------------------


def cfg_chain(node: ast.expr) -> list[str] | None:
    """["a", "b"] for `cfg.a.b`, [] for `cfg`, None when not rooted at the Name `cfg`."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "cfg":
        return parts[::-1]
    return None


def recipe_reads(module: Module) -> Data:
    """Every read of the recipe config: `cfg.get("name", default)`, `cfg.name`, `cfg["name"]`."""
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(module.tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    reads: dict[str, Data] = {}
    scope = Scope(module, {}, {})

    def note(path: str, line: int, entry: Data) -> None:
        if path not in reads:
            reads[path] = {**entry, "lines": [line]}
            return
        known = reads[path]
        if line not in known["lines"]:
            known["lines"].append(line)
        if "required" in known and "required" not in entry:
            lines = known["lines"]
            reads[path] = {**entry, "lines": lines, "also_required_read": True}
        elif "required" not in entry and entry.get("default") != known.get("default"):
            known.setdefault("other_defaults", []).append({"line": line, **entry})

    for node in ast.walk(module.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            prefix = cfg_chain(node.func.value)
            if prefix is None or not node.args:
                continue
            key = node.args[0]
            described = describe_default(key, scope)
            name = described.get("default")
            if not isinstance(name, str):
                continue
            default = node.args[1] if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "default":
                    default = kw.value
            entry: Data = describe_default(default, scope) if default is not None else {"default": None}
            if default is None:
                entry["default_kind"] = "cfg.get without a default"
            note(".".join([*prefix, name]), node.lineno, entry)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            up = parents.get(node)
            if isinstance(up, ast.Attribute):
                continue
            chain = cfg_chain(node)
            if not chain:
                continue
            if isinstance(up, ast.Call) and up.func is node:
                chain = chain[:-1]
            if chain:
                note(".".join(chain), node.lineno, {"required": True})
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            chain = cfg_chain(node.value)
            if (
                chain is not None
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                note(".".join([*chain, node.slice.value]), node.lineno, {"required": True})
    for entry in reads.values():
        entry["lines"] = sorted(entry["lines"])
    return dict(sorted(reads.items()))


LOSS_BLOCK = re.compile(r"^loss:\s*\n((?:[ \t]+.*\n?)+)", re.M)
COMPONENT = re.compile(r"_component_:\s*([\w.]+)")


def loss_components(tree: Tree, folder: str) -> Data:
    """How many recipe configs name each loss component."""
    counts: dict[str, list[str]] = {}
    for path in tree.files(folder):
        if not path.endswith(".yaml"):
            continue
        match = LOSS_BLOCK.search(tree.read(path))
        if not match:
            continue
        component = COMPONENT.search(match[1])
        if component:
            counts.setdefault(component[1], []).append(path.removeprefix(folder + "/"))
    ordered = sorted(counts.items(), key=lambda item: (-len(item[1]), item[0]))
    return {name: {"configs": len(paths), "e.g.": sorted(paths)[:3]} for name, paths in ordered}


# --- History ------------------------------------------------------------------------------------------------

RELEASE = re.compile(r"^v?(\d+(?:\.\d+)+)$")


def first_release(tree: GitTree, commit: str) -> str | None:
    tags = git(tree.git_dir, "tag", "--contains", commit).split()
    releases = [(tuple(int(p) for p in m[1].split(".")), tag) for tag in tags if (m := RELEASE.match(tag))]
    return min(releases)[1] if releases else None


def pickaxe(tree: GitTree, needle: str, paths: Sequence[str], newest_only: bool) -> list[Data]:
    """Commits that changed how often `needle` occurs in `paths` (oldest first), with their first release."""
    args = ["log", "--format=%H%x09%cI%x09%s", "-S", needle, tree.commit, "--", *paths]
    if newest_only:
        args.insert(1, "-1")
    else:
        args.insert(1, "--reverse")
    out: list[Data] = []
    for line in git(tree.git_dir, *args).splitlines():
        sha, date, subject = line.split("\t", 2)
        count_after = sum(occurrences(tree, sha, path, needle) for path in paths)
        count_before = sum(occurrences(tree, f"{sha}^", path, needle) for path in paths)
        entry: Data = {
            "commit": sha[:10],
            "date": date,
            "subject": squash(subject, TEXT_CHARS),
            "change": "added" if count_after > count_before else "removed",
            "first_release": first_release(tree, sha),
        }
        out.append(entry)
    return out


def occurrences(tree: GitTree, rev: str, path: str, needle: str) -> int:
    done = subprocess.run(
        ["git", "--git-dir", str(tree.git_dir), "show", f"{rev}:{path}"], capture_output=True, text=True
    )
    return done.stdout.count(needle) if done.returncode == 0 else 0


# --- One framework ------------------------------------------------------------------------------------------


@dataclass
class Reading:
    """One framework's extracted table, plus what the setting lookup needs."""

    framework: Framework
    tree: Tree
    classes: dict[str, Data]
    targets: dict[tuple[str, str], str]  # (class, field) -> the class its value is (sections)
    out: Data


def open_tree(
    framework: Framework, mirrors: Path, transformers: Path | None, refs: Mapping[str, str]
) -> tuple[Tree, Data]:
    """The source tree and its pin (repo, commit, commit_date)."""
    pin: Data = {"repo": framework.repo}
    if framework.key == "transformers" and transformers is not None:
        pin["commit"] = None
        pin["commit_date"] = None
        pin["source"] = "installed package (site-packages copy), no git commit: `tag` is its version"
        return FolderTree(transformers, strip=f"{TRANSFORMERS}/"), pin
    git_dir = mirrors / framework.mirror / "repo"
    if not git_dir.is_dir():
        raise SystemExit(f"no mirror of {framework.repo} at {git_dir}")
    ref = refs.get(framework.key, framework.ref)
    commit = git(git_dir, "rev-parse", f"{ref}^{{commit}}").strip()
    pin["commit"] = commit
    pin["commit_date"] = git(git_dir, "log", "-1", "--format=%cI", commit).strip()
    if ref != "HEAD":
        pin["ref"] = ref
    return GitTree(git_dir, commit), pin


def version_of(tree: Tree, framework: Framework) -> Data:
    text = tree.read(framework.version_file)
    match = re.search(framework.version_pattern, text)
    return {"version": match["v"] if match else None, "version_source": framework.version_file}


def read_framework(framework: Framework, tree: Tree, pin: Data) -> Reading:
    modules: dict[str, Module] = {}

    def module(path: str) -> Module:
        if path not in modules:
            modules[path] = Module.parse(path, tree.read(path))
        return modules[path]

    for spec in framework.classes:
        module(spec.path)
    for path in framework.enums:
        module(path)
    for scan in framework.scans:
        module(scan.path)
    enums = enum_values(modules.values())
    wanted_leaves = {setting.rsplit(".", 1)[-1] for setting in framework.wanted}
    wanted_leaves |= {leaf.removeprefix("fsdp_") for leaf in wanted_leaves}
    wanted_leaves |= {framework.aliases.get(leaf, leaf) for leaf in wanted_leaves}

    def pick_for(spec: ClassSpec) -> Callable[[str], bool]:
        if spec.every_field:
            return lambda name: True
        return lambda name: (
            name in wanted_leaves or (bool(RELEVANT.search(name)) and not IRRELEVANT.match(name))
        )

    classes: dict[str, Data] = {}
    for spec in framework.classes:
        source = module(spec.path)
        if spec.name not in source.classes:
            raise SystemExit(f"{framework.key}: no class {spec.name} in {spec.path}")
        classes[spec.name] = class_record(source.classes[spec.name], source, enums, pick_for(spec))

    attach_late(framework, modules, classes, module)
    for spec in framework.classes:
        own = classes[spec.name]["fields"]
        for base in spec.inherit:
            for name, record in classes[base]["fields"].items():
                if name not in own:
                    own[name] = {**copy.deepcopy(record), "from": base}

    targets = section_targets(classes)
    out: Data = {**pin, **version_of(tree, framework), "note": framework.note, "classes": classes}
    if framework.constants_file:
        out["classes"] = {
            "constants": constants_record(module(framework.constants_file), framework),
            **classes,
        }
        classes = out["classes"]
    if framework.tables:
        out["tables"] = {name: table_record(module(path), name) for path, name in framework.tables}
    if framework.functions:
        out["functions"] = {
            spec.name: function_record(module(spec.path), spec) for spec in framework.functions
        }
    if framework.recipes:
        out["recipes"] = recipes_record(framework, module)
    if framework.recipe_configs:
        out["loss_components"] = loss_components(tree, framework.recipe_configs)
    if framework.markers:
        out["located"] = {
            marker.key: marker_record(
                module(marker.path),
                marker,
                {"changes": pickaxe(tree, marker.needle, [marker.path], False)}
                if marker.history and isinstance(tree, GitTree)
                else None,
            )
            for marker in framework.markers
        }
    return Reading(framework, tree, classes, targets, out)


def attach_late(
    framework: Framework,
    modules: Mapping[str, Module],
    classes: dict[str, Data],
    module: Callable[[str], Module],
) -> None:
    """Add the post-construction assignments to the fields they change."""
    found: list[Assignment] = []
    for source in list(modules.values()):
        found.extend(late_assignments(source))
    for scan in framework.scans:
        found.extend(scanned_assignments(module(scan.path), scan))
    seen: set[tuple[str, str, str]] = set()
    for assignment in found:
        owner_fields = classes.get(assignment.owner, {}).get("fields", {})
        root_fields = classes[framework.classes[0].name]["fields"] if framework.classes else {}
        if assignment.name in owner_fields:
            homes = [owner_fields[assignment.name]]
        elif assignment.name in root_fields:
            homes = [root_fields[assignment.name]]
        else:
            homes = [
                data["fields"][assignment.name]
                for data in classes.values()
                if assignment.name in data["fields"]
            ]
        for home in homes:
            key = (str(id(home)), assignment.where, assignment.value)
            if key in seen:
                continue
            seen.add(key)
            later = home.setdefault("set_later", [])
            if len(later) >= SET_LATER_MAX:
                home["set_later_more"] = home.get("set_later_more", 0) + 1
                continue
            entry: Data = {"where": assignment.where, "in": assignment.function}
            if assignment.when:
                entry["when"] = assignment.when
            entry["value"] = assignment.value
            later.append(entry)


ANNOTATION_NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def section_targets(classes: Mapping[str, Data]) -> dict[tuple[str, str], str]:
    """(class, field) -> the extracted class the field's value is, from its default_factory or annotation."""
    targets: dict[tuple[str, str], str] = {}
    for class_name, data in classes.items():
        for name, record in data["fields"].items():
            candidates: list[str] = []
            expr = record.get("default_expr", "")
            if record.get("default_kind") == "default_factory" and expr.endswith("()"):
                candidates.append(expr[:-2])
            candidates.extend(ANNOTATION_NAMES.findall(record.get("type", "")))
            for candidate in candidates:
                if candidate in classes:
                    targets[(class_name, name)] = candidate
                    break
    return targets


def table_record(module: Module, name: str) -> Data:
    """A module-level literal (a mapping or list the framework consults)."""
    bound = module.names[name][-1]
    ok, value = literal(bound.value)
    return {"source": module.path, "line": bound.line, "value": value if ok else module.segment(bound.value)}


def constants_record(module: Module, framework: Framework) -> Data:
    """DeepSpeed's top-level and section keys whose defaults are module constants."""
    fields: Data = {}
    for constant in framework.constants:
        bound = module.names.get(constant.default)
        if not bound:
            continue
        record = describe_default(bound[-1].value, Scope(module, {}, {}))
        record["line"] = bound[-1].line
        record["constant"] = constant.default
        if constant.key:
            key_bound = module.names.get(constant.key)
            ok, key = literal(key_bound[-1].value) if key_bound else (False, None)
            record["key"] = key if ok else None
            if ok and not constant.setting.endswith(str(key)):
                record["key_mismatch"] = True
        fields[constant.setting] = record
    return {
        "source": module.path,
        "doc": "read with get_scalar_param(param_dict, KEY, KEY_DEFAULT) in deepspeed/runtime/config.py; the"
        " bf16/fp16 rows are the legacy constants (the pydantic precision configs below are what is used)",
        "fields": fields,
    }


def recipes_record(framework: Framework, module: Callable[[str], Module]) -> Data:
    out: Data = {}
    for path in framework.recipes:
        reads = recipe_reads(module(path))
        top = {key.split(".", 1)[0] for key in reads}
        missing = [name for name in framework.wanted if name not in reads and name not in top]
        entry: Data = {"source": path, "reads": reads}
        if missing:
            entry["not_read"] = missing
        out[Path(path).stem] = entry
    return out


# --- Settings lookup ----------------------------------------------------------------------------------------


def find_field(reading: Reading, class_name: str, leaf: str) -> str | None:
    fields = reading.classes[class_name]["fields"]
    for name in (leaf, reading.framework.aliases.get(leaf, ""), leaf.removeprefix("fsdp_")):
        if name and name in fields:
            return name
        alias = reading.framework.aliases.get(name, "")
        if alias and alias in fields:
            return alias
    for name, record in fields.items():
        if leaf in record.get("aliases", []):
            return str(name)
    return None


def locate(reading: Reading, setting: str) -> str | None:
    """Where ("Class.field") the framework defines a reader's setting."""
    head, _, rest = setting.partition(".")
    if not rest:
        for class_name in reading.classes:
            name = find_field(reading, class_name, head)
            if name:
                return f"{class_name}.{name}"
        return None
    owner = reading.framework.sections.get(head)
    if owner is None:
        for (class_name, name), target in reading.targets.items():
            if name == head or find_field(reading, class_name, head) == name:
                owner = target
                break
    while owner is not None and owner in reading.classes:
        leaf, _, more = rest.partition(".")
        name = find_field(reading, owner, leaf)
        if name is None:
            break
        if not more:
            return f"{owner}.{name}"
        owner, rest = reading.targets.get((owner, name)), more
    for class_name, data in reading.classes.items():
        if setting in data["fields"]:
            return f"{class_name}.{setting}"
    return None


def owner_of(reading: Reading, setting: str) -> str | None:
    """The class that holds the last part of a dotted setting, when the path up to it resolves."""
    head, _, rest = setting.partition(".")
    if not rest:
        return None
    owner = reading.framework.sections.get(head)
    if owner is None:
        for (class_name, name), target in reading.targets.items():
            if name == head or find_field(reading, class_name, head) == name:
                owner = target
                break
    while owner is not None and "." in rest:
        leaf, _, rest = rest.partition(".")
        inner = find_field(reading, owner, leaf)
        owner = reading.targets.get((owner, inner)) if inner else None
    return owner


def settings_and_gaps(reading: Reading, others: Mapping[str, Reading]) -> tuple[Data, Data]:
    settings: Data = {}
    not_found: Data = {}
    framework = reading.framework
    for setting in dict.fromkeys(framework.wanted):
        place = locate(reading, setting)
        if place:
            settings[setting] = place
            continue
        not_found[setting] = reason(reading, setting, others)
    return settings, not_found


def reason(reading: Reading, setting: str, others: Mapping[str, Reading]) -> str:
    framework = reading.framework
    if setting in framework.reasons:
        return framework.reasons[setting]
    for key in framework.inherits_from:
        other = others.get(key)
        place = locate(other, setting) if other else None
        if place:
            relation = "inherited from" if key == "transformers" else "defined by"
            return f"not in these classes; {relation} {key} ({place})"
    owner = owner_of(reading, setting)
    data = reading.classes.get(owner or "", {})
    if owner and "BaseModel" in data.get("bases", []) and "model_config" not in data:
        return (
            f"not a field of {owner}, a pydantic model with the default extra='ignore': the key is dropped"
            " without an error"
        )
    if framework.key == "llama_factory" and setting in HF_SETTINGS:
        return "a TRL setting (ModelConfig/SFTConfig); LLaMA-Factory has no such argument"
    tree = reading.tree
    leaf = setting.rsplit(".", 1)[-1]
    if isinstance(tree, GitTree):
        paths = sorted({spec.path for spec in framework.classes})
        needle = f"{leaf}:"
        if not any(needle in tree.read(path) for path in paths):
            changes = pickaxe(tree, needle, paths, True)
            if changes:
                last = changes[0]
                release = f", first in {last['first_release']}" if last["first_release"] else ""
                when = f"{last['commit']} ({last['date'][:10]}{release})"
                return f"not a field at this commit; last {last['change']} in {when}: {last['subject']}"
    return "not a field of the classes read here"


# --- YAML ---------------------------------------------------------------------------------------------------

PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def yaml_key(key: str) -> str:
    if PLAIN_KEY.match(key) and key.lower() not in YAML_WORDS:
        return key
    return json.dumps(key, ensure_ascii=False)


def yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text:
            mantissa, exponent = text.split("e")
            mantissa = mantissa if "." in mantissa else mantissa + ".0"
            sign = exponent[0] if exponent[0] in "+-" else "+"
            text = f"{mantissa}e{sign}{exponent.lstrip('+-')}"
        return text
    return json.dumps(str(value), ensure_ascii=False)


def yaml_lines(value: Any, indent: int) -> list[str]:
    pad = "  " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if (isinstance(item, dict) and item) or (isinstance(item, list) and item and not flow(item)):
                lines.append(f"{pad}{yaml_key(str(key))}:")
                lines.extend(yaml_lines(item, indent + 1))
            else:
                lines.append(f"{pad}{yaml_key(str(key))}: {inline(item)}")
        return lines
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and item:
                inner = yaml_lines(item, indent + 1)
                lines.append(f"{pad}- {inner[0].lstrip()}")
                lines.extend(inner[1:])
            elif isinstance(item, list) and item and not flow(item):
                lines.append(f"{pad}-")
                lines.extend(yaml_lines(item, indent + 1))
            else:
                lines.append(f"{pad}- {inline(item)}")
        return lines
    return [pad + inline(value)]


def flow(items: list[Any]) -> bool:
    """Whether a list is written on one line: scalars only, and short."""
    return all(not isinstance(i, dict | list) for i in items) and len(inline_list(items)) <= 100


def inline_list(items: list[Any]) -> str:
    return "[" + ", ".join(yaml_scalar(i) for i in items) + "]"


def inline(value: Any) -> str:
    if isinstance(value, dict):
        return (
            "{}"
            if not value
            else "{" + ", ".join(f"{yaml_key(str(k))}: {inline(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(inline(i) for i in value) + "]"
    return yaml_scalar(value)


HEADER = """\
# Training frameworks' own defaults and the meaning of their settings, read from each framework's source at
# the pinned commit below by parsing it with Python's ast (nothing is imported). Per class: every field
# (or, for the large classes, those bearing on memory, time or trainplan's readers) with its default, type
# annotation, help text (shortened to 200 characters) and line. `default` is always a literal; a default
# that is an expression is given as `default_expr`, with `default_kind` saying what it is (default_factory,
# enum member, a name bound in the source, a call). `set_later` lists assignments made after construction
# (__post_init__, validators, config normalisation) that change the value in effect; `doc_default` is the
# default the class docstring states. `settings` maps the settings trainplan's reader of the framework
# reads onto the class fields; `not_found` says why a setting has no field.
#
# Regenerate (needs the git mirrors, OWNER+NAME/repo, under --mirrors):
#   .venv/bin/python scripts/framework_defaults.py --mirrors DIR
"""


def to_yaml(data: Data) -> str:
    return HEADER + "\n".join(yaml_lines(data, 0)) + "\n"


# --- Main ---------------------------------------------------------------------------------------------------


def parse_refs(values: Sequence[str]) -> dict[str, str]:
    refs: dict[str, str] = {}
    for value in values:
        key, sep, ref = value.partition("=")
        if not sep:
            raise SystemExit(f"--ref takes KEY=REF, not {value!r}")
        refs[key] = ref
    return refs


def build(mirrors: Path, transformers: Path | None, refs: Mapping[str, str]) -> Data:
    readings: dict[str, Reading] = {}
    for framework in FRAMEWORKS:
        tree, pin = open_tree(framework, mirrors, transformers, refs)
        reading = read_framework(framework, tree, pin)
        if pin.get("commit") is None:
            version = reading.out.get("version")
            reading.out = {**reading.out, "tag": f"v{version}" if version else None}
        readings[framework.key] = reading
    frameworks: Data = {}
    for key, reading in readings.items():
        settings, not_found = settings_and_gaps(reading, readings)
        out = dict(reading.out)
        if reading.framework.recipes:
            frameworks[key] = out
            continue
        if settings:
            out["settings"] = settings
        if not_found:
            out["not_found"] = not_found
        frameworks[key] = out
    return {"frameworks": frameworks}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--mirrors", type=Path, default=MIRRORS, help="folder of OWNER+NAME/repo git mirrors")
    parser.add_argument(
        "--transformers",
        type=Path,
        default=None,
        help="a transformers package folder to read instead of a mirror (default: the mirror if present,"
        " else the installed package)",
    )
    parser.add_argument("--ref", action="append", default=[], help="KEY=REF: read a framework at another ref")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    transformers: Path | None = args.transformers
    if transformers is None and not (args.mirrors / "huggingface+transformers" / "repo").is_dir():
        transformers = SITE / "transformers"
    data = build(args.mirrors, transformers, parse_refs(args.ref))
    args.out.write_text(to_yaml(data), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
