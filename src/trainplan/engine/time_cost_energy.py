"""Time, cost, energy and load figures for a scenario whose memory is already estimated."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, NamedTuple

from trainplan.engine.per_gpu import Hardware, Layout, StepSeconds, forward_seconds, step_seconds
from trainplan.engine.per_replica import Coefficients
from trainplan.engine.rollout_step import RolloutFigures, rollout_seconds
from trainplan.engine.scalar_or_array import minimum, where
from trainplan.engine.terms.cost import co2e_kg, cost_usd, energy_kwh, gpu_power_w
from trainplan.engine.terms.flops import FlopsPerToken
from trainplan.engine.terms.loading import checkpoint_writes, load_bandwidth, node_share
from trainplan.engine.terms.params import ParamCounts
from trainplan.engine.terms.precisions import PrecisionBytes
from trainplan.engine.terms.timing import default_efficiency, efficiency_kind, fp8_matmul_efficiency_ratio
from trainplan.inputs.catalogs.cost_inputs import (
    discounts,
    energy_defaults,
    find_region,
    host_link_bytes_per_s,
    host_memory_defaults,
    network_bytes_per_s,
    no_price_reasons,
    parse_load_source,
    rates,
    run_fixed_defaults,
)
from trainplan.inputs.catalogs.gpus import GpuSpec, scale_up_domain
from trainplan.inputs.catalogs.prices import is_stale, parse_date
from trainplan.specs.frozen import direct_init
from trainplan.specs.scenario import DEFAULT_TRAIN_SAMPLES, DEFAULT_TRAIN_TOKENS, Scenario, data_parallel


@direct_init
@dataclass(frozen=True)
class FixedSeconds:
    """A run's time outside its training steps, the same however many tokens it trains on:
    launch (a judgement, or the scenario's `launch_s`), loading the weights (LoadFigures), and
    writing `checkpoint_writes` checkpoints of `checkpoint_bytes` each (trainable weights and
    optimizer state) at the load's bandwidth. Every part is an estimate."""

    launch_s: float
    load_s: float
    checkpoints_s: float
    checkpoint_writes: int
    checkpoint_every: int
    checkpoint_bytes: float
    # a preference stage's precomputed reference log-probs: one no-grad pass over the data
    reference_precompute_s: float = 0.0

    @property
    def total(self) -> float:
        return self.launch_s + self.load_s + self.checkpoints_s + self.reference_precompute_s


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
    total_s: float  # the training steps alone
    gpu_hours: float  # of the training steps
    mfu: float
    hfu: float
    fixed: FixedSeconds
    # diffusion, video and JEPA: images or clips (None for a language model)
    samples_per_s_per_gpu: float | None = None
    train_samples: float | None = None

    @property
    def fixed_s(self) -> float:
        """The run's time outside its training steps."""
        return self.fixed.total

    @property
    def run_s(self) -> float:
        """The whole run: training steps plus the fixed time."""
        return self.total_s + self.fixed.total


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
    fixed_usd: float | None = None  # the fixed time's GPU-hours at the same rate

    @property
    def run_usd(self) -> float | None:
        """The whole run: training steps plus the fixed time."""
        return None if self.usd is None else self.usd + (self.fixed_usd or 0.0)


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
    fixed_kwh: float | None = None  # the fixed time with the GPUs at their idle draw

    @property
    def run_kwh(self) -> float | None:
        """The whole run: training steps plus the fixed time."""
        return None if self.kwh is None else self.kwh + (self.fixed_kwh or 0.0)

    @property
    def run_co2e_kg(self) -> float | None:
        """The whole run's emissions."""
        run = self.run_kwh
        return None if run is None else co2e_kg(run, self.gco2e_per_kwh)


@direct_init
@dataclass(frozen=True)
class LoadFigures:
    """Time to load the weights onto the GPUs of one node."""

    seconds: float
    source: str
    bytes_per_node: float
    bandwidth_bytes_per_s: float
    parallel: bool
    node_share: float = 1.0  # of the checkpoint, each node's: its GPUs' shards, or all of it


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


def linear_efficiency_ratio(gpu: GpuSpec, recipe: PrecisionBytes, mfu: float | None) -> float | None:
    """The fp8 linears' efficiency relative to the 16-bit one (terms/timing.py
    `fp8_matmul_efficiency_ratio`); None for 16-bit compute, or when a given mfu is the all-in
    efficiency."""
    if mfu is not None or peak_flops(gpu, recipe.compute)[1] != "fp8":
        return None
    return fp8_matmul_efficiency_ratio(gpu.architecture)


def hardware_of(
    gpu: GpuSpec,
    recipe: PrecisionBytes,
    mfu: float | None,
    model_kind: str = "llm",
    domain: int | None = None,
) -> Hardware | None:
    """The GPU's figures for the step-time formulas; None when it lacks the precision.
    `model_kind` (terms/timing.py `efficiency_kind`) selects the efficiency factor of the model;
    `domain` is the run's scale-up domain (catalogs/gpus.py scale_up_domain; None: the record's)."""
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
        scale_up_domain_gpus=gpu.scale_up_domain_gpus if domain is None else domain,
        network_bytes_per_s=network_bytes_per_s(gpu),
        pcie_bytes_per_s=pcie,
        memory_bandwidth_bytes_per_s=gpu.memory_bandwidth_bytes_per_s,
    )


