"""Reading one or more framework config files into a scenario: which framework each file is
(from its content), the files it points at, the merge (DeepSpeed and accelerate settings over a
trainer's), the user's overrides, the global batch and GPU count the files imply, the model's
match with the catalog, and where every field came from; and writing a plan back out."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from trainplan.inputs.configs.base import FileReading, Skipped, Source, flatten
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.rollout import ROLLOUT_FIELDS

FIELD = "from"  # the CLI flag and the error field of everything a config file gets wrong
# Detection order: the formats with the most distinctive keys first.
READERS = (
    "deepspeed", "accelerate", "torchtune", "torchtitan", "llama_factory_v1", "llama_factory", "axolotl",
    "hf_trainer",
)  # fmt: skip
EMIT_FORMATS = {
    "axolotl": "axolotl",
    "torchtune": "torchtune",
    "torchtitan": "torchtitan",
    "llama-factory": "llama_factory",
    "accelerate": "accelerate",
    "deepspeed": "deepspeed",
}
# A launcher's or engine's file owns the precision over the trainer's flags (DeepSpeed's ZeRO
# optimizer keeps an fp32 master whatever the trainer's bf16 flag says).
RANK = {"deepspeed": 2, "accelerate": 1}
MAX_FILES = 16
# A trainer's half-precision flag under DeepSpeed ("auto" follows it): DeepSpeed's bf16/fp16
# modes cast the model to half precision and keep fp32 master weights in the ZeRO optimizer.
UNDER_DEEPSPEED = {"amp-bf16": "bf16-mixed", "bf16": "bf16-mixed", "amp-fp16": "fp16-mixed"}
# The same flags under accelerate's FSDP (the HF Trainer's `fsdp`, axolotl's FSDP1): prepare
# upcasts every trainable parameter to fp32 when mixed precision is on and computes in the half
# dtype (accelerate accelerator.py:2017-2031 for FSDP1, utils/fsdp_utils.py:806-810 for FSDP2,
# at huggingface/accelerate@16cb6eb80dd9).
UNDER_FSDP = UNDER_DEEPSPEED
# The scenario fields a training config can set; the others (GPU type, prices, region) never
# come from one and are listed only when given.
CONFIG_FIELDS = (
    "model", "method", "recipe", "stage", "reference", "reference_weights", *ROLLOUT_FIELDS,
    "lora.rank", "lora.alpha",
    "lora.targets", "lora.dropout", "lora.dora",
    "base_weights", "precision", "optimizer", "micro_batch", "seq_len", "grad_accum",
    "activation_checkpointing", "activation_offload", "attention", "gpus", "zero_stage",
    "tensor_parallel", "pipeline_parallel", "context_parallel", "data_parallel_replicate", "expert_parallel",
    "virtual_stages", "pipeline_schedule", "offload", "loss", "loss_chunks", "kernels",
    "compile", "optimizer_in_backward", "kbit_upcast", "gpus_per_node", "steps", "sequence_parallel",
    "checkpoint_every",
)  # fmt: skip


def reader(name: str) -> ModuleType:
    """The reader module `name` (imported on first use)."""
    return importlib.import_module(f"trainplan.inputs.configs.{name}")


def formats() -> list[str]:
    """The formats we read, by name."""
    return [reader(name).FORMAT for name in READERS]


class ConfigReading(NamedTuple):
    """A config read: the scenario mapping (overrides applied), where each field came from, the
    settings that set nothing (with the reason), and each file with the format it was read as."""

    mapping: dict[str, Any]
    provenance: list[Source]
    ignored: list[Skipped]
    files: list[tuple[str, str]]

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (CLI --json, the web API)."""
        return {
            "files": [{"file": name, "format": kind} for name, kind in self.files],
            "provenance": [source.to_dict() for source in self.provenance],
            "ignored": [skipped.to_dict() for skipped in self.ignored],
        }


Resolver = Callable[[str, str], tuple[str, str]]  # (reference, setting) -> (name, text)


