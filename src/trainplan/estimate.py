"""The one entry point: a scenario in, an Estimate out. CLI, API and web page all call this."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainplan.catalog import resolve_model
from trainplan.errors import InputError
from trainplan.gpus import GPU_CLASSES, GpuSpec, find_gpu, gpu_catalog
from trainplan.model import ModelSpec, block_linears
from trainplan.result import ESTIMATE, EXACT, Batch, Estimate, FitRow, Phase, Term
from trainplan.runtime import cost_figures, energy_figures, load_figures, time_figures
from trainplan.scenario import Scenario, data_parallel, scenario_from_mapping
from trainplan.terms.activations import ActivationMode
from trainplan.terms.memory import (
    Sharding,
    activation_bytes,
    layer_weight_bytes,
    logits_bytes,
    optimizer_state_bytes,
    optimizer_transient_bytes,
    shard_states,
)
from trainplan.terms.params import ParamCounts, block_params, count_params, targeted
from trainplan.terms.recipes import (
    ADAPTER_RECIPE,
    BASE_WEIGHT_BYTES,
    OPTIMIZERS,
    PRECISIONS,
    QLORA_DEQUANT_BYTES_PER_WEIGHT,
    QUANTISED_BASES,
    PrecisionRecipe,
)
from trainplan.terms.timing import INTER_NODE_EFFICIENCY, INTRA_NODE_EFFICIENCY
from trainplan.units import GIB


def estimate(scenario: Scenario | Mapping[str, Any], *, model: ModelSpec | None = None) -> Estimate:
    """Estimate parameters, per-GPU memory (by phase) and fit for one scenario.

    `model` may be given to skip resolving `scenario.model` (a parsed uploaded config).
    """
    if not isinstance(scenario, Scenario):
        scenario = scenario_from_mapping(scenario)
    spec = model if model is not None else resolve_model(scenario.model)
    gpu = find_gpu(scenario.gpu)
    _check_parallel(spec, scenario)
    recipe = PRECISIONS[scenario.precision]
    counts = count_params(spec, scenario.method, scenario.lora)
    base = resolved_base_weights(scenario)
    phases, states, offloaded = _memory(spec, scenario, recipe, counts, base)
    peak = max(phases, key=lambda phase: phase.total)
    share = _pipeline_share(spec, counts, scenario.pipeline_parallel)
    time = time_figures(spec, scenario, gpu, recipe, counts, share, base)
    cost = cost_figures(scenario, gpu, time)
    energy = energy_figures(scenario, gpu, time)
    return Estimate(
        scenario=scenario,
        model_name=spec.name,
        model_source=spec.source,
        params=counts,
        peak=peak,
        phases=phases,
        states=states,
        cpu_offload_bytes=offloaded,
        fit=fit_rows(peak.total),
        batch=Batch(scenario.micro_batch, scenario.grad_accum, data_parallel(scenario), scenario.seq_len),
        warnings=tuple(_warnings(spec, scenario, gpu, recipe)),
        approximations=spec.approximations,
        time=time,
        cost=cost,
        energy=energy,
        load=load_figures(scenario, gpu, counts, recipe),
        gpu=gpu.name,
        assumptions={
            "base_weights": base,
            "base_weight_bytes_per_param": BASE_WEIGHT_BYTES[base] if base else None,
            "overhead_bytes": scenario.overhead_gib * GIB,
            "precision": recipe.note,
            "optimizer": OPTIMIZERS[scenario.optimizer].note,
            "data_parallel": data_parallel(scenario),
            "efficiency": time.efficiency if time else None,
            "efficiency_source": time.efficiency_source if time else None,
            "comm_overlap": scenario.comm_overlap,
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
        },
    )


def resolved_base_weights(scenario: Scenario) -> str | None:
    """The frozen base's storage format: given, else nf4 for QLoRA, else the weight dtype."""
    if scenario.method == "full":
        return None
    if scenario.base_weights is not None:
        return scenario.base_weights
    if scenario.method == "qlora":
        return "nf4"
    return {"fp32": "fp32", "fp16-mixed": "fp16", "amp-fp16": "fp16"}.get(scenario.precision, "bf16")


