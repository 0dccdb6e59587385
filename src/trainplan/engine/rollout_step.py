"""A GRPO step's rollout as the estimate uses it: the engine's memory on the trainer's GPUs and
on its own, the prompts and completions of a step, and the seconds spent generating and syncing
weights (terms/rollout.py has the formulas and their sources)."""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.engine.per_gpu import Hardware, link_bytes_per_s
from trainplan.engine.per_replica import Coefficients, frozen_base_bytes, reference_copy_format
from trainplan.engine.terms.rollout import (
    EngineMemory,
    GenerationSeconds,
    engine_memory,
    generation_seconds,
    ppo_rollout_bytes,
)
from trainplan.inputs.catalogs.gpus import GpuSpec
from trainplan.specs.rollout import Rollout, resolved_rollout
from trainplan.specs.scenario import Scenario, data_parallel
from trainplan.specs.validity import QUANTISED_BASES


@dataclass(frozen=True)
class RolloutFigures:
    """What a rollout stage adds to the estimate.

    `training_bytes`: the engine's bytes on each trainer GPU while the policy is scored and
    trained (a colocated vLLM engine that does not sleep keeps its whole budget);
    `generation_bytes`: the engine's on each trainer GPU while it generates (0 for an engine on
    GPUs of its own); `generation_temporaries`: what transformers' generate adds on the trainer's
    allocator (the prefill's one-layer working set, and the full weights gathered under ZeRO-3)."""

    rollout: Rollout
    engine: EngineMemory
    engine_weights_bytes: float  # the engine's whole weights (all of its tensor-parallel ranks)
    completions_per_step: int  # trained per optimizer step
    prompts_per_step: int
    training_bytes: float
    generation_bytes: float
    generation_temporaries: float
    generation_batch: int = 0  # completions one generation makes (micro x replicas x steps_per_generation)
    # PPO on each trainer GPU (0 for GRPO): its scoring forwards' working set (GRPO's is one
    # micro-batch's), the generated logits kept from one generation to the next, and the logits
    # alive at the generating moment (terms/rollout.py PpoRolloutBytes)
    scoring_bytes: float = 0.0
    held_logits_bytes: float = 0.0
    generation_logits_bytes: float = 0.0


def rollout_figures(coeffs: Coefficients, scenario: Scenario, gpu: GpuSpec) -> RolloutFigures | None:
    """The rollout of `scenario` on `gpu` (None for a stage that generates nothing)."""
    rollout = resolved_rollout(scenario)
    if rollout is None:
        return None
    replicas = data_parallel(scenario)
    # one process's generation batch: micro_batch x steps_per_generation completions
    local = scenario.micro_batch * rollout.steps_per_generation
    completions = local * replicas
    trained = scenario.micro_batch * scenario.grad_accum * replicas  # per optimizer step
    value_bytes = coeffs.precision.activation_bytes
    base = coeffs.base
    if base in QUANTISED_BASES:
        # TRL loads a bitsandbytes 4-bit policy into vLLM with bitsandbytes quantisation
        weights = frozen_base_bytes(coeffs.model, coeffs.counts, base or "nf4", value_bytes)
    else:
        weights = float((coeffs.counts.total - coeffs.counts.lora) * value_bytes)
    engine = engine_memory(
        coeffs.model,
        rollout,
        gpu_memory_bytes=gpu.memory_bytes,
        weights_bytes=weights,
        value_bytes=value_bytes,
        completions=completions,
        local_completions=local,
    )
    tp = scenario.tensor_parallel
    if rollout.engine == "hf":
        # generate's prefill of the prompts it takes at once (one layer's working set), and the
        # full weights ZeRO-3 gathers for it
        tokens = engine.concurrent * rollout.prompt_len
        prefill = coeffs.activations.layer_working_forward * tokens / tp
        sharded = scenario.zero_stage == 3 and replicas > 1
        gathered = coeffs.work.weights_16bit_bytes / tp * (1 - 1 / replicas) if sharded else 0.0
        if not rollout.forward_batch:
            return RolloutFigures(
                rollout,
                engine,
                0.0,
                trained,
                trained // rollout.generations,
                0.0,
                engine.total_bytes / tp,
                prefill + gathered,
                completions,
            )
        # PPO (terms/rollout.py ppo_rollout_bytes)
        copy = reference_copy_format(scenario)
        ppo = ppo_rollout_bytes(
            coeffs.model,
            rollout,
            engine,
            local_completions=local,
            scoring_value_bytes=coeffs.precision.weight_bytes
            if copy is None
            else (4 if copy == "fp32" else value_bytes),
            layer_working_per_token=coeffs.activations.layer_working_forward,
            scorers=tuple(
                spec for spec in (coeffs.critic.model if coeffs.critic else None, coeffs.reward) if spec
            ),
        )
        return RolloutFigures(
            rollout,
            engine,
            0.0,
            trained,
            trained,
            0.0,
            ppo.generation_cache,
            prefill + gathered,
            completions,
            ppo.scoring,
            ppo.scores,
            ppo.generation_logits,
        )
    colocated = rollout.colocated
    return RolloutFigures(
        rollout,
        engine,
        weights,
        trained,
        trained // rollout.generations,
        engine.budget_bytes if colocated and not rollout.sleep else 0.0,
        engine.budget_bytes if colocated else 0.0,
        0.0,
        completions,
    )


