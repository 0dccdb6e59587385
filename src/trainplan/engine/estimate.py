"""The one entry point: a scenario in, an Estimate out. CLI, API and web page all call this."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from itertools import repeat
from operator import attrgetter
from typing import Any

from trainplan.engine.per_gpu import (
    OFFLOAD_CODES,
    TERMS,
    Layout,
    Memory,
    memory,
    stage_memory,
    worse_stage,
)
from trainplan.engine.per_replica import Coefficients, coefficients
from trainplan.engine.result import Batch, Estimate, FitRow, Phase, StageMemory, Term, TermLabels, record
from trainplan.engine.rollout_step import RolloutFigures, rollout_figures
from trainplan.engine.samples import resolved_ema, sample_assumptions, sample_shape
from trainplan.engine.terms.device import DeviceOverhead, cache_fraction, device_rates, layout_overhead
from trainplan.engine.terms.pipeline import SCHEDULE_CODES, pipeline_in_flight
from trainplan.engine.terms.precisions import (
    BASE_WEIGHT_BYTES,
    OPTIMIZERS,
    QLORA_DEQUANT_BYTES_PER_WEIGHT,
)
from trainplan.engine.terms.timing import (
    EFFICIENCY_FACTOR_BY_MODEL_KIND,
    INTER_NODE_EFFICIENCY,
    INTRA_NODE_EFFICIENCY,
    efficiency_kind,
)
from trainplan.engine.time_cost_energy import (
    cost_figures,
    energy_figures,
    host_memory_bytes_per_s,
    linear_efficiency_ratio,
    load_figures,
    run_domain,
    time_figures,
)
from trainplan.inputs.catalogs.cost_inputs import unpublished_links
from trainplan.inputs.catalogs.gpus import GPU_CLASSES, GpuSpec, gpu_catalog
from trainplan.inputs.resolve import chosen_gpu, resolve_model
from trainplan.specs.labels import ESTIMATE, EXACT
from trainplan.specs.model import ModelSpec
from trainplan.specs.pipeline import V_SCHEDULES
from trainplan.specs.presets import adapter_dtype_summary, recipe_summary
from trainplan.specs.rollout import rollout_data
from trainplan.specs.scenario import (
    Scenario,
    data_parallel,
    default_scenario,
    resolved_base_weights,
    resolved_schedule,
    scenario_from_mapping,
    shard_ranks,
)
from trainplan.specs.stages import CRITIC_STAGES, resolved_loss, resolved_reference, sequences_per_sample
from trainplan.specs.units import GIB
from trainplan.specs.validity import QUANTISED_BASES, WithDomain, check_layout

__all__ = [
    "device_of",
    "estimate",
    "fit_rows",
    "layout_of",
    "resolved_base_weights",
    "resolved_ema",
    "sample_shape",
]

KINDS = {
    "weights": (
        EXACT,
        "parameters held on this GPU at their storage precision (with an EMA copy, frozen "
        "encoders and a preference stage's reference copy kept on the GPU, where there are any)",
    ),
    "gradients": (EXACT, "gradients present at this moment of the step"),
    "optimizer": (EXACT, "optimizer state (and fp32 master copy)"),
    "activations": (ESTIMATE, "tensors saved for backward (Korthikanti et al. 2022, per architecture)"),
    "logits": (
        ESTIMATE,
        "LM-head logits and cross-entropy buffers (batch x seq x vocab; hidden-sized with a fused loss); "
        "PPO's generated fp32 logits too, kept from one generation to the next",
    ),
    "temporaries": (
        ESTIMATE,
        "autocast weight copies, optimizer-step and dequantisation scratch, ZeRO-3 gathered layers, "
        "reduce-scatter buffers and the all-gather stream's pool; a diffusion model's frozen "
        "encoders' working set while they run",
    ),
    "rollout": (
        EXACT,
        "a GRPO or PPO step's rollout on this GPU: a colocated vLLM engine's budget "
        "(rollout_memory_fraction x the GPU's memory, exact; split in memory.rollout), or "
        "transformers' generate's KV caches and logits (an estimate); not in allocated_peak_bytes",
    ),
    "cache": (
        ESTIMATE,
        "blocks the CUDA caching allocator keeps reserved beyond the live tensors (a fraction of "
        "them, fitted on traced steps replayed through the allocator's rules)",
    ),
    "overhead": (
        ESTIMATE,
        "device memory outside PyTorch's allocator: CUDA context, cuBLAS workspace, NCCL buffers per "
        "communicator (or the scenario's overhead_gib)",
    ),
}


def estimate(scenario: Scenario | Mapping[str, Any], *, model: ModelSpec | None = None) -> Estimate:
    """Estimate parameters, per-GPU memory (by phase), fit, time, cost, energy and loading.

    `model` may be given to skip resolving `scenario.model` (a parsed uploaded config).
    """
    if not isinstance(scenario, Scenario):
        scenario = scenario_from_mapping(scenario)
    spec = model if model is not None else resolve_model(scenario.model, scenario.force, scenario.vae)
    gpu, gpu_record = chosen_gpu(scenario)
    domain = run_domain(scenario, gpu)
    # the rules read scale_up_domain; a record's domain past the node is lent to them (the
    # scenario leaves its own null then)
    reaches = scenario.scale_up_domain is None and domain > scenario.gpus_per_node
    check_layout(WithDomain(scenario, domain) if reaches else scenario, spec)
    coeffs = coefficients(spec, scenario)
    device = device_of(scenario, gpu)
    rollout = rollout_figures(coeffs, scenario, gpu)
    layout = layout_of(coeffs, scenario, device, rollout)
    mem, stages = _memories(coeffs, scenario, layout)
    phases = _phases(mem)
    peak = max(phases, key=_total)
    stages = stages or (StageMemory(0, 1.0, 1.0, peak),)  # one micro-batch at a time
    paged = float(mem.paged)
    load = load_figures(scenario, gpu, coeffs.counts, coeffs.precision)
    time = time_figures(coeffs, scenario, gpu, layout, load, rollout)
    cost = cost_figures(scenario, gpu, time)
    energy = energy_figures(scenario, gpu, time)
    base = coeffs.base
    return Estimate(
        scenario=scenario,
        model_name=spec.name,
        model_source=spec.source,
        params=coeffs.counts,
        peak=peak,
        phases=phases,
        states=tuple(
            record(Term, (name, float(value), EXACT, f"all {name} on this GPU"))
            for name, value in mem.states.items()
        ),
        cpu_offload_bytes=float(mem.offloaded),
        paged_bytes=paged,
        stream_pool_bytes=float(mem.stream_pool.get(peak.name, 0.0)),
        allocated_peak=_allocated_peak(mem),
        device=device,
        fit=_engine_fit(_with_chosen(_fit(phases, rollout), gpu, peak.total), gpu, rollout),
        batch=Batch(
            scenario.micro_batch,
            scenario.grad_accum,
            layout.data_parallel,
            coeffs.seq_len,
            sequences_per_sample(scenario.stage),
            rollout.rollout.generations if rollout else None,
            scenario.context_parallel,
        ),
        warnings=tuple(
            _warnings(spec, scenario, gpu, coeffs)
            + _paged_warning(paged, peak.total, gpu, scenario)
            + _rollout_warnings(rollout)
            + _ppo_warnings(scenario)
        ),
        approximations=spec.approximations,
        time=time,
        cost=cost,
        energy=energy,
        load=load,
        gpu=gpu.name,
        assumptions={
            "base_weights": base,
            "gpu_record": gpu_record,
            "base_weight_bytes_per_param": BASE_WEIGHT_BYTES[base] if base else None,
            "overhead_bytes": device.total,
            "cache_fraction": layout.cache_fraction,
            "precision": coeffs.precision.note,
            "optimizer": OPTIMIZERS[scenario.optimizer].note,
            "data_parallel": layout.data_parallel,
            # the ranks the states shard over: data- and context-parallel, per HSDP group
            "shard_group": layout.shard,
            "efficiency": time.efficiency if time else None,
            "efficiency_source": time.efficiency_source if time else None,
            "fp8_matmul_efficiency_ratio": linear_efficiency_ratio(gpu, coeffs.precision, scenario.mfu)
            if time
            else None,
            "comm_overlap": scenario.comm_overlap,
            "host_memory_bytes_per_s": host_memory_bytes_per_s(scenario)
            if scenario.offload != "none"
            else None,
            "intra_node_bus_efficiency": INTRA_NODE_EFFICIENCY,
            "inter_node_bus_efficiency": INTER_NODE_EFFICIENCY,
            "qlora_dequant_bytes_per_weight": QLORA_DEQUANT_BYTES_PER_WEIGHT
            if base in QUANTISED_BASES
            else None,
            "usd_per_gpu_hour": cost.usd_per_gpu_hour,
            "rate_source": cost.rate_source,
            "discount": cost.discount,
            "pue": energy.pue,
            "host_overhead": energy.host_overhead,
            "idle_fraction": energy.idle_fraction,
            "gco2e_per_kwh": energy.gco2e_per_kwh,
            "region_source": energy.region_source,
            "recipe": recipe_summary(scenario),
            "adapter_dtype": adapter_dtype_summary(spec.kind, scenario, coeffs.precision.compute),
            **sample_assumptions(spec, scenario),
            **stage_assumptions(scenario, coeffs),
            **rollout_assumptions(rollout),
        },
        sample=coeffs.sample,
        rollout=rollout,
        stages=stages,
    )


def _rank_fractions(coeffs: Coefficients, scenario: Scenario) -> tuple[float, ...]:
    """Each pipeline rank's share of the parameters, as the scenario's schedule places chunks."""
    v_shape = resolved_schedule(scenario) in V_SCHEDULES
    return coeffs.rank_fractions(scenario.pipeline_parallel, scenario.virtual_stages, v_shape)


def _memories(
    coeffs: Coefficients, scenario: Scenario, layout: Layout
) -> tuple[Memory, tuple[StageMemory, ...]]:
    """The memory of the worst GPU and, under pipeline parallelism, of every rank at its own
    peak phase (per_gpu.stage_memory): the worst is the first rank's or the last's, as
    per_gpu.memory picks it, here from the ranks already worked out."""
    pp = layout.pipeline_parallel
    if pp == 1:
        return memory(coeffs, layout), ()
    fractions = _rank_fractions(coeffs, scenario)
    ranks = [stage_memory(coeffs, layout, rank, fraction) for rank, fraction in enumerate(fractions)]
    first, last = ranks[0], ranks[-1]
    stages = tuple(
        StageMemory(
            rank,
            float(
                pipeline_in_flight(
                    layout.pipeline_schedule, pp, layout.grad_accum, layout.virtual_stages, rank
                )
            ),
            fractions[rank],
            max(_phases(each), key=_total),
        )
        for rank, each in enumerate(ranks)
    )
    return worse_stage(first, last), stages


def stage_assumptions(scenario: Scenario, coeffs: Coefficients) -> dict[str, object]:
    """What a language model's estimate assumed about its stage (empty for other kinds): the
    stage, the reference that applied (given or the trainer's default) and its copy's bytes per
    replica, and how many sequences one micro-batch element runs."""
    if coeffs.model.kind != "llm":
        return {}
    return {
        "stage": scenario.stage,
        "reference": resolved_reference(scenario),
        "reference_source": "given" if scenario.reference is not None else "trainer default",
        "reference_weight_bytes": coeffs.reference.resident_bytes,
        "sequences_per_sample": sequences_per_sample(scenario.stage),
        # PPO's value and reward models, each with a one-score head
        **(
            {
                "value_model": f"{coeffs.critic.model.name}, one-score head",
                "reward_model": f"{coeffs.reward.name}, one-score head",
            }
            if coeffs.critic is not None and coeffs.reward is not None
            else {}
        ),
    }


def rollout_assumptions(rollout: RolloutFigures | None) -> dict[str, object]:
    """What a rollout stage's estimate assumed (empty without one): the engine's settings with
    TRL's defaults applied, and the generation rates (data/rollout.yaml)."""
    if rollout is None:
        return {}
    _, rates = rollout_data()
    settings = rollout.rollout
    return {
        "rollout_engine": settings.engine,
        "rollout_placement": settings.placement,
        "rollout_memory_fraction": settings.memory_fraction if settings.engine == "vllm" else None,
        "generations": settings.generations,
        "completion_len": settings.completion_len,
        "prompt_len": settings.prompt_len,
        "decode_bandwidth_efficiency": rates["decode_bandwidth_efficiency"],
        "hf_decode_step_s": rates["hf_decode_step_s"] if settings.engine == "hf" else None,
    }


def _rollout_warnings(rollout: RolloutFigures | None) -> list[str]:
    """What a rollout stage's engine cannot do as asked, and what its generation assumes."""
    if rollout is None:
        return []
    engine, settings = rollout.engine, rollout.rollout
    notes = [
        f"generation assumes every completion runs to completion_len ({settings.completion_len:,} "
        "tokens): shorter completions generate faster"
    ]
    if engine.problem is not None:
        notes.insert(0, f"the vLLM engine cannot start: {engine.problem}")
    elif engine.engine == "vllm" and engine.concurrent < min(engine.sequences, engine.max_num_seqs):
        notes.insert(
            0,
            f"the engine's KV cache holds {engine.max_sequences:,} sequences of {engine.sequence_tokens:,} "
            f"tokens at once: its {engine.sequences:,} completions run in {engine.waves} waves",
        )
    return notes


def _ppo_warnings(scenario: Scenario) -> list[str]:
    """What a PPO estimate models that TRL's PPOTrainer would not do: checkpointing (it never
    enables it; the TRL reader sets none)."""
    if scenario.stage not in CRITIC_STAGES or scenario.activation_checkpointing == "none":
        return []
    return [
        f"activation_checkpointing {scenario.activation_checkpointing} checkpoints the policy, not the "
        "value model; TRL's PPOTrainer never enables checkpointing (its configs read as none), so "
        "under TRL set activation_checkpointing none"
    ]


def _engine_fit(rows: tuple[FitRow, ...], gpu: GpuSpec, rollout: RolloutFigures | None) -> tuple[FitRow, ...]:
    """The fit table with the scenario's GPU marked as not fitting when its vLLM engine cannot
    start there (no KV-cache block, or none for one whole sequence: vLLM refuses to)."""
    if rollout is None or rollout.engine.problem is None:
        return rows
    return tuple(row._replace(fits=False) if row.gpu == gpu.name else row for row in rows)


def device_of(scenario: Scenario, gpu: GpuSpec) -> DeviceOverhead:
    """The scenario's memory outside the caching allocator on `gpu` (terms/device.py)."""
    return layout_overhead(
        scenario.overhead_gib,
        device_rates(gpu),
        scenario.tensor_parallel,
        scenario.pipeline_parallel,
        data_parallel(scenario),
        scenario.context_parallel,
        scenario.data_parallel_replicate,
        scenario.expert_parallel,
    )


def layout_of(
    coeffs: Coefficients, scenario: Scenario, device: DeviceOverhead, rollout: RolloutFigures | None = None
) -> Layout:
    """The scenario's parallel layout as formula inputs (Python numbers), with a rollout
    stage's engine bytes on each trainer GPU."""
    fractions = _rank_fractions(coeffs, scenario) if scenario.pipeline_parallel > 1 else (None,)
    return Layout(
        tensor_parallel=scenario.tensor_parallel,
        pipeline_parallel=scenario.pipeline_parallel,
        data_parallel=data_parallel(scenario),
        zero_stage=scenario.zero_stage,
        micro_batch=scenario.micro_batch,
        grad_accum=scenario.grad_accum,
        stage_fraction=coeffs.stage_fraction(scenario.pipeline_parallel),
        first_fraction=fractions[0],
        last_fraction=fractions[-1],
        offload=OFFLOAD_CODES[scenario.offload],
        sequence_parallel=scenario.sequence_parallel,
        context_parallel=scenario.context_parallel,
        data_parallel_replicate=scenario.data_parallel_replicate,
        pipeline_schedule=SCHEDULE_CODES[resolved_schedule(scenario)],
        virtual_stages=scenario.virtual_stages,
        expert_parallel=scenario.expert_parallel,
        expert_imbalance=scenario.expert_imbalance,
        overhead_bytes=device.total,
        cache_fraction=cache_fraction(scenario.expandable_segments, scenario.cache_fraction),
        rollout=rollout is not None,
        rollout_bytes=rollout.training_bytes if rollout else 0.0,
        generation_bytes=rollout.generation_bytes if rollout else 0.0,
        generation_temporaries=rollout.generation_temporaries if rollout else 0.0,
        scoring_bytes=rollout.scoring_bytes if rollout else 0.0,
        held_logits=rollout.held_logits_bytes if rollout else 0.0,
        generation_logits=rollout.generation_logits_bytes if rollout else 0.0,
    )


def _phases(mem: Memory) -> tuple[Phase, ...]:
    """The memory phases as named, labelled terms (a rollout stage's generation and scoring
    first, then forward, backward and optimizer)."""
    return tuple(_phase(name, terms) for name, terms in mem.phases.items())


def _fit(phases: tuple[Phase, ...], rollout: RolloutFigures | None) -> tuple[FitRow, ...]:
    """The fit table. A colocated vLLM engine takes a share of each GPU's own memory, so on each
    catalog GPU the phases that hold it are counted with that GPU's share in place of the
    scenario's GPU's; and a vLLM engine fits a GPU only where its share holds its weights, its
    activations and one sequence's KV cache (vLLM refuses to start otherwise)."""
    peak = max(phase.total for phase in phases)
    if rollout is None or rollout.engine.engine != "vllm":
        return fit_rows(peak)
    engine = rollout.engine
    fraction, budget, least = rollout.rollout.memory_fraction, engine.budget_bytes, engine.least_bytes
    if not rollout.rollout.colocated:
        return tuple(
            row._replace(fits=row.fits and fraction * row.memory_bytes >= least) for row in fit_rows(peak)
        )
    fixed = max((p.total for p in phases if p.term("rollout").value == 0), default=0.0)
    shared = max((p.total - budget for p in phases if p.term("rollout").value > 0), default=0.0)
    rows = []
    for row in fit_rows(0.0):
        total = max(fixed, shared + fraction * row.memory_bytes)
        fits = total <= row.memory_bytes and fraction * row.memory_bytes >= least
        rows.append(row._replace(free_bytes=row.memory_bytes - total, fits=fits))
    return tuple(rows)


def _allocated_peak(mem: Memory) -> Phase:
    """The peak moment as max_memory_allocated() would see it (FSDP2's stream pools left out)."""
    return _phase(*mem.allocated())


def _phase(name: str, terms: Mapping[str, Any]) -> Phase:
    """One moment's terms, named and labelled (KINDS), in TERMS order."""
    return Phase(name, tuple(map(float, map(terms.__getitem__, TERMS))), _TERM_LABELS)


#: A phase's total, for picking the peak (in C, without a lambda's frame).
_total = attrgetter("total")

#: The names, kinds and notes of the memory terms (KINDS), in TERMS order: every phase's labels.
_TERM_LABELS: TermLabels = (
    TERMS,
    tuple(KINDS[term][0] for term in TERMS),
    tuple(KINDS[term][1] for term in TERMS),
)


def fit_rows(total_bytes: float) -> tuple[FitRow, ...]:
    """Every catalog GPU: does the per-GPU peak fit its memory, and by how much. (Built column
    by column, as `_phase` builds its terms; the free bytes and the verdicts come from float
    methods mapped in C over the memories as floats, the same numbers as `memory - total` and
    `total <= memory` on the integer bytes, which stay exact below 2**53.)"""
    names, classes, memories, as_floats = _fit_columns()
    total = float(total_bytes)  # a float's methods, whatever number the caller gives
    free = map(total.__rsub__, as_floats)
    fits = map(total.__le__, as_floats)
    return tuple(map(record, repeat(FitRow), zip(names, classes, memories, free, fits, strict=True)))


def _with_chosen(rows: tuple[FitRow, ...], gpu: GpuSpec, total_bytes: float) -> tuple[FitRow, ...]:
    """The fit table with the chosen GPU's row as the scenario has it: a GPU of the user's file
    added, a catalog GPU whose memory the scenario overrode (`gpu_memory_gib`) replaced."""
    row = FitRow(
        gpu.name,
        gpu.gpu_class,
        gpu.memory_bytes,
        gpu.memory_bytes - total_bytes,
        total_bytes <= gpu.memory_bytes,
    )
    for index, other in enumerate(rows):
        if other.gpu == gpu.name:
            return rows if other == row else (*rows[:index], row, *rows[index + 1 :])
    return (*rows, row)


@lru_cache(maxsize=1)
def _fit_columns() -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...], tuple[float, ...]]:
    """The names, classes and memory bytes (as integers and as floats) of every catalog GPU, by
    class then memory."""
    order = {name: index for index, name in enumerate(GPU_CLASSES)}
    gpus = sorted(gpu_catalog(), key=lambda gpu: (order[gpu.gpu_class], gpu.memory_bytes))
    return (
        tuple(gpu.name for gpu in gpus),
        tuple(gpu.gpu_class for gpu in gpus),
        tuple(gpu.memory_bytes for gpu in gpus),
        tuple(float(gpu.memory_bytes) for gpu in gpus),
    )