def run_domain(scenario: Scenario, gpu: GpuSpec) -> int:
    """The scenario's scale-up domain on `gpu` (catalogs/gpus.py scale_up_domain)."""
    return scale_up_domain(gpu, scenario.gpus_per_node, scenario.scale_up_domain)


def host_memory_bytes_per_s(scenario: Scenario) -> float:
    """The host's sustained memory bandwidth: the scenario's, else the data's peak x efficiency."""
    if scenario.host_memory_gb_s is not None:
        return scenario.host_memory_gb_s * 1e9
    peak, efficiency = host_memory_defaults()
    return peak * efficiency


def scenario_step_seconds(
    coeffs: Coefficients, hardware: Hardware, layout: Layout, scenario: Scenario
) -> StepSeconds:
    """Step seconds with the scenario's node size, overlap and MFU setting (the layout and
    hardware may hold arrays of candidates)."""
    return step_seconds(
        coeffs,
        hardware,
        layout,
        gpus_per_node=scenario.gpus_per_node,
        comm_overlap=scenario.comm_overlap,
        host_bytes_per_s=host_memory_bytes_per_s(scenario),
        all_in=scenario.mfu is not None,
    )


def time_figures(
    coeffs: Coefficients,
    scenario: Scenario,
    gpu: GpuSpec,
    layout: Layout,
    load: LoadFigures,
    rollout: RolloutFigures | None = None,
) -> TimeFigures | None:
    """Step time by cause, the time to train and the run's fixed time; None when the GPU lacks
    the precision. A rollout stage's generation and weight sync run before its training, in
    the same step (GRPOTrainer waits for them)."""
    hardware = hardware_of(
        gpu, coeffs.precision, scenario.mfu, efficiency_kind(coeffs.model), run_domain(scenario, gpu)
    )
    if hardware is None:
        return None
    step = scenario_step_seconds(coeffs, hardware, layout, scenario)
    if rollout is not None:
        seconds = rollout_seconds(coeffs, scenario, hardware, rollout, gpu)
        step = replace(step, generation=seconds.generation.total, weight_sync=seconds.weight_sync)
    global_tokens = scenario.micro_batch * coeffs.seq_len * scenario.grad_accum * data_parallel(scenario)
    per_sample = coeffs.seq_len if coeffs.model.kind != "llm" else 0
    train_tokens, steps = training_tokens(scenario, global_tokens, per_sample)
    flops = coeffs.work.flops
    total_s = steps * step.total
    tokens_per_s = global_tokens / step.total
    peak = hardware.peak_flops_per_s
    fixed = fixed_seconds(
        coeffs,
        scenario,
        steps,
        layout,
        load.seconds,
        load.bandwidth_bytes_per_s,
        load.node_share,
        precompute_seconds(coeffs, scenario, train_tokens, scenario.gpus, hardware),
    )
    return TimeFigures(
        flops=flops,
        peak_flops_per_s=peak,
        compute_precision=peak_flops(gpu, coeffs.precision.compute)[1],
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
        hfu=tokens_per_s * (flops.total + coeffs.encoders.flops_per_token) / (scenario.gpus * peak),
        fixed=fixed,
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
    usd = per_million = per_thousand = fixed_usd = None
    if rate is not None and time is not None:
        usd = cost_usd(time.gpu_hours, rate, discount)
        fixed_usd = cost_usd(time.fixed_s * scenario.gpus / 3600, rate, discount)
        per_million = usd / time.train_tokens * 1e6
        per_thousand = usd / time.train_samples * 1e3 if time.train_samples else None
    return CostFigures(
        usd, per_million, rate, scenario.pricing, discount, rate_source, quotes, as_of, stale,
        discount_range(scenario), per_thousand, fixed_usd,
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
    # outside the steps (launch, load, checkpoint writes) the GPUs draw their idle power
    fixed_kwh = energy_kwh(gpu_power_w(gpu.tdp_w, idle, 0.0), scenario.gpus, time.fixed_s, host, pue)
    return EnergyFigures(
        kwh, co2e_kg(kwh, region.gco2e_per_kwh), region.id, region.gco2e_per_kwh, power, pue, host, idle,
        region.source, fixed_kwh,
    )  # fmt: skip


def load_figures(
    scenario: Scenario, gpu: GpuSpec, counts: ParamCounts, recipe: PrecisionBytes
) -> LoadFigures:
    """Seconds to read the checkpoint (16-bit, or fp32 for fp32 training) onto one node."""
    path = load_path(scenario, counts, recipe, host_link_bytes_per_s(gpu), scenario.gpus, scenario.zero_stage)
    return LoadFigures(
        path.seconds, path.source, path.bytes_per_node, path.bandwidth, scenario.load_parallel, path.share
    )


class LoadPath(NamedTuple):
    """How the weights reach one node, and checkpoints leave it (numbers or arrays)."""

    seconds: Any
    bytes_per_node: Any
    bandwidth: Any
    share: Any  # of a checkpoint, each node's (terms/loading.node_share)
    source: str  # the load source's kind


def load_path(
    scenario: Scenario, counts: ParamCounts, recipe: PrecisionBytes, pcie: Any, gpus: Any, zero_stage: Any
) -> LoadPath:
    """The load of the weights (16-bit, or fp32 for fp32 training) from the scenario's source:
    each node reads its shard when every GPU reads its own of a ZeRO-3 checkpoint, else all of
    it. `pcie`, `gpus` and `zero_stage` may be the planner's arrays."""
    source = parse_load_source(scenario.load_source)
    share = node_share((zero_stage == 3) & scenario.load_parallel, gpus, scenario.gpus_per_node)
    per_node = counts.total * (4 if recipe.compute == "fp32" else 2) * share
    bandwidth = load_bandwidth(
        source.single_stream_bytes_per_s,
        source.parallel_bytes_per_s,
        pcie,
        minimum(gpus, scenario.gpus_per_node),
        scenario.load_parallel,
    )
    return LoadPath(per_node / bandwidth, per_node, bandwidth, share, source.kind)


def fixed_settings(scenario: Scenario) -> tuple[float, int]:
    """(launch seconds, optimizer steps between checkpoint writes): the scenario's, else the
    defaults of load_sources.yaml `run_fixed`."""
    data = run_fixed_defaults()
    launch = scenario.launch_s if scenario.launch_s is not None else data["launch_s"]
    every = (
        scenario.checkpoint_every if scenario.checkpoint_every is not None else int(data["checkpoint_every"])
    )
    return launch, every


def checkpoint_bytes(coeffs: Coefficients, zero_stage: Any, shard: Any) -> Any:
    """One checkpoint of the run (all ranks' shards together): the trainable weights and the
    optimizer state with its master copy, as transformers' Trainer (model plus optimizer.pt)
    and torch.distributed.checkpoint (model and optimizer state dicts) write them; a LoRA
    checkpoint holds the adapters and their state, never the frozen base. Where FSDP keeps the
    fp32 master as the weights' shard, the optimizer bytes hold the weights already."""
    shard_master = (zero_stage == 3) & (shard > 1) & (coeffs.fsdp.shard_master_bytes > 0)
    return coeffs.states.optimizer_bytes + where(shard_master, 0.0, coeffs.states.trainable_weight_bytes)


def fixed_seconds(
    coeffs: Coefficients,
    scenario: Scenario,
    steps: Any,
    layout: Layout,
    load_s: Any,
    write_bytes_per_s: Any,
    share: Any,
    precompute_s: Any = 0.0,
) -> FixedSeconds:
    """The fixed time of a run of `steps` steps; numbers or the planner's arrays alike. Each
    node writes its `share` of every checkpoint at `write_bytes_per_s` (the load's bandwidth);
    `precompute_s` is the reference's pass before training (`precompute_seconds`)."""
    launch, every = fixed_settings(scenario)
    # epochs are counted where the budget is a dataset (dataset_tokens or dataset_size)
    dataset = scenario.dataset_tokens is not None or scenario.dataset_size is not None
    writes = checkpoint_writes(steps, every, math.ceil(scenario.epochs) if dataset else 1)
    saved = checkpoint_bytes(coeffs, layout.zero_stage, layout.shard)
    return FixedSeconds(
        launch, load_s, writes * saved * share / write_bytes_per_s, writes, every, saved, precompute_s
    )


def precompute_seconds(
    coeffs: Coefficients, scenario: Scenario, train_tokens: Any, gpus: Any, hw: Hardware
) -> Any:
    """The reference's precomputed log-probs (TRL `precompute_ref_log_probs`): one no-grad
    pass of the reference over the training data before the first step, on every GPU (TRL
    1.16.0 DPOTrainer._precompute_ref_logps maps the whole train dataset once). The data is the
    trained tokens over the epochs where the budget is a dataset, else the trained tokens."""
    flops = coeffs.reference.precompute_flops_per_token
    if not flops:
        return 0.0 * gpus
    dataset = scenario.dataset_tokens is not None
    data_tokens = train_tokens / scenario.epochs if dataset else train_tokens
    return forward_seconds(data_tokens * flops, gpus, hw)
