"""Time, cost, energy and load figures for a scenario whose memory is already estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

from trainplan.catalogs.cost_inputs import (
    discounts,
    energy_defaults,
    find_region,
    host_link_bytes_per_s,
    network_bytes_per_s,
    no_price_reasons,
    parse_load_source,
    rates,
)
from trainplan.catalogs.gpus import GpuSpec
from trainplan.catalogs.prices import is_stale, parse_date
from trainplan.frozen import direct_init
from trainplan.per_gpu import Hardware, Layout, StepSeconds, step_seconds
from trainplan.per_replica import Coefficients
from trainplan.scenario import Scenario, data_parallel
from trainplan.terms.cost import co2e_kg, cost_usd, energy_kwh, gpu_power_w
from trainplan.terms.flops import FlopsPerToken
from trainplan.terms.loading import load_seconds
from trainplan.terms.params import ParamCounts
from trainplan.terms.recipes import PrecisionRecipe
from trainplan.terms.timing import default_efficiency, efficiency_kind, fp8_matmul_efficiency_ratio

DEFAULT_TRAIN_TOKENS = 2.0e9
#: Images or clips trained on when a diffusion, video or JEPA scenario gives no budget.
DEFAULT_TRAIN_SAMPLES = 10_000.0


@direct_init
@dataclass(frozen=True)
class TimeFigures:
    """How long the run takes."""

    flops: FlopsPerToken
    peak_flops_per_s: float
    compute_precision: str
    efficiency: float
    efficiency_source: str
    step: StepSeconds
    steps: int
    train_tokens: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    total_s: float
    gpu_hours: float
    mfu: float
    hfu: float
    # diffusion, video and JEPA: images or clips (None for a language model)
    samples_per_s_per_gpu: float | None = None
    train_samples: float | None = None


@direct_init
@dataclass(frozen=True)
class CostFigures:
    """What the run costs."""

    usd: float | None
    usd_per_million_tokens: float | None
    usd_per_gpu_hour: float | None
    pricing: str
    discount: float
    rate_source: str
    quotes: int | None = None  # on-demand quotes behind a catalog rate; None for a user's rate
    price_as_of: str | None = None  # newest of those quotes
    price_stale: bool | None = None  # older than STALE_AFTER_DAYS today
    discount_range: tuple[float, float] | None = None  # (low, high) the data's sources give
    usd_per_thousand_samples: float | None = None  # diffusion, video, JEPA: per 1,000 images / clips


@direct_init
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


@direct_init
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


def training_tokens(scenario: Scenario, global_tokens: int, sample_tokens: int = 0) -> tuple[float, int]:
    """(tokens, optimizer steps) from steps, dataset_tokens x epochs, or train_tokens; for a
    diffusion, video or JEPA model (`sample_tokens` per image or clip) from steps,
    dataset_size x epochs, or train_samples."""
    if scenario.steps:
        return float(scenario.steps * global_tokens), scenario.steps
    if sample_tokens:
        samples = (
            scenario.dataset_size * scenario.epochs
            if scenario.dataset_size
            else scenario.train_samples or DEFAULT_TRAIN_SAMPLES
        )
        tokens = samples * sample_tokens
        return tokens, max(1, math.ceil(tokens / global_tokens))
    if scenario.dataset_tokens:
        tokens = scenario.dataset_tokens * scenario.epochs
    else:
        tokens = scenario.train_tokens or DEFAULT_TRAIN_TOKENS
    return tokens, max(1, math.ceil(tokens / global_tokens))


def linear_efficiency_ratio(gpu: GpuSpec, recipe: PrecisionRecipe, mfu: float | None) -> float | None:
    """The fp8 linears' efficiency relative to the 16-bit one (terms/timing.py
    `fp8_matmul_efficiency_ratio`); None for 16-bit compute, or when a given mfu is the all-in
    efficiency."""
    if mfu is not None or peak_flops(gpu, recipe.compute)[1] != "fp8":
        return None
    return fp8_matmul_efficiency_ratio(gpu.architecture)


def hardware_of(
    gpu: GpuSpec, recipe: PrecisionRecipe, mfu: float | None, model_kind: str = "llm"
) -> Hardware | None:
    """The GPU's figures for the step-time formulas; None when it lacks the precision.
    `model_kind` (terms/timing.py `efficiency_kind`) selects the efficiency factor of the model."""
    peak, precision = peak_flops(gpu, recipe.compute)
    if peak is None:
        return None
    # fp8 recipes run only the layers' linears in fp8; attention kernels and the output head stay
    # at the 16-bit rate (terms/timing.py)
    attention_peak = (gpu.dense_flops_per_s.get("bf16") or peak) if precision == "fp8" else peak
    pcie = host_link_bytes_per_s(gpu)
    return Hardware(
        peak_flops_per_s=peak,
        attention_peak_flops_per_s=attention_peak,
        efficiency=mfu if mfu is not None else default_efficiency(gpu.architecture, model_kind),
        linear_efficiency_ratio=linear_efficiency_ratio(gpu, recipe, mfu) or 1.0,
        nvlink_bytes_per_s=(gpu.scale_up_bandwidth_bytes_per_s or 0.0) / 2,
        scale_up_domain_gpus=gpu.scale_up_domain_gpus,
        network_bytes_per_s=network_bytes_per_s(gpu),
        pcie_bytes_per_s=pcie,
        memory_bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s,
    )


def scenario_step_seconds(
    coeffs: Coefficients, hardware: Hardware, layout: Layout, scenario: Scenario
) -> StepSeconds:
    """Step seconds with the scenario's node size, overlap, interleaving and MFU setting (the
    layout and hardware may hold arrays of candidates)."""
    return step_seconds(
        coeffs,
        hardware,
        layout,
        gpus_per_node=scenario.gpus_per_node,
        comm_overlap=scenario.comm_overlap,
        virtual_stages=scenario.virtual_stages,
        all_in=scenario.mfu is not None,
    )


def time_figures(
    coeffs: Coefficients, scenario: Scenario, gpu: GpuSpec, layout: Layout
) -> TimeFigures | None:
    """Step time by cause and the time to train; None when the GPU lacks the precision."""
    hardware = hardware_of(gpu, coeffs.recipe, scenario.mfu, efficiency_kind(coeffs.model))
    if hardware is None:
        return None
    step = scenario_step_seconds(coeffs, hardware, layout, scenario)
    global_tokens = scenario.micro_batch * coeffs.seq_len * scenario.grad_accum * data_parallel(scenario)
    per_sample = coeffs.seq_len if coeffs.model.kind != "llm" else 0
    train_tokens, steps = training_tokens(scenario, global_tokens, per_sample)
    flops = coeffs.flops
    total_s = steps * step.total
    tokens_per_s = global_tokens / step.total
    peak = hardware.peak_flops_per_s
    return TimeFigures(
        flops=flops,
        peak_flops_per_s=peak,
        compute_precision=peak_flops(gpu, coeffs.recipe.compute)[1],
        efficiency=hardware.efficiency,
        efficiency_source="user-given mfu" if scenario.mfu is not None else "trainplan default",
        step=step,
        steps=steps,
        train_tokens=train_tokens,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=tokens_per_s / scenario.gpus,
        total_s=total_s,
        gpu_hours=total_s * scenario.gpus / 3600,
        mfu=tokens_per_s * (flops.total - flops.recompute) / (scenario.gpus * peak),
        hfu=tokens_per_s * (flops.total + coeffs.encoder_flops_per_token) / (scenario.gpus * peak),
        samples_per_s_per_gpu=tokens_per_s / per_sample / scenario.gpus if per_sample else None,
        train_samples=train_tokens / per_sample if per_sample else None,
    )


def discount_for(scenario: Scenario) -> float:
    """Fraction off on-demand for the scenario's pricing plan (given, else the data default)."""
    if scenario.pricing == "on-demand":
        return 0.0
    given = _given_discount(scenario)
    return given if given is not None else discounts()[scenario.pricing].fraction_off


