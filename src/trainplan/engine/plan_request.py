"""What to plan for: the planner's options, each declared once (kind, range, default, help and
form words), read from their string form (a CLI flag or a JSON value), and the request they make."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainplan.inputs.catalogs.cost_inputs import rates
from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.scenario import METHODS, Scenario, data_parallel
from trainplan.specs.stages import sequences_per_sample

# How `--help` names a value of each kind (a scenario field's or a planner option's).
METAVARS = {"int": "INT", "float": "NUMBER", "bool": "BOOL", "list": "A,B,..."}


OBJECTIVES = ("time", "cost", "energy", "pareto", "gpus")


@dataclass(frozen=True)
class PlanOption:
    """One option of the planner, declared once: how it is read (`kind`: int, float, choice or
    list), its range or choices, its default, its help and form label, and `web_maximum`, the
    tighter cap the web server passes to the same validator (request_from_options)."""

    value_type: str
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
        return METAVARS.get(self.value_type, "TEXT")

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


def _default(name: str) -> Any:
    """The declared default of a planner option (PLAN_OPTIONS)."""
    return PLAN_OPTIONS[name].default


@dataclass(frozen=True)
class PlanRequest:
    """What to plan for. `base` carries the model, precision, optimizer, LoRA settings,
    sequence length, token budget, pricing and region; the planner chooses the rest."""

    base: Scenario
    methods: tuple[str, ...] = ("lora",)
    gpu_types: tuple[str, ...] = ()
    max_gpus: int = _default("max_gpus")
    target_global_tokens: int | None = None
    target_global_sequences: int | None = None
    budget_usd: float | None = None
    deadline_hours: float | None = None
    objective: str = _default("objective")
    top_k: int = _default("top_k")
    max_candidates: int = _default("max_candidates")
    micro_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    tensor_parallel: tuple[int, ...] = (1, 2, 4, 8)
    pipeline_parallel: tuple[int, ...] = (1, 2, 4, 8, 16)
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    checkpointing: tuple[str, ...] = ("none", "selective", "full")
    offloads: tuple[str, ...] = ("none", "optimizer")
    gpu_counts: tuple[int, ...] = field(default=())
    # context-parallel degrees; empty: `context_parallels()` chooses them from the sequence
    context_parallel: tuple[int, ...] = ()

    def context_parallels(self) -> tuple[int, ...]:
        """Context-parallel degrees searched: those given, else 1, the scenario's own, and each
        of 2, 4, 8 that leaves every GPU at least CP_LEAST_TOKENS of a sequence the head-tail
        balance can split (a CP layout trades data-parallel replicas for activation memory: it
        wins only where a single sequence's activations do not fit at micro-batch 1, which at
        fewer tokens per GPU checkpointing and a smaller micro-batch settle first)."""
        if self.context_parallel:
            return self.context_parallel
        seq = self.base.seq_len
        split = {cp for cp in CONTEXT_PARALLEL if seq % (2 * cp) == 0 and seq // cp >= CP_LEAST_TOKENS}
        return tuple(sorted({1, self.base.context_parallel} | split))

    def counts(self) -> tuple[int, ...]:
        """GPU counts searched: 1, 2, 4, then multiples of 8 (whole nodes) up to max_gpus."""
        if self.gpu_counts:
            return tuple(n for n in self.gpu_counts if n <= self.max_gpus)
        small = [n for n in (1, 2, 4) if n <= self.max_gpus]
        nodes = list(range(8, self.max_gpus + 1, 8))
        return tuple(small + nodes)

    def grid_parts(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...], bool], ...]:
        """(context-parallel degrees, ZeRO stages, HSDP) of each part of the search grid: every
        stage without context parallelism; with it, ZeRO-3 alone, as torchtitan, torchtune and
        accelerate run it (FSDP over the data- and context-parallel ranks); and ZeRO-3 again as
        HSDP, one shard group a node, where the search spans nodes and the scenario sets no
        replicas of its own. The parts with ZeRO-3 only where the search has it."""
        split = tuple(cp for cp in self.context_parallels() if cp > 1)
        sharded = 3 in self.zero_stages
        parts: list[tuple[tuple[int, ...], tuple[int, ...], bool]] = []
        if 1 in self.context_parallels():
            parts.append(((1,), self.zero_stages, False))
        if split and sharded:
            parts.append((split, (3,), False))
        spans_nodes = max(self.counts(), default=0) > self.base.gpus_per_node
        if sharded and spans_nodes and self.base.data_parallel_replicate == 1:
            parts.append(((1,), (3,), True))
        return tuple(parts)

    def part_counts(self, hsdp: bool) -> tuple[int, ...]:
        """The GPU counts a grid part searches: all of them, or for HSDP those over a node."""
        return tuple(n for n in self.counts() if n > self.base.gpus_per_node) if hsdp else self.counts()

    def candidates(self) -> int:
        """How many layouts `plan()` evaluates: the size of its search grid."""
        per_group = (
            len(self.gpu_types or default_gpu_types())
            * len(self.tensor_parallel)
            * len(self.pipeline_parallel)
            * len(self.micro_batches)
            * sum(
                len(self.part_counts(hsdp)) * len(cps) * len(zeros) for cps, zeros, hsdp in self.grid_parts()
            )
        )
        return per_group * len(self.methods) * len(self.checkpointing) * len(self.offloads)

    def narrowed(self, axes: Mapping[str, tuple[Any, ...]], why: str) -> PlanRequest:
        """This search over only the layouts `axes` allows (for each axis named, the values of
        this request it keeps), e.g. those a framework's config can express; `why` names it in
        the error when an axis keeps nothing."""
        changes: dict[str, tuple[Any, ...]] = {}
        for name, allowed in axes.items():
            searched = self.context_parallels() if name == "context_parallel" else getattr(self, name)
            kept = tuple(value for value in searched if value in allowed)
            if not kept:
                field = "methods" if name == "methods" else "emit"
                raise InputError(
                    field,
                    f"{why} runs none of the {name} searched ({', '.join(map(str, searched))})",
                )
            changes[name] = kept
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def check_size(self, can_raise: bool = True) -> None:
        """Refuse a search larger than `max_candidates` before any array is made (one of 100,000
        GPUs over every method would need tens of GB), naming max_gpus, the largest lever, and
        what else to change (`can_raise`: whether max_candidates itself may go higher)."""
        count = self.candidates()
        if count > self.max_candidates:
            raise InputError(
                "max_gpus",
                f"this search has {count:,} candidate layouts, more than the {self.max_candidates:,} "
                "allowed (max_candidates): lower max_gpus, or plan over fewer GPU types or methods"
                + (", or raise max_candidates" if can_raise else ""),
            )

    def global_sequences(self) -> int:
        """Sequences per optimizer step the plan must hit."""
        if self.target_global_sequences:
            return self.target_global_sequences
        if self.target_global_tokens:
            # a paired stage's example is both sequences of a pair
            tokens = self.base.seq_len * sequences_per_sample(self.base.stage)
            return max(1, round(self.target_global_tokens / tokens))
        return self.base.micro_batch * self.base.grad_accum * max(1, data_parallel(self.base))


#: The context-parallel degrees the planner may add, and the fewest tokens of a sequence each GPU
#: keeps under one: torchtitan's published CP runs keep 32,768 (benchmarks/
#: llama3_h100_202412_torchtitan.md Table 2); 8,192, torchtitan's default sequence, is the bound
#: below which a sequence is short enough that checkpointing alone settles its memory (a judgement).
CONTEXT_PARALLEL = (2, 4, 8)
CP_LEAST_TOKENS = 8192

#: The vendors whose GPUs the planner searches unless told otherwise: PyTorch's CUDA and ROCm
#: builds run the recipes trainplan models unchanged there, where TPUs, Gaudi and Trainium need
#: another stack (torch_xla, the Gaudi bridge, Neuron). Named in `gpu_types`, those are searched.
DEFAULT_VENDORS = ("NVIDIA", "AMD")


def default_gpu_types() -> tuple[str, ...]:
    """Every NVIDIA and AMD GPU with a catalog price, consumer, workstation and datacenter."""
    priced = rates()
    return tuple(g.name for g in gpu_catalog() if g.name in priced and g.vendor in DEFAULT_VENDORS)


def plan_option(name: str, raw: str | None, maximum: float | None = None) -> Any:
    """One planner option from its string form (a CLI flag or a JSON value), checked against its
    declaration in PLAN_OPTIONS; None when not given. `maximum` is a tighter cap than the
    declared one (the web server's); the error names the option and the allowed range."""
    option = PLAN_OPTIONS[name]
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if option.value_type == "choice":
        if text.lower() not in option.choices:
            raise InputError(name, f"{shown_value(text)} is not one of {', '.join(option.choices)}")
        return text.lower()
    try:
        number = float(text)
    except ValueError:
        raise InputError(name, f"{shown_value(text[:40])} is not a number") from None
    if not math.isfinite(number):
        raise InputError(name, f"{shown_value(text[:40])} is not a finite number")
    high = option.maximum if maximum is None else maximum
    low = option.minimum
    if (low is not None and number < low) or (high is not None and number > high):
        allowed = f"between {low:g} and {high:,g}" if high is not None else f">= {low:g}"
        raise InputError(name, f"must be {allowed} (got {text[:40]})")
    if option.value_type == "int" and not number.is_integer():
        raise InputError(name, f"must be a whole number (got {text[:40]})")
    return int(number) if option.value_type == "int" else number


def request_from_options(
    base: Scenario, options: dict[str, str | None], caps: dict[str, float] | None = None
) -> PlanRequest:
    """A PlanRequest from string options (CLI flags or JSON), every value checked against
    PLAN_OPTIONS; `caps` lowers an option's maximum (WEB_CAPS on the server)."""
    caps = caps or {}
    value = {
        name: plan_option(name, options.get(name), caps.get(name))
        for name in PLAN_OPTIONS
        if PLAN_OPTIONS[name].value_type != "list"
    }
    methods_text = (options.get("methods") or base.method).strip().lower()
    methods = (
        METHODS
        if methods_text == "any"
        else tuple(part.strip() for part in methods_text.split(",") if part.strip())
    )
    for method in methods:
        if method not in METHODS:
            raise InputError(
                "methods", f"{shown_value(method)} is not one of {', '.join(PLAN_OPTIONS['methods'].choices)}"
            )
    gpu_types = tuple(part.strip() for part in (options.get("gpu_types") or "").split(",") if part.strip())
    for name in gpu_types:
        find_gpu(name)
    given = {name: number for name, number in value.items() if number is not None}
    return PlanRequest(base=base, methods=methods, gpu_types=gpu_types, **given)
