"""The option names the interfaces share: CLI flag spellings of the LoRA parts, the `estimate`
options, the planner's options, and the field -> flag rule. Plain data, no CLI or web library,
so the CLI and the web package both read it and neither imports the other."""

from __future__ import annotations

from trainplan.scenario import LORA_FIELDS, field_infos

LORA_FLAGS = {
    "lora_rank": "rank",
    "lora_alpha": "alpha",
    "lora_targets": "targets",
    "dora": "dora",
    "lora_dropout": "dropout",
    "lora_dtype": "dtype",
}


def flag_name(field: str) -> str:
    """micro_batch -> --micro-batch."""
    return "--" + field.replace("_", "-")


PLAN_OPTIONS: dict[str, tuple[str, str]] = {
    "methods": ("--methods", "methods to consider: full, lora, qlora, comma-separated, or any"),
    "gpu_types": (
        "--gpu-types",
        "GPU types to consider, comma-separated (default: every GPU with a catalog price)",
    ),
    "max_gpus": ("--max-gpus", "largest GPU count to consider (default 64)"),
    "target_global_tokens": ("--target-global-tokens", "tokens per optimizer step to hit"),
    "target_global_sequences": ("--target-global-sequences", "sequences per optimizer step to hit"),
    "budget_usd": ("--budget-usd", "reject plans costing more (USD)"),
    "deadline_hours": ("--deadline-hours", "reject plans taking longer (hours)"),
    "objective": ("--objective", "time | cost | energy | pareto | gpus (fewest GPUs that fit)"),
    "top_k": ("--top-k", "how many plans to return (default 5)"),
}


def estimate_options() -> list[tuple[str, str, str]]:
    """(parameter, flag, help) of each string option of `estimate`: one per scenario field (LoRA
    settings flattened), so that the scenario parser does every conversion and range check, with
    field-named errors."""
    options: list[tuple[str, str, str]] = []
    for name, info in field_infos().items():
        if name == "lora":
            continue
        help_text = info.help + (f" [{'|'.join(info.choices)}]" if info.choices else "")
        if info.minimum is not None:
            help_text += f" ({'>' if info.exclusive else '>='} {info.minimum:g})"
        options.append((name, flag_name(name), help_text))
    return [
        *options,
        ("lora_rank", "--lora-rank", LORA_FIELDS["rank"].help + " (1 .. 65536)"),
        ("lora_alpha", "--lora-alpha", LORA_FIELDS["alpha"].help),
        ("lora_targets", "--lora-targets", LORA_FIELDS["targets"].help + " (comma-separated)"),
        ("dora", "--dora", LORA_FIELDS["dora"].help + " (true/false)"),
        ("lora_dropout", "--lora-dropout", LORA_FIELDS["dropout"].help + " (0 .. 0.99)"),
        ("lora_dtype", "--lora-dtype", LORA_FIELDS["dtype"].help + " [fp32|compute]"),
        ("scenario", "--scenario", "scenario file (YAML or JSON); flags override it"),
    ]


# The flags of `estimate` beyond its string options.
FROM_FLAG, JSON_FLAG, MAX_FLAG, HEADROOM_FLAG = "--from", "--json", "--max", "--headroom"
