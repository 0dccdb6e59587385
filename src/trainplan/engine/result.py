"""The result tree of an estimate: named terms with values in base units, each exact or estimate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from itertools import repeat
from typing import Any, NamedTuple

from trainplan.engine.rollout_step import RolloutFigures
from trainplan.engine.terms.device import DeviceOverhead
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.terms.params import ParamCounts
from trainplan.engine.time_cost_energy import CostFigures, EnergyFigures, LoadFigures, TimeFigures
from trainplan.specs.frozen import direct_init, once
from trainplan.specs.labels import ESTIMATE, EXACT
from trainplan.specs.scenario import Scenario, scenario_to_mapping
from trainplan.specs.stages import CRITIC_STAGES


class Term(NamedTuple):
    """One figure: `value` in base units (bytes), exact arithmetic or an estimate, with its formula.
    (Immutable records like the dataclasses; a named tuple because one estimate makes some seventy
    of them with the fit rows, and a tuple is built at half the cost of a frozen dataclass.)"""

    name: str
    value: float
    kind: str
    note: str


#: The names, kinds and notes of a phase's terms, as three columns in term order.
TermLabels = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


@direct_init
@dataclass(frozen=True)
class Phase:
    """Memory of one GPU at one moment of the step; its terms sum to its total. Held as the
    terms' bytes beside their labels (the same columns for every phase); the `Term` records are
    made on first read, since a caller may want no more than the totals (the peak, the fit)."""

    name: str
    values: tuple[float, ...]  # bytes of each term, in the order of `labels`
    labels: TermLabels

    @once
    def terms(self) -> tuple[Term, ...]:
        """The named, labelled terms (built once, column by column: `record` makes each Term
        from its zipped tuple)."""
        names, kinds, notes = self.labels
        return tuple(map(record, repeat(Term), zip(names, self.values, kinds, notes, strict=True)))

    @once
    def total(self) -> float:
        """Sum of the terms (worked out once: the peak, the fit table, the warnings and the JSON
        all read it)."""
        return sum(self.values)

    def term(self, name: str) -> Term:
        """The term called `name`."""
        return next(term for term in self.terms if term.name == name)


#: Builds a named tuple from the tuple of all its fields in order, without the generated
#: `__new__`'s argument parsing: `record(Term, (name, value, kind, note))`. The same object as
#: `Term(name, value, kind, note)` at a third of the cost; for the rows one estimate makes by the
#: dozen (its terms and fit rows).
record = tuple.__new__


class FitRow(NamedTuple):
    """Whether the per-GPU peak fits one catalog GPU."""

    gpu: str
    gpu_class: str
    memory_bytes: int
    free_bytes: float
    fits: bool


@direct_init
@dataclass(frozen=True)
class Batch:
    """The global batch: micro x accum x replicas examples of seq_len tokens each. An example
    is one sequence, or a chosen/rejected pair of `sequences_per_sample` sequences (rm, dpo,
    orpo, simpo), whose `seq_len` then counts both; for grpo one completion (prompt and
    completion), `generations` of them per prompt."""

    micro_batch: int
    grad_accum: int
    replicas: int
    seq_len: int
    sequences_per_sample: int = 1
    generations: int | None = None  # grpo: completions per prompt
    context_parallel: int = 1  # GPUs each sequence is split over (1 / context_parallel of it each)

    @property
    def prompts_per_step(self) -> int | None:
        """grpo: prompts one optimizer step generates for (global_sequences / generations)."""
        return self.global_sequences // self.generations if self.generations else None

    @property
    def global_sequences(self) -> int:
        """Examples per optimizer step: sequences, or pairs where the stage is paired."""
        return self.micro_batch * self.grad_accum * self.replicas

    @property
    def global_tokens(self) -> int:
        """Tokens per optimizer step."""
        return self.global_sequences * self.seq_len


class StageMemory(NamedTuple):
    """One pipeline rank's memory: the micro-batches its schedule holds in flight, its share of
    the parameters, and its peak phase (the device figure, with its terms)."""

    stage: int
    micro_batches_in_flight: float
    params_fraction: float
    peak: Phase


@direct_init
@dataclass(frozen=True)
class Estimate:
    """Everything `estimate()` knows about one scenario."""

    scenario: Scenario
    model_name: str
    model_source: str
    params: ParamCounts
    peak: Phase
    phases: tuple[Phase, ...]
    states: tuple[Term, ...]
    cpu_offload_bytes: float
    paged_bytes: float
    fit: tuple[FitRow, ...]
    batch: Batch
    stream_pool_bytes: float = 0.0
    allocated_peak: Phase | None = None  # the peak without FSDP2's reserved stream pools
    device: DeviceOverhead | None = None  # the memory outside the caching allocator, by part

    @property
    def allocated_peak_bytes(self) -> float:
        """What torch.cuda.max_memory_allocated() would report (the peak without the blocks
        FSDP2's side streams keep reserved)."""
        return self.allocated_peak.total if self.allocated_peak is not None else self.total_bytes

    @property
    def reserved_peak_bytes(self) -> float:
        """What torch.cuda.max_memory_reserved() would report: the peak without the memory outside
        the caching allocator (the live tensors, the side streams' pools and the cache), summed
        term by term (not the total less the overhead: that rounds with the overhead's size)."""
        return sum(term.value for term in self.peak.terms if term.name != "overhead")

    warnings: tuple[str, ...] = ()
    approximations: tuple[str, ...] = ()
    time: TimeFigures | None = None
    cost: CostFigures | None = None
    energy: EnergyFigures | None = None
    load: LoadFigures | None = None
    gpu: str = ""
    assumptions: dict[str, Any] = field(default_factory=dict)
    sample: TokenShape | None = None  # one image / clip of a diffusion, video or JEPA model
    rollout: RolloutFigures | None = None  # a GRPO step's rollout engine and its figures
    # every pipeline rank's memory (one entry without pipelining); `peak` is the worst's
    stages: tuple[StageMemory, ...] = ()

    @property
    def total_bytes(self) -> float:
        """Peak memory per GPU, overhead included."""
        return self.peak.total

    @property
    def reference_bytes(self) -> float:
        """A frozen reference copy's share of the weights on this GPU (0 without one)."""
        return self.state_bytes("reference")

    def state_bytes(self, name: str) -> float:
        """One of `states` on this GPU by name (0 where the run has none): the frozen reference
        copy, PPO's value model (`critic`: its weights, gradients and optimizer state) and its
        reward model (`reward_model`)."""
        return next((state.value for state in self.states if state.name == name), 0.0)

    @property
    def chosen_fit(self) -> FitRow:
        """The fit table's row of the scenario's GPU."""
        return next(row for row in self.fit if row.gpu == self.gpu)

    @property
    def fits(self) -> bool:
        """Whether the per-GPU peak fits the scenario's GPU."""
        return self.chosen_fit.fits

    def to_dict(self) -> dict[str, Any]:
        """The JSON output contract (see docs/cli.md): the tree as `json_tree` writes it."""
        tree: dict[str, Any] = json_tree(self)
        return tree


#: How a result type's JSON object is made from its value (see `json_tree`).
Converter = Callable[[Any], Any]


@dataclass(frozen=True)
class JsonShape:
    """Where one result type's JSON object differs from its fields. Every field not named here
    is written under its own name, so a field added to a result type reaches the JSON without
    a line here; only a different key, a different value or a figure kept elsewhere is declared."""

    keys: Mapping[str, str] = field(default_factory=dict)  # field -> its public key
    values: Mapping[str, Converter] = field(default_factory=dict)  # field -> JSON value, from the object
    elsewhere: Mapping[str, str] = field(default_factory=dict)  # field -> where the JSON has it instead
    derived: Mapping[str, Converter] = field(default_factory=dict)  # key -> figure added after the fields


def _term_bytes(terms: tuple[Term, ...]) -> dict[str, float]:
    """{'weights_bytes': ..., ...}: each term's value under its name with the unit."""
    return {f"{term.name}_bytes": term.value for term in terms}


def _memory(result: Estimate) -> dict[str, Any]:
    """The `memory` object: the peak's terms with their kinds and notes, each phase, the states."""
    peak = result.peak
    return {
        "per_gpu": {
            **_term_bytes(peak.terms),
            "total_bytes": peak.total,
            "kinds": {term.name: term.kind for term in peak.terms},
            "notes": {term.name: term.note for term in peak.terms},
        },
        "peak_phase": peak.name,
        "phases": {
            phase.name: {"total_bytes": phase.total, **_term_bytes(phase.terms)} for phase in result.phases
        },
        "states": _term_bytes(result.states),
        "cpu_offload_bytes": result.cpu_offload_bytes,
        "paged_bytes": result.paged_bytes,
        "stream_pool_bytes": result.stream_pool_bytes,
        "allocated_peak_bytes": result.allocated_peak_bytes,
        "reserved_peak_bytes": result.reserved_peak_bytes,
        "device_overhead": _device(result.device),
        "rollout": _rollout(result),
        "per_stage": [
            {
                "stage": stage.stage,
                "micro_batches_in_flight": stage.micro_batches_in_flight,
                "params_fraction": stage.params_fraction,
                "peak_phase": stage.peak.name,
                "total_bytes": stage.peak.total,
                **_term_bytes(stage.peak.terms),
            }
            for stage in result.stages
        ],
    }


def rollout_rounds(result: Estimate) -> dict[str, Phase]:
    """A rollout step's rounds and the phase that is each one's peak: rollout (the generation
    moment), scoring, and training (the largest of forward, backward and optimizer); empty
    without a rollout."""
    if result.rollout is None:
        return {}
    phases = {phase.name: phase for phase in result.phases}
    training = max((phases[name] for name in ("forward", "backward", "optimizer")), key=lambda p: p.total)
    return {"rollout": phases["generation"], "scoring": phases["scoring"], "training": training}


def largest_round(rounds: Mapping[str, Phase]) -> str:
    """The round whose peak is the step's."""
    return max(rounds, key=lambda name: rounds[name].total)


def _rollout(result: Estimate) -> dict[str, Any] | None:
    """A rollout stage's engine (its settings with the defaults applied, its memory on one of its
    GPUs and on each trainer GPU) and the memory of each round of the step; None without one."""
    figures = result.rollout
    if figures is None:
        return None
    engine = figures.engine
    rounds = rollout_rounds(result)
    peak_round = largest_round(rounds)
    return {
        **json_tree(figures.rollout),
        "completions_per_step": figures.completions_per_step,
        "prompts_per_step": figures.prompts_per_step,
        "generation_batch": figures.generation_batch,
        "generations_per_step": figures.rollout.generations_per_step,
        "engine_memory": {
            "budget_bytes": engine.budget_bytes,
            "weights_bytes": engine.weights_bytes,
            "activations_bytes": engine.activation_bytes,
            "kv_cache_bytes": engine.kv_cache_bytes,
            "total_bytes": engine.total_bytes,
            "kv_bytes_per_token": engine.kv_bytes_per_token,
            "kv_tokens": engine.kv_tokens,
            "max_sequences": engine.max_sequences,
            "max_num_seqs": engine.max_num_seqs,
            "sequences": engine.sequences,
            "concurrent_sequences": engine.concurrent,
            "waves": engine.waves,
            "problem": engine.problem,
            "kinds": {
                "budget": EXACT,
                "weights": EXACT,
                "activations": ESTIMATE,
                "kv_cache": ESTIMATE if engine.engine == "vllm" else EXACT,
            },
        },
        "trainer_gpu": {
            "generation_bytes": figures.generation_bytes,
            "training_bytes": figures.training_bytes,
            "generation_temporaries_bytes": figures.generation_temporaries,
        },
        "rounds": {name: _round(result, phase) for name, phase in rounds.items()},
        "peak_round": peak_round,
        "peak_role": max(roles := _roles(result, rounds[peak_round]), key=roles.__getitem__),
    }


def _roles(result: Estimate, phase: Phase) -> dict[str, float]:
    """A round's bytes by role: the rollout engine (PPO's: transformers' cache and the generated
    logits the trainer keeps), a frozen reference copy, PPO's value model
    (its states; gradients only in the rounds that hold them) and reward model, and the policy's
    trainer (everything else: its states, activations, temporaries, cache and overhead)."""
    engine, reference = phase.term("rollout").value, result.reference_bytes
    figures = result.rollout
    if figures is not None:  # PPO's generated logits, kept by the trainer (in `logits`)
        engine += figures.generation_logits_bytes if phase.name == "generation" else figures.held_logits_bytes
    roles = {"reference": reference, "engine": engine}
    if result.scenario.stage in CRITIC_STAGES:
        critic = result.state_bytes("critic")
        if not phase.term("gradients").value:  # freed by zero_grad before generation and scoring
            critic -= result.state_bytes("critic_gradients")
        roles |= {"critic": critic, "reward_model": result.state_bytes("reward_model")}
    return {"policy": phase.total - sum(roles.values())} | roles


def _round(result: Estimate, phase: Phase) -> dict[str, Any]:
    """One round of a rollout step: the phase that is its peak, its bytes and their roles."""
    roles = _roles(result, phase)
    return {
        "phase": phase.name,
        "total_bytes": phase.total,
        "engine_bytes": roles["engine"],
        "roles": {f"{role}_bytes": value for role, value in roles.items()},
    }


def _device(device: DeviceOverhead | None) -> dict[str, Any] | None:
    """The memory outside the caching allocator by part (`flat_bytes`: the scenario's own figure)."""
    if device is None:
        return None
    return {
        "context_bytes": float(device.context),
        "workspace_bytes": float(device.workspace),
        "nccl_bytes": float(device.nccl),
        "communicators": int(device.communicators),
        "flat_bytes": float(device.flat),
        "total_bytes": float(device.total),
    }


_IN_MEMORY = "under memory"
_IN_ASSUMPTIONS = "under assumptions"

#: The declared differences between the result types and their JSON objects; a type not listed
#: is written field by field.
JSON_SHAPES: dict[type, JsonShape] = {
    Estimate: JsonShape(
        keys={"model_name": "model", "peak": "memory"},
        values={
            "scenario": lambda result: scenario_to_mapping(result.scenario),
            "model_name": lambda result: {"name": result.model_name, "source": result.model_source},
            "params": lambda result: {**json_tree(result.params), "approximate": bool(result.approximations)},
            "peak": _memory,
        },
        elsewhere={
            "model_source": "under model",
            **dict.fromkeys(
                (
                    "phases",
                    "states",
                    "cpu_offload_bytes",
                    "paged_bytes",
                    "stream_pool_bytes",
                    "allocated_peak",
                    "device",
                    "rollout",
                ),
                _IN_MEMORY,
            ),
            "stages": "under memory, as per_stage",
        },
    ),
    ParamCounts: JsonShape(
        elsewhere=dict.fromkeys(("head", "layers", "linear_weights", "extras"), "not in the contract"),
        derived={"trainable_fraction": lambda counts: counts.trainable_fraction},
    ),
    FitRow: JsonShape(keys={"gpu_class": "class"}),
    Batch: JsonShape(
        derived={
            "global_sequences": lambda batch: batch.global_sequences,
            "global_tokens": lambda batch: batch.global_tokens,
            "prompts_per_step": lambda batch: batch.prompts_per_step,
        }
    ),
    TimeFigures: JsonShape(
        elsewhere={
            "flops": "as flops_per_token, model_flops_per_token, palm_model_flops_per_token",
            "step": "as step_s, step_breakdown_s, dominant_overhead",
            "efficiency_source": _IN_ASSUMPTIONS,
        },
        derived={
            "flops_per_token": lambda time: time.flops.total,
            "model_flops_per_token": lambda time: time.flops.total - time.flops.recompute,
            "palm_model_flops_per_token": lambda time: time.flops.palm_model_flops,
            "step_s": lambda time: time.step.total,
            "step_breakdown_s": lambda time: time.step,
            "dominant_overhead": lambda time: time.step.dominant_overhead(),
            "fixed_s": lambda time: time.fixed_s,
            "run_s": lambda time: time.run_s,
        },
    ),
    CostFigures: JsonShape(derived={"run_usd": lambda cost: cost.run_usd}),
    EnergyFigures: JsonShape(
        elsewhere=dict.fromkeys(("pue", "host_overhead", "idle_fraction", "region_source"), _IN_ASSUMPTIONS),
        derived={"run_kwh": lambda energy: energy.run_kwh, "run_co2e_kg": lambda energy: energy.run_co2e_kg},
    ),
}


def field_names(kind: type) -> tuple[str, ...]:
    """The fields of a result type (a dataclass or a named tuple), in order."""
    names: tuple[str, ...] = getattr(kind, "_fields", None) or tuple(item.name for item in fields(kind))
    return names


def json_tree(value: Any) -> Any:
    """`value` as JSON data: a result dataclass or named tuple as an object of its fields (as
    JSON_SHAPES declares where it differs), other tuples and lists as lists, mappings with their
    values converted."""
    record = (is_dataclass(value) and not isinstance(value, type)) or hasattr(value, "_fields")
    if record:
        shape = JSON_SHAPES.get(type(value))
        names = field_names(type(value))
        if shape is None:
            return {name: json_tree(getattr(value, name)) for name in names}
        out: dict[str, Any] = {}
        for name in names:
            if name in shape.elsewhere:
                continue
            convert = shape.values.get(name)
            out[shape.keys.get(name, name)] = json_tree(convert(value) if convert else getattr(value, name))
        for key, derive in shape.derived.items():
            out[key] = json_tree(derive(value))
        return out
    if isinstance(value, tuple | list):
        return [json_tree(item) for item in value]
    if isinstance(value, Mapping):
        return {key: json_tree(item) for key, item in value.items()}
    return value


CONTEXT_WINDOW = "context window"  # Largest.limit where a sequence search stopped at the model's window


@dataclass(frozen=True)
class Largest:
    """The answer of a largest-that-fits search: `value` is what to use, `exact` the largest value
    whose peak stays within (1 - headroom) of the GPU's memory, rounded down to `multiple`."""

    estimate: Estimate
    field: str
    value: int
    exact: int
    headroom: float
    multiple: int
    # what stopped the search short of memory: CONTEXT_WINDOW (the model's, for seq_len), or ""
    limit: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The `max` object of `estimate --max --json` and `POST /api/estimate?max=`."""
        tree: dict[str, Any] = json_tree(self)
        return tree


# The `max` object sits beside the estimate tree it was searched for.
JSON_SHAPES[Largest] = JsonShape(elsewhere={"estimate": "the estimate tree around the max object"})
