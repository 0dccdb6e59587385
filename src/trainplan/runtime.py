"""Time, cost, energy and load figures for a scenario whose memory is already estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainplan.gpus import GpuSpec
from trainplan.model import ModelSpec
from trainplan.scenario import Scenario, data_parallel
from trainplan.tables import (
    discounts,
    energy_defaults,
    find_region,
    parse_load_source,
    pcie_practical_bytes_per_s,
    rates,
)
from trainplan.terms.cost import co2e_kg, cost_usd, energy_kwh, gpu_power_w
from trainplan.terms.flops import FlopsPerToken, flops_per_token
from trainplan.terms.loading import load_seconds
from trainplan.terms.params import ParamCounts
from trainplan.terms.recipes import QLORA_DEQUANT_BYTES_PER_WEIGHT, QLORA_RECOMPUTE_FACTOR, PrecisionRecipe
from trainplan.terms.timing import (
    FALLBACK_NETWORK_BYTES_PER_S,
    INTER_NODE_EFFICIENCY,
    INTRA_NODE_EFFICIENCY,
    StepTime,
    default_efficiency,
    exposed_seconds,
    gather_or_scatter_seconds,
    pipeline_bubble_seconds,
    ring_allreduce_seconds,
)

DEFAULT_TRAIN_TOKENS = 2.0e9


@dataclass(frozen=True)
class TimeFigures:
    """How long the run takes."""

    flops: FlopsPerToken
    peak_flops_per_s: float
    compute_precision: str
    efficiency: float
    efficiency_source: str
    step: StepTime
    steps: int
    train_tokens: float
    tokens_per_s: float
    total_s: float
    gpu_hours: float
    mfu: float
    hfu: float


@dataclass(frozen=True)
class CostFigures:
    """What the run costs."""

    usd: float | None
    usd_per_million_tokens: float | None
    usd_per_gpu_hour: float | None
    pricing: str
    discount: float
    rate_source: str


@dataclass(frozen=True)
class EnergyFigures:
    """Energy and emissions of the run."""

    kwh: float | None
    co2e_kg: float | None
    region: str
    gco2e_per_kwh: float
    gpu_power_w: float | None
    pue: float
    host_overhead: float
    idle_fraction: float
    region_source: str


@dataclass(frozen=True)
class LoadFigures:
    """Time to load the weights onto the GPUs of one node."""

    seconds: float
    source: str
    bytes_per_node: float
    bandwidth_bytes_per_s: float
    parallel: bool


def peak_flops(gpu: GpuSpec, precision: str) -> tuple[float | None, str]:
    """Dense peak of the compute precision; bf16 falls back to fp16 on GPUs without bf16."""
    value = gpu.dense_flops_per_s.get(precision)
    if value is None and precision == "bf16":
        return gpu.dense_flops_per_s.get("fp16"), "fp16"
    return value, precision


def link_bytes_per_s(gpu: GpuSpec, group: int, spans_nodes: bool) -> float:
    """Usable bandwidth per GPU for a collective over `group` ranks."""
    if spans_nodes:
        return (gpu.scale_out_bytes_per_s or FALLBACK_NETWORK_BYTES_PER_S) * INTER_NODE_EFFICIENCY
    if gpu.scale_up_bandwidth_bytes_per_s and group <= gpu.scale_up_domain_gpus:
        return gpu.scale_up_bandwidth_bytes_per_s / 2 * INTRA_NODE_EFFICIENCY
    return pcie_practical_bytes_per_s().get(gpu.pcie_gen or 4, 2.5e10) * INTRA_NODE_EFFICIENCY


def training_tokens(scenario: Scenario, global_tokens: int) -> tuple[float, int]:
    """(tokens, optimizer steps) from steps, dataset_tokens x epochs, or train_tokens."""
    if scenario.steps:
        return float(scenario.steps * global_tokens), scenario.steps
    if scenario.dataset_tokens:
        tokens = scenario.dataset_tokens * scenario.epochs
    else:
        tokens = scenario.train_tokens or DEFAULT_TRAIN_TOKENS
    return tokens, max(1, math.ceil(tokens / global_tokens))


def time_figures(
    model: ModelSpec,
    scenario: Scenario,
    gpu: GpuSpec,
    recipe: PrecisionRecipe,
    counts: ParamCounts,
    pipeline_share: float,
    base: str | None,
) -> TimeFigures | None:
    """Step time by cause and the time to train; None when the GPU lacks the precision."""
    peak, compute_precision = peak_flops(gpu, recipe.compute)
    if peak is None:
        return None
    full = scenario.method == "full"
    flops = flops_per_token(
        model,
        scenario.seq_len,
        frozen_base=not full,
        lora_params=counts.lora,
        checkpointing=scenario.activation_checkpointing,
    )
    dp, pp = data_parallel(scenario), scenario.pipeline_parallel
    global_tokens = scenario.micro_batch * scenario.seq_len * scenario.grad_accum * dp
    efficiency = scenario.mfu if scenario.mfu is not None else default_efficiency(gpu.architecture)
    # fp8 recipes run only the linear layers in fp8; attention kernels stay at the 16-bit rate
    attention_peak = peak
    if compute_precision == "fp8":
        attention_peak = gpu.dense_flops_per_s.get("bf16") or peak
    recomputed_attention = flops.attention_forward if flops.recompute else 0.0
    attention_share = 3 * flops.attention_forward + recomputed_attention
    compute = (
        global_tokens
        * ((flops.total - attention_share) / peak + attention_share / attention_peak)
        / (scenario.gpus * efficiency)
    )
    dequant = 0.0
    if base in ("nf4", "int8") and gpu.memory_bandwidth_bytes_per_s:
        weights = counts.linear_weights * pipeline_share / scenario.tensor_parallel
        recompute = QLORA_RECOMPUTE_FACTOR if scenario.activation_checkpointing == "full" else 1.0
        per_micro = QLORA_DEQUANT_BYTES_PER_WEIGHT * weights * recompute / gpu.memory_bandwidth_bytes_per_s
        dequant = per_micro * scenario.grad_accum
    step = StepTime(compute, 0.0, 0.0, 0.0, 0.0, dequant)
    if scenario.mfu is None:
        step = StepTime(
            compute=compute,
            pipeline_bubble=pipeline_bubble_seconds(
                compute + dequant, pp, scenario.grad_accum, scenario.virtual_stages
            ),
            data_parallel_comm=_dp_seconds(scenario, gpu, recipe, counts, pipeline_share, compute),
            tensor_parallel_comm=_tp_seconds(model, scenario, gpu, recipe),
            offload=_offload_seconds(scenario, gpu, recipe, counts, pipeline_share),
            dequantisation=dequant,
        )
    train_tokens, steps = training_tokens(scenario, global_tokens)
    total_s = steps * step.total
    tokens_per_s = global_tokens / step.total
    model_flops = flops.total - flops.recompute
    return TimeFigures(
        flops=flops,
        peak_flops_per_s=peak,
        compute_precision=compute_precision,
        efficiency=efficiency,
        efficiency_source="user-given mfu" if scenario.mfu is not None else "trainplan default",
        step=step,
        steps=steps,
        train_tokens=train_tokens,
        tokens_per_s=tokens_per_s,
        total_s=total_s,
        gpu_hours=total_s * scenario.gpus / 3600,
        mfu=tokens_per_s * model_flops / (scenario.gpus * peak),
        hfu=tokens_per_s * flops.total / (scenario.gpus * peak),
    )


def _dp_seconds(
    scenario: Scenario,
    gpu: GpuSpec,
    recipe: PrecisionRecipe,
    counts: ParamCounts,
    share: float,
    compute: float,
) -> float:
    """Exposed data-parallel communication per step: the gradient all-reduce can hide under
    backward (2/3 of compute), ZeRO-3's gathers under forward and backward."""
    dp = data_parallel(scenario)
    if dp == 1:
        return 0.0
    spans = scenario.gpus > scenario.gpus_per_node
    bandwidth = link_bytes_per_s(gpu, dp, spans)
    # `share` is the heaviest pipeline stage's fraction of the parameters
    grads = counts.trainable * recipe.grad_bytes * share / scenario.tensor_parallel
    if scenario.zero_stage == 3:
        weights = counts.total * recipe.activation_bytes * share / scenario.tensor_parallel
        per_micro = 2 * gather_or_scatter_seconds(weights, dp, bandwidth)
        per_micro += gather_or_scatter_seconds(grads, dp, bandwidth)
        return exposed_seconds(per_micro * scenario.grad_accum, compute, scenario.comm_overlap)
    # gradients are reduced once per step, under the last micro-batch's backward
    window = 2 / 3 * compute / scenario.grad_accum
    return exposed_seconds(ring_allreduce_seconds(grads, dp, bandwidth), window, scenario.comm_overlap)


