"""accelerate config YAML (`accelerate config` / `default_config.yaml`), and the `fsdp_*` keys that
the HF Trainer's fsdp_config and axolotl's fsdp_config share with it.

Keys: huggingface/accelerate docs, "accelerate config" and the FSDP guide: distributed_type
NO | MULTI_GPU | FSDP | DEEPSPEED; num_processes = GPUs over all machines; mixed_precision
no | fp16 | bf16 | fp8 (autocast over the model; with FSDP, its MixedPrecision policy keeps
fp32 sharded parameters: bf16-mixed); fsdp_sharding_strategy FULL_SHARD (1) | SHARD_GRAD_OP (2)
| NO_SHARD (3) | HYBRID_SHARD (4); FSDP2's fsdp_reshard_after_forward true = full sharding;
deepspeed_config's zero_stage, offload_optimizer_device, offload_param_device.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.configs.base import (
    IRRELEVANT,
    NOT_MODELLED,
    Convert,
    Ignore,
    Rule,
    choice,
    deepspeed_offload_note,
    fsdp_offload_note,
    ignored,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.offload import FSDP_OFFLOAD, PARAM_OFFLOADS

FORMAT = "accelerate"
TITLE = "accelerate config"
SYNTAX = "yaml"
EMITS = ("gpus", "zero_stage", "offload", "precision", "activation_checkpointing", "grad_accum")

HYBRID = frozenset({"HYBRID_SHARD", "HYBRID_SHARD_ZERO2", "4", "5"})
SHARDING = {
    "FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0, "HYBRID_SHARD": 3, "HYBRID_SHARD_ZERO2": 2,
    "1": 3, "2": 2, "3": 0, "4": 3, "5": 2,
}  # fmt: skip


def _sharding(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """The strategy's ZeRO stage; the hybrid ones shard within a node and replicate across the
    num_machines nodes (torch distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups:
    the intra-node group is the local GPUs)."""
    strategy = str(value).upper()
    fields: dict[str, Any] = {
        "zero_stage": choice("fsdp_sharding_strategy", SHARDING, strategy),
        "_backend": "FSDP",
    }
    if strategy in HYBRID:
        machines = flat.get("num_machines")
        if machines is None:
            fields["_hybrid_nodes"] = strategy
        else:
            fields["data_parallel_replicate"] = positive_int("num_machines")(machines)
    return fields


def _reshard(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """FSDP2's true / false; under FSDP1 accelerate takes a ShardingStrategy name here too
    (utils/dataclasses.py FullyShardedDataParallelPlugin: reshard_after_forward is
    `bool | str`, the strategy for fsdp_version 1)."""
    if isinstance(value, str) and value.strip().upper() in SHARDING:
        return _sharding(value, flat)
    return {"zero_stage": 3 if truthy("fsdp_reshard_after_forward", value) else 2, "_backend": "FSDP"}


def _fsdp_offload(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    # FSDP1 CPUOffload(offload_params=True) and FSDP2 CPUOffloadPolicy: parameters and gradients
    return {"offload": FSDP_OFFLOAD} if truthy("fsdp_offload_params", value) else Ignore("false")


def _fsdp_checkpointing(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    on = truthy("fsdp_activation_checkpointing", value)
    return (
        {"activation_checkpointing": "full"}
        if on
        else Ignore("false: the trainer's gradient_checkpointing decides")
    )


FSDP_RULES: dict[str, Rule] = {
    "fsdp_sharding_strategy": Rule(
        "FULL_SHARD = ZeRO 3, SHARD_GRAD_OP = ZeRO 2; the hybrid ones replicate across the nodes",
        _sharding,
        sets="zero_stage, data_parallel_replicate",
    ),
    "fsdp_reshard_after_forward": Rule("FSDP2: true = ZeRO 3, false = ZeRO 2", _reshard, sets="zero_stage"),
    "fsdp_offload_params": Rule(
        "parameters, gradients and optimizer on the CPU", _fsdp_offload, sets="offload"
    ),
    "fsdp_activation_checkpointing": Rule(
        "checkpoint every wrapped block", _fsdp_checkpointing, sets="activation_checkpointing"
    ),
    "fsdp_version": ignored(f"{IRRELEVANT}: FSDP1 and FSDP2 shard the same states"),
    "fsdp_auto_wrap_policy": ignored("read with the FSDP version (fsdp_wrap)"),
    "fsdp_transformer_layer_cls_to_wrap": ignored(IRRELEVANT),
    "fsdp_state_dict_type": ignored(IRRELEVANT),
    "fsdp_sync_module_states": ignored(IRRELEVANT),
    "fsdp_use_orig_params": ignored(IRRELEVANT),
    "fsdp_cpu_ram_efficient_loading": ignored(f"{IRRELEVANT} for the training step"),
    "fsdp_forward_prefetch": ignored(f"{NOT_MODELLED}: prefetch buffers"),
    "fsdp_backward_prefetch": ignored(f"{NOT_MODELLED}: prefetch buffers"),
    "fsdp_min_num_params": ignored(IRRELEVANT),
}


def fsdp_rules(prefix: str) -> dict[str, Rule]:
    """The fsdp_* table under `prefix` (``fsdp_config.``); keys also accepted without `fsdp_`."""
    table = {f"{prefix}{key}": rule for key, rule in FSDP_RULES.items()}
    table |= {f"{prefix}{key.removeprefix('fsdp_')}": rule for key, rule in FSDP_RULES.items()}
    return table


def _distributed(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if value is False:  # an unquoted NO, which YAML 1.1 reads as false
        value = "NO"
    kind = choice(
        "distributed_type",
        {"NO": "none", "MULTI_GPU": "ddp", "FSDP": "fsdp", "DEEPSPEED": "deepspeed", "MEGATRON_LM": "mlm",
         "MULTI_CPU": "cpu", "XLA": "xla", "TPU": "xla", "MULTI_NPU": "npu", "MULTI_XPU": "xpu"},
        value,
    )  # fmt: skip
    if kind in ("mlm", "cpu", "xla", "npu", "xpu"):
        return Ignore(f"{NOT_MODELLED}: {value}")
    if kind == "fsdp":
        strategy = flat.get(
            "fsdp_config.fsdp_sharding_strategy", flat.get("fsdp_config.fsdp_reshard_after_forward")
        )
        return (
            Ignore("read with fsdp_config") if strategy is not None else {"zero_stage": 3, "_backend": "FSDP"}
        )
    if kind == "deepspeed":
        return Ignore("read with deepspeed_config")
    return {"zero_stage": 0}


def _mixed_precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    kind = str(value).strip().lower()
    sharded = str(flat.get("distributed_type", "")).upper() in ("FSDP", "DEEPSPEED")
    table: dict[str, Any] = {
        "bf16": "bf16-mixed" if sharded else "amp-bf16",
        "fp16": "fp16-mixed" if sharded else "amp-fp16",
        "fp8": "fp8-mixed",
        "no": Ignore("no autocast: the model's own dtype decides"),
    }
    result = choice("mixed_precision", table, kind)
    return result if isinstance(result, Ignore) else {"precision": result}


def _ds_offload(part: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        on = choice(
            f"deepspeed_config.offload_{part}_device", {"cpu": True, "nvme": True, "none": False}, value
        )
        if not on:
            return Ignore("none")
        if part == "optimizer":
            params = str(flat.get("deepspeed_config.offload_param_device", "none")).lower()
            return (
                Ignore("read with offload_param_device")
                if params in ("cpu", "nvme")
                else {"offload": "optimizer"}
            )
        return {"offload": "optimizer+params"}

    return convert


def _ds_stage(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    stage = choice("deepspeed_config.zero_stage", {0: 0, 1: 1, 2: 2, 3: 3}, value)
    return {"zero_stage": stage, "_backend": "DeepSpeed"}


def _processes(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """num_processes, except that distributed_type NO launches one process whatever it says
    (commands/launch.py:1212-1245 at huggingface/accelerate@16cb6eb8: only the MULTI_* types,
    FSDP and DeepSpeed start several)."""
    processes = positive_int("num_processes")(value)
    kind = flat.get("distributed_type")
    if kind is False or str(kind).strip().upper() == "NO":  # an unquoted NO is YAML 1.1's false
        return {"gpus": 1, "_note": "distributed_type NO: accelerate launches one process"}
    return processes if isinstance(processes, Ignore) else {"gpus": processes}


def _machines(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    from trainplan.specs.scenario import default_scenario

    node_gpus = default_scenario().gpus_per_node
    machines = positive_int("num_machines")(value)
    processes = flat.get("num_processes")
    if isinstance(machines, Ignore) or not isinstance(processes, int):
        return Ignore("no process count")
    if machines == 1:  # one machine holds every process: a node at least that large
        if processes > node_gpus:
            return {"gpus_per_node": processes}
        return Ignore(f"one machine: its {processes} processes fit a node of {node_gpus} GPUs")
    return {"gpus_per_node": max(1, processes // machines)}


RULES: dict[str, Rule] = {
    "distributed_type": Rule(
        "NO / MULTI_GPU = ZeRO 0; FSDP and DEEPSPEED read with their blocks", _distributed, sets="zero_stage"
    ),
    "num_processes": Rule("GPUs over all machines (one under distributed_type NO)", _processes, sets="gpus"),
    "num_machines": Rule(
        "nodes: num_processes / num_machines GPUs per node", _machines, sets="gpus_per_node"
    ),
    "mixed_precision": Rule(
        "autocast; under FSDP or DeepSpeed fp32 sharded master weights", _mixed_precision, sets="precision"
    ),
    **fsdp_rules("fsdp_config."),
    "deepspeed_config.zero_stage": Rule("ZeRO stage", _ds_stage, sets="zero_stage"),
    "deepspeed_config.offload_optimizer_device": Rule(
        "optimizer on the CPU", _ds_offload("optimizer"), sets="offload"
    ),
    "deepspeed_config.offload_param_device": Rule(
        "parameters on the CPU", _ds_offload("param"), sets="offload"
    ),
    "deepspeed_config.gradient_accumulation_steps": to(
        "grad_accum", "micro-batches per step", positive_int("deepspeed_config.gradient_accumulation_steps")
    ),
    "deepspeed_config.deepspeed_config_file": Rule(
        "a DeepSpeed JSON file beside this one (read under distributed_type DEEPSPEED)",
        lambda value, flat: (
            {"_reference": value}
            if str(flat.get("distributed_type", "")).upper() == "DEEPSPEED"
            else Ignore("distributed_type is not DEEPSPEED: accelerate does not read it")
        ),
        sets="",
    ),
    "parallelism_config.parallelism_config_tp_size": to(
        "tensor_parallel", "tensor-parallel ranks", positive_int("parallelism_config_tp_size")
    ),
    "parallelism_config.parallelism_config_cp_size": to(
        "context_parallel",
        "ranks each sequence is split over (torch's context parallelism)",
        positive_int("parallelism_config_cp_size"),
    ),
    "parallelism_config.parallelism_config_dp_replicate_size": to(
        "data_parallel_replicate",
        "replicas of hybrid sharding (HSDP)",
        positive_int("parallelism_config_dp_replicate_size"),
    ),
    "parallelism_config.parallelism_config_dp_shard_size": ignored("the GPUs left after the other degrees"),
    "parallelism_config.*": ignored(f"{NOT_MODELLED}: context-parallel details"),
    "deepspeed_config.*": ignored(IRRELEVANT),
    "dynamo_config.dynamo_backend": Rule(
        "torch.compile through dynamo",
        lambda value, flat: {"compile": str(value).upper() != "NO"},
        sets="compile",
    ),
    "dynamo_config*": ignored(IRRELEVANT),
    "compute_environment": ignored(IRRELEVANT),
    "machine_rank": ignored(IRRELEVANT),
    "main_training_function": ignored(IRRELEVANT),
    "main_process_ip": ignored(IRRELEVANT),
    "main_process_port": ignored(IRRELEVANT),
    "rdzv_backend": ignored(IRRELEVANT),
    "same_network": ignored(IRRELEVANT),
    "tpu_*": ignored(IRRELEVANT),
    "use_cpu": ignored(IRRELEVANT),
    "downcast_bf16": ignored(IRRELEVANT),
    "enable_cpu_affinity": ignored(IRRELEVANT),
    "gpu_ids": ignored(IRRELEVANT),
}


def detect(data: Mapping[str, Any]) -> bool:
    """accelerate's own keys."""
    return "distributed_type" in data or "compute_environment" in data