def _paged_warning(paged: float, peak: float, gpu: GpuSpec, scenario: Scenario) -> list[str]:
    """What the paged optimizer state does on this GPU: stays on it while there is room beside
    the resident peak, else its excess pages to the host (bitsandbytes' paged optimizers:
    cudaMallocManaged, evicted by the driver under pressure) and each step reads it back."""
    if not paged:
        return []
    free = max(gpu.memory_bytes - peak, 0.0)
    text = (
        f"paged: {paged / GIB:.2f} GiB of optimizer state is in unified memory, outside the "
        f"{peak / GIB:.2f} GiB peak (it pages to the host when the GPU is short)"
    )
    if paged <= free:
        return [f"{text}; it fits in the {free / GIB:.2f} GiB left free on {gpu.name}"]
    if peak > gpu.memory_bytes:
        return [f"{text}; the resident peak alone is more than the {gpu.name}'s memory"]
    host = (paged - free) * min(scenario.gpus, scenario.gpus_per_node)
    return [
        f"{text}; {free / GIB:.2f} GiB is left free on {gpu.name}, so {(paged - free) / GIB:.2f} GiB "
        f"per GPU pages to the host ({host / GIB:.2f} GiB of host RAM per node) and moves over "
        "PCIe at every optimizer step, which the step time does not include"
    ]


