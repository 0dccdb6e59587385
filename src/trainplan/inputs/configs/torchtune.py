"""torchtune recipe configs (YAML with `_component_` builders).

Keys: pytorch/torchtune recipes/configs/llama3_1/8B_lora_single_device.yaml and siblings:
model._component_ is the model builder (lora_ / qlora_ prefix: the method), with lora_rank,
lora_alpha, lora_dropout, lora_attn_modules (q_proj, k_proj, v_proj, output_proj),
apply_lora_to_mlp, apply_lora_to_output; tokenizer.max_seq_len; batch_size per GPU (per rank);
enable_activation_checkpointing, enable_activation_offloading, optimizer_in_bwd, compile,
dtype bf16 | fp32 for the whole model; loss._component_ CEWithChunkedOutputLoss (chunked);
the header line `tune run [--nproc_per_node N] RECIPE --config ...` names the recipe; the
*_distributed recipes shard with FSDP2 (fsdp_reshard_after_forward true: ZeRO 3). The
`_component_` strings are only read as names, never imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    ROTATE_METHOD,
    Default,
    Ignore,
    Rule,
    built_model,
    choice,
    fsdp_offload_note,
    ignored,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError
from trainplan.specs.offload import FSDP_OFFLOAD, PARAM_OFFLOADS
from trainplan.specs.stages import resolved_loss

FORMAT = "torchtune"
TITLE = "torchtune recipe config"
SYNTAX = "yaml"
EMITS = (
    "gpus", "zero_stage", "micro_batch", "grad_accum", "activation_checkpointing", "activation_offload",
    "optimizer_in_backward", "compile", "precision", "optimizer", "loss", "offload", "context_parallel",
    "data_parallel_replicate",
)  # fmt: skip

ATTENTION_MODULES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")  # torchtune's w1, w3, w2
OPTIMIZERS: dict[str, str | Ignore] = {
    "torch.optim.AdamW": "adamw",
    "torch.optim.Adam": "adamw",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "adamw",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "torchao.optim.AdamW8bit": "adamw-8bit",
    "torchao.prototype.low_bit_optim.AdamW8bit": "adamw-8bit",
    "torch.optim.SGD": "sgd",
    "torchao.optim.AdamW4bit": Ignore(f"{NOT_MODELLED}: 4-bit AdamW"),
    "torchao.optim.AdamWFp8": Ignore(f"{NOT_MODELLED}: fp8 AdamW"),
}
LOSSES = {
    "torchtune.modules.loss.CEWithChunkedOutputLoss": "chunked",
    # the output projection and the fp32 cross-entropy run a chunk at a time, and each chunk's
    # fp32 log-softmax stays for backward (modules/loss/cross_entropy_loss.py
    # compute_cross_entropy: F.cross_entropy(logits.float())): the chunked class
    "torchtune.modules.loss.LinearCrossEntropyLoss": "chunked",
    **{
        name: Ignore(
            f"{NOT_MODELLED}: preference and RL training (a reference model, paired or generated "
            "sequences); the policy's supervised step is estimated"
        )
        for name in (
            "torchtune.rlhf.loss.DPOLoss",
            "torchtune.rlhf.loss.PPOLoss",
            "torchtune.rlhf.loss.SimPOLoss",
            "torchtune.dev.grpo.loss.GRPOSimpleLoss",
            "torchtune.dev.grpo.loss.GRPOLoss",
            "torchtune.dev.rl.linear_grpo_loss.LinearGRPOLoss",
        )
    },
    "torchtune.modules.loss.ForwardKLWithChunkedOutputLoss": Ignore(
        f"{NOT_MODELLED}: knowledge distillation (a teacher model); "
        "the student's supervised step is estimated"
    ),
    "torch.nn.CrossEntropyLoss": "standard",
}
_RECIPE_NAMED = re.compile(r"^#.*?\b([a-z]+(?:_[a-z]+)*_distributed)(?:\.py)?\b", re.MULTILINE)
_TUNE_RUN = re.compile(r"tune\s+run\s+(?P<options>(?:--\S+(?:[ =]\d+)?\s+)*)(?P<recipe>[A-Za-z_]\w*)")


def builder_model(builder: str) -> tuple[str, str]:
    """(the catalog model of a builder, torchtune.models.llama3_1.lora_llama3_1_8b ->
    Llama-3.1-8B, by the builder's shapes in data/framework_models.yaml; the note saying so). A
    builder no catalog model matches keeps its own name, so that the model check says which
    catalog models are close and asks for --model."""
    name = builder.rsplit(".", 1)[-1].removeprefix("qlora_").removeprefix("lora_")
    model, note = built_model("torchtune", name)
    return (model or name), note


def _model(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, str):
        raise InputError("model._component_", "must be a builder name (torchtune.models...)")
    if not any(key.endswith(("optimizer._component_", "loss._component_")) for key in flat):
        raise InputError(
            "model._component_",
            "a generation, evaluation or quantization config (no optimizer, no loss): nothing is trained",
        )
    short = value.rsplit(".", 1)[-1]
    method = "qlora" if short.startswith("qlora_") else "lora" if short.startswith("lora_") else "full"
    quantize = flat.get("model.quantize_base")
    if method == "lora" and quantize is not None and truthy("model.quantize_base", quantize):
        method = "qlora"  # a lora_ builder with quantize_base: the qlora_ builder's NF4 base
    model, note = builder_model(value)
    found = {"model": model, "method": method, "_note": note}
    if ".gemma2." in value:
        # models/gemma2/_attention.py:24 (pytorch/torchtune@bd2a0fc7): Gemma2Attention computes
        # q @ k^T itself, soft-capped, because SDPA cannot soft-cap: the scores are materialised
        found["attention"] = "eager"
    return found


def _targets(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, list) or not value:
        raise InputError("model.lora_attn_modules", "must be a list of q_proj, k_proj, v_proj, output_proj")
    attention = [choice("model.lora_attn_modules", ATTENTION_MODULES, name) for name in value]
    mlp = truthy("model.apply_lora_to_mlp", flat.get("model.apply_lora_to_mlp", False))
    output = truthy("model.apply_lora_to_output", flat.get("model.apply_lora_to_output", False))
    names = set(attention)
    if not output and not mlp and names == {"q_proj", "v_proj"}:
        return {"lora.targets": "qv"}
    if not output and names == {"q_proj", "k_proj", "v_proj", "o_proj"}:
        return {"lora.targets": "all-linear" if mlp else "attention"}
    return {"lora.targets": [*attention, *(MLP_MODULES if mlp else ()), *(["lm_head"] if output else [])]}


def _optimizer(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    kind = choice("optimizer._component_", OPTIMIZERS, value)
    if isinstance(kind, Ignore):
        return kind
    if kind == "adamw" and flat.get("optimizer.fused") is True:
        kind = "adamw-fused"
    if kind == "sgd" and (flat.get("optimizer.momentum") or 0) > 0:
        kind = "sgd-momentum"
    return {"optimizer": kind}


def _dtype(value: Any) -> Any:
    return choice("dtype", {"bf16": "bf16", "fp32": "fp32"}, value)


def _offload(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    # FSDP2 CPUOffloadPolicy: parameters, gradients and the optimizer step on the CPU
    return {"offload": FSDP_OFFLOAD} if truthy("fsdp_cpu_offload", value) else Ignore("false")


def _reshard(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    return {"zero_stage": 3 if truthy("fsdp_reshard_after_forward", value) else 2}


RULES: dict[str, Rule] = {
    "model._component_": Rule(
        "the model builder: lora_ / qlora_ prefix sets the method", _model, sets="model, method"
    ),
    "model.lora_rank": to("lora.rank", "LoRA rank", positive_int("model.lora_rank")),
    "model.lora_alpha": to("lora.alpha", "LoRA alpha"),
    "model.lora_dropout": to("lora.dropout", "LoRA dropout"),
    "model.lora_attn_modules": Rule(
        "attention projections; with apply_lora_to_mlp the MLP too", _targets, sets="lora.targets"
    ),
    "model.apply_lora_to_mlp": ignored("read with model.lora_attn_modules"),
    "model.apply_lora_to_output": ignored("read with model.lora_attn_modules"),
    "model.use_dora": to("lora.dora", "DoRA", lambda value: truthy("model.use_dora", value)),
    "model.quantize_base": ignored("read with model._component_ (qlora_ builders: an NF4 base)"),
    "model.*": ignored(f"{IRRELEVANT}: the builder fixes the architecture"),
    "tokenizer.max_seq_len": to(
        "seq_len", "tokens per sequence (null: no cap, give seq_len)", positive_int("tokenizer.max_seq_len")
    ),
    "tokenizer.*": ignored(IRRELEVANT),
    "batch_size": to("micro_batch", "per GPU (per rank)", positive_int("batch_size")),
    "gradient_accumulation_steps": to(
        "grad_accum", "micro-batches per step", positive_int("gradient_accumulation_steps")
    ),
    "enable_activation_checkpointing": to(
        "activation_checkpointing",
        "every block",
        lambda v: "full" if truthy("enable_activation_checkpointing", v) else "none",
    ),
    "enable_activation_offloading": to(
        "activation_offload",
        "saved activations on the CPU",
        lambda v: truthy("enable_activation_offloading", v),
    ),
    "activation_offloading_use_streams": ignored(IRRELEVANT),
    "optimizer_in_bwd": to(
        "optimizer_in_backward", "step in backward", lambda v: truthy("optimizer_in_bwd", v)
    ),
    "compile": to("compile", "torch.compile", lambda value: truthy("compile", value)),
    "dtype": to("precision", "the whole model, adapters included (bf16: no fp32 master)", _dtype),
    "optimizer._component_": Rule(
        "optimizer class (fused: True = fused AdamW)", _optimizer, sets="optimizer"
    ),
    "optimizer.fused": ignored("read with optimizer._component_"),
    "optimizer.momentum": ignored("read with optimizer._component_"),
    "optimizer.*": ignored(IRRELEVANT),
    "loss._component_": to(
        "loss", "cross-entropy implementation", lambda value: choice("loss._component_", LOSSES, value)
    ),
    "loss.num_output_chunks": to(
        "loss_chunks", "chunks of the chunked loss", positive_int("loss.num_output_chunks")
    ),
    "loss.*": ignored(IRRELEVANT),
    "fsdp_cpu_offload": Rule("parameters, gradients and optimizer on the CPU", _offload, sets="offload"),
    "fsdp_reshard_after_forward": Rule(
        "true = ZeRO 3, false = ZeRO 2 (distributed recipes)", _reshard, sets="zero_stage"
    ),
    "custom_sharded_layers": ignored("read with the distributed recipe (fsdp_wrap)"),
    "orchestration*": ignored(
        f"{NOT_MODELLED}: RL with a separate generation engine (the policy's step is read)"
    ),
    "inference*": ignored(
        f"{NOT_MODELLED}: RL with a separate generation engine (the policy's step is read)"
    ),
    "postprocessing*": ignored(f"{NOT_MODELLED}: RL with a separate generation engine"),
    "reward_functions*": ignored(f"{NOT_MODELLED}: RL rewards"),
    "teacher_model*": ignored(f"{NOT_MODELLED}: knowledge distillation (a teacher model)"),
    "tensor_parallel_dim": to(
        "tensor_parallel", "tensor-parallel degree", positive_int("tensor_parallel_dim")
    ),
    "tensor_parallel_plan*": ignored(IRRELEVANT),
    "data_parallel_shard_dim": ignored("read with the GPU count (-1: every GPU left)"),
    # recipes/full_finetune_distributed.py:165-177 at pytorch/torchtune@bd2a0fc7: ParallelDims
    # (dp_replicate, dp_shard, tp, cp), FSDP2 over dp_shard x cp, HSDP replicas outside it
    "data_parallel_replicate_dim": to(
        "data_parallel_replicate", "HSDP replicas", positive_int("data_parallel_replicate_dim")
    ),
    "context_parallel_dim": to(
        "context_parallel", "ranks each sequence is split over", positive_int("context_parallel_dim")
    ),
    "context_parallel_rotate_method": ignored(ROTATE_METHOD),
    "max_steps_per_epoch": ignored(f"{NOT_MODELLED}: trainplan does not read the dataset; give steps"),
    "epochs": ignored(f"{NOT_MODELLED}: trainplan does not read the dataset; give dataset_tokens"),
    "clip_grad_norm": ignored(IRRELEVANT),
    "device": ignored(IRRELEVANT),
    "checkpointer*": ignored(IRRELEVANT),
    "metric_logger*": ignored(IRRELEVANT),
    "profiler*": ignored(IRRELEVANT),
    "shuffle": ignored(IRRELEVANT),
    "save_adapter_weights_only": ignored(IRRELEVANT),
    "log_every_n_steps": ignored(IRRELEVANT),
    "log_peak_memory_stats": ignored(IRRELEVANT),
    "log_level": ignored(IRRELEVANT),
    "cudnn_deterministic_mode": ignored(IRRELEVANT),
    "output_dir": ignored(IRRELEVANT),
}


def detect(data: Mapping[str, Any]) -> bool:
    """A `_component_` builder under `model` (or any top-level block)."""
    return any(isinstance(value, Mapping) and "_component_" in value for value in data.values())


def recipe(flat: Mapping[str, Any]) -> str:
    """torchtune's defaults."""
    return "torchtune"


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """The defaults torchtune's recipes read with cfg.get (recipes/*.py): checkpointing,
    activation offloading and the optimizer in backward off. The LoRA recipe's for an adapter
    builder, the full fine-tune's otherwise (the same values in every recipe)."""
    builder = str(flat.get("model._component_", "")).rsplit(".", 1)[-1]
    recipe = (
        "lora_finetune_single_device"
        if builder.startswith(("lora_", "qlora_"))
        else "full_finetune_single_device"
    )
    names = ["enable_activation_checkpointing", "enable_activation_offloading"]
    if recipe.startswith("full"):
        names.append("optimizer_in_bwd")
    return {name: Default(False, "torchtune", f"{recipe}.{name}") for name in names}


_TUNE_DOWNLOAD = re.compile(r"^#\s*tune\s+download\s+(?P<hub_id>[\w.-]+/[\w.-]+)", re.MULTILINE)
# A comment's `tune download` Hub id names the model where the builder matches no catalog model.
TEXT_WINS = ("model",)


def from_text(text: str, name: str, flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """The recipe named in the header (`tune run --nproc_per_node 8 full_finetune_distributed`),
    else in the file name: its GPU count, and FSDP2 full sharding for a distributed recipe, with
    each layer its own group and, unless custom_sharded_layers lists them, the embedding and the
    output in the root group (training/_distributed.py get_shard_conditions and shard_model;
    the recipes pass cfg.get("custom_sharded_layers", None), at pytorch/torchtune@bd2a0fc7).
    A builder no catalog model matches is read as the Hub id its `tune download` line fetches."""
    found: dict[str, tuple[Any, str]] = {}
    builder = flat.get("model._component_")
    downloads = set(_TUNE_DOWNLOAD.findall(text))
    if isinstance(builder, str) and len(downloads) == 1:
        note = builder_model(builder)[1]
        if "has no catalog model" in note:
            (hub_id,) = downloads
            found["model"] = (hub_id, f"the checkpoint its `tune download {hub_id}` line fetches; {note}")
    match = _TUNE_RUN.search(text)
    recipe_name = match.group("recipe") if match else None
    if match:
        processes = re.search(r"--nproc_per_node[ =](\d+)", match.group("options"))
        if processes:
            found["gpus"] = (int(processes.group(1)), "tune run --nproc_per_node")
    if recipe_name is None:  # the recipe a comment names ("... in full_finetune_distributed.py")
        named = _RECIPE_NAMED.search(text)
        recipe_name = named.group(1) if named else None
    if recipe_name is not None and recipe_name.endswith("distributed"):
        found["zero_stage"] = (3, f"recipe {recipe_name}: FSDP2, parameters resharded after forward")
    elif recipe_name is None and "distributed" in Path(name).stem:
        found["zero_stage"] = (3, "a *_distributed config: FSDP2 full sharding")
    if "zero_stage" in found:
        listed = flat.get("custom_sharded_layers") or []
        own = isinstance(listed, list) and {"tok_embeddings", "output"} <= set(listed)
        found["fsdp_wrap"] = (
            ("layers", "custom_sharded_layers: the embedding and the output their own groups")
            if own
            else ("root", "each layer its own FSDP2 group, the embedding and the output in the root")
        )
    return found


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """Tensor or context parallelism needs at least tensor_parallel_dim x context_parallel_dim
    GPUs (x the data-parallel degrees a file gives): the distributed recipe builds its device
    mesh from them."""

    def degree(key: str) -> int:
        value = flat.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1

    model_parallel = degree("tensor_parallel_dim") * degree("context_parallel_dim")
    if model_parallel == 1:
        return {}
    gpus = model_parallel * degree("data_parallel_shard_dim") * degree("data_parallel_replicate_dim")
    named = " x ".join(key for key in ("tensor_parallel_dim", "context_parallel_dim") if degree(key) > 1)
    return {"gpus": (gpus, f"{named} {model_parallel} and the data-parallel degrees: at least {gpus} GPUs")}


OPTIMIZER_CLASSES = {
    "adamw": "torch.optim.AdamW", "adamw-fused": "torch.optim.AdamW", "adamw-8bit": "torchao.optim.AdamW8bit",
    "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit", "sgd": "torch.optim.SGD",
    "sgd-momentum": "torch.optim.SGD",
}  # fmt: skip


# The layouts `emit` can write (plan --emit torchtune searches only these): FSDP2 (ZeRO 2, 3),
# tensor parallelism, no pipeline, every block checkpointed or none, parameters offloaded with
# the optimizer (fsdp_cpu_offload).
PLAN_AXES: dict[str, tuple[Any, ...]] = {
    "pipeline_parallel": (1,), "zero_stages": (0, 2, 3), "checkpointing": ("none", "full"),
    "offloads": ("none", FSDP_OFFLOAD),
}  # fmt: skip


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan's torchtune keys; the header's `tune run` line carries the GPU count and recipe."""
    notes = ["model: keep your model._component_ (its lora_ / qlora_ prefix sets the method)"]
    data: dict[str, Any] = {
        "batch_size": scenario.micro_batch,
        "gradient_accumulation_steps": scenario.grad_accum,
        "enable_activation_checkpointing": scenario.activation_checkpointing != "none",
        "enable_activation_offloading": scenario.activation_offload,
        "optimizer_in_bwd": scenario.optimizer_in_backward,
        "compile": scenario.compile,
    }
    if scenario.activation_checkpointing not in ("none", "full"):
        notes.append(
            f"activation_checkpointing {scenario.activation_checkpointing}: torchtune checkpoints every block"
        )
    if scenario.precision in ("bf16", "fp32"):
        data["dtype"] = scenario.precision
    else:
        notes.append(f"precision {scenario.precision}: torchtune trains dtype bf16 or fp32")
    if scenario.optimizer in OPTIMIZER_CLASSES:
        data["optimizer"] = {"_component_": OPTIMIZER_CLASSES[scenario.optimizer]}
        if scenario.optimizer == "adamw-fused":
            data["optimizer"]["fused"] = True
        if scenario.optimizer == "sgd-momentum":
            data["optimizer"]["momentum"] = 0.9
    else:
        notes.append(f"optimizer {scenario.optimizer}: no torchtune class")
    losses = {
        "chunked": "torchtune.modules.loss.LinearCrossEntropyLoss",
        "standard": "torch.nn.CrossEntropyLoss",
    }
    if resolved_loss(scenario) in losses:
        data["loss"] = {"_component_": losses[resolved_loss(scenario)]}
    else:
        notes.append(f"loss {resolved_loss(scenario)}: torchtune's LinearCrossEntropyLoss is the chunked one")
    if resolved_loss(scenario) == "chunked":
        data["loss"]["num_output_chunks"] = scenario.loss_chunks
    if scenario.zero_stage in (2, 3) and scenario.gpus > 1:
        data["fsdp_reshard_after_forward"] = scenario.zero_stage == 3
        if scenario.zero_stage == 3 and scenario.fsdp_wrap == "layers":
            data["custom_sharded_layers"] = ["tok_embeddings", "output"]
    elif scenario.zero_stage:
        notes.append(f"zero_stage {scenario.zero_stage}: torchtune's distributed recipes shard with FSDP2")
    if scenario.offload in PARAM_OFFLOADS:
        data["fsdp_cpu_offload"] = True
        notes += fsdp_offload_note(scenario.offload)
    elif scenario.offload != "none":
        notes.append(f"offload {scenario.offload}: torchtune offloads parameters with the optimizer")
    if scenario.tensor_parallel > 1:
        data["tensor_parallel_dim"] = scenario.tensor_parallel
    if scenario.context_parallel > 1:
        data["context_parallel_dim"] = scenario.context_parallel
    if scenario.data_parallel_replicate > 1:
        data["data_parallel_replicate_dim"] = scenario.data_parallel_replicate
    if scenario.pipeline_parallel > 1:
        notes.append(f"pipeline_parallel {scenario.pipeline_parallel}: torchtune has no pipeline parallelism")
    return data, notes


def run_line(scenario: Any) -> str:
    """The `tune run` line for the emitted fragment's header."""
    method = "full" if scenario.method == "full" else "lora"
    if scenario.gpus > 1:
        return f"tune run --nproc_per_node {scenario.gpus} {method}_finetune_distributed --config YOUR_CONFIG"
    return f"tune run {method}_finetune_single_device --config YOUR_CONFIG"
