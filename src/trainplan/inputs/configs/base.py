"""What every framework reader shares: the rule of one setting, the record of where a field came
from, and the walk that applies a reader's field table to a parsed file.

A reader module (axolotl.py, torchtune.py, ...) holds one table, ``RULES``: the framework's
setting (a dotted path for nested keys) -> a ``Rule`` that converts its value into scenario
fields, with a note on the value's meaning (per GPU or global, what "auto" means). A setting with
no scenario field still has a rule, one that says why it is ignored. Settings that no table
names are listed as unknown: nothing in a file is dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.offload import FSDP_OFFLOAD

IRRELEVANT = "irrelevant to memory and time"
NOT_MODELLED = "not modelled yet"
# torch's context-parallel rotate method (torchtitan's and torchtune's context_parallel_rotate_method)
ROTATE_METHOD = (
    f"{NOT_MODELLED}: read as allgather, torch's default (alltoall exchanges the same bytes in cp - 1 steps)"
)
UNKNOWN = "unknown"
REFERENCE = "names another file, read in turn"
EMPTY = "empty: unset, the framework's default applies"

# Settings that every trainer shares and that change neither memory nor time: the data, the
# schedule's shape, logging and saving. Prefixes end with "*"; compared with the dotted path.
COMMON_IRRELEVANT = (
    "learning_rate", "lr", "lr_scheduler*", "lr_scheduler_type", "warmup*", "weight_decay", "seed",
    "data_seed", "output_dir", "overwrite_output_dir", "logging*", "log_*", "save_*", "eval_*",
    "evaluation_strategy", "eval_strategy", "per_device_eval_batch_size", "wandb*", "report_to",
    "run_name", "max_grad_norm", "adam_beta1", "adam_beta2", "adam_epsilon", "push_to_hub",
    "hub_*", "dataloader_*", "resume_from_checkpoint", "dataset*", "datasets*", "val_set_size",
    "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "do_train", "do_eval",
    "trust_remote_code", "template", "chat_template", "special_tokens", "tokenizer_*",
    "ddp_timeout", "ddp_find_unused_parameters", "remove_unused_columns", "label_names",
    "disable_tqdm", "local_rank", "debug", "save_steps", "save_strategy", "save_total_limit",
    "early_stopping_patience", "max_samples", "preprocessing_num_workers", "overwrite_cache",
    "plot_loss", "save_only_model", "val_size", "eval_steps", "strict", "train_on_inputs",
    "group_by_length", "lr_scheduler_kwargs", "optim_args", "seed_everything",
)  # fmt: skip


@dataclass(frozen=True)
class Ignore:
    """A conversion's answer when this value sets no field (with the reason)."""

    reason: str


Convert = Callable[[Any, Mapping[str, Any]], "dict[str, Any] | Ignore"]


@dataclass(frozen=True)
class Rule:
    """One framework setting: `convert(value, flat)` -> scenario fields, or an Ignore.

    `flat` is the whole file (dotted keys), for settings read together with a sibling
    (a 4-bit base turns an adapter into QLoRA). `convert` None: the setting is always ignored,
    `note` being the reason. Otherwise `note` says what the value means (its unit); a converter
    may say more about this value under the key "_note"."""

    note: str
    convert: Convert | None = None
    sets: str = ""  # the scenario fields it can set, for the docs


def ignored(reason: str) -> Rule:
    """A setting that sets no scenario field, for `reason`."""
    return Rule(reason)


def onto(target: str, value: Any, convert: Callable[[Any], Any] | None = None) -> dict[str, Any] | Ignore:
    """`value` (converted) as the scenario field `target`, or the converter's Ignore."""
    converted = convert(value) if convert else value
    return converted if isinstance(converted, Ignore) else {target: converted}


