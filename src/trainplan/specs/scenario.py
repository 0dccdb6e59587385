"""The scenario: every user-settable input of an estimate, flat, validated, documented.

The same field names are the scenario-file keys, the CLI flags (``micro_batch`` -> ``--micro-batch``)
and the web API's JSON fields. Each field carries its help text and allowed values here, once, so
the interfaces are generated from this table and cannot drift from it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from trainplan.specs.errors import InputError, shown_number, shown_value
from trainplan.specs.model import MODEL_KINDS
from trainplan.specs.offload import OFFLOAD
from trainplan.specs.pipeline import PIPELINE_SCHEDULES
from trainplan.specs.presets import Recipe, recipes, with_recipe
from trainplan.specs.rollout import (
    ROLLOUT_ENGINES,
    ROLLOUT_PLACEMENTS,
    ROLLOUT_STAGES,
    check_rollout,
    trainer_gpus,
)
from trainplan.specs.stages import (
    OPTIONAL_REFERENCE_STAGES,
    REFERENCE_STAGES,
    REFERENCES,
    STAGES,
    check_stage,
)
from trainplan.specs.validity import check_layout
from trainplan.specs.validity import resolved_base_weights as resolved_base_weights  # re-exported
from trainplan.specs.validity import shard_group as shard_group  # re-exported

#: Tokens trained on when a language-model scenario gives no budget (the field table's help and
#: the time figures read this one number).
DEFAULT_TRAIN_TOKENS = 2.0e9
#: Images or clips trained on when a diffusion, video or JEPA scenario gives no budget.
DEFAULT_TRAIN_SAMPLES = 10_000.0
_TOKENS_TEXT = f"{DEFAULT_TRAIN_TOKENS:.0e}".replace("e+0", "e")  # "2e9", as the form takes it

METHODS = ("full", "lora", "qlora")
PRECISIONS = ("bf16-mixed", "fp16-mixed", "amp-bf16", "amp-fp16", "bf16", "fp32", "fp8-mixed", "fp8-torchao")
BASE_WEIGHTS = ("bf16", "fp16", "fp32", "int8", "nf4")
OPTIMIZERS = (
    "adamw",
    "adamw-fused",
    "adamw-8bit",
    "paged-adamw-8bit",
    "adamw-4bit",
    "sgd",
    "sgd-momentum",
    "adafactor",
    "lion",
)
CHECKPOINTING = ("none", "selective", "op", "full")
ATTENTION = ("flash", "sdpa", "eager")
SSM_KERNELS = ("fused", "naive")
KERNELS = ("eager", "liger", "unsloth")
LORA_TARGET_PRESETS = ("qv", "attention", "all-linear")
ADAPTER_DTYPES = ("fp32", "compute")
PRICING = ("on-demand", "committed", "spot")
LOSSES = ("standard", "chunked", "fused", "logprob", "selective", "logsoftmax")
FSDP_WRAPS = ("layers", "root")
REDUCE_DTYPES = ("compute", "fp32")
ZERO3_MASTERS = ("shard", "separate")
FROZEN_ENCODERS = ("precomputed", "gpu", "offload")
EMA_DTYPES = ("none", "fp32", "bf16")
RECIPES = (
    "hf-trainer",
    "trl",
    "torchtune",
    "torchtitan",
    "axolotl",
    "unsloth",
    "llama-factory",
    "deepspeed",
    "megatron",
    "diffusers",
)


MAX_PIXELS_PER_SIDE = 16_384  # the largest `resolution` side
MAX_FRAMES = 4_096  # the largest `frames`
_WXH = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")
DEFAULT_LOSS_CHUNKS = 8  # torchtune CEWithChunkedOutputLoss(num_output_chunks=8)


def parse_resolution(raw: object) -> tuple[int, int]:
    """(width, height) in pixels of an int (square) or "WxH"; InputError naming `resolution`."""
    wrong = f"{shown_value(raw)} is not a resolution: give pixels (1024) or WxH (832x480)"
    if isinstance(raw, int) and not isinstance(raw, bool):
        width = height = raw
    elif isinstance(raw, str) and len(raw) <= 40:
        match = _WXH.match(raw)
        if match is None and raw.strip().isdigit():
            width = height = int(raw)
        elif match is None:
            raise InputError("resolution", wrong)
        else:
            width, height = int(match.group(1)), int(match.group(2))
    else:
        raise InputError("resolution", wrong)
    for side in (width, height):
        if not 1 <= side <= MAX_PIXELS_PER_SIDE:
            raise InputError(
                "resolution", f"{shown_number(side)} px is outside 1..{MAX_PIXELS_PER_SIDE:,} per side"
            )
    return width, height


# The interfaces a field can appear in: the CLI's flags (options.estimate_options), the web
# page's form (app.js draws a control only for these) and the JSON API's body (its OpenAPI
# schema). A scenario file takes every field: it is the scenario's own shape.
INTERFACES = ("cli", "web", "api")
# The training-budget modes, in the order the page offers them: a field that belongs to one
# (`FieldInfo.budget`) is shown only in that mode, and switching modes clears the others' values.
BUDGET_MODES = {"tokens": "Tokens", "dataset": "Dataset", "steps": "Steps"}


# The range of a rate in USD per GPU-hour: a user's own rate (the field `usd_per_gpu_hour`) and
# every quote in the price data (catalogs/prices.py checks them against it).
USD_PER_GPU_HOUR_RANGE = (0.001, 1000.0)


@dataclass(frozen=True)
class FieldInfo:
    """Everything the interfaces say about one scenario field: its help, allowed values and
    range, its label (the form's, the error messages' and OpenAPI's `title`), and where it shows.

    `label` is required: `check_field_table` refuses a table with a field that has none (at the
    first use of the table), so no interface makes one up from the field's name.
    """

    help: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    value_type: str | None = None  # "int" | "float" | "str" | "bool"; inferred from the default if None
    web_help: str | None = None  # the help where the web API accepts less (it reads no paths)
    form_help: str | None = None  # the help where the page's control does more (search, upload)
    exclusive: bool = False  # minimum and maximum themselves are outside the range
    # the model kinds (model.MODEL_KINDS) the field applies to, the methods and the stages; None:
    # every one.
    # The form shows a field only where it applies and sends it only then; the engine refuses a
    # value where it applies to nothing, or the value changes nothing (a test holds both).
    model_kinds: tuple[str, ...] | None = None
    methods: tuple[str, ...] | None = None
    stages: tuple[str, ...] | None = None  # the training stages (stages.STAGES); None: every one
    label: str = ""  # the form's label, e.g. "Micro-batch"
    short_label: str | None = None  # lower-case, inside a sentence: "differs in micro-batch"
    placeholder: str | None = None  # what an empty input means, e.g. "2e9 (default)"
    choice_labels: tuple[tuple[str, str], ...] = ()  # (choice, how the form names it)
    budget: str | None = None  # the training-budget mode (BUDGET_MODES) the field belongs to
    interfaces: tuple[str, ...] = INTERFACES  # where the field appears (INTERFACES)
    # (model kind, value) the page's form takes when a model of that kind is picked, where the
    # default would not be what anyone runs; the value is then stated in the link and the command
    kind_defaults: tuple[tuple[str, str], ...] = ()


LORA_FIELDS: dict[str, FieldInfo] = {
    "rank": FieldInfo(
        "LoRA rank r: adapter matrices are r x in and out x r", None, 1, 65536, "int", label="LoRA rank"
    ),
    "alpha": FieldInfo(
        "LoRA alpha: scales the update (no effect on memory or time)",
        None,
        0.001,
        1e6,
        "float",
        label="LoRA alpha",
    ),
    "targets": FieldInfo(
        "which linear layers get adapters: qv, attention, all-linear, or module names",
        None,
        None,
        None,
        "str",
        label="LoRA targets",
        placeholder="q_proj,v_proj,gate_proj",
    ),
    "dora": FieldInfo(
        "DoRA: adds a magnitude vector per adapted layer", None, None, None, "bool", label="DoRA"
    ),
    "dropout": FieldInfo(
        "dropout on each adapter's input (peft lora_dropout; above 0 keeps a dropped copy and a mask "
        "per adapted module)",
        None,
        0.0,
        0.99,
        "float",
        label="LoRA dropout",
    ),
    "dtype": FieldInfo(
        "adapter weights, gradients and optimizer state: fp32 (peft's autocast_adapter_dtype) or "
        "the compute dtype (torchtune keeps the whole model in bf16); unset: the compute dtype for "
        "a diffusion or video model without a recipe (the diffusers recipe's), else fp32",
        ADAPTER_DTYPES,
        value_type="str",
        label="LoRA adapter dtype",
    ),
}


LLM_ONLY = ("llm",)
#: The stages the rollout fields apply to (specs/rollout.py): both, GRPO's own, PPO's own.
_ROLLOUT = tuple(sorted(ROLLOUT_STAGES))
_GRPO = ("grpo",)
_PPO = ("ppo",)
SAMPLE_KINDS = ("diffusion", "video", "jepa")  # the kinds that train on images or clips
ADAPTER_METHODS = ("lora", "qlora")


def _field(default: Any, info: FieldInfo) -> Any:
    return field(default=default, metadata={"info": info})


@cache
def _defaults(record: type) -> dict[str, Any]:
    """The declared default of each field of a dataclass (no instance is built)."""
    return {item.name: item.default for item in dataclasses.fields(record)}


def field_kind(info: FieldInfo, default: Any) -> str:
    """int | float | str | bool (or a declared kind such as targets): the declared kind, else the
    default's type."""
    if info.value_type:
        return info.value_type
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    return "str"


def _checked_type(name: str, value: Any, kind: type) -> None:
    if type(value) is not kind:
        raise InputError(name, f"{shown_value(value)} is not a {kind.__name__}")


def _checked_value(name: str, value: Any, default: Any, info: FieldInfo) -> None:
    """`value` as a constructed record holds it: of the field's type, in its range or among its
    choices, and already what `_coerce` would make of it (a choice in lower case, a stripped
    string), else the InputError naming the field."""
    kind = info.value_type or type(default).__name__
    if kind == "bool":
        _checked_type(name, value, bool)
        return
    if info.choices is None and kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(name, f"{shown_value(value)} is not an integer")
    if (
        info.choices is None
        and kind == "float"
        and (isinstance(value, bool) or not isinstance(value, int | float))
    ):
        raise InputError(name, f"{shown_value(value)} is not a number")
    if (info.choices is not None or kind == "str") and not isinstance(value, str):
        raise InputError(name, f"{shown_value(value)} is not a string")
    coerced = _coerce(name, value, default, info)
    if coerced != value:
        raise InputError(name, f"{shown_value(value)}: give {shown_value(coerced)}")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (Hu et al. 2021; DoRA: Liu et al. 2024)."""

    rank: int = 16
    alpha: float = 32.0
    targets: str | tuple[str, ...] = "qv"
    dora: bool = False
    dropout: float = 0.0
    dtype: str | None = None  # unset: presets.resolved_adapter_dtype decides by the model

    def __post_init__(self) -> None:
        """Refuse a bad part at construction with the InputError a mapping gets."""
        defaults = _defaults(LoraSettings)
        for part, info in LORA_FIELDS.items():
            value = getattr(self, part)
            if value is defaults[part] or (type(value) is type(defaults[part]) and value == defaults[part]):
                continue
            if part == "targets":
                if _targets_from(value) != value:
                    raise InputError("lora.targets", f"{shown_value(value)} is not in canonical form")
            elif part == "dora":
                _checked_type(f"lora.{part}", value, bool)
            elif not (value is None and part == "dtype"):
                _checked_value(f"lora.{part}", value, defaults[part], info)


@dataclass(frozen=True)
class Scenario:
    """All inputs of one estimate. Defaults are a sensible single-GPU LoRA fine-tune."""

    model: str = _field(
        "Llama-3.1-8B",
        FieldInfo(
            "catalog name, path to a config.json (or its folder), or a Hugging Face Hub id",
            web_help="catalog name or Hugging Face Hub id (owner/name); the server reads no paths: "
            "send the config.json contents as `model_config` instead",
            form_help="Search the catalog by name, family or Hub id; type a Hub id (owner/name); or use "
            "your own config.json.",
            label="Model",
            placeholder="Search: llama, qwen 7b, mixtral… or owner/name",
        ),
    )
    force: bool = _field(
        False,
        FieldInfo(
            "estimate a model whose architecture is refused (not modelled) with the closest modelled "
            "reading; the result is labelled approximate and names the reason",
            value_type="bool",
            label="Estimate a refused architecture (approximate)",
        ),
    )
    vae: str | None = _field(
        None,
        FieldInfo(
            "the VAE and text encoders for a denoiser's config.json given without its pipeline folder: "
            "a catalog diffusion model, or the path of a VAE config.json (default: the closest catalog "
            "pipeline's, named in the warnings)",
            value_type="str",
            label="VAE",
            model_kinds=("diffusion", "video"),
            interfaces=("cli", "api"),
        ),
    )
    method: str = _field(
        "lora",
        FieldInfo(
            "what is trained",
            METHODS,
            label="Method",
            short_label="method",
            choice_labels=(("full", "Full"), ("lora", "LoRA"), ("qlora", "QLoRA")),
            # a JEPA's published recipes pretrain every weight (data/jepa_recipes.yaml)
            kind_defaults=(("jepa", "full"),),
        ),
    )
    stage: str = _field(
        "sft",
        FieldInfo(
            "what the step trains: sft and pt (one sequence per example), rm (a reward model: "
            "chosen and rejected scored by one scalar head), dpo, orpo, simpo (micro_batch counts "
            "chosen/rejected pairs, run as one batch of 2 x micro_batch sequences) or kto "
            "(unpaired examples plus a KL batch), grpo (completions generated per prompt, then "
            "trained; the rollout fields), ppo (one completion per prompt, scored by a reward model, "
            "the policy trained with a value model of its architecture); LLaMA-Factory's stage "
            "names, TRL's trainers",
            STAGES,
            model_kinds=LLM_ONLY,
            label="Training stage",
            choice_labels=(
                ("sft", "SFT"),
                ("pt", "Pre-training"),
                ("rm", "Reward model"),
                ("dpo", "DPO"),
                ("kto", "KTO"),
                ("orpo", "ORPO"),
                ("simpo", "SimPO"),
                ("grpo", "GRPO"),
                ("ppo", "PPO"),
            ),
        ),
    )
    reference: str | None = _field(
        None,
        FieldInfo(
            "dpo, kto, grpo and ppo: where the reference log-probs come from: model (a frozen copy on "
            "every GPU), adapter (the LoRA policy with its adapters disabled), precomputed (one "
            "pass before training, precompute_ref_log_probs; not grpo or ppo) or none (null: TRL's "
            "default, adapter for LoRA and QLoRA, model for a full fine-tune; none for grpo, whose "
            "beta is 0 by default, and for the other stages)",
            REFERENCES,
            model_kinds=LLM_ONLY,
            stages=tuple(sorted(REFERENCE_STAGES | OPTIONAL_REFERENCE_STAGES)),
            label="Reference log-probs",
            choice_labels=(
                ("model", "Frozen copy"),
                ("adapter", "Adapters disabled"),
                ("precomputed", "Precomputed"),
                ("none", "No reference"),
            ),
        ),
    )
    reference_weights: str | None = _field(
        None,
        FieldInfo(
            "precision of the reference copy (reference model; null: as the policy's weights are "
            "loaded, TRL's ref_model takes the policy's model_init_kwargs: the base's format for "
            "LoRA and QLoRA, the 16-bit compute dtype for *-mixed and bf16, fp32 for amp-* and fp32)",
            BASE_WEIGHTS,
            stages=tuple(sorted(REFERENCE_STAGES | OPTIONAL_REFERENCE_STAGES)),
            model_kinds=LLM_ONLY,
            label="Reference-copy precision",
        ),
    )
    completion_len: int | None = _field(
        None,
        FieldInfo(
            "grpo, ppo: tokens generated per completion, the part of seq_len after the prompt "
            "(TRL's max_completion_length, PPO's response_length; every completion taken to run to "
            "it; null: 512 for grpo, 53 for ppo, TRL's defaults)",
            None,
            1,
            10_000_000,
            "int",
            model_kinds=LLM_ONLY,
            stages=_ROLLOUT,
            label="Completion length",
            placeholder="512 grpo, 53 ppo (TRL's defaults)",
        ),
    )
    generations: int | None = _field(
        None,
        FieldInfo(
            "grpo: completions sampled per prompt (TRL's num_generations; null: 8); it must divide "
            "the completions of one step, micro_batch x grad_accum x data-parallel replicas",
            None,
            2,
            65536,
            "int",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Generations per prompt",
            placeholder="8 (TRL's default)",
        ),
    )
    rollout_engine: str | None = _field(
        None,
        FieldInfo(
            "grpo: what generates the completions: hf (transformers' generate on the policy, TRL's "
            "default use_vllm false) or vllm",
            ROLLOUT_ENGINES,
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Rollout engine",
            choice_labels=(("hf", "transformers generate"), ("vllm", "vLLM")),
        ),
    )
    rollout_placement: str | None = _field(
        None,
        FieldInfo(
            "grpo with vllm: colocate (an engine inside every training process, sharing its GPU; "
            "TRL's default vllm_mode) or separate (trl vllm-serve on rollout_gpus of the gpus)",
            ROLLOUT_PLACEMENTS,
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Engine placement",
            choice_labels=(("colocate", "Share the training GPUs"), ("separate", "GPUs of its own")),
        ),
    )
    rollout_gpus: int | None = _field(
        None,
        FieldInfo(
            "grpo with a separate engine: how many of the gpus run it (null: 1); the rest train",
            None,
            1,
            1_000_000,
            "int",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Engine GPUs",
            placeholder="1 GPU",
        ),
    )
    rollout_tensor_parallel: int | None = _field(
        None,
        FieldInfo(
            "grpo with vllm: the engine's tensor-parallel size (vllm_tensor_parallel_size, or "
            "vllm-serve's --tensor_parallel_size; null: 1)",
            None,
            1,
            1024,
            "int",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Engine tensor parallel",
            placeholder="1 (no tensor parallel)",
        ),
    )
    rollout_memory_fraction: float | None = _field(
        None,
        FieldInfo(
            "grpo with vllm: share of each engine GPU's memory the engine takes for its weights, "
            "activations and KV cache (vLLM's gpu_memory_utilization; null: 0.3 colocated, TRL's "
            "vllm_gpu_memory_utilization, 0.9 separate, trl vllm-serve's)",
            None,
            0.01,
            1.0,
            "float",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Engine memory fraction",
            placeholder="0.3 colocated, 0.9 separate",
        ),
    )
    rollout_sleep: bool | None = _field(
        None,
        FieldInfo(
            "grpo with a colocated vllm engine: the engine sleeps at level 2 while the policy trains "
            "(TRL's vllm_enable_sleep_mode: weights and KV cache released, the weights loaded again "
            "from the policy before each generation; null: false)",
            value_type="bool",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Engine sleeps while training",
        ),
    )
    steps_per_generation: int | None = _field(
        None,
        FieldInfo(
            "grpo: micro-steps one generation batch serves (TRL's steps_per_generation; null: "
            "grad_accum, one batch per optimizer step); a batch is micro_batch x replicas x this "
            "many completions",
            None,
            1,
            1_000_000,
            "int",
            model_kinds=LLM_ONLY,
            stages=_GRPO,
            label="Steps per generation",
            placeholder="grad_accum (TRL's default)",
        ),
    )
    num_iterations: int | None = _field(
        None,
        FieldInfo(
            "grpo, ppo: passes over each generation batch (TRL's num_iterations, GRPO's mu, "
            "PPO's num_ppo_epochs; null: 1 for grpo, 4 for ppo)",
            None,
            1,
            1024,
            "int",
            model_kinds=LLM_ONLY,
            stages=_ROLLOUT,
            label="Iterations per batch",
            placeholder="1 grpo, 4 ppo (TRL's defaults)",
        ),
    )
    critic_model: str | None = _field(
        None,
        FieldInfo(
            "ppo: the value model's architecture, trained beside the policy with a one-score head: a "
            "catalog name, a config.json path or a Hub id (null: the policy's; TRL's example loads it "
            "from reward_model_path)",
            web_help="ppo: the value model's architecture, a catalog name (null: the policy's; the "
            "server reads no paths)",
            value_type="str",
            model_kinds=LLM_ONLY,
            stages=_PPO,
            label="Value model",
            placeholder="the policy's architecture",
        ),
    )
    reward_model: str | None = _field(
        None,
        FieldInfo(
            "ppo: the frozen reward model's architecture (a one-score head): a catalog name, a "
            "config.json path or a Hub id (null: the policy's; TRL's reward_model_path)",
            web_help="ppo: the frozen reward model's architecture, a catalog name (null: the "
            "policy's; the server reads no paths)",
            value_type="str",
            model_kinds=LLM_ONLY,
            stages=_PPO,
            label="Reward model",
            placeholder="the policy's architecture",
        ),
    )
    rollout_forward_batch: int | None = _field(
        None,
        FieldInfo(
            "ppo: prompts generated, and scored by the reference, value and reward models, at once "
            "(TRL's local_rollout_forward_batch_size; null: 64)",
            None,
            1,
            1_000_000,
            "int",
            model_kinds=LLM_ONLY,
            stages=_PPO,
            label="Rollout forward batch",
            placeholder="64 (TRL's default)",
        ),
    )
    recipe: str | None = _field(
        None,
        FieldInfo(
            "framework preset: fills the memory settings you leave unset with what that framework "
            "ships (data/recipes.yaml); fields you set win",
            RECIPES,
            label="Framework recipe",
        ),
    )
    lora: LoraSettings = _field(
        LoraSettings(),
        FieldInfo(
            "LoRA rank, alpha, targets (qv | attention | all-linear | module names), dora, dropout "
            "and the adapters' dtype",
            methods=ADAPTER_METHODS,
            label="LoRA settings",
        ),
    )
    base_weights: str | None = _field(
        None,
        FieldInfo(
            "precision of the frozen base for lora/qlora (default: the precision's weight "
            "dtype for lora, nf4 for qlora)",
            BASE_WEIGHTS,
            methods=ADAPTER_METHODS,
            label="Base-weight precision",
        ),
    )
    precision: str = _field(
        "bf16-mixed",
        FieldInfo(
            "how weights are kept and matmuls run: *-mixed keep 16-bit weights beside an fp32 master "
            "copy, amp-* autocast fp32 weights, bf16 is pure bf16, fp8-* run the linears in float8",
            PRECISIONS,
            label="Training precision",
        ),
    )
    optimizer: str = _field(
        "adamw",
        FieldInfo(
            "what the optimizer keeps per trainable weight: AdamW two fp32 moments, the 8- and 4-bit "
            "variants quantised ones (paged: in unified memory), SGD none or one, Adafactor factored",
            OPTIMIZERS,
            label="Optimizer",
        ),
    )
    micro_batch: int = _field(
        1,
        FieldInfo(
            "sequences per GPU per forward pass; for rm, dpo, orpo and simpo chosen/rejected pairs "
            "(2 x micro_batch sequences)",
            None,
            1,
            65536,
            label="Micro-batch",
            short_label="micro-batch",
        ),
    )
    seq_len: int = _field(
        2048,
        FieldInfo(
            "tokens per training sequence (prompt and response together), padded or packed to it",
            None,
            1,
            10_000_000,
            model_kinds=LLM_ONLY,
            label="Sequence length",
            short_label="sequence length",
        ),
    )
    grad_accum: int = _field(
        16,
        FieldInfo(
            "micro-batches accumulated per step",
            None,
            1,
            65536,
            label="Gradient accumulation",
            short_label="accumulation",
        ),
    )
    resolution: str | None = _field(
        None,
        FieldInfo(
            "diffusion, video and JEPA models: pixels per side (1024) or WxH (832x480), each side a "
            "multiple of the VAE stride x patch; not for language models",
            value_type="str",
            model_kinds=SAMPLE_KINDS,
            label="Resolution (px or WxH)",
            placeholder="the pipeline's default",
        ),
    )
    frames: int | None = _field(
        None,
        FieldInfo(
            "pixel frames per sample (null: 1 for image models; video models and video JEPAs need it)",
            None,
            1,
            MAX_FRAMES,
            "int",
            model_kinds=SAMPLE_KINDS,
            label="Frames per clip",
            placeholder="the pipeline's default",
        ),
    )
    text_tokens: int | None = _field(
        None,
        FieldInfo(
            "text tokens the denoiser reads (null: the pipeline's default, e.g. 512 T5 tokens for "
            "FLUX.1-dev; a JEPA reads none)",
            None,
            0,
            1_000_000,
            "int",
            model_kinds=("diffusion", "video"),
            label="Text tokens",
            placeholder="the pipeline's default",
        ),
    )
    frozen_encoders: str = _field(
        "precomputed",
        FieldInfo(
            "diffusion: the VAE and text encoders are precomputed (latents and embeddings cached "
            "beforehand, only the denoiser on the GPU), gpu (resident, run every step) or offload "
            "(kept on the CPU)",
            FROZEN_ENCODERS,
            model_kinds=("diffusion", "video"),
            label="VAE and text encoders",
        ),
    )
    ema: str | None = _field(
        None,
        FieldInfo(
            "EMA copy of the trainable weights (the diffusers full fine-tune scripts' use_ema); for "
            "a JEPA the target encoder's dtype (null: none for diffusion, fp32 for a JEPA)",
            EMA_DTYPES,
            model_kinds=SAMPLE_KINDS,
            label="EMA copy",
        ),
    )
    mask_ratio: float | None = _field(
        None,
        FieldInfo(
            "JEPA: one mask generator hiding this share of the patch tokens (null: the model's "
            "published pretraining masks)",
            None,
            0.0,
            1.0,
            "float",
            exclusive=True,
            model_kinds=("jepa",),
            label="JEPA mask ratio",
            placeholder="published masks",
        ),
    )
    activation_checkpointing: str = _field(
        "full",
        FieldInfo(
            "activation (gradient) checkpointing: selective recomputes core attention (Megatron), op "
            "saves matmul and attention outputs (torchtitan op-level SAC), full:N checkpoints every "
            "N-th block (full:1 = full)",
            CHECKPOINTING,
            label="Activation checkpointing",
            short_label="checkpointing",
        ),
    )
    activation_offload: bool = _field(
        False,
        FieldInfo(
            "move saved activations to CPU memory with streams (torchtune, Unsloth); the layer in "
            "flight stays on the GPU",
            label="Offload activations to CPU",
        ),
    )
    attention: str = _field(
        "flash",
        FieldInfo(
            "attention kernel: flash and sdpa keep no seq x seq scores; eager materialises them",
            ATTENTION,
            label="Attention kernel",
        ),
    )
    kernels: str = _field(
        "eager",
        FieldInfo(
            "layer kernels: eager (PyTorch / Hugging Face modules), liger (Liger's RMSNorm, RoPE and "
            "SwiGLU kernels, which save the norm input and the gate and up outputs only), unsloth "
            "(the same, plus Unsloth's fused LoRA MLP / QKV / O functions, which keep each input once "
            "and recompute the SwiGLU product)",
            KERNELS,
            model_kinds=LLM_ONLY,
            label="Layer kernels",
        ),
    )
    ssm_kernel: str = _field(
        "fused",
        FieldInfo(
            "Mamba / Mamba-2 and linear-attention kernels: fused (mamba-ssm, flash-linear-attention, "
            "causal-conv1d) or naive (the PyTorch fallback, which keeps far more for backward)",
            SSM_KERNELS,
            model_kinds=LLM_ONLY,
            label="SSM kernel",
        ),
    )
    gpu: str = _field(
        "H100-SXM",
        FieldInfo("GPU type (name or alias, see `trainplan gpus`)", label="GPU type", short_label="GPU"),
    )
    gpus: int = _field(
        1, FieldInfo("total number of GPUs", None, 1, 1_000_000, label="GPUs", short_label="GPU count")
    )
    gpu_file: str | None = _field(
        None,
        FieldInfo(
            "a YAML or JSON file of your own GPU records in the catalog's schema (src/trainplan/data/"
            "gpus.yaml; null-able keys may be left out): `gpu` is looked up there first",
            value_type="str",
            label="GPU file",
            interfaces=("cli", "api"),
        ),
    )
    gpu_memory_gib: float | None = _field(
        None,
        FieldInfo(
            "the chosen GPU's usable memory in GiB instead of its record's (a MIG slice, a card shared "
            "with another process, a variant with less memory); the fit and the largest-fit search use it",
            None,
            0.125,
            1_000_000,
            "float",
            label="GPU memory (GiB)",
            placeholder="the GPU's own",
        ),
    )
    zero_stage: int = _field(
        0,
        FieldInfo(
            "ZeRO stage (3 = FSDP full sharding) over data-parallel ranks",
            None,
            0,
            3,
            label="ZeRO stage",
            short_label="ZeRO stage",
        ),
    )
    fsdp_wrap: str = _field(
        "layers",
        FieldInfo(
            "ZeRO-3/FSDP2 wrapping: layers (every layer, the embedding and the head their own "
            "group, each gathered only while in use) or root (embeddings, final norm and head left "
            "to the root group, gathered for the whole step: torchtitan 2024, torchtune without "
            "custom_sharded_layers)",
            FSDP_WRAPS,
            label="FSDP wrapping",
        ),
    )
    zero3_master: str = _field(
        "shard",
        FieldInfo(
            "where ZeRO-3 keeps the fp32 master of a mixed precision: shard (FSDP/FSDP2: the fp32 "
            "shard is the parameter, gradients are reduced into fp32 shards, 16-bit copies exist "
            "only for gathered layers) or separate (DeepSpeed: 16-bit partitions beside an fp32 "
            "master in the optimizer)",
            ZERO3_MASTERS,
            label="ZeRO-3 fp32 master",
        ),
    )
    fsdp_reduce_dtype: str = _field(
        "compute",
        FieldInfo(
            "dtype gradients are reduce-scattered in under ZeRO-3/FSDP2: compute (FSDP2's default, "
            "the parameter dtype) or fp32 (MixedPrecisionPolicy reduce_dtype, torchtitan)",
            REDUCE_DTYPES,
            label="FSDP reduce dtype",
        ),
    )
    fsdp_prefetch: int = _field(
        1,
        FieldInfo(
            "layers gathered ahead of the one computing under ZeRO-3/FSDP2 (FSDP2 prefetches 1)",
            None,
            0,
            16,
            label="FSDP prefetch (layers)",
        ),
    )
    reshard_after_forward: bool = _field(
        True,
        FieldInfo(
            "ZeRO-3/FSDP2: free each layer's gathered weights after its forward (false keeps every "
            "layer gathered from forward until its backward)",
            label="Reshard after forward",
        ),
    )
    tensor_parallel: int = _field(
        1,
        FieldInfo(
            "GPUs each layer's matrices are split across (Megatron tensor parallelism, within a node)",
            None,
            1,
            1024,
            model_kinds=LLM_ONLY,
            label="Tensor parallel",
            short_label="tensor parallel",
        ),
    )
    pipeline_parallel: int = _field(
        1,
        FieldInfo(
            "stages the layers are cut into, one per GPU group (1F1B pipeline schedule)",
            None,
            1,
            1024,
            model_kinds=LLM_ONLY,
            label="Pipeline parallel",
            short_label="pipeline parallel",
        ),
    )
    context_parallel: int = _field(
        1,
        FieldInfo(
            "GPUs each sequence is split across (context parallelism: torch's ring attention with "
            "head-tail load balancing, torchtitan context_parallel_degree, Megatron --cp); "
            "micro_batch counts the sequences the group shares, each GPU holds seq_len / "
            "context_parallel of their tokens",
            None,
            1,
            1024,
            model_kinds=LLM_ONLY,
            label="Context parallel",
            short_label="context parallel",
        ),
    )
    expert_parallel: int = _field(
        1,
        FieldInfo(
            "GPUs a mixture-of-experts model's routed experts are split across (torchtitan "
            "expert_parallel_degree, Megatron --expert-model-parallel-size): each holds 1 / "
            "expert_parallel of every MoE layer's experts, whole, the expert ranks taken from "
            "the tensor-, data- and context-parallel ones; tokens reach their experts by all-to-all",
            None,
            1,
            1024,
            model_kinds=LLM_ONLY,
            label="Expert parallel",
        ),
    )
    expert_imbalance: float = _field(
        1.0,
        FieldInfo(
            "routed tokens of the busiest expert-parallel rank over the mean (1: balanced, the "
            "default): a stated factor on that rank's expert matmuls and on the all-to-alls, which "
            "finish when it does; used where expert_parallel > 1",
            None,
            1.0,
            16.0,
            model_kinds=LLM_ONLY,
            label="Expert imbalance",
        ),
    )
    data_parallel_replicate: int = _field(
        1,
        FieldInfo(
            "hybrid sharding (HSDP): replicas of the sharded states; ZeRO / FSDP shards within "
            "each group of data_parallel / data_parallel_replicate replicas (torchtitan "
            "data_parallel_replicate_degree, FSDP HYBRID_SHARD); 1: one group, every replica shards",
            None,
            1,
            1024,
            label="HSDP replicas",
        ),
    )
    virtual_stages: int = _field(
        1,
        FieldInfo(
            "interleaved pipeline: model chunks per GPU (Megatron virtual stages)",
            None,
            1,
            64,
            label="Virtual pipeline stages",
        ),
    )
    pipeline_schedule: str | None = _field(
        None,
        FieldInfo(
            "the pipeline schedule: 1f1b (one forward, one backward; pipeline_parallel "
            "micro-batches in flight), gpipe (every micro-batch's forward first), "
            "interleaved-1f1b (virtual_stages chunks per GPU), zero-bubble (ZB-H1: the backward "
            "split into input and weight gradients, the bubble a third of 1F1B's at 1F1B's "
            "memory), zero-bubble-v (ZB-V, torch ScheduleZBVZeroBubble: 2 chunks a GPU in a V, "
            "half ZB-H1's bubble once grad_accum >= 2 x pipeline_parallel), dualpipev (DeepSeek's "
            "DualPipe in a V, torch ScheduleDualPipeV: 2 chunks a GPU, ZB-H1's bubble, the expert "
            "all-to-alls under the overlapped forward and backward); the V schedules need "
            "virtual_stages 2; null: interleaved-1f1b with virtual stages, else 1f1b",
            PIPELINE_SCHEDULES,
            label="Pipeline schedule",
            placeholder="1f1b (interleaved with virtual stages)",
        ),
    )
    sequence_parallel: bool = _field(
        False,
        FieldInfo(
            "shard norm/dropout activations over the tensor-parallel group",
            model_kinds=LLM_ONLY,
            label="Sequence parallel",
        ),
    )
    offload: str = _field(
        "none",
        FieldInfo(
            "model states moved to CPU memory: the optimizer state, stepped on the CPU (DeepSpeed "
            "offload_optimizer), the parameters too (DeepSpeed offload_param, ZeRO-3), or the "
            "parameters and their sharded gradients (FSDP's CPU offload: FSDP2 CPUOffloadPolicy, "
            "torchtune fsdp_cpu_offload, accelerate fsdp_offload_params; ZeRO-3)",
            OFFLOAD,
            label="CPU offload",
            short_label="offload",
        ),
    )
    loss: str | None = _field(
        None,
        FieldInfo(
            "cross-entropy implementation: standard (Hugging Face) or fused linear + cross-entropy "
            "(Liger, Cut Cross-Entropy), which never holds the full logits; chunked upcasts the "
            "logits to fp32 one chunk at a time (torchtune); logprob is TRL's fused log-prob head "
            "(ChunkedLogProbFunction: logits in tiles, recomputed in backward); selective is the "
            "full logits through selective_log_softmax, as TRL 1.10 and before scored dpo and kto; "
            "logsoftmax the full fp32 logits' log-softmax, as LLaMA-Factory scores dpo, orpo and "
            "simpo. Null: the stage's "
            "default, logprob for dpo, kto, orpo and simpo (TRL scores them through it), "
            "standard otherwise",
            LOSSES,
            model_kinds=LLM_ONLY,
            label="Loss kernel",
        ),
    )
    loss_chunks: int = _field(
        DEFAULT_LOSS_CHUNKS,
        FieldInfo(
            "chunks of the chunked loss (torchtune's num_output_chunks)",
            None,
            1,
            1024,
            model_kinds=LLM_ONLY,
            label="Loss chunks",
        ),
    )
    compile: bool = _field(
        False,
        FieldInfo(
            "torch.compile of each block: AOTAutograd's min-cut partition recomputes the norms' "
            "fp32 copies and the gated activation in backward instead of saving them, and "
            "Inductor's fused kernels remove their eager memory traffic; the chunked loss saves "
            "its 16-bit logits instead of an fp32 log-softmax, and torchao's float8 casts fuse "
            "into the kernels before them",
            label="torch.compile",
        ),
    )
    optimizer_in_backward: bool = _field(
        False,
        FieldInfo(
            "step each parameter as soon as its gradient is ready and free the gradient "
            "(torchtune optimizer_in_bwd): no full gradient buffer; needs grad_accum 1",
            label="Optimizer step in backward",
        ),
    )
    kbit_upcast: bool = _field(
        False,
        FieldInfo(
            "cast the parameters a quantised base leaves unquantised (embeddings, norms, LM head) "
            "to fp32, as peft's prepare_model_for_kbit_training does",
            methods=ADAPTER_METHODS,
            label="Upcast unquantised parts to fp32",
        ),
    )
    overhead_gib: float | None = _field(
        None,
        FieldInfo(
            "per-GPU memory outside PyTorch's allocator, in GiB: the CUDA context, cuBLAS workspace "
            "and NCCL buffers (default: derived from the GPU and the parallel layout)",
            None,
            0.0,
            1024.0,
            "float",
            label="Overhead GiB",
            placeholder="derived (default)",
        ),
    )
    expandable_segments: bool = _field(
        False,
        FieldInfo(
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the caching allocator grows one "
            "segment per pool, keeping less reserved beyond the live tensors",
            label="Expandable segments",
        ),
    )
    cache_fraction: float | None = _field(
        None,
        FieldInfo(
            "memory the caching allocator keeps reserved beyond the live tensors, as a fraction of "
            "the allocated bytes (default: fitted on traced steps, 0.072; 0.039 with expandable "
            "segments)",
            None,
            0.0,
            1.0,
            "float",
            label="Allocator cache fraction",
            placeholder="fitted (default)",
        ),
    )

    train_tokens: float | None = _field(
        None,
        FieldInfo(
            f"tokens to train on ({_TOKENS_TEXT} when neither steps nor dataset_tokens is given)",
            None,
            1,
            1e16,
            "float",
            model_kinds=LLM_ONLY,
            label="Training tokens",
            placeholder=f"{_TOKENS_TEXT} (default)",
            budget="tokens",
        ),
    )
    dataset_tokens: float | None = _field(
        None,
        FieldInfo(
            "tokens in the dataset; times epochs gives the budget",
            None,
            1,
            1e16,
            "float",
            model_kinds=LLM_ONLY,
            label="Dataset tokens",
            placeholder="e.g. 5e8",
            budget="dataset",
        ),
    )
    epochs: float = _field(
        1.0,
        FieldInfo(
            "passes over dataset_tokens or dataset_size", None, 0.001, 10000, label="Epochs", budget="dataset"
        ),
    )
    dataset_size: float | None = _field(
        None,
        FieldInfo(
            "diffusion, video, JEPA: images or clips in the dataset; times epochs gives the budget",
            None,
            1,
            1e13,
            "float",
            model_kinds=SAMPLE_KINDS,
            label="Dataset images or clips",
            placeholder="e.g. 10000",
            budget="dataset",
        ),
    )
    train_samples: float | None = _field(
        None,
        FieldInfo(
            f"diffusion, video, JEPA: images or clips to train on ({DEFAULT_TRAIN_SAMPLES:,.0f} when "
            "neither steps nor dataset_size is given)",
            None,
            1,
            1e13,
            "float",
            model_kinds=SAMPLE_KINDS,
            label="Training images or clips",
            placeholder=f"{DEFAULT_TRAIN_SAMPLES:,.0f} (default)",
            budget="tokens",
        ),
    )
    steps: int | None = _field(
        None,
        FieldInfo(
            "train for this many optimizer steps instead of a token budget",
            None,
            1,
            1e12,
            "int",
            label="Optimizer steps",
            placeholder="e.g. 1000",
            budget="steps",
        ),
    )
    mfu: float | None = _field(
        None,
        FieldInfo(
            "fraction of peak FLOP/s sustained (recompute included); null: trainplan's own model",
            None,
            0.001,
            1.0,
            "float",
            label="MFU",
            placeholder="trainplan's own model",
        ),
    )
    gpus_per_node: int = _field(
        8, FieldInfo("GPUs per node (one NVLink/PCIe domain)", None, 1, 1024, label="GPUs per node")
    )
    scale_up_domain: int | None = _field(
        None,
        FieldInfo(
            "the chosen GPU's scale-up domain instead of its record's: GPUs one NVLink, Infinity "
            "Fabric or ICI domain joins (8 in an HGX node, 72 in an NVL72 rack of 4-GPU trays); "
            "collectives within it run at the scale-up bandwidth, and tensor parallelism may span it",
            None,
            1,
            100_000,
            "int",
            label="Scale-up domain (GPUs)",
            placeholder="the GPU's own",
        ),
    )
    scale_out_bytes_per_s: float | None = _field(
        None,
        FieldInfo(
            "the chosen GPU's network bandwidth instead of its record's: bytes/s per GPU, one "
            "direction (400 Gb/s InfiniBand NDR = 5e10), for collectives across scale-up domains",
            None,
            1e8,
            1e13,
            "float",
            label="Scale-out bytes/s per GPU",
            placeholder="the GPU's own",
        ),
    )
    pricing: str = _field(
        "on-demand",
        FieldInfo(
            "on-demand at the catalog rate, or committed-use or spot capacity at a discount off it",
            PRICING,
            label="Pricing",
        ),
    )
    usd_per_gpu_hour: float | None = _field(
        None,
        FieldInfo(
            "your own quote in USD per GPU-hour (overrides the catalog rate)",
            None,
            *USD_PER_GPU_HOUR_RANGE,
            "float",
            label="Your rate, USD per GPU-hour",
            placeholder="catalog median rate",
        ),
    )
    committed_discount: float | None = _field(
        None,
        FieldInfo(
            "fraction off on-demand for committed use (default from data)",
            None,
            0,
            0.99,
            "float",
            label="Committed discount",
        ),
    )
    spot_discount: float | None = _field(
        None,
        FieldInfo(
            "fraction off on-demand for spot capacity (default from data)",
            None,
            0,
            0.99,
            "float",
            label="Spot discount",
        ),
    )
    region: str = _field(
        "us-east-1", FieldInfo("grid region for CO2 (cloud region id or country code)", label="Grid region")
    )
    pue: float | None = _field(
        None,
        FieldInfo(
            "data-centre power usage effectiveness (default from data: 1.2)",
            None,
            1.0,
            3.0,
            "float",
            label="PUE",
        ),
    )
    host_overhead: float | None = _field(
        None,
        FieldInfo(
            "host power as a fraction of GPU power (default from data: 0.3)",
            None,
            0.0,
            2.0,
            "float",
            label="Host overhead",
        ),
    )
    idle_fraction: float | None = _field(
        None,
        FieldInfo(
            "GPU idle draw as a fraction of TDP (default from data: the GPU's measured idle draw, else 0.3)",
            None,
            0.0,
            1.0,
            "float",
            label="Idle fraction",
        ),
    )
    comm_overlap: float = _field(
        0.8,
        FieldInfo(
            "share of the compute window that data-parallel communication can hide under",
            None,
            0.0,
            1.0,
            label="Comm overlap",
        ),
    )
    load_source: str = _field(
        "local-nvme",
        FieldInfo(
            "where weights load from: local-nvme | network-fs | object-store, or a bandwidth in GB/s",
            label="Load source",
        ),
    )
    load_parallel: bool = _field(
        True,
        FieldInfo(
            "sharded parallel loader (every GPU reads its shard) instead of one stream", label="Load parallel"
        ),
    )
    host_memory_gb_s: float | None = _field(
        None,
        FieldInfo(
            "the host's sustained memory bandwidth in GB/s (decimal), shared by its GPUs' CPU "
            "optimizer steps under offload (default from data: 70% of a DGX A100's 409.6)",
            None,
            1.0,
            100_000.0,
            "float",
            label="Host memory bandwidth (GB/s)",
        ),
    )
    launch_s: float | None = _field(
        None,
        FieldInfo(
            "seconds from the job's start to its first step besides loading the weights: processes, "
            "imports, process groups, the first compile (default from data: 120)",
            None,
            0.0,
            86_400.0,
            "float",
            label="Launch time (s)",
        ),
    )
    checkpoint_every: int | None = _field(
        None,
        FieldInfo(
            "optimizer steps between checkpoint writes (trainable weights and optimizer state), the "
            "last at the run's end (default from data: 500, transformers' save_steps); 0: one write at "
            "the end of each epoch, as torchtune's recipes save",
            None,
            0,
            1e12,
            "int",
            label="Checkpoint every (steps)",
        ),
    )

    def __post_init__(self) -> None:
        """Refuse bad values at construction, with the InputError (field and allowed range) a
        mapping of the same values gets from `scenario_from_mapping`: every per-field check and
        every cross-field rule that needs no model (validity.py). A value must already be in the
        form a mapping's is converted to (an int for an int field, a choice in lower case)."""
        infos = field_infos()
        defaults = _defaults(Scenario)
        for name, info in infos.items():
            value = getattr(self, name)
            default = defaults[name]
            if value is default or (type(value) is type(default) and value == default):
                continue  # the defaults are valid (a test holds the default scenario)
            if name == "lora":
                if not isinstance(value, LoraSettings):
                    raise InputError("lora", f"must be a LoraSettings, not {type(value).__name__}")
            elif name == "activation_checkpointing":
                if not isinstance(value, str) or checkpointing_from(value) != value:
                    raise InputError(
                        name, f"{shown_value(value)} is not one of: {', '.join(CHECKPOINTING)}, full:N"
                    )
            elif name == "resolution":
                if value is not None and (not isinstance(value, str) or resolution_from(value) != value):
                    raise InputError(name, f"{shown_value(value)}: give WIDTHxHEIGHT, e.g. 1024x1024")
            elif value is not None or default is not None:
                _checked_value(name, value, default, info)
        _check_combinations(self)

    def field_info(self, name: str) -> FieldInfo:
        """The documentation record of field `name`."""
        info: FieldInfo = {f.name: f for f in dataclasses.fields(self)}[name].metadata["info"]
        return info


SCENARIO_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Scenario))