def _tp_seconds(model: ModelSpec, scenario: Scenario, gpu: GpuSpec, recipe: PrecisionRecipe) -> float:
    """Tensor-parallel all-reduces per step (4 per layer per micro-batch, 6 with full recompute)."""
    tp = scenario.tensor_parallel
    if tp == 1:
        return 0.0
    per_layer = 6 if scenario.activation_checkpointing == "full" else 4
    layers = model.num_layers / scenario.pipeline_parallel
    volume = scenario.micro_batch * scenario.seq_len * model.hidden_size * recipe.activation_bytes
    bandwidth = link_bytes_per_s(gpu, tp, spans_nodes=False)
    return per_layer * layers * scenario.grad_accum * ring_allreduce_seconds(volume, tp, bandwidth)


def _offload_seconds(
    scenario: Scenario, gpu: GpuSpec, recipe: PrecisionRecipe, counts: ParamCounts, share: float
) -> float:
    """PCIe traffic of CPU offload per step: gradients down, weights up (and, with parameter
    offload, weights up for forward and backward of every micro-batch)."""
    if scenario.offload == "none":
        return 0.0
    pcie = pcie_practical_bytes_per_s().get(gpu.pcie_gen or 4, 2.5e10)
    dp = data_parallel(scenario) if scenario.zero_stage >= 1 else 1
    shard = share / scenario.tensor_parallel / dp
    moved = counts.trainable * (recipe.grad_bytes + recipe.weight_bytes) * shard
    if scenario.offload == "optimizer+params":
        moved += 2 * scenario.grad_accum * counts.total * recipe.weight_bytes * shard
    return moved / pcie


