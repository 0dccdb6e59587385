"""The option names the interfaces share: CLI flag spellings of the LoRA parts, the `estimate`
options, the planner's options, and the field -> flag rule. Plain data, no CLI or web library,
so the CLI and the web package both read it and neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.scenario import (
    LORA_FIELDS,
    METHODS,
    FieldInfo,
    LoraSettings,
    default_scenario,
    field_infos,
    field_kind,
)

# The CLI parameter of each LoRA part (`--lora-rank` ... and `--dora`); the parts themselves,
# with their types, ranges and help, are scenario.LORA_FIELDS.
LORA_FLAGS = {("dora" if part == "dora" else f"lora_{part}"): part for part in LORA_FIELDS}


def flag_name(field: str) -> str:
    """micro_batch -> --micro-batch."""
    return "--" + field.replace("_", "-")


def option_help(info: FieldInfo) -> str:
    """A field's help with its choices and range, as the CLI shows it: `... [a|b] (1 .. 64)`."""
    text = info.help + (f" [{'|'.join(info.choices)}]" if info.choices else "")
    if info.kind == "bool":
        text += " (true/false)"
    low, high = info.minimum, info.maximum
    if low is not None and high is not None:
        text += f" ({'strictly ' if info.exclusive else ''}{low:g} .. {high:g})"
    elif low is not None:
        text += f" ({'>' if info.exclusive else '>='} {low:g})"
    return text


# How `--help` names a value of each kind (a scenario field's or a planner option's).
METAVARS = {"int": "INT", "float": "NUMBER", "bool": "BOOL", "list": "A,B,..."}


def option_metavar(name: str) -> str | None:
    """What an `estimate` option's value looks like in `--help` (a scenario field, or a LoRA
    setting by its flag): its choices where they are few (`fp32|compute`), else its kind (INT,
    NUMBER, BOOL, CHOICE, TEXT); FILE for --scenario."""
    if name in LORA_FLAGS:
        info, default = LORA_FIELDS[LORA_FLAGS[name]], getattr(LoraSettings(), LORA_FLAGS[name])
    elif name in field_infos():
        info, default = field_infos()[name], getattr(default_scenario(), name)
    else:
        return "FILE" if name == "scenario" else None
    if info.choices:
        joined = "|".join(info.choices)
        return joined if len(joined) <= 28 else "CHOICE"
    return METAVARS.get(field_kind(info, default), "TEXT")


OBJECTIVES = ("time", "cost", "energy", "pareto", "gpus")


@dataclass(frozen=True)
class PlanOption:
    """One option of the planner, declared once: how it is read (`kind`: int, float, choice or
    list), its range or choices, its default, its help and form label, and `web_maximum`, the
    tighter cap the web server passes to the same validator (plan.request_from_options)."""

    kind: str
    label: str
    help: str
    default: str | int | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    web_maximum: float | None = None
    # where the option appears (scenario.INTERFACES): the page's planner form draws only some
    interfaces: tuple[str, ...] = ("cli", "web", "api")
    # the page's words: a label per choice, the short help under the control, a placeholder
    choice_labels: tuple[tuple[str, str], ...] = ()
    form_help: str | None = None
    placeholder: str | None = None

    def metavar(self) -> str:
        """What the option's value looks like in `--help`: its choices, or its kind."""
        if self.choices:
            return "|".join(self.choices)
        return METAVARS.get(self.kind, "TEXT")

    def help_text(self) -> str:
        """The help as the CLI and OpenAPI show it, with the default."""
        return self.help + (f" (default {self.default})" if self.default is not None else "")


PLAN_OPTIONS: dict[str, PlanOption] = {
    "methods": PlanOption(
        "list",
        "Methods",
        "methods to consider: full, lora, qlora, comma-separated, or any (default: the scenario's)",
        choices=(*METHODS, "any"),
        form_help="any: full fine-tune, LoRA and QLoRA",
    ),
    "gpu_types": PlanOption(
        "list",
        "GPU types",
        "GPU types to consider, comma-separated (default: every NVIDIA and AMD GPU with a catalog price)",
    ),
    "max_gpus": PlanOption(
        "int",
        "Max GPUs",
        "largest GPU count to consider",
        64,
        1,
        100_000,
        web_maximum=4096,
        form_help="1, 2, 4, then whole nodes",
    ),
    "target_global_tokens": PlanOption(
        "int",
        "Target global batch (tokens)",
        "tokens per optimizer step to hit",
        None,
        1,
        None,
        web_maximum=10**10,
        form_help="tokens per optimizer step; empty: the calculator's",
    ),
    "target_global_sequences": PlanOption(
        "int",
        "Target global sequences",
        "sequences per optimizer step to hit",
        None,
        1,
        None,
        web_maximum=10**8,
        interfaces=("cli", "api"),
    ),
    "budget_usd": PlanOption(
        "float",
        "Budget (USD)",
        "reject plans costing more (USD)",
        None,
        0,
        form_help="reject plans that cost more",
        placeholder="no limit",
    ),
    "deadline_hours": PlanOption(
        "float",
        "Deadline (hours)",
        "reject plans taking longer (hours)",
        None,
        0,
        form_help="reject plans that take longer",
        placeholder="no limit",
    ),
    "objective": PlanOption(
        "choice",
        "Objective",
        "time | cost | energy | pareto | gpus (fewest GPUs that fit)",
        "cost",
        choices=OBJECTIVES,
        choice_labels=(
            ("time", "Fastest"),
            ("cost", "Cheapest"),
            ("energy", "Least energy"),
            ("pareto", "Cost vs time (Pareto front)"),
            ("gpus", "Fewest GPUs"),
        ),
        form_help="what ranks the plans",
    ),
    "max_candidates": PlanOption(
        "int",
        "Max candidates",
        "the most candidate layouts one search may evaluate (GPU counts x GPU types x methods x the "
        "rest of the grid; about 1.3 s and 140 MiB per million); a larger search is refused",
        2_500_000,
        1,
        10**9,
        web_maximum=2_500_000,
        interfaces=("cli", "api"),
    ),
    "top_k": PlanOption(
        "int",
        "Plans to show",
        "how many plans to return",
        5,
        1,
        100,
        web_maximum=20,
        interfaces=("cli", "api"),
    ),
}
WEB_CAPS = {name: option.web_maximum for name, option in PLAN_OPTIONS.items() if option.web_maximum}


def estimate_options() -> list[tuple[str, str, str]]:
    """(parameter, flag, help) of each string option of `estimate`: one per scenario field (LoRA
    settings flattened), so that the scenario parser does every conversion and range check, with
    field-named errors."""
    options = [
        (name, flag_name(name), option_help(info))
        for name, info in field_infos().items()
        if name != "lora" and "cli" in info.interfaces
    ]
    lora = [
        (
            flag,
            flag_name(flag),
            option_help(LORA_FIELDS[part]) + (" (comma-separated)" if part == "targets" else ""),
        )
        for flag, part in LORA_FLAGS.items()
    ]
    return [*options, *lora, ("scenario", "--scenario", "scenario file (YAML or JSON); flags override it")]


# The flags of `estimate` beyond its string options.
FROM_FLAG, JSON_FLAG, MAX_FLAG, HEADROOM_FLAG = "--from", "--json", "--max", "--headroom"
PAST_CONTEXT_FLAG = "--past-context"  # with --max seq_len: search past the model's context window
