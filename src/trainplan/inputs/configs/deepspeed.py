"""DeepSpeed JSON configs (the `ds_config.json` that the HF Trainer, accelerate, axolotl and
LLaMA-Factory point at).

Keys: DeepSpeed docs, "DeepSpeed Configuration JSON" (deepspeed.ai/docs/config-json):
train_micro_batch_size_per_gpu is per GPU; train_batch_size is global (micro x accumulation x
data-parallel GPUs); "auto" (the HF integration) takes the trainer's value. zero_optimization.stage
0-3; offload_optimizer / offload_param device cpu or nvme; bf16/fp16 enabled keep fp32 master
weights and optimizer states in the ZeRO optimizer (bf16-mixed / fp16-mixed).
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
    ignored,
    on,
    positive_int,
    to,
    truthy,
)
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.offload import PARAM_OFFLOADS

FORMAT = "deepspeed"
TITLE = "DeepSpeed JSON"
SYNTAX = "json"
EMITS = ("micro_batch", "grad_accum", "zero_stage", "offload", "precision", "optimizer")

_AUTO = "auto: the trainer's own setting decides"


def _enabled(precision: str) -> Convert:
    """bf16/fp16 enabled: half-precision weights with an fp32 master and fp32 states in the ZeRO
    optimizer; with bf16_master_weights_and_grads and bf16_optimizer_states both on, nothing is
    fp32 (runtime/precision_config.py DeepSpeedBF16Config): pure bf16."""

    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return Ignore(_AUTO)
        if not truthy(f"{precision[:4]}.enabled", value):
            return Ignore("false")
        if precision == "bf16-mixed" and on(flat, "bf16.bf16_master_weights_and_grads"):
            if on(flat, "bf16.bf16_optimizer_states"):
                return {"precision": "bf16"}
            return {
                "precision": precision
            }  # bf16 master and grads, fp32 states: read as the fp32-master class
        return {"precision": precision}

    return convert


def _stage(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if isinstance(value, bool) or value not in (0, 1, 2, 3):
        raise InputError(
            "zero_optimization.stage", f"{shown_value(value)} is not a ZeRO stage (0, 1, 2 or 3)"
        )
    return {"zero_stage": value, "_backend": "DeepSpeed"}


OFFLOAD_DEVICES = {"cpu": True, "nvme": True, "none": False}


def _offload(part: str) -> Convert:
    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if not choice(f"zero_optimization.offload_{part}.device", OFFLOAD_DEVICES, value):
            return Ignore("none")
        if part == "optimizer":
            params = flat.get("zero_optimization.offload_param.device")
            if isinstance(params, str) and params.lower() in ("cpu", "nvme"):
                return Ignore("read with offload_param")
            return {"offload": "optimizer"}
        return {"offload": "optimizer+params"}

    return convert


_COMPRESSED = f"{NOT_MODELLED}: 1-bit compressed communication and its error-feedback buffers"
OPTIMIZERS: dict[str, str | Ignore] = {
    "AdamW": "adamw-fused", "Adam": "adamw-fused", "FusedAdam": "adamw-fused", "CPUAdam": "adamw-fused",
    "Lion": "lion", "FusedLion": "lion", "Adagrad": "sgd-momentum", "Lamb": Ignore(f"{NOT_MODELLED}: LAMB"),
    "OneBitAdam": Ignore(_COMPRESSED), "ZeroOneAdam": Ignore(_COMPRESSED), "OneBitLamb": Ignore(_COMPRESSED),
    "MuAdam": "adamw-fused", "MuAdamW": "adamw-fused", "MuSGD": "sgd",
}  # fmt: skip


def _optimizer(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """DeepSpeed's optimizer.type names (runtime/config.py DEEPSPEED_OPTIMIZERS), by their state:
    AdamW's two, Lion's one, Adagrad's one sum of squares (counted as SGD momentum's buffer).
    Adam or AdamW with params.torch_adam is torch.optim.Adam(W) (runtime/engine.py:2096-2106 at
    deepspeedai/DeepSpeed@edaa7221); without it, FusedAdam, or DeepSpeedCPUAdam on the host
    under offload_optimizer (no GPU temporaries either way: adamw-fused)."""
    kind = choice("optimizer.type", OPTIMIZERS, value)
    if isinstance(kind, Ignore):
        return kind
    if kind == "adamw-fused" and str(value) in ("Adam", "AdamW") and on(flat, "optimizer.params.torch_adam"):
        return {"optimizer": "adamw"}
    return {"optimizer": kind}


RULES: dict[str, Rule] = {
    "train_micro_batch_size_per_gpu": to(
        "micro_batch", "per GPU", positive_int("train_micro_batch_size_per_gpu")
    ),
    "gradient_accumulation_steps": to(
        "grad_accum", "micro-batches per step", positive_int("gradient_accumulation_steps")
    ),
    "train_batch_size": to(
        "_global_batch",
        "global: micro_batch x grad_accum x data-parallel GPUs",
        positive_int("train_batch_size"),
    ),
    "tensor_parallel.autotp_size": to(
        "tensor_parallel", "AutoTP tensor-parallel ranks", positive_int("tensor_parallel.autotp_size")
    ),
    "tensor_parallel.*": ignored(IRRELEVANT),
    "zero_optimization.stage": Rule("ZeRO stage over the data-parallel GPUs", _stage, sets="zero_stage"),
    "zero_optimization.offload_optimizer.device": Rule(
        "optimizer states (and the step) on the CPU", _offload("optimizer"), sets="offload"
    ),
    "zero_optimization.offload_param.device": Rule(
        "parameters on the CPU (stage 3)", _offload("param"), sets="offload"
    ),
    "zero_optimization.offload_optimizer.pin_memory": ignored(IRRELEVANT),
    "zero_optimization.offload_param.pin_memory": ignored(IRRELEVANT),
    "zero_optimization.offload_optimizer.nvme_path": ignored(IRRELEVANT),
    "zero_optimization.offload_param.nvme_path": ignored(IRRELEVANT),
    "zero_optimization.offload_optimizer.*": ignored(f"{NOT_MODELLED}: offload buffers"),
    "zero_optimization.offload_param.*": ignored(f"{NOT_MODELLED}: offload buffers"),
    "zero_optimization.overlap_comm": ignored(f"{NOT_MODELLED}: trainplan's comm_overlap applies"),
    "zero_optimization.contiguous_gradients": ignored(IRRELEVANT),
    "zero_optimization.round_robin_gradients": ignored(IRRELEVANT),
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": ignored(IRRELEVANT),
    "zero_optimization.*": ignored(f"{NOT_MODELLED}: communication bucket and prefetch sizes"),
    "bf16.enabled": Rule(
        "bf16 weights, fp32 master and states in the ZeRO optimizer", _enabled("bf16-mixed"), sets="precision"
    ),
    "fp16.enabled": Rule(
        "fp16 weights with loss scaling, fp32 master and states", _enabled("fp16-mixed"), sets="precision"
    ),
    "fp16.*": ignored(f"{IRRELEVANT} (loss-scale settings)"),
    "bf16.*": ignored(IRRELEVANT),
    "optimizer.type": Rule(
        "DeepSpeed's fused (or CPU) Adam; torch_adam: torch's", _optimizer, sets="optimizer"
    ),
    "optimizer.params.torch_adam": ignored("read with optimizer.type"),
    "optimizer.params*": ignored(IRRELEVANT),
    "scheduler*": ignored(IRRELEVANT),
    "gradient_clipping": ignored(IRRELEVANT),
    "steps_per_print": ignored(IRRELEVANT),
    "wall_clock_breakdown": ignored(IRRELEVANT),
    "zero_allow_untested_optimizer": ignored(IRRELEVANT),
    "prescale_gradients": ignored(IRRELEVANT),
    "communication_data_type": ignored(NOT_MODELLED),
    "activation_checkpointing*": ignored(
        f"{NOT_MODELLED}: DeepSpeed checkpointing acts only where the model calls deepspeed.checkpointing; "
        "the trainer's gradient_checkpointing decides"
    ),
    "flops_profiler*": ignored(IRRELEVANT),
    "comms_logger*": ignored(IRRELEVANT),
    "tensorboard*": ignored(IRRELEVANT),
    "wandb*": ignored(IRRELEVANT),
    "data_types*": ignored(NOT_MODELLED),
}


def detect(data: Mapping[str, Any]) -> bool:
    """DeepSpeed's own keys, or its precision blocks ({"fp16": {"enabled": ...}}: a trainer's
    fp16/bf16 is a flag, never a mapping)."""
    if any(
        key in data for key in ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size")
    ):
        return True
    return any(isinstance(data.get(key), Mapping) and "enabled" in data[key] for key in ("fp16", "bf16"))


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """No bf16 or fp16 block enabled (or "auto"): DeepSpeed trains in fp32
    (runtime/precision_config.py: both blocks default to enabled false). A micro-batch without
    train_batch_size or gradient_accumulation_steps: no accumulation (runtime/config.py:978-980
    _set_batch_related_parameters). A trainer's file beside it that sets either wins."""
    found: dict[str, tuple[Any, str]] = {}
    blocks = [flat.get(f"{name}.enabled") for name in ("bf16", "fp16", "bfloat16")]
    if not any(value is not None and (str(value).lower() == "auto" or value is True) for value in blocks):
        found["precision"] = ("fp32", "no bf16 or fp16 block enabled: DeepSpeed's default, fp32")
    if (
        flat.get("train_micro_batch_size_per_gpu") is not None
        and flat.get("train_batch_size") is None
        and flat.get("gradient_accumulation_steps") is None
    ):
        found["grad_accum"] = (1, "a micro-batch alone: DeepSpeed sets gradient_accumulation_steps 1")
    return found