def folder_resolver(given: list[Path]) -> Resolver:
    """References resolved as the frameworks resolve them: among the other files given (by base
    name), then against the first config's folder and the folder the command runs in (axolotl,
    LLaMA-Factory and accelerate open a path relative to where they were launched:
    `deepspeed: deepspeed_configs/zero2.json` at an axolotl checkout's top); never outside those
    two folders' trees."""
    import os

    from trainplan.inputs.userfiles import read_text

    roots = list(dict.fromkeys([given[0].resolve().parent, Path.cwd().resolve()]))
    others = {path.name: path for path in given[1:]}

    def resolve(reference: str, setting: str) -> tuple[str, str]:
        wanted = Path(reference).expanduser()
        if wanted.name in others:
            return str(others[wanted.name]), read_text(others[wanted.name], FIELD)
        candidates = [(root / wanted).resolve() for root in roots]
        inside = [target for target in candidates if any(target.is_relative_to(root) for root in roots)]
        for target in inside:
            if os.path.lexists(target):
                return str(target), read_text(target, FIELD)
        where = " or ".join(str(root) for root in roots)
        if not inside:
            raise InputError(
                setting,
                f"{shown_value(reference)} is outside the folder of {given[0].name} and the folder "
                f"trainplan runs in ({where}); copy it beside the config or pass it with another --from",
            )
        raise InputError(
            setting, f"{shown_value(reference)} was not found in {where}; pass it with another --from"
        )

    return resolve


def upload_resolver(files: Mapping[str, str]) -> Resolver:
    """References resolved among uploaded files by their base name: the server reads no paths."""

    def resolve(reference: str, setting: str) -> tuple[str, str]:
        name = Path(reference.replace("\\", "/")).name
        if name not in files:
            raise InputError(
                setting, f"points at {shown_value(reference)}: drop that file too (the server reads no paths)"
            )
        return name, files[name]

    return resolve


def scenario_from_config(
    paths: Iterable[str | Path], overrides: Mapping[str, Any] | None = None
) -> ConfigReading:
    """Read training config files (axolotl, torchtune, torchtitan, LLaMA-Factory, HF/TRL,
    accelerate, DeepSpeed; the format is detected from the content) into a scenario mapping.

    `overrides` (scenario fields, the CLI's flags) win over the files. Returns the mapping
    (`scenario_from_mapping(reading.mapping)` builds the Scenario), the provenance of every
    config field, the settings that were ignored and why, and the files read."""
    from trainplan.inputs.userfiles import read_text

    given = [Path(path) for path in paths]
    if not given:
        raise InputError(FIELD, "give at least one config file")
    files = [(str(path), read_text(path, FIELD)) for path in given]
    return read_configs(files, folder_resolver(given), overrides, check_model=True)


def read_configs(
    files: list[tuple[str, str]],
    resolve: Resolver,
    overrides: Mapping[str, Any] | None = None,
    check_model: bool = False,
) -> ConfigReading:
    """The reading of `files` ((name, text) pairs), following references through `resolve`."""
    from trainplan.inputs.userfiles import parse_any

    readings: list[FileReading] = []
    queue: list[tuple[str, Any, str | None]] = [(name, text, None) for name, text in files]
    seen: set[str] = set()
    while queue:
        name, content, hint = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if len(seen) > MAX_FILES:
            raise InputError(FIELD, f"more than {MAX_FILES} config files")
        data = parse_any(content, name, FIELD) if isinstance(content, str) else content
        if not isinstance(data, Mapping) or not data:
            raise InputError(FIELD, f"{name} holds no settings (a mapping of keys is expected)")
        text = content if isinstance(content, str) else ""
        reading = read_file(detect(data, name, hint), data, name, text)
        readings.append(reading)
        for setting, target in reading.references:
            if isinstance(target, Mapping):
                queue.append((f"{name} ({setting})", target, "deepspeed"))
            else:
                queue.append((*resolve(str(target), setting), None))
    return _finish(readings, overrides or {}, check_model)


def detect(data: Mapping[str, Any], name: str, hint: str | None = None) -> ModuleType:
    """The reader whose keys the file holds; an error naming the formats we read otherwise."""
    if hint is not None:
        return reader(hint)
    for module_name in READERS:
        module = reader(module_name)
        if module.detect(data):
            return module
    raise InputError(
        FIELD,
        f"{name} is not a training config we read; formats: {', '.join(reader(r).TITLE for r in READERS)}",
    )


