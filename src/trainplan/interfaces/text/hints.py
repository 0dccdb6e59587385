"""'Worth knowing': what a change of one setting would do, as true numbers.

Each hint re-runs `estimate()` with the changed setting; nothing is extrapolated here. The
policy (which changes are worth trying for this scenario) is the only thing this module adds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.plan_request import CP_LEAST_TOKENS
from trainplan.engine.result import Estimate
from trainplan.inputs.catalogs.models import find_model_record
from trainplan.inputs.resolve import catalog_spec
from trainplan.interfaces.text.phrasing import format_duration, format_usd, with_article
from trainplan.specs.errors import TrainplanError
from trainplan.specs.model import ModelSpec
from trainplan.specs.rollout import resolved_rollout
from trainplan.specs.scenario import Scenario, scenario_from_mapping, scenario_to_mapping, shard_ranks
from trainplan.specs.stages import CRITIC_STAGES, resolved_loss
from trainplan.specs.units import format_gib

MAX_GPUS_TRIED = 4096


@dataclass(frozen=True)
class Hint:
    """One suggestion: the settings to change and the estimate they give."""

    id: str
    title: str
    text: str
    change: dict[str, Any]
    total_bytes: float
    fits: bool
    total_s: float | None = None
    usd: float | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        data = dataclasses.asdict(self)
        data["tags"] = list(self.tags)
        return data


class _Trier:
    """Runs estimate() for changed scenarios, reusing the resolved model."""

    def __init__(self, scenario: Scenario, model: ModelSpec | None) -> None:
        self.scenario = scenario
        record = find_model_record(scenario.model) if model is None else None
        self.model = catalog_spec(record.name) if record is not None else model

    def __call__(self, change: dict[str, Any]) -> Estimate | None:
        """The estimate with `change` applied, or None when that combination is invalid."""
        try:
            return estimate(scenario_from_mapping(change, base=self.scenario), model=self.model)
        except TrainplanError:
            return None


def _pct(new: float, old: float) -> str:
    """'23% less' / '12% more'."""
    if old <= 0:
        return ""
    delta = (new - old) / old
    return f"{abs(delta):.0%} {'less' if delta < 0 else 'more'}"


def _memory_text(result: Estimate, base: Estimate) -> str:
    verdict = "fits" if result.fits else "still does not fit"
    return (
        f"saves {format_gib(base.total_bytes - result.total_bytes)} here: "
        f"{format_gib(result.total_bytes)} per GPU ({_pct(result.total_bytes, base.total_bytes)}), "
        f"{verdict} the {result.gpu}"
    )


def _hint(hint_id: str, title: str, text: str, change: dict[str, Any], result: Estimate, *tags: str) -> Hint:
    return Hint(
        hint_id,
        title,
        text,
        change,
        result.total_bytes,
        result.fits,
        result.time.run_s if result.time else None,
        result.cost.run_usd if result.cost else None,
        tags,
    )


def _memory_savers(scenario: Scenario) -> list[tuple[str, str, dict[str, Any]]]:
    """Single changes that lower per-GPU memory, in order of how little they change the run."""
    # the frameworks' savers first: where two set the same field, "All of these together" keeps
    # the later, stronger one (full checkpointing over op-level SAC)
    savers: list[tuple[str, str, dict[str, Any]]] = _framework_savers(scenario) + _rollout_savers(scenario)
    # TRL's PPOTrainer never checkpoints (estimate.py warns where a PPO scenario asks)
    if scenario.activation_checkpointing != "full" and scenario.stage not in CRITIC_STAGES:
        savers.append(
            ("checkpointing", "Turn on full activation checkpointing", {"activation_checkpointing": "full"})
        )
    change: dict[str, Any]
    if scenario.micro_batch > 1:
        change = {"micro_batch": 1, "grad_accum": scenario.grad_accum * scenario.micro_batch}
        savers.append(("micro_batch", "Micro-batch 1, more accumulation (same global batch)", change))
    if scenario.gpus > 1 and scenario.zero_stage < 3:
        savers.append(("zero3", "Shard everything with ZeRO-3 / FSDP", {"zero_stage": 3}))
    experts = _expert_split(scenario)
    if experts:
        savers.append(
            (
                "expert_parallel",
                f"Split the routed experts over {experts} GPUs (expert parallelism)",
                {"expert_parallel": experts},
            )
        )
    split = _context_split(scenario)
    if split:
        savers.append(
            (
                "context_parallel",
                f"Split each sequence over {split} GPUs (context parallelism)",
                {"context_parallel": split},
            )
        )
    if scenario.method == "full" and scenario.optimizer not in ("adamw-8bit", "paged-adamw-8bit", "sgd"):
        savers.append(("optimizer", "8-bit AdamW optimizer state", {"optimizer": "adamw-8bit"}))
    if scenario.method == "full":
        savers.append(("lora", "LoRA instead of a full fine-tune", {"method": "lora", "base_weights": None}))
    if scenario.method != "qlora":
        savers.append(
            ("qlora", "QLoRA: 4-bit NF4 base with LoRA adapters", {"method": "qlora", "base_weights": None})
        )
    if scenario.offload == "none" and scenario.method == "full":
        change = {"offload": "optimizer"}
        if scenario.gpus > 1 and scenario.zero_stage == 0:
            change["zero_stage"] = 1
        savers.append(("offload", "Offload optimizer state to CPU memory", change))
    return savers


def _expert_split(scenario: Scenario) -> int:
    """Every rank the expert ranks can be carved from (tensor_parallel x the shard ranks),
    where ZeRO leaves a state unsharded (under ZeRO-3 the experts' share is the dense one
    already) and the scenario splits no experts yet; 0 otherwise. A model without routed
    experts, or whose experts it does not divide, is refused by the estimate the hint runs."""
    ranks = scenario.tensor_parallel * shard_ranks(scenario)
    if scenario.zero_stage >= 3 or scenario.expert_parallel > 1 or ranks < 2:
        return 0
    return ranks


def _context_split(scenario: Scenario) -> int:
    """The next context-parallel degree (twice today's) where the planner would search it (each
    GPU keeping at least CP_LEAST_TOKENS of a sequence it splits evenly) and the GPUs hold it;
    0 where there is none."""
    split = 2 * scenario.context_parallel
    model_parallel = scenario.tensor_parallel * scenario.pipeline_parallel * split
    long_enough = scenario.seq_len % (2 * split) == 0 and scenario.seq_len // split >= CP_LEAST_TOKENS
    return split if long_enough and scenario.gpus % model_parallel == 0 else 0


def _engine_share(result: Estimate) -> bool:
    """Whether a colocated vLLM engine takes a share of each GPU (so the memory that fits differs
    from one GPU to the next)."""
    figures = result.rollout
    return figures is not None and figures.engine.engine == "vllm" and figures.rollout.colocated


#: The forward batch PPO's saver offers (a judgement: small enough to bound the cache and the
#: scoring forwards, large enough to keep generation batched).
PPO_FORWARD_BATCH = 8


def _rollout_savers(scenario: Scenario) -> list[tuple[str, str, dict[str, Any]]]:
    """A colocated vLLM engine's savers: sleeping while the policy trains (TRL's
    vllm_enable_sleep_mode), a smaller share of the GPU, or a GPU of its own; PPO's: a smaller
    forward batch."""
    rollout = resolved_rollout(scenario)
    if rollout is not None and rollout.forward_batch:
        # PPO: generate and score fewer prompts at once (the KV cache and the scoring forwards
        # shrink; the generated logits, a whole generation batch's, do not)
        chunk = min(rollout.forward_batch, scenario.micro_batch * scenario.grad_accum)
        if chunk > PPO_FORWARD_BATCH:
            text = f"Generate and score {PPO_FORWARD_BATCH} prompts at a time instead of {chunk}"
            return [("rollout_forward_batch", text, {"rollout_forward_batch": PPO_FORWARD_BATCH})]
        return []
    if rollout is None or rollout.engine != "vllm" or not rollout.colocated:
        return []
    savers: list[tuple[str, str, dict[str, Any]]] = []
    if not rollout.sleep:
        savers.append(
            ("rollout_sleep", "Let the vLLM engine sleep while the policy trains", {"rollout_sleep": True})
        )
    smaller = round(rollout.memory_fraction - 0.1, 2)
    if smaller >= 0.1:
        savers.append(
            (
                "rollout_fraction",
                f"Give the vLLM engine {smaller:g} of each GPU instead of {rollout.memory_fraction:g}",
                {"rollout_memory_fraction": smaller},
            )
        )
    if scenario.gpus > 1:
        change = {"rollout_placement": "separate", "rollout_gpus": 1, "rollout_sleep": None}
        savers.append(("rollout_separate", "Run the vLLM engine on one GPU of its own", change))
    return savers


def _framework_savers(scenario: Scenario) -> list[tuple[str, str, dict[str, Any]]]:
    """The memory savers of torchtune, torchtitan, Liger and peft that this scenario does not use yet."""
    savers: list[tuple[str, str, dict[str, Any]]] = []
    if resolved_loss(scenario) == "standard":
        savers.append(("chunked_loss", "Chunked cross-entropy (torchtune)", {"loss": "chunked"}))
    if scenario.kernels == "eager":
        savers.append(("kernels", "Liger's fused RMSNorm and SwiGLU kernels", {"kernels": "liger"}))
    if scenario.activation_checkpointing in ("none", "selective") and scenario.stage not in CRITIC_STAGES:
        savers.append(
            (
                "op_checkpointing",
                "Op-level selective checkpointing (torchtitan)",
                {"activation_checkpointing": "op"},
            )
        )
    if not scenario.activation_offload and scenario.activation_checkpointing != "none":
        savers.append(
            ("activation_offload", "Offload activations to CPU memory", {"activation_offload": True})
        )
    free_to_step = scenario.grad_accum == 1 and scenario.offload == "none"
    if scenario.method == "full" and not scenario.optimizer_in_backward and free_to_step:
        savers.append(
            ("optimizer_in_backward", "Step the optimizer in backward", {"optimizer_in_backward": True})
        )
    if scenario.kbit_upcast:
        savers.append(
            (
                "kbit_upcast",
                "Keep the unquantised parts in 16 bits (torchtune, Unsloth)",
                {"kbit_upcast": False},
            )
        )
    if scenario.method != "full" and scenario.lora.dropout > 0:
        lora = {**scenario_to_mapping(scenario)["lora"], "dropout": 0.0}
        savers.append(("lora_dropout", "LoRA dropout 0 (peft's default)", {"lora": lora}))
    return savers


def _more_gpus(scenario: Scenario, trier: Callable[[dict[str, Any]], Estimate | None]) -> Hint | None:
    """The fewest GPUs (doubling) with ZeRO-3 that make the peak fit."""
    gpus = scenario.gpus
    while gpus < MAX_GPUS_TRIED:
        gpus *= 2
        change = {"gpus": gpus, "zero_stage": 3}
        result = trier(change)
        if result is not None and result.fits:
            text = f"{format_gib(result.total_bytes)} per GPU on {gpus} x {result.gpu}"
            if result.time:
                text += f"; the run takes {format_duration(result.time.run_s)}"
            return _hint("more_gpus", f"{gpus} GPUs with ZeRO-3", text, change, result, "fit")
    return None


def _smallest_fitting_gpu(result: Estimate) -> str | None:
    """The catalog GPU with the least memory that holds this peak."""
    fitting = [row for row in result.fit if row.fits]
    return min(fitting, key=lambda row: row.memory_bytes).gpu if fitting else None


def _when_short(scenario: Scenario, base: Estimate, trier: _Trier) -> list[Hint]:
    """What would make a scenario that does not fit, fit."""
    hints: list[Hint] = []
    combined: dict[str, Any] = {}
    for hint_id, title, change in _memory_savers(scenario):
        result = trier(change)
        if result is None or result.total_bytes >= base.total_bytes:
            continue
        hints.append(_hint(hint_id, title, _memory_text(result, base), change, result, "fit"))
        combined.update(change)
    if hints and not any(h.fits for h in hints) and len(combined) > 1:
        result = trier(combined)
        if result is not None and result.total_bytes < min(h.total_bytes for h in hints):
            hints.append(
                _hint(
                    "combined", "All of these together", _memory_text(result, base), combined, result, "fit"
                )
            )
    more = _more_gpus(scenario, trier)
    if more is not None:
        hints.append(more)
    bigger = _smallest_fitting_gpu(base)
    if bigger is not None:
        # another catalog GPU as it is: a memory given for the chosen one does not carry over
        switch: dict[str, Any] = {"gpu": bigger}
        if scenario.gpu_memory_gib is not None:
            switch["gpu_memory_gib"] = None
        result = trier(switch)
        if result is not None:
            text = (
                f"the smallest catalog GPU that holds {format_gib(base.total_bytes)} per GPU"
                if not _engine_share(base)
                else "the smallest catalog GPU that holds the trainer and the engine's share of it"
            )
            hints.append(_hint("gpu", f"Use {with_article(bigger)}", text, switch, result, "fit"))
    hints.sort(key=lambda hint: (not hint.fits, hint.total_bytes))
    return hints


def _saves_time(result: Estimate, base: Estimate, threshold: float = 0.03) -> bool:
    """Whether `result` trains at least `threshold` faster than `base`."""
    if result.time is None or base.time is None:
        return False
    return result.time.run_s < base.time.run_s * (1 - threshold)


def _faster(result: Estimate, base: Estimate) -> str:
    if result.time is None or base.time is None:
        return ""
    change = _pct(result.time.run_s, base.time.run_s)
    return f"; the run takes {format_duration(result.time.run_s)} ({change} time)"


def _when_fits(scenario: Scenario, base: Estimate, trier: _Trier) -> list[Hint]:
    """Headroom worth using, and cheaper ways to the same run."""
    hints: list[Hint] = []
    change: dict[str, Any]
    if scenario.activation_checkpointing != "none":
        change = {"activation_checkpointing": "none"}
        result = trier(change)
        if result is not None and result.fits:
            text = f"{format_gib(result.total_bytes)} per GPU still fits{_faster(result, base)}: no recompute"
            hints.append(
                _hint("no_checkpointing", "Checkpointing off still fits", text, change, result, "speed")
            )
    largest: tuple[dict[str, Any], Estimate] | None = None
    micro = scenario.micro_batch
    while micro * 2 <= scenario.micro_batch * scenario.grad_accum:
        micro *= 2
        accum = scenario.micro_batch * scenario.grad_accum // micro
        change = {"micro_batch": micro, "grad_accum": accum}
        result = trier(change)
        if result is None or not result.fits:
            break
        largest = (change, result)
    if largest is not None and _saves_time(largest[1], base):
        change, result = largest
        text = (
            f"micro-batch {change['micro_batch']} x {change['grad_accum']} accum keeps the global batch and "
            f"needs {format_gib(result.total_bytes)} per GPU{_faster(result, base)}"
        )
        hints.append(_hint("micro_batch", "Room for a larger micro-batch", text, change, result, "speed"))
    if scenario.method != "qlora":
        change = {"method": "qlora", "base_weights": None}
        result = trier(change)
        smallest = _smallest_fitting_gpu(result) if result is not None else None
        if result is not None and smallest is not None and smallest != _smallest_fitting_gpu(base):
            text = (
                f"{format_gib(result.total_bytes)} per GPU, small enough for {with_article(smallest)}"
                f"{_faster(result, base)}"
            )
            hints.append(_hint("qlora", "QLoRA would fit a smaller GPU", text, change, result, "memory"))
    return hints


def _cost_hints(scenario: Scenario, base: Estimate, trier: _Trier) -> list[Hint]:
    """Spot or committed pricing for the same run, when the catalog has a price."""
    if base.cost is None or base.cost.usd is None or scenario.pricing != "on-demand":
        return []
    hints = []
    for plan in ("spot", "committed"):
        change = {"pricing": plan}
        result = trier(change)
        cost = result.cost if result is not None else None
        if result is None or cost is None or cost.run_usd is None or base.cost.run_usd is None:
            continue
        text = (
            f"{format_usd(cost.run_usd)} instead of {format_usd(base.cost.run_usd)} "
            f"({cost.discount:.0%} off the on-demand rate)"
        )
        hints.append(_hint(plan, f"{plan.capitalize()} pricing", text, change, result, "cost"))
    return hints


def hints(scenario: Scenario, base: Estimate, model: ModelSpec | None = None) -> list[Hint]:
    """The hints for `scenario`, whose estimate is `base`; `model` skips re-resolving it."""
    trier = _Trier(scenario, model)
    found = _when_short(scenario, base, trier) if not base.fits else _when_fits(scenario, base, trier)
    return found + _cost_hints(scenario, base, trier)