def recipe(flat: Mapping[str, Any]) -> None:
    """accelerate launches a trainer; it has no defaults of its own."""
    return None


def fsdp_wrap(flat: Mapping[str, Any], prefix: str, carves: bool) -> dict[str, tuple[Any, str]]:
    """Where FSDP leaves the embedding, the final norm and the head. FSDP1's transformer auto-wrap
    wraps the decoder layers and leaves the rest to the root unit, gathered for the whole step
    (root). accelerate's FSDP2 prepare (`carves`) shards the input embedding and [final norm,
    lm_head] as their own units (utils/fsdp_utils.py:847-856 at huggingface/accelerate@16cb6eb8):
    layers. Another wrap policy (size-based, none) is not modelled and keeps the default."""
    version = str(flat.get(f"{prefix}fsdp_version", flat.get(f"{prefix}version", 1))).strip()
    policy = str(flat.get(f"{prefix}fsdp_auto_wrap_policy", flat.get(f"{prefix}auto_wrap_policy", "")))
    if policy.strip().upper() not in ("", "TRANSFORMER_BASED_WRAP"):
        return {}
    if version == "2" and carves:
        return {"fsdp_wrap": ("layers", "FSDP2: the embedding and [final norm, head] their own units")}
    return {
        "fsdp_wrap": (
            "root",
            "each decoder layer its own unit; the embedding, final norm and head in the root",
        )
    }


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """FSDP's units (fsdp_wrap) under distributed_type FSDP."""
    if str(flat.get("distributed_type", "")).upper() != "FSDP":
        return {}
    return fsdp_wrap(flat, "fsdp_config.", carves=True)


