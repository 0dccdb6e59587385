"""The rollout of a GRPO step: which engine generates the completions, where it runs, and the
rules on its fields.

Read from TRL 1.16.0 (trl/trainer/grpo_trainer.py, trl/trainer/grpo_config.py,
trl/generation/vllm_generation.py):

- `generations` completions are sampled per prompt (`num_generations`); `micro_batch` counts
  completions (prompt + completion sequences) per GPU per forward/backward
  (`per_device_train_batch_size`); one generation batch, `micro_batch x grad_accum x replicas`
  completions (`steps_per_generation` = grad_accum, TRL's default), is generated per optimizer
  step, so the prompts per step are that over `generations`, which must divide it (GRPOTrainer
  raises otherwise).
- `seq_len` is one sequence's tokens, prompt + completion; `completion_len` the generated part
  (`max_completion_length`; every completion taken to run to it).
- `rollout_engine`: `hf` (transformers' generate on the policy itself, TRL's default
  `use_vllm: false`) or `vllm`; `rollout_placement`: `colocate` (vLLM in each training
  process, `vllm_mode: colocate`, TRL's default) or `separate` (`trl vllm-serve` on
  `rollout_gpus` GPUs of the `gpus`, `vllm_mode: server`).
- `rollout_memory_fraction`: vLLM's `gpu_memory_utilization`, the share of each engine GPU's
  memory the engine takes for its weights, its activations and its KV cache (0.3 colocated, 0.9
  for vllm-serve).
- `rollout_sleep`: `vllm_enable_sleep_mode`: a colocated engine sleeps at level 2 between
  generations (weights and KV cache released, weights loaded again from the policy).
- `steps_per_generation` (micro-steps per generation batch; TRL's default grad_accum) and
  `num_iterations` (passes over each generation batch; 1): one generation batch is
  `micro_batch x replicas x steps_per_generation` completions, generated every
  `steps_per_generation x num_iterations` micro-steps (GRPOConfig.__post_init__,
  GRPOTrainer._prepare_inputs); `generations` must divide the generation batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Protocol

from trainplan.specs.errors import InputError
from trainplan.specs.loader import load_yaml, sourced_section

ROLLOUT_STAGES = frozenset({"grpo"})
ROLLOUT_ENGINES = ("hf", "vllm")
ROLLOUT_PLACEMENTS = ("colocate", "separate")
#: The scenario fields that describe a rollout (None unless the stage generates), in the order
#: the page's form shows them.
ROLLOUT_FIELDS = (
    "generations",
    "completion_len",
    "rollout_engine",
    "rollout_placement",
    "rollout_gpus",
    "rollout_tensor_parallel",
    "rollout_memory_fraction",
    "rollout_sleep",
    "steps_per_generation",
    "num_iterations",
)

_DEFAULT_KEYS = (
    "generations",
    "completion_len",
    "colocate_memory_fraction",
    "separate_memory_fraction",
    "colocate_batched_tokens",
    "separate_batched_tokens_large",
    "separate_batched_tokens_small",
    "separate_max_sequences_large",
    "separate_max_sequences_small",
    "kv_block_tokens",
)
_RATE_KEYS = ("tp_allreduce_latency_s", "decode_bandwidth_efficiency", "hf_decode_step_s")


@cache
def rollout_data() -> tuple[dict[str, float], dict[str, float]]:
    """(defaults, rates) of data/rollout.yaml, each row checked (value, basis, source, as_of)."""
    raw = load_yaml("rollout.yaml")
    return (
        sourced_section(raw["defaults"], _DEFAULT_KEYS, "rollout.yaml defaults"),
        sourced_section(raw["rates"], _RATE_KEYS, "rollout.yaml rates"),
    )


class RolloutFields(Protocol):
    """The scenario fields the rollout rules read."""

    @property
    def stage(self) -> str: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def grad_accum(self) -> int: ...
    @property
    def tensor_parallel(self) -> int: ...
    @property
    def pipeline_parallel(self) -> int: ...
    @property
    def completion_len(self) -> int | None: ...
    @property
    def generations(self) -> int | None: ...
    @property
    def rollout_engine(self) -> str | None: ...
    @property
    def rollout_placement(self) -> str | None: ...
    @property
    def rollout_gpus(self) -> int | None: ...
    @property
    def rollout_tensor_parallel(self) -> int | None: ...
    @property
    def rollout_memory_fraction(self) -> float | None: ...
    @property
    def rollout_sleep(self) -> bool | None: ...
    @property
    def steps_per_generation(self) -> int | None: ...
    @property
    def num_iterations(self) -> int | None: ...


@dataclass(frozen=True)
class Rollout:
    """A rollout stage's settings with TRL's defaults filled in (`resolved_rollout`).

    `engine_gpus` are the GPUs the engine runs on: all the trainer's when colocated (each
    process runs its own engine, or one per `tensor_parallel` group), `rollout_gpus` when
    separate. `engines` is how many engine replicas there are; each one generates its share
    of the step's completions."""

    generations: int
    completion_len: int
    prompt_len: int
    engine: str
    placement: str
    engine_gpus: int
    tensor_parallel: int
    memory_fraction: float
    sleep: bool
    steps_per_generation: int = 1
    num_iterations: int = 1
    grad_accum: int = 1

    @property
    def generations_per_step(self) -> float:
        """Generation batches per optimizer step: grad_accum micro-steps over the
        steps_per_generation x num_iterations each batch serves."""
        return self.grad_accum / (self.steps_per_generation * self.num_iterations)

    @property
    def misaligned(self) -> bool:
        """Whether a generation batch's completions are trained after the policy has moved
        (GRPOTrainer then scores their old log-probs: grad_accum % generate_every != 0)."""
        return self.grad_accum % (self.steps_per_generation * self.num_iterations) != 0

    @property
    def engines(self) -> int:
        """Engine replicas (data-parallel copies of the engine)."""
        return self.engine_gpus // self.tensor_parallel

    @property
    def colocated(self) -> bool:
        """Whether the engine shares the trainer's GPUs."""
        return self.placement == "colocate"