@cache
def default_scenario() -> Scenario:
    """The default scenario, built once (it is immutable, so every reader shares it)."""
    return Scenario()


@cache
def field_infos() -> dict[str, FieldInfo]:
    """Field name -> its documentation record, in declaration order (built once; do not mutate).
    The table is checked on this first use (`check_field_table`), the LoRA parts with it."""
    infos: dict[str, FieldInfo] = {f.name: f.metadata["info"] for f in dataclasses.fields(Scenario)}
    check_field_table(infos)
    check_field_table({f"lora.{part}": info for part, info in LORA_FIELDS.items()})
    return infos


def field_noun(field: str) -> str:
    """What a field is called inside a sentence: its short label in the field table
    (scenario.FieldInfo.short_label, e.g. "micro-batch"), else its label."""
    info = field_infos()[field]
    return info.short_label or info.label


def check_field_table(infos: Mapping[str, FieldInfo]) -> None:
    """Refuse a field table the interfaces could not draw from: a field without a label, a choice
    label for no choice, a budget mode or an interface that does not exist. A ValueError naming
    the field, raised when the CLI or the server first reads the table."""
    for name, info in infos.items():
        if not info.label.strip():
            raise ValueError(f"scenario field {name!r} has no label (FieldInfo.label)")
        stray = sorted({choice for choice, _ in info.choice_labels} - set(info.choices or ()))
        if stray:
            raise ValueError(f"scenario field {name!r}: choice labels for no choice: {stray}")
        odd = [(kind, value) for kind, value in info.kind_defaults if value not in (info.choices or ())]
        if odd or any(kind not in MODEL_KINDS for kind, _ in info.kind_defaults):
            raise ValueError(
                f"scenario field {name!r}: kind defaults {info.kind_defaults} name no kind or choice"
            )
        if info.budget is not None and info.budget not in BUDGET_MODES:
            raise ValueError(
                f"scenario field {name!r}: budget {info.budget!r} is not one of {tuple(BUDGET_MODES)}"
            )
        unknown = sorted(set(info.interfaces) - set(INTERFACES))
        if unknown or not info.interfaces:
            raise ValueError(f"scenario field {name!r}: interfaces {unknown or '()'} not among {INTERFACES}")