# The layouts `emit` can write (plan --emit accelerate searches only these): FSDP or DeepSpeed
# ZeRO over data parallelism (the checkpointing is the training script's).
PLAN_AXES: dict[str, tuple[Any, ...]] = {
    "tensor_parallel": (1,), "pipeline_parallel": (1,), "context_parallel": (1,),
}  # fmt: skip


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan as an accelerate config; the micro-batch lives in the training script."""
    notes = [f"micro_batch {scenario.micro_batch}: set per_device_train_batch_size in the training script"]
    data: dict[str, Any] = {"compute_environment": "LOCAL_MACHINE", "num_processes": scenario.gpus}
    if scenario.gpus > scenario.gpus_per_node:
        data["num_machines"] = -(-scenario.gpus // scenario.gpus_per_node)
    sharded = scenario.zero_stage in (2, 3) and scenario.gpus > 1
    deepspeed = not sharded and (scenario.zero_stage == 1 or scenario.offload != "none")
    mixed = {"fp8-mixed": "fp8"}
    if sharded or deepspeed:
        mixed |= {"bf16-mixed": "bf16", "fp16-mixed": "fp16"}
    else:
        mixed |= {"amp-bf16": "bf16", "amp-fp16": "fp16"}
    if scenario.precision in mixed:
        data["mixed_precision"] = mixed[scenario.precision]
    else:
        notes.append(f"precision {scenario.precision}: set by the model's dtype and the trainer")
    if sharded:
        data["distributed_type"] = "FSDP"
        # FSDP2 gives the embedding and the head their own units (fsdp_wrap layers), FSDP1 leaves
        # them to the root unit
        fsdp: dict[str, Any] = {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP"}
        if scenario.fsdp_wrap == "layers":
            fsdp |= {"fsdp_version": 2, "fsdp_reshard_after_forward": scenario.zero_stage == 3}
        else:
            fsdp["fsdp_sharding_strategy"] = "FULL_SHARD" if scenario.zero_stage == 3 else "SHARD_GRAD_OP"
        fsdp |= {
            "fsdp_offload_params": scenario.offload in PARAM_OFFLOADS,
            "fsdp_activation_checkpointing": scenario.activation_checkpointing == "full",
        }
        data["fsdp_config"] = fsdp
        if scenario.activation_checkpointing != "full":
            notes.append(
                f"activation_checkpointing {scenario.activation_checkpointing}: set in the training script"
            )
        if scenario.offload == "optimizer":
            notes.append(
                "offload optimizer: FSDP offloads parameters too; use DeepSpeed for optimizer-only offload"
            )
        notes += fsdp_offload_note(scenario.offload)
        notes.append(
            f"grad_accum {scenario.grad_accum}: set gradient_accumulation_steps in the training script"
        )
    elif deepspeed:
        data["distributed_type"] = "DEEPSPEED"
        data["deepspeed_config"] = {
            "zero_stage": scenario.zero_stage,
            "offload_optimizer_device": "cpu" if scenario.offload != "none" else "none",
            "offload_param_device": "cpu" if scenario.offload in PARAM_OFFLOADS else "none",
            "gradient_accumulation_steps": scenario.grad_accum,
        }
        notes += deepspeed_offload_note(scenario.offload)
        notes.append(
            f"activation_checkpointing {scenario.activation_checkpointing}: set in the training script"
        )
    else:
        data["distributed_type"] = "MULTI_GPU" if scenario.gpus > 1 else "NO"
        notes.append(
            f"activation_checkpointing {scenario.activation_checkpointing}: set in the training script"
        )
        notes.append(
            f"grad_accum {scenario.grad_accum}: set gradient_accumulation_steps in the training script"
        )
    return data, notes