def _check_parallel(model: ModelSpec, scenario: Scenario) -> None:
    """Tensor parallel must split heads evenly; pipeline parallel needs a layer per stage."""
    tp, pp = scenario.tensor_parallel, scenario.pipeline_parallel
    heads = model.blocks[0].attention.num_heads
    kv_heads = model.blocks[0].attention.num_kv_heads
    if heads % tp:
        raise InputError("tensor_parallel", f"{tp} does not divide the {heads} attention heads")
    if kv_heads % tp and tp % kv_heads:
        raise InputError("tensor_parallel", f"{tp} and the {kv_heads} key/value heads do not nest")
    if pp > model.num_layers:
        raise InputError("pipeline_parallel", f"must be <= the {model.num_layers} layers")


def _pipeline_share(model: ModelSpec, counts: ParamCounts, pp: int) -> float:
    """Fraction of parameters on the heaviest pipeline stage: layers split evenly (rounded up),
    the embedding on the first stage, the head and final norm on the last."""
    if pp == 1:
        return 1.0
    per_layer = [block_params(block, model) for block in model.blocks for _ in range(block.count)]
    size = math.ceil(len(per_layer) / pp)
    stages = [sum(per_layer[i : i + size]) for i in range(0, len(per_layer), size)]
    stages[0] += counts.embedding
    stages[-1] += counts.head + model.final_norms * model.norm_params
    return max(stages) / counts.total