@cache
def checked_recipes() -> dict[str, Recipe]:
    """The framework presets (presets.py), checked against the field table once: every field a
    recipe sets is a scenario field (or a LoRA part), and the names are the `recipe` choices."""
    found = recipes()
    allowed = {name for name in SCENARIO_FIELDS if name not in ("lora", "recipe", "model")}
    allowed |= {f"lora.{part}" for part in LORA_FIELDS}
    for recipe in found.values():
        for key, block in recipe.blocks.items():
            bad = sorted(set(block) - allowed)
            if bad:
                raise ValueError(f"recipes.yaml {recipe.name}.{key}: not scenario fields: {bad}")
    if tuple(found) != RECIPES:
        raise ValueError(f"recipes.yaml names {tuple(found)} differ from scenario.RECIPES {RECIPES}")
    return found


def layout_template(base: Scenario, **changes: Any) -> Scenario:
    """`base` with `changes`, built without the checks of construction: the planner's template
    for one group of candidates, whose layout fields (GPUs, parallel degrees, ZeRO stage,
    accumulation) are placeholders it replaces with arrays and checks per candidate
    (validity.layout_problems), so the template alone may break a cross-field rule. Every
    candidate it reports is built as a checked Scenario."""
    template = object.__new__(Scenario)
    for name in SCENARIO_FIELDS:
        object.__setattr__(template, name, changes.get(name, getattr(base, name)))
    return template


