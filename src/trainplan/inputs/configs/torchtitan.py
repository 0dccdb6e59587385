"""torchtitan TOML job configs.

Keys: pytorch/torchtitan torchtitan/config/job_config.py and
torchtitan/models/llama3/train_configs/llama3_8b.toml: [model] name + flavor; [training]
local_batch_size (per data-parallel rank, shared by a context-parallel group; `batch_size` in
older releases), global_batch_size (all replicas; -1 = local x data-parallel, no accumulation),
seq_len, steps, mixed_precision_param, enable_cpu_offload;
[parallelism] data_parallel_shard_degree (-1 = every GPU left; FSDP2), data_parallel_replicate_degree,
tensor_parallel_degree, pipeline_parallel_degree, context_parallel_degree,
fsdp_reshard_after_forward; [activation_checkpoint] mode none | selective | full with
selective_ac_option "op" or N (every N-th block); [compile] enable; float8 through
model.converters = ["float8"] or [float8] enable_float8_linear; [optimizer] name and
implementation (fused by default).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.offload import FSDP_OFFLOAD, PARAM_OFFLOADS
from trainplan.specs.pipeline import MULTI_CHUNK_SCHEDULES

FORMAT = "torchtitan"
TITLE = "torchtitan TOML"
SYNTAX = "toml"
EMITS = (
    "micro_batch", "grad_accum", "gpus", "zero_stage", "tensor_parallel", "pipeline_parallel",
    "context_parallel", "data_parallel_replicate", "expert_parallel", "activation_checkpointing", "compile",
    "precision", "offload",
)  # fmt: skip

DEGREES = (
    "data_parallel_replicate_degree",
    "data_parallel_shard_degree",
    "tensor_parallel_degree",
    "pipeline_parallel_degree",
    "context_parallel_degree",
)


def _get(flat: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """`parallelism.KEY`, or `training.KEY` as older releases had it."""
    return flat.get(f"parallelism.{key}", flat.get(f"training.{key}", default))


def _model(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """[model] name and flavor -> the catalog model of its shapes (data/framework_models.yaml:
    llama3 8B is Llama 3.1's); a flavor none matches keeps its own name for the model check."""
    flavor = flat.get("model.flavor")
    name, note = built_model("torchtitan", f"{value}/{flavor}")
    return {"model": name or f"{value}-{flavor}", "method": "full", "_note": note}


def _degree(key: str) -> int:
    return -1 if key == "data_parallel_shard_degree" else 1


def _degrees(flat: Mapping[str, Any]) -> dict[str, int]:
    """The [parallelism] degrees, each checked (a missing one at torchtitan's default)."""
    degrees = {key: _get(flat, key, _degree(key)) for key in DEGREES}
    for key, degree in degrees.items():
        if isinstance(degree, bool) or not isinstance(degree, int) or (degree < 1 and degree != -1):
            raise InputError(f"parallelism.{key}", f"{shown_value(degree)} is not a degree (>= 1, or -1)")
    return degrees


def _fsdp(degrees: Mapping[str, int]) -> bool:
    """Whether torchtitan applies FSDP: over dp_shard x cp whenever either is used ("we always
    assume that when cp is used, FSDP is also applied", distributed/parallel_dims.py:82-85,
    fsdp_enabled :334, at pytorch/torchtitan@238fa995); -1 shards over every GPU left."""
    shard = degrees["data_parallel_shard_degree"]
    return shard == -1 or shard > 1 or degrees["context_parallel_degree"] > 1


def _parallel(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """The whole [parallelism] layout, read once (from data_parallel_shard_degree)."""
    degrees = _degrees(flat)
    shard, replicate = degrees["data_parallel_shard_degree"], degrees["data_parallel_replicate_degree"]
    tp, pp = degrees["tensor_parallel_degree"], degrees["pipeline_parallel_degree"]
    cp = degrees["context_parallel_degree"]
    reshard = str(_get(flat, "fsdp_reshard_after_forward", "default")).lower()
    fields: dict[str, Any] = {"tensor_parallel": tp, "pipeline_parallel": pp, "context_parallel": cp}
    if tp > 1:
        # torchtitan's tensor parallelism is always sequence parallel: apply_tp shards every
        # norm's input over the sequence ("Apply tensor + sequence parallelism to every
        # transformer block", models/llama3/infra/parallelize.py at pytorch/torchtitan@018740b7)
        fields["sequence_parallel"] = True
    sharded = _fsdp(degrees)
    # "default" keeps the layers gathered from forward to backward under pipeline parallelism
    # (reshard_after_forward = not pp_enabled, models/llama3/infra/parallelize.py:325-327 at
    # pytorch/torchtitan@238fa995), as "never" always does: read as ZeRO 2
    kept = reshard == "never" or (reshard == "default" and pp > 1)
    fields["zero_stage"] = (2 if kept else 3) if sharded else 0
    # FSDP2 shards over dp_shard x cp; the replicas of HSDP all-reduce their shards (world =
    # dp_replicate x dp_shard x cp x tp x pp, parallel_dims.py:53, fsdp = dp_shard x cp :137, at
    # pytorch/torchtitan@238fa995); without sharding the replicas are plain DDP
    fields["data_parallel_replicate"] = replicate if sharded else 1
    if shard != -1:
        fields["gpus"] = shard * replicate * tp * pp * cp
    elif tp * pp * cp > 1:
        fields["gpus"] = tp * pp * cp * replicate
    return fields


PARALLEL_SETS = (
    "zero_stage, gpus, tensor_parallel, pipeline_parallel, context_parallel, data_parallel_replicate, "
    "sequence_parallel"
)


# torch's schedule names (torch/distributed/pipelining/schedules.py get_schedule_class, matched
# without case), as torchtitan's pipeline_parallel_schedule takes them, for the schedules modelled
SCHEDULES = {
    "1F1B": "1f1b",
    "GPipe": "gpipe",
    "Interleaved1F1B": "interleaved-1f1b",
    "DualPipeV": "dualpipev",
    "ZBVZeroBubble": "zero-bubble-v",
}


def _schedule(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """pipeline_parallel_schedule: a single-stage schedule runs one chunk a rank; a looped one
    (Interleaved1F1B) or a V (DualPipeV, ZBVZeroBubble) two unless pipeline_parallel_layers_per_stage says
    otherwise (distributed/pipeline_parallel.py :114 at pytorch/torchtitan@238fa995:
    stages_per_rank = 1 if single-stage else 2)."""
    if _degrees(flat)["pipeline_parallel_degree"] == 1:
        return Ignore("no pipeline parallelism (pipeline_parallel_degree 1)")
    schedule = {name.lower(): ours for name, ours in SCHEDULES.items()}.get(str(value).strip().lower())
    if schedule is None:
        return Ignore(f"{NOT_MODELLED}: the {value} schedule (read as 1F1B)")
    if schedule not in MULTI_CHUNK_SCHEDULES:
        return {"pipeline_schedule": schedule}
    if _get(flat, "pipeline_parallel_layers_per_stage") is not None:
        return Ignore(f"{NOT_MODELLED}: virtual stages from pipeline_parallel_layers_per_stage")
    return {"pipeline_schedule": schedule, "virtual_stages": 2}


def _expert_tensor_parallel(value: Any, flat: Mapping[str, Any]) -> Ignore:
    """expert_tensor_parallel_degree: 1 (whole experts per EP rank) is what is modelled; tp (the
    experts split by tensor parallelism too) is not yet."""
    if value in (1, None) or _get(flat, "expert_parallel_degree", 1) == 1:
        return Ignore("1, or no expert parallelism: whole experts a rank")
    return Ignore(f"{NOT_MODELLED}: experts split by tensor parallelism (read as whole experts a rank)")


def _checkpoint(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """[checkpoint] enable (JobConfig default false) with its interval (default 500 steps): on,
    one write every interval steps; off, torchtitan writes none, read as the one write at the
    end (checkpoint_every 0)."""
    if not truthy("checkpoint.enable", value):
        return {"checkpoint_every": 0}
    interval = flat.get("checkpoint.interval", 500)
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise InputError("checkpoint.interval", f"must be a positive number of steps (got {interval!r})")
    return {"checkpoint_every": interval}


def _precision(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """mixed_precision_param as torchtitan applies it (distributed/utils.py maybe_enable_amp):
    FSDP2's policy under FSDP (bf16 compute over fp32 shards: bf16-mixed), autocast under
    DDP or on one GPU (amp-bf16), none at all with tensor or pipeline parallelism but no FSDP."""
    if _float8(flat):
        return Ignore("float8 sets the precision")
    kind = choice("training.mixed_precision_param", {"bfloat16": "bf16", "float32": "fp32"}, value)
    degrees = _degrees(flat)
    if kind == "fp32" or _fsdp(degrees):
        return {"precision": "fp32" if kind == "fp32" else "bf16-mixed"}
    if degrees["tensor_parallel_degree"] > 1 or degrees["pipeline_parallel_degree"] > 1:
        return {"precision": "fp32"}
    return {"precision": "amp-bf16"}


def _reduce(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    kind = choice("training.mixed_precision_reduce", {"float32": "fp32", "bfloat16": "compute"}, value)
    return {"fsdp_reduce_dtype": kind}


def _float8(flat: Mapping[str, Any]) -> bool:
    converters = flat.get("model.converters") or []
    return "float8" in converters or flat.get("float8.enable_float8_linear") is True


def _converters(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    if not isinstance(value, list):
        raise InputError("model.converters", "must be a list of converter names")
    return (
        {"precision": "fp8-torchao"}
        if "float8" in value
        else Ignore(f"{NOT_MODELLED}: {', '.join(map(str, value))}")
    )


def _checkpointing(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    mode = choice(
        "activation_checkpoint.mode",
        {"none": "none", "full": "full", "selective": "selective", "memory_budget": "budget"},
        value,
    )
    if mode == "budget":
        return Ignore(f"{NOT_MODELLED}: memory_budget checkpointing")
    if mode != "selective":
        return {"activation_checkpointing": mode}
    option = str(flat.get("activation_checkpoint.selective_ac_option", "2")).strip().lower()
    if option == "op":
        return {"activation_checkpointing": "op"}
    if not option.isdigit() or int(option) < 1:
        raise InputError(
            "activation_checkpoint.selective_ac_option",
            f"{shown_value(option)} is not 'op' or a positive block count",
        )
    return {"activation_checkpointing": "full" if int(option) == 1 else f"full:{int(option)}"}


def _optimizer(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    kind = choice("optimizer.name", {"AdamW": "adamw", "Adam": "adamw"}, value)
    fused = str(flat.get("optimizer.implementation", "fused")).lower() == "fused"
    return {"optimizer": "adamw-fused" if fused else kind}


LOCAL_BATCH = 8  # Training.local_batch_size's default (config/job_config.py)


def _pipeline_micro_batch(flat: Mapping[str, Any]) -> int | None:
    """Under pipeline parallelism torchtitan splits each rank's local batch into micro-batches
    of pipeline_parallel_microbatch_size (default 1; distributed/pipeline_parallel.py:186-194 at
    pytorch/torchtitan@238fa995: n_microbatches = local_batch_size // microbatch_size); None
    without it."""
    if _degrees(flat)["pipeline_parallel_degree"] == 1:
        return None
    size: int = positive_int("parallelism.pipeline_parallel_microbatch_size")(
        _get(flat, "pipeline_parallel_microbatch_size", 1)
    )
    return size


def _local_batch(setting: str) -> Callable[[Any, Mapping[str, Any]], dict[str, Any]]:
    """The local batch as the micro-batch, or under pipeline parallelism its micro-batches'
    size (the rest of it is accumulation: global_batch_size reads it so)."""

    def convert(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
        local = positive_int(setting)(value)
        micro = _pipeline_micro_batch(flat)
        if micro is None:
            return {"micro_batch": local}
        if local % micro:
            raise InputError(
                setting, f"{local} is not a multiple of pipeline_parallel_microbatch_size {micro}"
            )
        return {
            "micro_batch": micro,
            "_note": f"pipeline parallel: {local} a rank in micro-batches of {micro}",
        }

    return convert


def _global_batch(value: Any, flat: Mapping[str, Any]) -> dict[str, Any]:
    """-1: local batch x data-parallel replicas, no accumulation beyond the pipeline's own
    micro-batches (local / pipeline micro-batch size); else the global batch, read with the
    micro-batch."""
    if value == -1:
        micro = _pipeline_micro_batch(flat)
        local = flat.get("training.local_batch_size", flat.get("training.batch_size", LOCAL_BATCH))
        return {"grad_accum": 1 if micro is None else max(1, int(local) // micro)}
    return {"_global_batch": positive_int("training.global_batch_size")(value)}


def _compile(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """compile.enable compiles the components listed (Compile.components, default ["model",
    "loss"], config/job_config.py:725 at pytorch/torchtitan@238fa995): the blocks only with
    "model"; the loss alone changes no saved activation trainplan counts."""
    if not truthy("compile.enable", value):
        return {"compile": False}
    components = flat.get("compile.components", ["model", "loss"])
    if isinstance(components, list) and "model" not in components:
        return {"compile": False, "_note": 'compile.components has no "model": only the loss is compiled'}
    return {"compile": True}


def _flux(flat: Mapping[str, Any]) -> bool:
    """A FLUX run (torchtitan/models/flux): images, not token sequences."""
    return str(flat.get("model.name", "")).strip().lower() == "flux"


def _img_size(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
    """FLUX's Training.img_size (models/flux/job_config.py:16): every image resized and cropped
    to img_size x img_size."""
    if not _flux(flat):
        return Ignore(IRRELEVANT)
    size = positive_int("training.img_size")(value)
    return {"resolution": f"{size}x{size}"}


RULES: dict[str, Rule] = {
    "model.name": Rule("model family; with flavor the catalog model", _model, sets="model, method"),
    "model.flavor": ignored("read with model.name"),
    "model.converters": Rule("float8 = fp8 matmuls", _converters, sets="precision"),
    "model.*": ignored(IRRELEVANT),
    "training.local_batch_size": Rule(
        "per data-parallel rank (under PP, split into pipeline micro-batches)",
        _local_batch("training.local_batch_size"),
        sets="micro_batch",
    ),
    "training.batch_size": Rule(
        "per GPU (older releases)", _local_batch("training.batch_size"), sets="micro_batch"
    ),
    "training.global_batch_size": Rule(
        "global: local batch x data-parallel GPUs x accumulation", _global_batch, sets="grad_accum"
    ),
    "training.seq_len": to("seq_len", "tokens per sequence", positive_int("training.seq_len")),
    "training.img_size": Rule("FLUX: images resized to img_size x img_size", _img_size, sets="resolution"),
    "encoder.max_t5_encoding_len": to(
        "text_tokens",
        "FLUX: T5 tokens per prompt (padded or cut)",
        positive_int("encoder.max_t5_encoding_len"),
    ),
    "encoder.*": ignored(f"{IRRELEVANT} (the encoders' and autoencoder's checkpoints)"),
    "training.steps": to("steps", "optimizer steps", positive_int("training.steps")),
    "training.mixed_precision_param": Rule(
        "FSDP2 parameters in bf16, fp32 sharded master", _precision, sets="precision"
    ),
    "parallelism.mixed_precision_param": Rule(
        "FSDP2 parameters in bf16, fp32 sharded master", _precision, sets="precision"
    ),
    "training.mixed_precision_reduce": Rule(
        "FSDP2 gradient reduction dtype", _reduce, sets="fsdp_reduce_dtype"
    ),
    "parallelism.mixed_precision_reduce": Rule(
        "FSDP2 gradient reduction dtype", _reduce, sets="fsdp_reduce_dtype"
    ),
    "training.enable_cpu_offload": to(
        "offload",
        "FSDP2 CPU offload",
        lambda v: FSDP_OFFLOAD if truthy("enable_cpu_offload", v) else Ignore("false"),
    ),
    "training.compile": to(
        "compile", "torch.compile (older releases)", lambda value: truthy("training.compile", value)
    ),
    "compile.enable": Rule("torch.compile of the model's blocks", _compile, sets="compile"),
    "compile.components": ignored("read with compile.enable"),
    "compile.*": ignored(IRRELEVANT),
    "parallelism.data_parallel_shard_degree": Rule(
        "FSDP degree (-1: every GPU left); with the others, the GPU count",
        _parallel,
        sets=PARALLEL_SETS,
    ),
    "training.data_parallel_shard_degree": Rule(
        "FSDP degree (older releases)",
        _parallel,
        sets=PARALLEL_SETS,
    ),
    "parallelism.data_parallel_replicate_degree": ignored(
        "read with data_parallel_shard_degree (HSDP replicas, or DDP's without sharding)"
    ),
    "parallelism.tensor_parallel_degree": ignored("read with data_parallel_shard_degree"),
    "parallelism.pipeline_parallel_degree": ignored("read with data_parallel_shard_degree"),
    "parallelism.fsdp_reshard_after_forward": ignored(
        "read with data_parallel_shard_degree (never, or default under PP = ZeRO 2)"
    ),
    "training.tensor_parallel_degree": ignored("read with data_parallel_shard_degree"),
    "training.pipeline_parallel_degree": ignored("read with data_parallel_shard_degree"),
    "training.data_parallel_replicate_degree": ignored("read with data_parallel_shard_degree"),
    "parallelism.context_parallel_degree": ignored("read with data_parallel_shard_degree"),
    "parallelism.context_parallel_rotate_method": ignored(ROTATE_METHOD),
    "parallelism.expert_parallel_degree": to(
        "expert_parallel",
        "ranks the routed experts are split over (carved from dp_shard x cp x tp)",
        positive_int("parallelism.expert_parallel_degree"),
    ),
    "parallelism.expert_tensor_parallel_degree": Rule(
        "tensor parallelism inside the experts (1: none, the default)",
        _expert_tensor_parallel,
        sets="",
    ),
    "parallelism.enable_async_tensor_parallel": ignored(f"{NOT_MODELLED}: async TP overlap"),
    "parallelism.pipeline_parallel_schedule": Rule(
        "1F1B, GPipe, Interleaved1F1B, ZBVZeroBubble or DualPipeV (the last three 2 stages per rank)",
        _schedule,
        sets="pipeline_schedule, virtual_stages",
    ),
    "parallelism.pipeline_parallel_microbatch_size": ignored("read with training.local_batch_size"),
    "parallelism.pipeline_parallel_expert_parallel_overlap": ignored(
        "on (the default) is what dualpipev models: the expert all-to-alls under the overlapped "
        "chunks; off is not modelled"
    ),
    "parallelism.*": ignored(NOT_MODELLED),
    "activation_checkpoint.mode": Rule(
        "none | full | selective (op, or every N-th block)", _checkpointing, sets="activation_checkpointing"
    ),
    "activation_checkpoint.selective_ac_option": ignored("read with activation_checkpoint.mode"),
    "activation_checkpoint.*": ignored(IRRELEVANT),
    "float8.enable_float8_linear": to(
        "precision",
        "fp8 matmuls",
        lambda v: "fp8-torchao" if truthy("float8.enable_float8_linear", v) else Ignore("false"),
    ),
    "float8.*": ignored(f"{NOT_MODELLED}: float8 all-gather and scaling details"),
    "quantize*": ignored(f"{NOT_MODELLED}: float8 all-gather and scaling details"),
    "optimizer.name": Rule(
        "AdamW; implementation fused (the default) or foreach", _optimizer, sets="optimizer"
    ),
    "optimizer.implementation": ignored("read with optimizer.name"),
    "optimizer.*": ignored(IRRELEVANT),
    "training.max_norm": ignored(IRRELEVANT),
    "training.*": ignored(IRRELEVANT),
    "job.*": ignored(IRRELEVANT),
    "metrics.*": ignored(IRRELEVANT),
    "profiling.*": ignored(IRRELEVANT),
    "checkpoint.enable": Rule("checkpoint writes on or off", _checkpoint, sets="checkpoint_every"),
    "checkpoint.enable_checkpoint": Rule(
        "checkpoint writes on or off (older releases)", _checkpoint, sets="checkpoint_every"
    ),
    "checkpoint.interval": ignored("read with checkpoint.enable"),
    "checkpoint.*": ignored(IRRELEVANT),
    "comm.*": ignored(IRRELEVANT),
    "validation.*": ignored(IRRELEVANT),
    "memory_estimation.*": ignored(IRRELEVANT),
    "experimental.*": ignored(NOT_MODELLED),
    "fault_tolerance.*": ignored(IRRELEVANT),
}


def detect(data: Mapping[str, Any]) -> bool:
    """torchtitan's tables: [model] with a flavor, or [training] next to [parallelism] / [job]."""
    model = data.get("model")
    if isinstance(model, Mapping) and "flavor" in model:
        return True
    return isinstance(data.get("training"), Mapping) and ("parallelism" in data or "job" in data)


def recipe(flat: Mapping[str, Any]) -> str:
    """torchtitan's defaults."""
    return "torchtitan"


DEFAULTS = {
    key: Default(value, "torchtitan", where)
    for key, value, where in (
        ("training.local_batch_size", LOCAL_BATCH, "Training.local_batch_size"),
        ("training.global_batch_size", -1, "Training.global_batch_size"),
        ("training.seq_len", 2048, "Training.seq_len"),
        ("training.mixed_precision_param", "bfloat16", "Training.mixed_precision_param"),
        ("training.mixed_precision_reduce", "float32", "Training.mixed_precision_reduce"),
        ("activation_checkpoint.mode", "selective", "ActivationCheckpoint.mode"),
        ("compile.enable", False, "Compile.enable"),
        ("optimizer.name", "AdamW", "Optimizer.name"),
    )
}
# Settings that older releases kept elsewhere: their default applies only where neither name is set.
OLDER_NAMES = {
    "training.local_batch_size": "training.batch_size",
    "training.mixed_precision_param": "parallelism.mixed_precision_param",
    "training.mixed_precision_reduce": "parallelism.mixed_precision_reduce",
}


def defaults(flat: Mapping[str, Any]) -> dict[str, Default]:
    """torchtitan's JobConfig defaults (torchtitan/config/job_config.py) for what a file leaves
    out; a default global_batch_size of -1 means no gradient accumulation (train.py)."""
    found = {key: default for key, default in DEFAULTS.items() if flat.get(OLDER_NAMES.get(key, "")) is None}
    if _flux(flat):
        found.pop("training.seq_len", None)  # a FLUX step is sized by img_size, not seq_len
    return found


def implied(flat: Mapping[str, Any]) -> dict[str, tuple[Any, str]]:
    """torchtitan's default layout for a file without data_parallel_shard_degree (-1: FSDP over
    every GPU left), with whatever TP and PP degrees the file gives."""
    found: dict[str, tuple[Any, str]] = {}
    if _flux(flat):
        # models/flux/train.py:52-74 (pytorch/torchtitan@238fa995): the autoencoder, CLIP and T5
        # are loaded on the GPU and encode every batch; FluxTrainer keeps no EMA copy
        found["frozen_encoders"] = (
            "gpu",
            "FluxTrainer: the autoencoder, CLIP and T5 on the GPU, run every step",
        )
        found["ema"] = ("none", "FluxTrainer keeps no EMA copy of the weights")
    if _get(flat, "data_parallel_shard_degree") is not None:
        return found
    fields = _parallel(-1, flat)
    assert isinstance(fields, dict)
    note = "torchtitan default data_parallel_shard_degree -1: FSDP over every GPU left"
    return found | {name: (value, note) for name, value in fields.items()}


# The layouts `emit` can write (plan --emit torchtitan searches only these): full fine-tunes,
# FSDP2 (ZeRO 2, 3) with TP and PP, none / full checkpointing, CPU offload of parameters.
PLAN_AXES: dict[str, tuple[Any, ...]] = {
    "methods": ("full",), "zero_stages": (0, 2, 3), "checkpointing": ("none", "full"),
    "offloads": ("none", FSDP_OFFLOAD),
}  # fmt: skip


def emit(scenario: Any) -> tuple[dict[str, Any], list[str]]:
    """The plan as torchtitan tables."""
    from trainplan.specs.scenario import data_parallel, resolved_schedule

    notes: list[str] = []
    replicas = data_parallel(scenario)
    sharded = scenario.zero_stage in (2, 3)
    pipelined = scenario.pipeline_parallel > 1
    training: dict[str, Any] = {
        # under PP a rank's local batch is all its micro-batches (pipeline_parallel_microbatch_size)
        "local_batch_size": scenario.micro_batch * (scenario.grad_accum if pipelined else 1),
        "global_batch_size": scenario.micro_batch * replicas * scenario.grad_accum,
    }
    if scenario.precision in ("bf16-mixed", "fp32", "fp8-torchao"):
        training["mixed_precision_param"] = "float32" if scenario.precision == "fp32" else "bfloat16"
    else:
        notes.append(
            f"precision {scenario.precision}: torchtitan's float8 is torchao's (fp8-torchao); "
            "otherwise it keeps an fp32 master (bf16-mixed)"
        )
    if scenario.offload in PARAM_OFFLOADS:
        training["enable_cpu_offload"] = True
        notes += fsdp_offload_note(scenario.offload)
    elif scenario.offload != "none":
        notes.append(f"offload {scenario.offload}: torchtitan offloads parameters with the optimizer")
    hybrid = scenario.data_parallel_replicate
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": hybrid if sharded else replicas,
        "data_parallel_shard_degree": replicas // hybrid if sharded else 1,
        "tensor_parallel_degree": scenario.tensor_parallel,
        "pipeline_parallel_degree": scenario.pipeline_parallel,
    }
    if scenario.context_parallel > 1:
        parallelism["context_parallel_degree"] = scenario.context_parallel
    if scenario.expert_parallel > 1:
        parallelism["expert_parallel_degree"] = scenario.expert_parallel
    if pipelined:
        parallelism["pipeline_parallel_microbatch_size"] = scenario.micro_batch
        schedule = resolved_schedule(scenario)
        torch_names = {ours: name for name, ours in SCHEDULES.items()}
        if schedule == "interleaved-1f1b" and scenario.virtual_stages != 2:
            notes.append(
                f"virtual_stages {scenario.virtual_stages}: torchtitan runs 2 stages a rank unless "
                "pipeline_parallel_layers_per_stage sets them"
            )
        if schedule in torch_names:
            parallelism["pipeline_parallel_schedule"] = torch_names[schedule]
        else:
            notes.append(f"pipeline_schedule {schedule}: torchtitan has no single-chunk zero-bubble schedule")
    if scenario.zero_stage == 2:
        parallelism["fsdp_reshard_after_forward"] = "never"
    elif scenario.zero_stage == 3 and scenario.pipeline_parallel > 1:
        parallelism["fsdp_reshard_after_forward"] = "always"  # "default" keeps them gathered under PP
    if scenario.zero_stage == 1 or (sharded and replicas == 1):
        notes.append(f"zero_stage {scenario.zero_stage}: torchtitan shards with FSDP2 over more than one GPU")
    checkpointing = scenario.activation_checkpointing
    if checkpointing in ("none", "full"):
        mode: dict[str, Any] = {"mode": checkpointing}
    elif checkpointing == "op" or checkpointing.startswith("full:"):
        mode = {"mode": "selective", "selective_ac_option": checkpointing.removeprefix("full:")}
    else:
        mode = {"mode": "full"}
        notes.append(f"activation_checkpointing {checkpointing}: torchtitan has none, op or per-block")
    data: dict[str, Any] = {"training": training, "parallelism": parallelism, "activation_checkpoint": mode}
    data["compile"] = {"enable": scenario.compile}
    if scenario.precision == "fp8-torchao":
        data["model"] = {"converters": ["float8"]}
    if scenario.method != "full":
        notes.append(f"method {scenario.method}: torchtitan trains the full model")
    return data, notes