def recipe(flat: Mapping[str, Any]) -> str:
    """DeepSpeed's defaults (used when no trainer config is given beside it)."""
    return "deepspeed"


# The layouts `emit` can write (plan --emit deepspeed searches only these): ZeRO with AutoTP
# tensor parallelism, no pipeline (the checkpointing is the trainer's).
PLAN_AXES: dict[str, tuple[Any, ...]] = {"pipeline_parallel": (1,), "context_parallel": (1,)}


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan as a DeepSpeed config; what DeepSpeed cannot say goes in the notes."""
    data: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": scenario.micro_batch,
        "gradient_accumulation_steps": scenario.grad_accum,
        "zero_optimization": {"stage": scenario.zero_stage},
    }
    notes = []
    if scenario.offload != "none":
        data["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if scenario.offload in PARAM_OFFLOADS:
        data["zero_optimization"]["offload_param"] = {"device": "cpu", "pin_memory": True}
    notes += deepspeed_offload_note(scenario.offload)
    if scenario.precision in ("bf16-mixed", "fp16-mixed"):
        data[scenario.precision[:4]] = {"enabled": True}
    else:
        notes.append(
            f"precision {scenario.precision}: set by the trainer (DeepSpeed keeps bf16-mixed/fp16-mixed)"
        )
    if scenario.tensor_parallel > 1:
        data["tensor_parallel"] = {"autotp_size": scenario.tensor_parallel}
    if scenario.pipeline_parallel > 1:
        notes.append(
            f"pipeline_parallel {scenario.pipeline_parallel}: DeepSpeed's pipeline engine is not written"
        )
    if scenario.optimizer in ("adamw-fused", "lion"):
        data["optimizer"] = {"type": "AdamW" if scenario.optimizer == "adamw-fused" else "Lion"}
    else:
        notes.append(f"optimizer {scenario.optimizer}: set by the trainer")
    return data, notes