def scenario_from_mapping(data: Mapping[str, Any], base: Scenario | None = None) -> Scenario:
    """Build a validated Scenario from a dict (a scenario file, CLI flags or a JSON body).

    Unknown keys are errors (a typo must not be silently ignored); keys absent from `data`
    keep the value from `base` (or the default). With `recipe`, that framework's defaults fill the
    fields `data` does not set (presets.py).
    """
    base = base or default_scenario()
    recipe = data.get("recipe")
    if recipe is not None:
        name = _coerce("recipe", recipe, None, field_infos()["recipe"])
        if name is not None:
            method = str(data.get("method", base.method)).strip().lower()
            defaults = checked_recipes()[name].fields(method)
            data = with_recipe(data, defaults, lambda trial: _build(trial, base))
    return _build(data, base)


def _build(data: Mapping[str, Any], base: Scenario) -> Scenario:
    """The validated scenario of `data` over `base`, recipes not applied."""
    unknown = sorted(set(data) - set(SCENARIO_FIELDS))
    if unknown:
        raise InputError(
            unknown[0],
            f"unknown scenario field. Allowed fields: {', '.join(SCENARIO_FIELDS)}",
        )
    values: dict[str, Any] = {}
    infos = field_infos()
    for name, raw in data.items():
        if name == "lora":
            values[name] = _lora_from(raw, base.lora)
        elif name == "activation_checkpointing":
            values[name] = checkpointing_from(raw)
        elif name == "resolution":
            values[name] = resolution_from(raw)
        elif raw is None and name in ("base_weights", "recipe"):
            values[name] = None
        else:
            values[name] = _coerce(name, raw, getattr(default_scenario(), name), infos[name])
    return dataclasses.replace(base, **values)  # the record checks the cross-field rules itself