def read_file(module: ModuleType, data: Mapping[str, Any], name: str, text: str = "") -> FileReading:
    """One file through its reader's table, read as the framework reads it: every setting the
    file leaves out or empty at the framework's own default (the reader's `defaults(flat)`,
    declared in data/framework_defaults.yaml), stated settings first. `implied` gives fields that
    follow from what a file leaves out, `from_text` those its comments state (torchtune's
    `tune run` line)."""
    from trainplan.inputs.configs.base import apply_rules

    flat = flatten(data, whole=getattr(module, "WHOLE", ()))
    # what the file's comments say about how it is run (`trl sft --config`), for the recipe and
    # the defaults only: no setting of the file
    hints = module.hints(text) if hasattr(module, "hints") else {}
    context = {**hints, **flat}
    reading = FileReading(name, module.FORMAT, module.recipe(context))
    defaults = module.defaults(context) if hasattr(module, "defaults") else {}
    filled = {setting: default for setting, default in defaults.items() if flat.get(setting) is None}
    effective = {**flat, **{setting: default.value for setting, default in filled.items()}}
    try:
        apply_rules(reading, effective, module.RULES, {s: d.note() for s, d in filled.items()})
    except InputError as error:
        if error.message.startswith(name):
            raise
        raise InputError(error.field, f"{name}: {error.message}") from None
    from_text = getattr(module, "from_text", None)
    wins = getattr(module, "TEXT_WINS", ())
    for field, (value, note) in (from_text(text, name, flat) if from_text else {}).items():
        if field not in reading.fields or reading.fields[field].default or field in wins:
            reading.fields[field] = Source(field, value, module.FORMAT, name, note)
    implied = getattr(module, "implied", None)
    for field, (value, note) in (implied(context) if implied else {}).items():
        if field not in reading.fields:
            reading.fields[field] = Source(field, value, module.FORMAT, name, note, default=True)
    return reading


def _merge(readings: list[FileReading]) -> dict[str, Source]:
    """Every file's fields in one table; two files disagreeing is an error naming both settings
    (the precision aside: a launcher's or DeepSpeed's file owns it)."""
    backends: dict[str, str] = {}
    for reading in readings:
        for backend, setting in reading.backends:
            backends.setdefault(backend, setting)
    if len(backends) > 1:
        (first, where), (second, other) = list(backends.items())[:2]
        raise InputError(FIELD, f"{first} ({where}) and {second} ({other}) both shard the model; keep one")
    merged: dict[str, Source] = {}
    ranks: dict[str, int] = {}
    for reading in readings:
        rank = RANK.get(reading.format, 0)
        for field, source in reading.fields.items():
            earlier = merged.get(field)
            if earlier is not None and earlier.default != source.default:
                # a stated setting beats any file's default
                if earlier.default:
                    merged[field], ranks[field] = source, rank
                continue
            if earlier is not None and earlier.default:
                # of two defaults the trainer's holds (DeepSpeed's fp32 only with no trainer beside it)
                if rank < ranks[field]:
                    merged[field], ranks[field] = source, rank
                continue
            if earlier is None or earlier.value == source.value:
                merged.setdefault(field, source)
                ranks.setdefault(field, rank)
            elif field == "precision" and rank != ranks[field]:
                if rank > ranks[field]:
                    merged[field], ranks[field] = source, rank
            else:
                raise InputError(
                    FIELD,
                    f"contradictory settings for {field}: {earlier.setting} = {earlier.value} in "
                    f"{earlier.file}, {source.setting} = {source.value} in {source.file}; make them agree",
                )
    precision = merged.get("precision")
    deepspeed_own = precision is not None and precision.setting.startswith("deepspeed ")
    if (
        "DeepSpeed" in backends
        and precision is not None
        and precision.value in UNDER_DEEPSPEED
        and not deepspeed_own
    ):
        value = UNDER_DEEPSPEED[precision.value]
        note = f"{precision.value} under DeepSpeed: half weights, fp32 master and states in ZeRO"
        merged["precision"] = Source("precision", value, precision.setting, precision.file, note)
    keeps = next((reading.keeps_dtype for reading in readings if reading.keeps_dtype), "")
    if (
        "FSDP" in backends
        and precision is not None
        and precision.value in UNDER_FSDP
        and ranks.get("precision", 0) == 0
        and not keeps
    ):
        value = UNDER_FSDP[precision.value]
        note = f"{precision.value} under accelerate's FSDP: trainable parameters upcast to an fp32 master"
        merged["precision"] = Source("precision", value, precision.setting, precision.file, note)
    if "DeepSpeed" in backends and _stage(merged) == 3 and "zero3_master" not in merged:
        merged["zero3_master"] = Source(
            "zero3_master",
            "separate",
            "implied by DeepSpeed ZeRO-3",
            backends["DeepSpeed"].split(": ", 1)[0],
            "DeepSpeed ZeRO-3 keeps 16-bit partitions beside the fp32 master in its optimizer "
            "(runtime/zero/stage3.py _create_fp32_partitions)",
        )
    return merged