def _memory(
    model: ModelSpec,
    scenario: Scenario,
    recipe: PrecisionRecipe,
    counts: ParamCounts,
    base: str | None,
) -> tuple[tuple[Phase, ...], tuple[Term, ...], float]:
    """Phases of the steady-state step on the busiest GPU, and the model states."""
    optimizer = OPTIMIZERS[scenario.optimizer]
    full = scenario.method == "full"
    tp, pp, dp = scenario.tensor_parallel, scenario.pipeline_parallel, data_parallel(scenario)
    linears = [
        (block.count, linear) for block in model.blocks for linear in block_linears(block, model.hidden_size)
    ]
    compute_bytes = recipe.activation_bytes
    # peft keeps adapters (and so their gradients and optimizer state) in fp32 whatever the
    # base precision (`autocast_adapter_dtype`, on by default)
    state_recipe = recipe if full else ADAPTER_RECIPE
    if full:
        frozen_params = counts.total - counts.trainable
        trainable_weights: float = counts.trainable * recipe.weight_bytes
        frozen_weights: float = frozen_params * compute_bytes
        rows_cols = sum(n * lin.copies * (lin.in_features + lin.out_features) for n, lin in linears)
        rows_cols += counts.total - counts.linear_weights
        largest = max([lin.in_features * lin.out_features for _, lin in linears] + [counts.embedding])
        layer_bytes = layer_weight_bytes(model, recipe.weight_bytes)
        layer_grads = layer_weight_bytes(model, recipe.grad_bytes)
    else:
        base_bytes = BASE_WEIGHT_BYTES[base or "bf16"]
        quantised = counts.linear_weights
        scales = 0.0
        if base == "int8":
            scales = 4 * sum(n * lin.copies * lin.out_features for n, lin in linears)
        other_bytes: float = compute_bytes if base in QUANTISED_BASES else base_bytes
        frozen_weights = quantised * base_bytes + scales + (counts.total - quantised) * other_bytes
        trainable_weights = counts.lora * state_recipe.weight_bytes
        rank = scenario.lora.rank
        targeted_linears = [(n, lin) for n, lin in linears if targeted(lin, scenario.lora.targets)]
        rows_cols = sum(
            n * lin.copies * (2 * rank + lin.in_features + lin.out_features) for n, lin in targeted_linears
        )
        largest = max(rank * max(lin.in_features, lin.out_features) for _, lin in targeted_linears)
        layer_bytes = layer_weight_bytes(model, base_bytes)
        layer_grads = 0.0
    share = _pipeline_share(model, counts, pp) * pp
    states = shard_states(
        trainable_weights=trainable_weights * share,
        frozen_weights=frozen_weights * share,
        gradients=counts.trainable * state_recipe.grad_bytes * share,
        optimizer=optimizer_state_bytes(counts.trainable, rows_cols, state_recipe, optimizer) * share,
        optimizer_transient=optimizer_transient_bytes(counts.trainable, largest, state_recipe, optimizer)
        * share,
        largest_layer_weights=layer_bytes,
        largest_layer_grads=layer_grads,
        sharding=Sharding(dp, scenario.zero_stage, tp, pp, scenario.offload),
    )
    lora_names = frozenset(
        lin.name for _, lin in linears if not full and targeted(lin, scenario.lora.targets)
    )
    residual = recipe.residual_bytes if full else (4 if base == "fp32" else compute_bytes)
    mode = ActivationMode(
        activation_bytes=compute_bytes,
        residual_bytes=residual,
        weights_trainable=full,
        lora_targets=lora_names,
        attention=scenario.attention,
        checkpointing=scenario.activation_checkpointing,
        tensor_parallel=tp,
        sequence_parallel=scenario.sequence_parallel,
        dropout=model.dropout > 0,
    )
    tokens = scenario.micro_batch * scenario.seq_len
    acts = activation_bytes(
        model,
        mode,
        micro_batch=scenario.micro_batch,
        seq_len=scenario.seq_len,
        pipeline_parallel=pp,
        grad_accum=scenario.grad_accum,
        head_trainable=full,
    )
    held, during_loss, during_backward = logits_bytes(
        model.vocab_size, tokens, compute_bytes, tp, model.final_logit_softcap
    )
    zero3 = scenario.zero_stage == 3 and dp > 1
    matmul_weights = counts.linear_weights + model.vocab_size * model.hidden_size
    autocast_cache = (
        recipe.autocast_copy_bytes * matmul_weights * share / (tp * pp) / (dp if zero3 else 1)
        if full
        else 0.0
    )
    dequant = 0.0
    if base in QUANTISED_BASES:
        dequant = 2 * max(lin.in_features * lin.out_features for _, lin in linears) / tp
    frozen_casts = 0.0
    if not full and base == "fp32" and compute_bytes == 2:
        # autocast casts frozen fp32 weights to half per call and autograd keeps the copy
        frozen_casts = 2 * counts.linear_weights * share / (tp * pp)
    if scenario.activation_checkpointing == "full":
        frozen_casts = 2 * layer_weight_bytes(model, 1) / tp if frozen_casts else 0.0
    head_grad = (
        model.vocab_size
        * model.hidden_size
        * recipe.grad_bytes
        / tp
        / (dp if scenario.zero_stage >= 2 and dp > 1 else 1)
        if full
        else 0.0
    )
    overhead = scenario.overhead_gib * GIB
    resident_grads = states.gradients if scenario.grad_accum > 1 else 0.0

    def phase(name: str, grads: float, activations: float, logits: float, temporaries: float) -> Phase:
        return Phase(
            name,
            (
                Term(
                    "weights",
                    states.weights,
                    EXACT,
                    "parameters held on this GPU at their storage precision",
                ),
                Term("gradients", grads, EXACT, "gradients present at this moment of the step"),
                Term("optimizer", states.optimizer, EXACT, "optimizer state (and fp32 master copy)"),
                Term(
                    "activations",
                    activations,
                    ESTIMATE,
                    "tensors saved for backward (Korthikanti et al. 2022, per architecture)",
                ),
                Term(
                    "logits",
                    logits,
                    ESTIMATE,
                    "LM-head logits and cross-entropy buffers (batch x seq x vocab)",
                ),
                Term(
                    "temporaries",
                    temporaries,
                    ESTIMATE,
                    "autocast weight copies, optimizer-step and dequantisation scratch, ZeRO-3 gathered"
                    " layers",
                ),
                Term(
                    "overhead",
                    overhead,
                    ESTIMATE,
                    "CUDA context, kernel workspaces, allocator fragmentation (user-set)",
                ),
            ),
        )

    stored = (
        acts.stored + acts.outside + (frozen_casts if scenario.activation_checkpointing != "full" else 0.0)
    )
    working = states.zero3_working_set + dequant
    recomputed = acts.recompute + (frozen_casts if scenario.activation_checkpointing == "full" else 0.0)
    # start of backward: the loss gradient over the vocabulary, then the last layer recomputed
    backward_start = phase(
        "backward",
        max(resident_grads, head_grad),
        stored + (recomputed if recomputed + held > during_backward else 0.0),
        max(during_backward, held + recomputed)
        - (recomputed if recomputed + held > during_backward else 0.0),
        working,
    )
    # end of backward: every gradient present; the embedding's gradient is made as a new tensor
    # and added when the embedding is tied to the head or gradients accumulate
    # (tied: the new gradient and the sum with the head's are both alive for a moment)
    embedding_grad = 0.0
    if full and (model.tied_embeddings or scenario.grad_accum > 1):
        copies = 2 if model.tied_embeddings else 1
        embedding_grad = copies * model.vocab_size * model.hidden_size * recipe.grad_bytes / tp
    backward_end = phase("backward", states.gradients, 0.0, 0.0, embedding_grad + working)
    phases = (
        phase("forward", resident_grads, stored, during_loss, autocast_cache + working),
        max(backward_start, backward_end, key=lambda moment: moment.total),
        phase("optimizer", states.gradients, 0.0, 0.0, states.optimizer_transient),
    )
    state_terms = (
        Term("weights", states.weights, EXACT, "all weights on this GPU"),
        Term("gradients", states.gradients, EXACT, "all gradients on this GPU"),
        Term("optimizer", states.optimizer, EXACT, "optimizer state on this GPU"),
    )
    return phases, state_terms, states.offloaded_to_cpu