def _coerce(name: str, raw: Any, default: Any, info: FieldInfo) -> Any:
    """Convert and range-check one scalar field; raise InputError naming it."""
    if raw is None and default is None:
        return None
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in ("", "null", "none") and default is None and text not in (info.choices or ()):
        return None  # a choice named "none" (ema) is a value, not an unset field
    kind = info.value_type or type(default).__name__
    if kind == "bool":
        return _as_bool(name, raw)
    if info.choices is not None:
        text = raw.strip().lower() if isinstance(raw, str) else ""
        if text not in info.choices:
            raise InputError(name, f"{shown_value(raw)} is not one of: {', '.join(info.choices)}")
        return text
    if kind == "int":
        value: float = _as_int(name, raw)
    elif kind == "float":
        value = _as_float(name, raw)
    else:
        if not isinstance(raw, str) or not raw.strip():
            raise InputError(name, "must be a non-empty string")
        return raw.strip()
    low, high = info.minimum, info.maximum
    if info.exclusive and value in (low, high):
        raise InputError(
            name, f"must be strictly between {shown_number(low or 0.0)} and {shown_number(high or 0.0)}"
        )
    if (low is not None and value < low) or (high is not None and value > high):
        if low is not None and high is not None:
            strictly = "strictly " if info.exclusive else ""
            allowed = f"{strictly}between {shown_number(low)} and {shown_number(high)}"
        elif low is not None:
            allowed = f">= {shown_number(low)}"
        else:
            allowed = f"<= {shown_number(high or 0.0)}"
        raise InputError(name, f"must be {allowed} (got {shown_number(value)})")
    return value