def _stage(merged: Mapping[str, Source]) -> Any:
    source = merged.get("zero_stage")
    return None if source is None else source.value


def _recipe(readings: list[FileReading]) -> tuple[str, Source] | None:
    """The framework whose defaults fill the rest: the trainer's file first, DeepSpeed's alone."""
    ordered = sorted(readings, key=lambda reading: RANK.get(reading.format, 0))
    for reading in ordered:
        if reading.recipe is not None:
            return reading.recipe, Source("recipe", reading.recipe, f"read as {reading.format}", reading.file)
    return None


def _mapping(sources: Mapping[str, Source]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for field, source in sources.items():
        if field.startswith("lora."):
            data.setdefault("lora", {})[field.split(".", 1)[1]] = source.value
        else:
            data[field] = source.value
    return data


def _given(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Override fields, the LoRA part flattened to lora.NAME."""
    given: dict[str, Any] = {}
    for name, value in overrides.items():
        if name == "lora" and isinstance(value, Mapping):
            given.update({f"lora.{part}": inner for part, inner in value.items()})
        else:
            given[name] = value
    return given


def _finish(readings: list[FileReading], overrides: Mapping[str, Any], check_model: bool) -> ConfigReading:
    """Merge, apply the overrides, derive a global batch, check the model, and say where each
    config field came from."""
    from trainplan.specs.presets import recipes
    from trainplan.specs.scenario import scenario_to_mapping

    sources = _merge(readings)
    _match_model(sources)
    extra: list[Skipped] = []
    recipe = _recipe(readings)
    if recipe is not None and "recipe" not in sources:
        sources["recipe"] = recipe[1]
    given = _given(overrides)
    for name in given:
        sources.pop(name, None)
    data = _mapping(sources)
    for name, value in overrides.items():
        if name == "lora" and isinstance(value, Mapping):
            data["lora"] = {**data.get("lora", {}), **value}
        else:
            data[name] = value
    _least_gpus(data, sources, given)
    _hybrid_nodes(data, sources, given, readings)
    scenario = _build(data, sources)
    batches = [
        (reading.file, reading.global_batch, reading.format) for reading in readings if reading.global_batch
    ]
    if batches:
        file, batch, kind = batches[0]
        data, sources, checked = _global_batch(
            data, sources, (file, batch), scenario, given, kind == "deepspeed"
        )
        scenario = _build(data, sources)
        extra += checked
    if check_model and "model" in sources and "model" not in given:
        _check_model(sources["model"])
    provenance = [sources[name] for name in CONFIG_FIELDS if name in sources]
    provenance += [Source(name, value, "given: flag or scenario file") for name, value in given.items()]
    from_recipe = recipes()[scenario.recipe].fields(scenario.method) if scenario.recipe else {}
    plain = scenario_to_mapping(scenario)
    for name in CONFIG_FIELDS:
        if name in sources or name in given:
            continue
        if scenario.method == "full" and (
            name.startswith("lora.") or name in ("base_weights", "kbit_upcast")
        ):
            continue
        value = plain["lora"][name[5:]] if name.startswith("lora.") else plain[name]
        if value is None:
            continue
        where = (
            f"{scenario.recipe} recipe default"
            if from_recipe.get(name, None) == value
            else "trainplan default"
        )
        provenance.append(Source(name, value, where))
    ignored = [skipped for reading in readings for skipped in reading.ignored] + extra
    return ConfigReading(data, provenance, ignored, [(reading.file, reading.format) for reading in readings])


def _build(data: Mapping[str, Any], sources: Mapping[str, Source]) -> Any:
    """The scenario, with a bad value's error naming the file and setting it came from."""
    from trainplan.specs.scenario import scenario_from_mapping

    try:
        return scenario_from_mapping(data)
    except InputError as error:
        source = sources.get(error.field)
        if source is None or source.file is None:
            raise
        raise InputError(error.field, f"{error.message} (from {source.setting} in {source.file})") from None


def _global_batch(
    data: dict[str, Any],
    sources: dict[str, Source],
    batch: tuple[str, tuple[str, int]],
    scenario: Any,
    given: Mapping[str, Any],
    deepspeed: bool,
) -> tuple[dict[str, Any], dict[str, Source], list[Skipped]]:
    """A global batch (all GPUs): with the micro-batch, grad_accum = global / (micro x
    data-parallel GPUs), or checked against a grad_accum set too. DeepSpeed's train_batch_size
    (`deepspeed`) may come without a micro-batch, and is read as DeepSpeed reads it
    (runtime/config.py `_set_batch_related_parameters`): with the accumulation, micro = global /
    (accumulation x data-parallel GPUs); with neither, no accumulation and micro = global /
    data-parallel GPUs. There a framework's default counts as not set; elsewhere (torchtitan's
    local_batch_size 8) the default is the micro-batch the framework runs."""
    from trainplan.specs.scenario import data_parallel

    file, (setting, total) = batch
    replicas = data_parallel(scenario)

    def stated(name: str) -> bool:
        return name in given or (name in sources and not (deepspeed and sources[name].default))

    if stated("micro_batch") and stated("grad_accum"):
        per_step = scenario.micro_batch * replicas
        where = f"{per_step} = micro_batch {scenario.micro_batch} x {replicas} data-parallel GPUs"
        if per_step * scenario.grad_accum != total:
            raise InputError(
                FIELD,
                f"{setting} = {total} (global) disagrees with grad_accum {scenario.grad_accum} x {where}",
            )
        reason = f"global batch, checked: {total} = grad_accum {scenario.grad_accum} x {where}"
        return data, sources, [Skipped(setting.split(" ", 1)[1], file, reason)]
    if stated("micro_batch"):
        name, known, value_of = "grad_accum", scenario.micro_batch, "micro_batch"
    else:
        accum = scenario.grad_accum if stated("grad_accum") else 1
        name, known, value_of = "micro_batch", accum, "grad_accum"
    divisor = known * replicas
    where = f"{value_of} {known} x {replicas} data-parallel GPUs"
    if total % divisor:
        raise InputError(FIELD, f"{setting} = {total} (global) is not a multiple of {divisor} = {where}")
    value = total // divisor
    derived = {name: value}
    notes = {name: Source(name, value, setting, file, f"global {total} / ({where})")}
    if name == "micro_batch" and not stated("grad_accum"):
        derived["grad_accum"] = 1
        notes["grad_accum"] = Source("grad_accum", 1, setting, file, "no gradient_accumulation_steps: 1")
    return {**data, **derived}, {**sources, **notes}, []


def _hybrid_nodes(
    data: dict[str, Any], sources: dict[str, Source], given: Mapping[str, Any], readings: list[FileReading]
) -> None:
    """FSDP1's hybrid strategies shard within each node and replicate across the nodes (torch
    distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups: the intra-node group is the
    node's GPUs): where a file names one and nothing gives the replicas, they are the nodes of
    gpus / gpus_per_node."""
    settings = [reading.hybrid_nodes for reading in readings if reading.hybrid_nodes]
    if not settings or "data_parallel_replicate" in given or "data_parallel_replicate" in sources:
        return
    from trainplan.specs.scenario import Scenario

    gpus, per_node = data.get("gpus") or 1, data.get("gpus_per_node") or Scenario.gpus_per_node
    if not all(
        isinstance(value, int) and not isinstance(value, bool) and value > 0 for value in (gpus, per_node)
    ):
        return  # the parser names the bad value
    nodes = max(1, gpus // per_node)
    data["data_parallel_replicate"] = nodes
    note = (
        f"hybrid sharding: FSDP shards within each node and replicates across the {nodes} of "
        "gpus / gpus_per_node"
    )
    sources["data_parallel_replicate"] = Source("data_parallel_replicate", nodes, settings[0], None, note)


#: The degrees whose product is the fewest GPUs a layout runs on.
LEAST_GPUS = ("tensor_parallel", "pipeline_parallel", "context_parallel", "data_parallel_replicate")


def _least_gpus(data: dict[str, Any], sources: dict[str, Source], given: Mapping[str, Any]) -> None:
    """A layout with tensor, pipeline or context parallelism (or HSDP replicas) needs at least
    their product of GPUs: when no file or flag gives the GPU count, that is the count (the
    launcher's, which a training config does not state)."""
    if "gpus" in given or ("gpus" in sources and not sources["gpus"].default):
        return

    def degree(name: str) -> int:
        """The degree a flag or file gives (1 where unset or not a positive integer: its own
        rule names the field later)."""
        value = given.get(name, sources[name].value if name in sources else 1)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    least, named = 1, []
    for name in LEAST_GPUS:
        given_degree = degree(name)
        least *= given_degree
        if given_degree > 1 or name in LEAST_GPUS[:2]:
            named.append(name)
    # the expert ranks are carved from the others (torchtitan: dp_shard x cp x tp), so at least
    # expert_parallel of them a pipeline stage and replica
    carved = degree("expert_parallel") * degree("pipeline_parallel") * degree("data_parallel_replicate")
    if carved > least:
        least, named = carved, ["expert_parallel", "pipeline_parallel", "data_parallel_replicate"]
    if least > int(data.get("gpus") or 1):
        data["gpus"] = least
        note = f"no GPU count given: the least a layout of {' x '.join(named)} = {least} runs on"
        sources["gpus"] = Source("gpus", least, "implied by the parallel degrees", None, note, default=True)


def _match_model(sources: dict[str, Source]) -> None:
    """A Hub id that is a copy or a same-shape variant of a catalog model is read as that model
    (resolve.py `catalog_match`, offline), saying so in its provenance."""
    from trainplan.inputs.resolve import catalog_model

    source = sources.get("model")
    found = catalog_model(str(source.value)) if source is not None else None
    if source is not None and found is not None and found[1]:
        note = f"{found[1]}{'; ' + source.note if source.note else ''}"
        sources["model"] = Source("model", found[0].name, source.setting, source.file, note, source.default)


def _check_model(source: Source) -> None:
    """A model reference that is neither a catalog model nor a local config is looked up now,
    so that a Hub id we cannot reach says which file named it and what to do."""
    from trainplan.inputs.catalogs.models import find_model_record
    from trainplan.inputs.resolve import model_config

    reference = str(source.value)
    if find_model_record(reference) is not None:
        return
    try:
        model_config(reference)
    except InputError as error:
        message = error.message.rstrip(".")
        if "has no catalog model" in source.note:  # a framework's builder: what differs
            message = f"{source.note}; {message}"
        if "--model" not in message:
            message += (
                " " if message.endswith("?") else ". "
            ) + "Pass --model with a catalog name or a local config.json"
        raise InputError(
            "model", f"{source.file} names {shown_value(reference)} ({source.setting}): {message}"
        ) from None


def emit_format(kind: str) -> ModuleType:
    """The reader that writes format `kind` (`plan --emit`); an error naming the formats."""
    if kind not in EMIT_FORMATS:
        raise InputError(
            "emit", f"{shown_value(kind)} is not a format we write; allowed: {', '.join(EMIT_FORMATS)}"
        )
    return reader(EMIT_FORMATS[kind])


#: Parallel degrees a format may not write (each emitter's EMITS says which it does): a note says so.
UNWRITTEN_DEGREES = ("context_parallel", "data_parallel_replicate", "expert_parallel")


def emit_axes(kind: str) -> dict[str, tuple[Any, ...]]:
    """The planner's search axes narrowed to the layouts format `kind` can write: `plan --emit`
    searches only plans that framework runs, so the winner is written whole."""
    return dict(getattr(emit_format(kind), "PLAN_AXES", {}))


def emit(scenario: Any, kind: str, header: list[str]) -> tuple[str, list[str]]:
    """The scenario as a config fragment of format `kind`: (text, notes on what the format
    cannot say). YAML and TOML carry `header` (and the notes) as comments; JSON cannot, so the
    caller shows them beside it."""
    module = emit_format(kind)
    data, notes = module.emit(scenario)
    notes = notes + [
        f"{name} {getattr(scenario, name)}: no {module.TITLE} setting is written for it"
        for name in UNWRITTEN_DEGREES
        if getattr(scenario, name) != 1 and name not in module.EMITS
    ]
    run_line = getattr(module, "run_line", None)
    comments = [
        *header,
        *([run_line(scenario)] if run_line else []),
        *(f"not written: {note}" for note in notes),
    ]
    if module.SYNTAX == "json":
        import json

        return json.dumps(data, indent=2) + "\n", comments
    lines = "".join(f"# {line}\n" for line in comments)
    if module.SYNTAX == "toml":
        from trainplan.inputs.configs.toml import dumps

        return lines + dumps(data), []
    import yaml

    return lines + yaml.safe_dump(data, sort_keys=False, default_flow_style=False), []