@dataclass(frozen=True)
class RolloutSeconds:
    """Seconds per optimizer step the rollout takes: generating, and loading the policy's new
    weights into the engine (each once per generation batch, `generations_per_step` batches a
    step)."""

    generation: GenerationSeconds
    weight_sync: float


def rollout_seconds(
    coeffs: Coefficients, scenario: Scenario, hardware: Hardware, figures: RolloutFigures, engine_gpu: GpuSpec
) -> RolloutSeconds:
    """The rollout's seconds per step.

    Generation: each engine generates its share at once (terms/rollout.py). Weight sync (vLLM):
    GRPOTrainer's sync_weights before each generation: under ZeRO-3 or FSDP the policy's shards
    are gathered first; LoRA adapters are merged and the merged 16-bit weights sent. Colocated,
    each weight is copied on the GPU (read and written at the memory bandwidth); vllm-serve
    receives them by NCCL broadcast from the first trainer rank, over the network when the
    engine's GPUs are in other nodes (trainplan takes them to be once gpus exceed a node)."""
    rollout, engine = figures.rollout, figures.engine
    flops = coeffs.work.flops
    forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
    if rollout.engine == "hf":
        tp = scenario.tensor_parallel
        read = coeffs.work.weights_16bit_bytes / tp
        gpus = tp
        bandwidth = hardware.memory_bandwidth_bytes_per_s
        peak = hardware.peak_flops_per_s
    else:
        read = engine.weights_bytes
        gpus = rollout.tensor_parallel
        bandwidth = engine_gpu.memory_bandwidth_bytes_per_s
        peak = hardware.attention_peak_flops_per_s  # the engine runs at the 16-bit rate
    generation = generation_seconds(
        coeffs.model,
        rollout,
        engine,
        forward_flops_per_token=forward,
        read_weight_bytes=read,
        peak_flops_per_s=peak,
        efficiency=hardware.efficiency,
        bandwidth_bytes_per_s=bandwidth,
        gpus=gpus,
        tp_link_bytes_per_s=float(link_bytes_per_s(hardware, gpus, False)) if gpus > 1 else 0.0,
    )
    per_step = rollout.generations_per_step
    generation = GenerationSeconds(generation.prefill * per_step, generation.decode * per_step)
    if rollout.engine == "hf":
        return RolloutSeconds(generation, 0.0)
    replicas = data_parallel(scenario)
    sixteen_bit = coeffs.work.weights_16bit_bytes / scenario.tensor_parallel / scenario.pipeline_parallel
    spans = scenario.gpus > scenario.gpus_per_node
    gather = 0.0
    if scenario.zero_stage == 3 and replicas > 1:
        extent = replicas * scenario.tensor_parallel
        gather = sixteen_bit * (replicas - 1) / replicas / float(link_bytes_per_s(hardware, extent, spans))
    if rollout.colocated:
        sync = (
            2 * figures.engine_weights_bytes / rollout.tensor_parallel / hardware.memory_bandwidth_bytes_per_s
        )
    else:
        link = float(link_bytes_per_s(hardware, rollout.engine_gpus + 1, spans))
        sync = figures.engine_weights_bytes / link
    return RolloutSeconds(generation, (gather + sync) * per_step)
