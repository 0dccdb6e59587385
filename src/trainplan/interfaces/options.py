"""The option names the interfaces share: CLI flag spellings of the LoRA parts, the `estimate`
options and the field -> flag rule (the planner's options are declared in
engine/plan_request.py). Plain data, no CLI or web library, so the CLI and the web package both
read it and neither imports the other."""

from __future__ import annotations

from trainplan.engine.plan_request import METAVARS
from trainplan.specs.scenario import (
    LORA_FIELDS,
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
    if info.value_type == "bool":
        text += " (true/false)"
    low, high = info.minimum, info.maximum
    if low is not None and high is not None:
        text += f" ({'strictly ' if info.exclusive else ''}{low:g} .. {high:g})"
    elif low is not None:
        text += f" ({'>' if info.exclusive else '>='} {low:g})"
    return text


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
HINTS_FLAG = "--hints"  # the page's "worth knowing" suggestions, each a true estimate