def fit_rows(total_bytes: float) -> tuple[FitRow, ...]:
    """Every catalog GPU: does the per-GPU peak fit its memory, and by how much."""
    order = {name: index for index, name in enumerate(GPU_CLASSES)}
    rows = [
        FitRow(
            gpu.name,
            gpu.gpu_class,
            gpu.memory_bytes,
            gpu.memory_bytes - total_bytes,
            total_bytes <= gpu.memory_bytes,
        )
        for gpu in gpu_catalog()
    ]
    return tuple(sorted(rows, key=lambda row: (order[row.gpu_class], row.memory_bytes)))


def _warnings(model: ModelSpec, scenario: Scenario, gpu: GpuSpec, recipe: PrecisionRecipe) -> list[str]:
    """Settings that have no effect or that the chosen GPU cannot run as asked."""
    notes = []
    if scenario.zero_stage and data_parallel(scenario) == 1:
        notes.append("zero_stage has no effect with a single data-parallel replica")
    if gpu.dense_flops_per_s.get(recipe.compute) is None:
        notes.append(
            f"{gpu.name} has no {recipe.compute} tensor cores: {scenario.precision} will not run as assumed"
        )
    if scenario.optimizer == "paged-adamw-8bit":
        notes.append("paged optimizer state can spill to CPU memory under pressure; counted as resident")
    if model.encoder_decoder:
        notes.append("encoder-decoder: the target sequence is assumed as long as the source (seq_len each)")
    if any(extra.params for extra in model.extras):
        names = ", ".join(extra.name for extra in model.extras)
        notes.append(f"{names}: weights counted; their activations are not modelled (small next to the LM)")
    if scenario.method == "qlora" and any(block.mlp.is_moe for block in model.blocks):
        notes.append("QLoRA on MoE: routed experts assumed quantised like other linear layers")
    return notes