def _as_bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else str(raw) if raw in (0, 1) else ""
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise InputError(name, f"{shown_value(raw)} is not a boolean (true/false)")


def _as_int(name: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InputError(name, f"{shown_value(raw)} is not an integer")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        try:
            number = float(raw.replace("_", "").replace(",", ""))
        except ValueError:
            raise InputError(name, f"{shown_value(raw)} is not an integer") from None
        if number.is_integer():
            return int(number)
    raise InputError(name, f"{shown_value(raw)} is not an integer")


def _as_float(name: str, raw: Any) -> float:
    if isinstance(raw, bool):
        raise InputError(name, f"{shown_value(raw)} is not a number")
    try:
        value = float(raw)
    except OverflowError:
        raise InputError(name, "is too large to be a finite number") from None
    except (TypeError, ValueError):
        raise InputError(name, f"{shown_value(raw)} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError(name, f"{shown_value(raw)} is not a finite number")
    return value


def _lora_from(raw: Any, base: LoraSettings) -> LoraSettings:
    """Parse the `lora` mapping: rank, alpha, targets, dora, dropout, dtype."""
    if isinstance(raw, LoraSettings):
        raw = dataclasses.asdict(raw)
    if not isinstance(raw, Mapping):
        raise InputError("lora", f"must be a mapping with {', '.join(LORA_FIELDS)}")
    allowed = set(LORA_FIELDS)
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise InputError(f"lora.{unknown[0]}", f"unknown field; allowed: {', '.join(sorted(allowed))}")
    rank = _coerce("lora.rank", raw.get("rank", base.rank), base.rank, LORA_FIELDS["rank"])
    alpha = _coerce("lora.alpha", raw.get("alpha", base.alpha), base.alpha, LORA_FIELDS["alpha"])
    dora = _as_bool("lora.dora", raw.get("dora", base.dora))
    targets = _targets_from(raw.get("targets", base.targets))
    dropout = _coerce("lora.dropout", raw.get("dropout", base.dropout), base.dropout, LORA_FIELDS["dropout"])
    dtype = _coerce("lora.dtype", raw.get("dtype", base.dtype), base.dtype, LORA_FIELDS["dtype"])
    return LoraSettings(rank=rank, alpha=alpha, targets=targets, dora=dora, dropout=dropout, dtype=dtype)


def resolution_from(raw: Any) -> str | None:
    """`resolution` as "WxH" (an int is a square), or None; InputError naming the field."""
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "null", "none")):
        return None
    width, height = parse_resolution(raw)
    return f"{width}x{height}"