def trainer_gpus(c: RolloutFields) -> int:
    """GPUs the trainer runs on: `gpus`, less the engine's when it runs apart."""
    rollout = resolved_rollout(c)
    return c.gpus - rollout.engine_gpus if rollout is not None and not rollout.colocated else c.gpus


def resolved_rollout(c: RolloutFields) -> Rollout | None:
    """The rollout that applies (None for a stage that generates nothing): the given fields,
    else TRL 1.16.0's defaults (data/rollout.yaml)."""
    if c.stage not in ROLLOUT_STAGES:
        return None
    defaults, _ = rollout_data()
    engine = c.rollout_engine or "hf"
    placement = c.rollout_placement or "colocate"
    completion = c.completion_len if c.completion_len is not None else int(defaults["completion_len"])
    tensor_parallel = c.rollout_tensor_parallel or 1
    if placement == "separate":
        engine_gpus = c.rollout_gpus or 1
        fraction_key = "separate_memory_fraction"
    else:
        engine_gpus = c.gpus
        fraction_key = "colocate_memory_fraction"
    fraction = c.rollout_memory_fraction
    return Rollout(
        generations=c.generations if c.generations is not None else int(defaults["generations"]),
        completion_len=completion,
        prompt_len=c.seq_len - completion,
        engine=engine,
        placement=placement,
        engine_gpus=engine_gpus,
        tensor_parallel=tensor_parallel,
        memory_fraction=fraction if fraction is not None else defaults[fraction_key],
        sleep=bool(c.rollout_sleep),
        steps_per_generation=c.steps_per_generation or c.grad_accum,
        num_iterations=c.num_iterations or 1,
        grad_accum=c.grad_accum,
    )


def check_rollout(c: RolloutFields) -> None:
    """The rollout fields' rules; an InputError names the field and what is allowed."""
    if c.stage not in ROLLOUT_STAGES:
        for name in ROLLOUT_FIELDS:
            if getattr(c, name) is not None:
                raise InputError(
                    name, f"applies to a stage that generates (grpo); the stage here is {c.stage}"
                )
        return
    rollout = resolved_rollout(c)
    assert rollout is not None
    if rollout.generations < 2:
        raise InputError(
            "generations",
            f"{rollout.generations}: GRPO compares completions of one prompt with each other; give 2 or more",
        )
    if rollout.completion_len >= c.seq_len:
        raise InputError(
            "completion_len",
            f"{rollout.completion_len}: must be below seq_len ({c.seq_len}), which counts the prompt "
            "and the completion of one sequence",
        )
    if rollout.engine == "hf":
        for name in (
            "rollout_placement",
            "rollout_gpus",
            "rollout_tensor_parallel",
            "rollout_memory_fraction",
        ):
            value = getattr(c, name)
            if value is not None and not (name == "rollout_placement" and value == "colocate"):
                raise InputError(
                    name,
                    "applies to a vLLM engine (rollout_engine vllm); transformers' generate runs on "
                    "the policy itself",
                )
    if c.rollout_sleep is not None and not (rollout.engine == "vllm" and rollout.colocated):
        raise InputError(
            "rollout_sleep", "applies to a colocated vLLM engine (rollout_engine vllm, colocate)"
        )
    if c.rollout_gpus is not None and not (rollout.engine == "vllm" and not rollout.colocated):
        raise InputError(
            "rollout_gpus", "applies to an engine on GPUs of its own (rollout_placement separate)"
        )
    if not rollout.colocated and rollout.engine_gpus >= c.gpus:
        raise InputError(
            "rollout_gpus",
            f"{rollout.engine_gpus}: the engine's GPUs are part of gpus ({c.gpus}); leave at least one "
            "for the trainer",
        )
    if rollout.engine_gpus % rollout.tensor_parallel:
        where = "rollout_gpus" if not rollout.colocated else "gpus"
        raise InputError(
            "rollout_tensor_parallel",
            f"{rollout.tensor_parallel} does not divide the engine's {rollout.engine_gpus} GPUs ({where})",
        )
    model_parallel = c.tensor_parallel * c.pipeline_parallel
    trainer = trainer_gpus(c)
    if trainer % model_parallel == 0:
        completions = c.micro_batch * rollout.steps_per_generation * (trainer // model_parallel)
        if completions % rollout.generations:
            raise InputError(
                "generations",
                f"{rollout.generations} does not divide the {completions} completions of one generation "
                "batch (micro_batch x steps_per_generation, grad_accum by default, x data-parallel "
                "replicas), as TRL's GRPOConfig requires",
            )