def discount_range(scenario: Scenario) -> tuple[float, float] | None:
    """(low, high) of the data's default discount, when the default applies; else None."""
    if scenario.pricing == "on-demand" or _given_discount(scenario) is not None:
        return None
    default = discounts()[scenario.pricing].default
    return default.low, default.high


def _given_discount(scenario: Scenario) -> float | None:
    """The scenario's own committed_discount or spot_discount, for its pricing plan."""
    return scenario.committed_discount if scenario.pricing == "committed" else scenario.spot_discount


def host_and_pue(scenario: Scenario) -> tuple[float, float]:
    """(host overhead as a fraction of GPU power, PUE): given, else the data defaults."""
    defaults = energy_defaults()
    host = scenario.host_overhead
    if host is None:
        host = defaults["host_overhead_fraction_of_gpu_power"]
    pue = scenario.pue if scenario.pue is not None else defaults["pue"]
    return host, pue


def idle_fraction_of(scenario: Scenario, gpu: GpuSpec) -> float:
    """The GPU's idle draw as a fraction of its TDP: the scenario's `idle_fraction` when given,
    else the measured `idle_w / tdp_w` of gpus.yaml (midpoints of nvidia-smi readings of an idle
    card, docs/data-sources.md section 5.1; H100 SXM: 70 W / 700 W = 0.10), else energy.yaml's
    `idle_fraction_of_tdp` default (0.30, a judgement for GPUs nobody measured)."""
    if scenario.idle_fraction is not None:
        return scenario.idle_fraction
    if gpu.idle_w is not None and gpu.tdp_w:
        return gpu.idle_w / gpu.tdp_w
    return energy_defaults()["idle_fraction_of_tdp"]