def _fsdp_notes(scenario: Scenario) -> list[str]:
    """FSDP2 settings changed from their defaults where no weights are sharded."""
    if scenario.zero_stage == 3 and shard_ranks(scenario) > 1:
        return []
    defaults = default_scenario()
    changed = [
        name
        for name in (
            "zero3_master",
            "fsdp_wrap",
            "fsdp_reduce_dtype",
            "fsdp_prefetch",
            "reshard_after_forward",
        )
        if getattr(scenario, name) != getattr(defaults, name)
    ]
    return [f"{name} has no effect without ZeRO-3 over several data-parallel ranks" for name in changed]


def _warnings(model: ModelSpec, scenario: Scenario, gpu: GpuSpec, coeffs: Coefficients) -> list[str]:
    """Settings that have no effect or that the chosen GPU cannot run as asked."""
    recipe = coeffs.precision
    notes = list(model.notes)  # what the model reading left out (a wrapper's vision tower)
    if scenario.zero_stage and shard_ranks(scenario) == 1:
        notes.append("zero_stage has no effect with a single data-parallel replica")
    if model.kind == "llm" and 0 < model.context_window < scenario.seq_len:
        notes.append(
            f"seq_len {scenario.seq_len:,} is beyond {model.name}'s context window of "
            f"{model.context_window:,} tokens (its config's max_position_embeddings or rope scaling): "
            "the memory is estimated, but the model was never trained on positions past it"
        )
    notes.extend(_fsdp_notes(scenario))
    if gpu.dense_flops_per_s.get(recipe.compute) is None:
        fallback = (
            " (timed at its fp16 rate)"
            if gpu.dense_flops_per_s.get("fp16") and recipe.compute == "bf16"
            else ""
        )
        notes.append(
            f"{gpu.name} has no {recipe.compute} support: "
            f"{scenario.precision} will not run as assumed{fallback}"
        )
    if gpu.tdp_w is None:
        notes.append(f"{gpu.name} has no published power figure: energy is not estimated")
    links = unpublished_links()
    if gpu.pcie_gen is None:
        notes.append(
            f"{gpu.name} has no published host link: PCIe gen {links.pcie_gen} x16 assumed for "
            "loading and host traffic"
        )
    if gpu.scale_out_bytes_per_s is None and scenario.gpus > scenario.gpus_per_node:
        notes.append(
            f"{gpu.name} has no published network figure: "
            f"{links.network_bytes_per_s * 8 / 1e9:g} Gb/s per GPU assumed between nodes"
        )
    if resolved_loss(scenario) != "chunked" and scenario.loss_chunks != default_scenario().loss_chunks:
        notes.append(f"loss_chunks has no effect with loss = {resolved_loss(scenario)} (only with chunked)")
    if scenario.compile and model.kind != "llm":
        notes.append(
            f"compile: torch.compile's saved tensors and fusion are modelled for language models; "
            f"this {model.kind} model is estimated as eager"
        )
    elif scenario.compile:
        notes.append(
            "compile: the blocks' saved tensors and fused norms, RoPE and gated activations are "
            "modelled; the final norm and a standard loss are taken as eager, and kernel-launch "
            "savings are not modelled"
        )
    if scenario.activation_checkpointing == "op" and scenario.method != "full":
        notes.append(
            "op-level SAC with adapters: torchtitan's every-second-matmul count is applied to the base "
            "matmuls only (torchtitan trains full models; the adapters' small matmuls are not counted)"
        )
    if scenario.method == "full" and scenario.lora.dropout > 0:
        notes.append("lora.dropout has no effect on a full fine-tune")
    kind = efficiency_kind(model)
    if kind in EFFICIENCY_FACTOR_BY_MODEL_KIND and scenario.mfu is None:
        notes.append(
            f"{kind} time uses an efficiency fitted to few published training runs "
            "(docs/accuracy.md, 'Diffusion and JEPA training time'); set mfu to use your own"
        )
    elif kind != "llm" and scenario.mfu is None:
        notes.append(
            f"{kind} time uses the language models' default efficiency: it is not yet calibrated "
            "against published training runs of these models (set mfu to use your own)"
        )
    if model.encoder_decoder:
        notes.append("encoder-decoder: the target sequence is assumed as long as the source (seq_len each)")
    if any(extra.params and not extra.in_layers for extra in model.extras):
        names = ", ".join(extra.name for extra in model.extras if not extra.in_layers)
        notes.append(f"{names}: weights counted; their activations are not modelled (small next to the LM)")
    if scenario.method == "qlora" and any(block.mlp and block.mlp.is_moe for block in model.blocks):
        notes.append("QLoRA on MoE: routed experts assumed quantised like other linear layers")
    return notes
