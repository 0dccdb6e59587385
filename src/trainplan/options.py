"""The option names the interfaces share: CLI flag spellings of the LoRA parts, the planner's
options, and the field -> flag rule. Plain data, no CLI or web library, so the CLI and the web
package both read it and neither imports the other."""

from __future__ import annotations

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