def checkpointing_from(raw: Any) -> str:
    """One of CHECKPOINTING, or `full:N` (every N-th block, torchtitan's layer-level selective
    AC; `full:1` is `full`)."""
    text = raw.strip().lower() if isinstance(raw, str) else ""
    if text.startswith("full:"):
        count = text.split(":", 1)[1].strip()
        if not count.isdigit() or not 1 <= int(count[:6]) <= 4096 or len(count) > 4:
            raise InputError(
                "activation_checkpointing",
                f"{shown_value(raw)}: full:N needs a whole number of blocks N between 1 and 4,096 "
                "(full:1 = full, none = no checkpointing)",
            )
        return "full" if int(count) == 1 else f"full:{int(count)}"
    if text not in CHECKPOINTING:
        raise InputError(
            "activation_checkpointing",
            f"{shown_value(raw)} is not one of: {', '.join(CHECKPOINTING)}, full:N",
        )
    return text


_PATTERN_SIGNS = frozenset("*+?()[]{}|\\^$")


def is_pattern(targets: str | tuple[str, ...]) -> bool:
    """Whether LoRA targets are one regular expression (peft's rule for a target_modules string:
    re.fullmatch against each module's full name), not a preset."""
    return isinstance(targets, str) and targets not in LORA_TARGET_PRESETS