def cost_figures(scenario: Scenario, gpu: GpuSpec, time: TimeFigures | None) -> CostFigures:
    """Total and per-million-token cost at the chosen pricing."""
    table = rates()
    if scenario.usd_per_gpu_hour is not None:
        rate: float | None = scenario.usd_per_gpu_hour
        rate_source = "user-given rate"
    elif gpu.name in table:
        rate = table[gpu.name].usd_per_gpu_hour
        rate_source = f"{table[gpu.name].basis} ({table[gpu.name].as_of})"
    else:
        rate, rate_source = None, f"no default price for {gpu.name}: set usd_per_gpu_hour"
    discount = 0.0
    if scenario.pricing != "on-demand":
        given = scenario.committed_discount if scenario.pricing == "committed" else scenario.spot_discount
        discount = given if given is not None else float(discounts()[scenario.pricing]["fraction_off"])
    if rate is None or time is None:
        return CostFigures(None, None, rate, scenario.pricing, discount, rate_source)
    usd = cost_usd(time.gpu_hours, rate, discount)
    return CostFigures(usd, usd / time.train_tokens * 1e6, rate, scenario.pricing, discount, rate_source)


def energy_figures(scenario: Scenario, gpu: GpuSpec, time: TimeFigures | None) -> EnergyFigures:
    """kWh and kg CO2e of the run in the chosen grid region."""
    defaults = energy_defaults()
    idle = scenario.idle_fraction if scenario.idle_fraction is not None else defaults["idle_fraction_of_tdp"]
    host = (
        scenario.host_overhead
        if scenario.host_overhead is not None
        else defaults["host_overhead_fraction_of_gpu_power"]
    )
    pue = scenario.pue if scenario.pue is not None else defaults["pue"]
    region = find_region(scenario.region)
    if time is None or gpu.tdp_w is None:
        return EnergyFigures(
            None, None, region.id, region.gco2e_per_kwh, None, pue, host, idle, region.source
        )
    utilisation = time.step.compute / time.step.total
    power = gpu_power_w(gpu.tdp_w, idle, utilisation)
    kwh = energy_kwh(power, scenario.gpus, time.total_s, host, pue)
    return EnergyFigures(
        kwh, co2e_kg(kwh, region.gco2e_per_kwh), region.id, region.gco2e_per_kwh, power, pue, host, idle,
        region.source,
    )  # fmt: skip


def load_figures(
    scenario: Scenario, gpu: GpuSpec, counts: ParamCounts, recipe: PrecisionRecipe
) -> LoadFigures:
    """Seconds to read the checkpoint (16-bit, or fp32 for fp32 training) onto one node."""
    source = parse_load_source(scenario.load_source)
    checkpoint = counts.total * (4 if recipe.compute == "fp32" else 2)
    node_gpus = min(scenario.gpus, scenario.gpus_per_node)
    per_node: float = checkpoint
    if scenario.zero_stage == 3 and scenario.load_parallel and scenario.gpus > scenario.gpus_per_node:
        per_node = checkpoint * node_gpus / scenario.gpus  # sharded checkpoint: each node reads its shard
    pcie = pcie_practical_bytes_per_s().get(gpu.pcie_gen or 4, 2.5e10)
    if scenario.load_parallel:
        bandwidth = min(source.parallel_bytes_per_s, pcie * node_gpus)
        seconds = load_seconds(per_node, source.parallel_bytes_per_s, pcie, node_gpus)
    else:
        bandwidth = min(source.single_stream_bytes_per_s, pcie)
        seconds = load_seconds(per_node, source.single_stream_bytes_per_s, pcie, 1)
    return LoadFigures(seconds, source.kind, per_node, bandwidth, scenario.load_parallel)
