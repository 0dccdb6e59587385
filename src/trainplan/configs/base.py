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
from typing import Any

from trainplan.errors import InputError, shown_value

IRRELEVANT = "irrelevant to memory and time"
NOT_MODELLED = "not modelled yet"
UNKNOWN = "unknown"
REFERENCE = "names another file, read in turn"

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
    `note` being the reason. Otherwise `note` says what the value means (its unit)."""

    note: str
    convert: Convert | None = None
    sets: str = ""  # the scenario fields it can set, for the docs


def ignored(reason: str) -> Rule:
    """A setting that sets no scenario field, for `reason`."""
    return Rule(reason)


def to(target: str, note: str, convert: Callable[[Any], Any] | None = None) -> Rule:
    """A setting that maps onto one scenario field (`lora.rank` for the LoRA part)."""

    def apply(value: Any, flat: Mapping[str, Any]) -> dict[str, Any] | Ignore:
        if value is None:
            return Ignore("null: the default applies")
        converted = convert(value) if convert else value
        return converted if isinstance(converted, Ignore) else {target: converted}

    return Rule(note, apply, target)


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
class Source:
    """Where one scenario field's value came from."""

    field: str
    value: Any
    setting: str  # "axolotl micro_batch_size", "recipe default", "--micro-batch", "trainplan default"
    file: str | None = None
    note: str = ""

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
    backends: list[tuple[str, str]] = field(default_factory=list)  # (DeepSpeed | FSDP, the setting)

    def set(self, name: str, value: Any, setting: str, note: str) -> None:
        """Record `name = value` from `setting`; a second setting of the same file giving the same
        field another value is a contradiction."""
        earlier = self.fields.get(name)
        if earlier is not None and earlier.value != value:
            raise InputError(
                setting,
                f"{self.file}: sets {name} = {shown_value(value)}, but {earlier.setting} sets "
                f"{shown_value(earlier.value)}; keep one",
            )
        self.fields[name] = Source(name, value, f"{self.format} {setting}", self.file, note)


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


def apply_rules(reading: FileReading, flat: Mapping[str, Any], rules: Mapping[str, Rule]) -> None:
    """Every setting of `flat` through its rule, into `reading` (fields or ignored)."""
    for path, value in flat.items():
        rule = rule_for(path, rules)
        if rule is None:
            reading.ignored.append(Skipped(path, reading.file, UNKNOWN))
            continue
        if rule.convert is None:
            reading.ignored.append(Skipped(path, reading.file, rule.note))
            continue
        result = rule.convert(value, flat)
        if isinstance(result, Ignore):
            reading.ignored.append(Skipped(path, reading.file, result.reason))
            continue
        for name, converted in result.items():
            if name == "_reference":
                reading.references.append((path, converted))
                reading.ignored.append(Skipped(path, reading.file, REFERENCE))
            elif name == "_backend":
                reading.backends.append((str(converted), f"{reading.file}: {reading.format} {path}"))
            elif name == "_global_batch":
                reading.global_batch = (f"{reading.format} {path}", int(converted))
            else:
                reading.set(name, converted, path, rule.note)


def positive_int(setting: str) -> Callable[[Any], Any]:
    """A converter for a count that must be a whole number >= 1 ("auto" is the trainer's value)."""

    def convert(value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return Ignore("auto: the trainer's own setting decides")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(setting, f"{shown_value(value)} is not a whole number >= 1")
        return value

    return convert


def keys(flat: Mapping[str, Any]) -> Iterator[str]:
    """The top-level keys of a flattened file."""
    return iter({path.split(".", 1)[0] for path in flat})