def to(target: str, note: str, convert: Callable[[Any], Any] | None = None) -> Rule:
    """A setting that maps onto one scenario field (`lora.rank` for the LoRA part)."""

    def apply(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        return onto(target, value, convert)

    return Rule(note, apply, target)


def onto_where(
    applies: Callable[[Mapping[str, Any]], bool], reason: str, target: str, convert: Callable[[Any], Any]
) -> Convert:
    """A conversion onto `target` (as `to`'s) for a file where `applies(flat)` holds; elsewhere the
    setting is ignored for `reason` (a rollout setting of a trainer that generates nothing)."""

    def apply(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        return onto(target, value, convert) if applies(flat) else Ignore(reason)

    return apply


def choice(setting: str, table: Mapping[Any, Any], value: Any) -> Any:
    """`table[value]` (strings compared case-insensitively), or an InputError naming the setting
    and the values it can take. A table value that is an Ignore is returned as such."""
    key = value.strip().lower() if isinstance(value, str) else value
    for name, target in table.items():
        if (name.lower() if isinstance(name, str) else name) == key and type(key) is type(name):
            return target
    allowed = ", ".join(str(name) for name in table)
    raise InputError(setting, f"{shown_value(value)} is not one we read; allowed: {allowed}")


def truthy(setting: str, value: Any) -> bool:
    """A config boolean (true/false, or the strings YAML 1.2 and some tools write)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InputError(setting, f"{shown_value(value)} is not a boolean (true/false)")


def on(flat: Mapping[str, Any], setting: str) -> bool:
    """Whether a boolean setting of the file is on (absent or empty: off; "true" as true)."""
    value = flat.get(setting)
    return value is not None and truthy(setting, value)


def flatten(data: Mapping[str, Any], prefix: str = "", whole: tuple[str, ...] = ()) -> dict[str, Any]:
    """Nested mappings -> dotted keys; lists, scalars and the keys in `whole` (an inline
    DeepSpeed config) are leaves."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and name not in whole:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


@dataclass(frozen=True)
class Default:
    """What a framework uses for a setting that a file leaves out or leaves empty: `value`, the
    default of field `where` ("Class.field") in `framework`'s own definitions, as
    data/framework_defaults.yaml records it (a test holds the two equal). `effective` says why the
    value in effect is not the declared one, where it is set after construction (TRL's
    `bf16 = not fp16` in __post_init__, axolotl's bf16 "auto" resolved for a GPU with bf16)."""

    value: Any
    framework: str
    where: str
    effective: str = ""

    def note(self) -> str:
        """Where the default comes from: the framework's version, the field, its file and line."""
        entry = framework_defaults()[self.framework]
        field = declared(self.framework, self.where)
        where = f"{self.where}, {field['source']}:{field.get('line', '?')}"
        because = f"; {self.effective}" if self.effective else ""
        return f"{entry['repo'].split('/')[-1]} {entry['version']} default ({where}){because}"


@cache
def framework_defaults() -> dict[str, Any]:
    """data/framework_defaults.yaml, checked: each framework with its pinned commit or version and
    its classes' fields."""
    from trainplan.specs.loader import load_yaml, require

    table = load_yaml("framework_defaults.yaml")["frameworks"]
    for name, entry in table.items():
        missing = [key for key in ("repo", "version", "classes") if key not in entry]
        if missing:
            raise RuntimeError(f"framework_defaults.yaml {name}: missing {missing}")
        for class_name, record in entry["classes"].items():
            require(record, ("source", "fields"), set(record), f"framework_defaults.yaml {name}.{class_name}")
    return dict(table)


@cache
def framework_models() -> dict[str, Any]:
    """data/framework_models.yaml: which catalog model each torchtune builder and torchtitan
    flavor builds (exactly its shapes, or null with the closest and what differs)."""
    from trainplan.specs.loader import load_yaml

    table = load_yaml("framework_models.yaml")
    for name, key in (("torchtune", "builders"), ("torchtitan", "flavors")):
        if key not in table.get(name, {}):
            raise RuntimeError(f"framework_models.yaml: {name}.{key} is missing")
    return dict(table)


def built_model(framework: str, key: str) -> tuple[str | None, str]:
    """(the catalog model a framework's model name builds, or None; a sentence saying where that
    comes from, or why none matches)."""
    table = framework_models()[framework]
    entry = table["builders" if framework == "torchtune" else "flavors"].get(key)
    if entry is None:
        return None, f"{key} is not a {framework} model we know (framework_models.yaml)"
    where = f"{entry['source']} at {table['repo']}@{str(table['commit'])[:12]}"
    if entry.get("catalog"):
        return str(entry["catalog"]), f"{key} builds {entry['catalog']}'s shapes ({where})"
    differs = entry.get("differs") or "no catalog model has its shapes"
    return None, f"{key} has no catalog model: {differs} ({where})"


def declared(framework: str, where: str) -> dict[str, Any]:
    """The record of field `where` ("Class.field", or "recipe.setting" for the settings a
    torchtune recipe reads with cfg.get) of `framework` in framework_defaults.yaml, with its
    source file added."""
    owner, _, name = where.partition(".")
    entry = framework_defaults()[framework]
    if owner in entry["classes"]:
        record = entry["classes"][owner]
        return {**record["fields"][name], "source": record["source"]}
    recipe = entry["recipes"][owner]
    read = recipe["reads"][name]
    return {**read, "line": read["lines"][0], "source": recipe["source"]}


@dataclass(frozen=True)
class Source:
    """Where one scenario field's value came from. `default`: from a framework's own default for a
    setting the file left out, which any setting a file states overrides."""

    field: str
    value: Any
    setting: str  # "axolotl micro_batch_size", "recipe default", "--micro-batch", "trainplan default"
    file: str | None = None
    note: str = ""
    default: bool = False

    def __str__(self) -> str:
        value = ", ".join(self.value) if isinstance(self.value, list | tuple) else self.value
        detail = f"{self.setting}, {self.note}" if self.note else self.setting
        return f"{self.field} = {value} ({detail})"

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {
            "field": self.field,
            "value": value,
            "setting": self.setting,
            "file": self.file,
            "note": self.note,
            "text": str(self),
        }


@dataclass(frozen=True)
class Skipped:
    """A setting of a file that sets no scenario field, and why."""

    setting: str
    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.setting} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {"setting": self.setting, "file": self.file, "reason": self.reason, "text": str(self)}


@dataclass
class FileReading:
    """What one file said: fields with their sources, the settings ignored, the files it points at."""

    file: str
    format: str
    recipe: str | None
    fields: dict[str, Source] = field(default_factory=dict)
    ignored: list[Skipped] = field(default_factory=list)
    references: list[tuple[str, Any]] = field(default_factory=list)  # (setting, path or inline mapping)
    global_batch: tuple[str, int] | None = None  # (setting, sequences per optimizer step), all GPUs
    # a hybrid sharding strategy that replicates across the nodes (FSDP1 HYBRID_SHARD): the setting
    hybrid_nodes: str | None = None
    backends: list[tuple[str, str]] = field(default_factory=list)  # (DeepSpeed | FSDP, the setting)
    # why FSDP keeps the loaded dtype here (no fp32 upcast of the trainable parameters), or ""
    keeps_dtype: str = ""

    def set(self, name: str, value: Any, setting: str, note: str, default: bool = False) -> None:
        """Record `name = value` from `setting`; a second setting of the same file giving the same
        field another value is a contradiction. A framework default (`default`) fills only a field
        that no stated setting sets."""
        earlier = self.fields.get(name)
        if earlier is not None and default:
            return
        if earlier is not None and not earlier.default and earlier.value != value:
            raise InputError(
                setting,
                f"{self.file}: sets {name} = {shown_value(value)}, but {earlier.setting} sets "
                f"{shown_value(earlier.value)}; keep one",
            )
        label = f"{self.format} default {setting}" if default else f"{self.format} {setting}"
        self.fields[name] = Source(name, value, label, self.file, note, default)


def matches(path: str, pattern: str) -> bool:
    """A dotted path against a table key (a trailing `*` matches any rest)."""
    return path.startswith(pattern[:-1]) if pattern.endswith("*") else path == pattern


def rule_for(path: str, rules: Mapping[str, Rule]) -> Rule | None:
    """The rule of `path`: its own entry, else a pattern, else a common irrelevant setting."""
    if path in rules:
        return rules[path]
    for pattern, rule in rules.items():
        if pattern.endswith("*") and matches(path, pattern):
            return rule
    parts = (path, path.split(".", 1)[0], path.rsplit(".", 1)[-1])
    if any(matches(part, pattern) for part in parts for pattern in COMMON_IRRELEVANT):
        return ignored(IRRELEVANT)
    return None


def apply_rules(
    reading: FileReading,
    flat: Mapping[str, Any],
    rules: Mapping[str, Rule],
    defaults: Mapping[str, str] | None = None,
) -> None:
    """Every setting of `flat` through its rule, into `reading` (fields or ignored). A key with no
    value (`fp16:` in YAML, null in JSON) is unset, as the frameworks read it: the framework's
    default applies. `defaults` names the settings that `flat` holds at the framework's default
    (the file left them out), each with the note saying where that default is declared: the
    fields they set yield to every stated setting, and an ignored one is not listed."""
    defaults = defaults or {}
    for path, value in flat.items():
        note = defaults.get(path)
        rule = rule_for(path, rules)
        if rule is None:
            reading.ignored.append(Skipped(path, reading.file, UNKNOWN))
            continue
        if value is None:
            reading.ignored.append(Skipped(path, reading.file, EMPTY))
            continue
        if rule.convert is None:
            if note is None:
                reading.ignored.append(Skipped(path, reading.file, rule.note))
            continue
        result = rule.convert(value, flat)
        if isinstance(result, Ignore):
            if note is None:
                reading.ignored.append(Skipped(path, reading.file, result.reason))
            continue
        if note is not None:
            for name, converted in result.items():
                if not name.startswith("_"):
                    shown = ", ".join(map(str, value)) if isinstance(value, list) else value
                    reading.set(name, converted, f"{path}: {shown}", note, default=True)
            continue
        said = str(result.pop("_note", "")) if "_note" in result else ""
        for name, converted in result.items():
            if name == "_reference":
                reading.references.append((path, converted))
                reading.ignored.append(Skipped(path, reading.file, REFERENCE))
            elif name == "_backend":
                reading.backends.append((str(converted), f"{reading.file}: {reading.format} {path}"))
            elif name == "_keeps_dtype":
                reading.keeps_dtype = f"{reading.file}: {reading.format} {path}: {converted}"
            elif name == "_global_batch":
                reading.global_batch = (f"{reading.format} {path}", int(converted))
            elif name == "_hybrid_nodes":
                reading.hybrid_nodes = f"{path}: {converted}"
            else:
                reading.set(name, converted, path, said or rule.note)


def positive_int(setting: str) -> Callable[[Any], Any]:
    """A converter for a count that must be a whole number >= 1 ("auto" is the trainer's value)."""

    def convert(value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return Ignore("auto: the trainer's own setting decides")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(setting, f"{shown_value(value)} is not a whole number >= 1")
        return value

    return convert


def fraction(setting: str) -> Callable[[Any], Any]:
    """A converter for a share in (0, 1] (vLLM's gpu_memory_utilization)."""

    def convert(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise InputError(setting, f"{shown_value(value)} is not a fraction in (0, 1]")
        return float(value)

    return convert


def keys(flat: Mapping[str, Any]) -> Iterator[str]:
    """The top-level keys of a flattened file."""
    return iter({path.split(".", 1)[0] for path in flat})


def fsdp_offload_note(offload: str) -> list[str]:
    """What an FSDP config cannot write of `offload` (its CPU offload moves the gradients too)."""
    if offload == "optimizer+params":
        return [f"offload {offload}: FSDP's CPU offload moves the gradients too (written as {FSDP_OFFLOAD})"]
    return []


def deepspeed_offload_note(offload: str) -> list[str]:
    """What a DeepSpeed config cannot write of `offload` (offload_param keeps gradients with the
    optimizer's offload, not FSDP's)."""
    if offload == FSDP_OFFLOAD:
        return [
            f"offload {offload}: FSDP's CPU offload (written as DeepSpeed's offload_param, optimizer+params)"
        ]
    return []