def cost_figures(
    scenario: Scenario, gpu: GpuSpec, time: TimeFigures | None, today: date | None = None
) -> CostFigures:
    """Total and per-million-token cost at the chosen pricing. A catalog rate is flagged stale
    when its newest quote is older than STALE_AFTER_DAYS before `today` (default: the date now)."""
    table = rates()
    quotes: int | None = None
    as_of: str | None = None
    stale: bool | None = None
    if scenario.usd_per_gpu_hour is not None:
        rate: float | None = scenario.usd_per_gpu_hour
        rate_source = "user-given rate"
    elif gpu.name in table:
        row = table[gpu.name]
        rate, quotes, as_of = row.usd_per_gpu_hour, row.quotes, row.as_of
        stale = is_stale(parse_date(as_of, gpu.name), today or date.today())
        rate_source = f"{row.basis}; {row.source}" + (f"; stale: newest quote {as_of}" if stale else "")
    else:
        reason = no_price_reasons().get(gpu.name, "no quote")
        rate, rate_source = None, f"no default price for {gpu.name} ({reason}): set usd_per_gpu_hour"
    discount = discount_for(scenario)
    usd = per_million = per_thousand = None
    if rate is not None and time is not None:
        usd = cost_usd(time.gpu_hours, rate, discount)
        per_million = usd / time.train_tokens * 1e6
        per_thousand = usd / time.train_samples * 1e3 if time.train_samples else None
    return CostFigures(
        usd, per_million, rate, scenario.pricing, discount, rate_source, quotes, as_of, stale,
        discount_range(scenario), per_thousand,
    )  # fmt: skip


def energy_figures(scenario: Scenario, gpu: GpuSpec, time: TimeFigures | None) -> EnergyFigures:
    """kWh and kg CO2e of the run in the chosen grid region."""
    idle = idle_fraction_of(scenario, gpu)
    host, pue = host_and_pue(scenario)
    region = find_region(scenario.region)
    if time is None or gpu.tdp_w is None:
        return EnergyFigures(
            None, None, region.id, region.gco2e_per_kwh, None, pue, host, idle, region.source
        )
    utilisation = time.step.busy / time.step.total
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
    pcie = host_link_bytes_per_s(gpu)
    if scenario.load_parallel:
        bandwidth = min(source.parallel_bytes_per_s, pcie * node_gpus)
        seconds = load_seconds(per_node, source.parallel_bytes_per_s, pcie, node_gpus)
    else:
        bandwidth = min(source.single_stream_bytes_per_s, pcie)
        seconds = load_seconds(per_node, source.single_stream_bytes_per_s, pcie, 1)
    return LoadFigures(seconds, source.kind, per_node, bandwidth, scenario.load_parallel)