def _targets_from(raw: Any) -> str | tuple[str, ...]:
    """A preset name, an explicit list of module names (a comma-separated string works too), or
    one regular expression (a string holding any of * + ? ( ) [ ] { } | \\ ^ $ and no comma, as
    the diffusers and axolotl examples pass peft `blocks.*(to_q|to_k|to_v|to_out.0)`)."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.lower() in LORA_TARGET_PRESETS:
            return text.lower()
        if "," not in text and any(sign in text for sign in _PATTERN_SIGNS):
            return text
        raw = [part for part in text.split(",") if part.strip()]
    if isinstance(raw, list | tuple) and raw and all(isinstance(x, str) and x.strip() for x in raw):
        if len(raw) == 1 and raw[0].strip().lower() in LORA_TARGET_PRESETS:
            return str(raw[0]).strip().lower()  # peft accepts target_modules="all-linear" either way
        return tuple(x.strip() for x in raw)
    raise InputError(
        "lora.targets",
        f"must be one of {', '.join(LORA_TARGET_PRESETS)} or a non-empty list of module names",
    )


def _check_combinations(scenario: Scenario) -> None:
    """Cross-field rules that a single range check cannot express: the layout and method rules
    (validity.py, the table the planner masks with too), then the training budget."""
    check_layout(scenario)
    check_stage(scenario)
    check_rollout(scenario)
    budgets = [
        name
        for name in ("steps", "dataset_tokens", "train_tokens", "dataset_size", "train_samples")
        if getattr(scenario, name)
    ]
    if len(budgets) > 1:
        raise InputError(budgets[1], f"give one training budget, not both {budgets[0]} and {budgets[1]}")


def resolved_schedule(scenario: Any) -> str:
    """The pipeline schedule a scenario runs: its own, else interleaved 1F1B over virtual
    stages and 1F1B without."""
    given: str | None = scenario.pipeline_schedule
    if given is not None:
        return given
    return "interleaved-1f1b" if scenario.virtual_stages > 1 else "1f1b"


def data_parallel(scenario: Scenario) -> int:
    """Data-parallel replicas: the trainer's GPUs (gpus, less a separate rollout engine's) /
    (tensor_parallel x pipeline_parallel x context_parallel)."""
    replicas: int = data_parallel_degree(
        trainer_gpus(scenario),
        scenario.tensor_parallel,
        scenario.pipeline_parallel,
        scenario.context_parallel,
    )
    return replicas


def data_parallel_degree(
    gpus: Any, tensor_parallel: Any, pipeline_parallel: Any, context_parallel: Any = 1
) -> Any:
    """Data-parallel replicas of a layout: gpus / (tensor_parallel x pipeline_parallel x
    context_parallel); numbers or the planner's arrays alike."""
    return gpus // (tensor_parallel * pipeline_parallel * context_parallel)


def shard_ranks(scenario: Scenario) -> int:
    """The scenario's ranks each state shards over under ZeRO / FSDP (`shard_group`)."""
    ranks: int = shard_group(
        data_parallel(scenario), scenario.context_parallel, scenario.data_parallel_replicate
    )
    return ranks


def scenario_to_mapping(scenario: Scenario) -> dict[str, Any]:
    """The scenario as plain data (the scenario-file shape), for echoing back and round trips."""
    data: dict[str, Any] = {name: getattr(scenario, name) for name in SCENARIO_FIELDS}
    lora = {item.name: getattr(scenario.lora, item.name) for item in dataclasses.fields(scenario.lora)}
    targets = scenario.lora.targets
    lora["targets"] = targets if isinstance(targets, str) else list(targets)
    data["lora"] = lora
    return data
