"""The result tree of an estimate: named terms with values in base units, each exact or estimate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainplan.runtime import CostFigures, EnergyFigures, LoadFigures, TimeFigures
from trainplan.scenario import Scenario, scenario_to_mapping
from trainplan.terms.geometry import TokenShape
from trainplan.terms.params import ParamCounts


@dataclass(frozen=True)
class Term:
    """One figure: `value` in base units (bytes), exact arithmetic or an estimate, with its formula."""

    name: str
    value: float
    kind: str
    note: str


@dataclass(frozen=True)
class Phase:
    """Memory of one GPU at one moment of the step; its terms sum to its total."""

    name: str
    terms: tuple[Term, ...]

    @property
    def total(self) -> float:
        """Sum of the terms."""
        return sum(term.value for term in self.terms)

    def term(self, name: str) -> Term:
        """The term called `name`."""
        return next(term for term in self.terms if term.name == name)


@dataclass(frozen=True)
class FitRow:
    """Whether the per-GPU peak fits one catalog GPU."""

    gpu: str
    gpu_class: str
    memory_bytes: int
    free_bytes: float
    fits: bool


@dataclass(frozen=True)
class Batch:
    """The global batch: micro x accum x replicas sequences of seq_len tokens."""

    micro_batch: int
    grad_accum: int
    replicas: int
    seq_len: int

    @property
    def global_sequences(self) -> int:
        """Sequences per optimizer step."""
        return self.micro_batch * self.grad_accum * self.replicas

    @property
    def global_tokens(self) -> int:
        """Tokens per optimizer step."""
        return self.global_sequences * self.seq_len


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

    @property
    def allocated_peak_bytes(self) -> float:
        """What torch.cuda.max_memory_allocated() would report (the peak without the blocks
        FSDP2's side streams keep reserved)."""
        return self.allocated_peak.total if self.allocated_peak is not None else self.total_bytes

    warnings: tuple[str, ...] = ()
    approximations: tuple[str, ...] = ()
    time: TimeFigures | None = None
    cost: CostFigures | None = None
    energy: EnergyFigures | None = None
    load: LoadFigures | None = None
    gpu: str = ""
    assumptions: dict[str, Any] = field(default_factory=dict)
    sample: TokenShape | None = None  # one image / clip of a diffusion, video or JEPA model

    @property
    def total_bytes(self) -> float:
        """Peak memory per GPU, overhead included."""
        return self.peak.total

    def to_dict(self) -> dict[str, Any]:
        """The JSON output contract (see docs/cli.md)."""
        per_gpu: dict[str, Any] = {f"{t.name}_bytes": t.value for t in self.peak.terms}
        per_gpu["total_bytes"] = self.peak.total
        per_gpu["kinds"] = {t.name: t.kind for t in self.peak.terms}
        per_gpu["notes"] = {t.name: t.note for t in self.peak.terms}
        return {
            "model": {"name": self.model_name, "source": self.model_source},
            "scenario": scenario_to_mapping(self.scenario),
            "params": {
                "total": self.params.total,
                "trainable": self.params.trainable,
                "trainable_fraction": self.params.trainable_fraction,
                "active": self.params.active,
                "embedding": self.params.embedding,
                "lora": self.params.lora,
                "approximate": bool(self.approximations),
            },
            "memory": {
                "per_gpu": per_gpu,
                "peak_phase": self.peak.name,
                "phases": {
                    phase.name: {
                        "total_bytes": phase.total,
                        **{f"{t.name}_bytes": t.value for t in phase.terms},
                    }
                    for phase in self.phases
                },
                "states": {f"{t.name}_bytes": t.value for t in self.states},
                "cpu_offload_bytes": self.cpu_offload_bytes,
                "paged_bytes": self.paged_bytes,
                "stream_pool_bytes": self.stream_pool_bytes,
                "allocated_peak_bytes": self.allocated_peak_bytes,
            },
            "fit": [
                {
                    "gpu": row.gpu,
                    "class": row.gpu_class,
                    "memory_bytes": row.memory_bytes,
                    "free_bytes": row.free_bytes,
                    "fits": row.fits,
                }
                for row in self.fit
            ],
            "batch": {
                "micro_batch": self.batch.micro_batch,
                "grad_accum": self.batch.grad_accum,
                "replicas": self.batch.replicas,
                "seq_len": self.batch.seq_len,
                "global_sequences": self.batch.global_sequences,
                "global_tokens": self.batch.global_tokens,
            },
            "sample": _sample_dict(self.sample),
            **self._runtime_dict(),
            "warnings": list(self.warnings),
            "approximations": list(self.approximations),
            "assumptions": self.assumptions,
        }

    def _runtime_dict(self) -> dict[str, Any]:
        """The time / cost / energy / load part of the JSON contract."""
        time, cost, energy, load = self.time, self.cost, self.energy, self.load
        out: dict[str, Any] = {"gpu": self.gpu}
        if time is not None:
            step = time.step
            out["time"] = {
                "flops_per_token": time.flops.total,
                "model_flops_per_token": time.flops.total - time.flops.recompute,
                "palm_model_flops_per_token": time.flops.palm_model_flops,
                "tokens_per_s": time.tokens_per_s,
                "tokens_per_s_per_gpu": time.tokens_per_s / self.scenario.gpus,
                "step_s": step.total,
                "step_breakdown_s": {
                    "compute": step.compute,
                    "pipeline_bubble": step.pipeline_bubble,
                    "data_parallel_comm": step.data_parallel_comm,
                    "tensor_parallel_comm": step.tensor_parallel_comm,
                    "offload": step.offload,
                    "dequantisation": step.dequantisation,
                    "float8_casts": step.float8_casts,
                    "compile_fusion": step.compile_fusion,
                },
                "dominant_overhead": step.dominant_overhead(),
                "steps": time.steps,
                "train_tokens": time.train_tokens,
                "samples_per_s_per_gpu": time.samples_per_s_per_gpu,
                "train_samples": time.train_samples,
                "total_s": time.total_s,
                "gpu_hours": time.gpu_hours,
                "mfu": time.mfu,
                "hfu": time.hfu,
                "efficiency": time.efficiency,
                "peak_flops_per_s": time.peak_flops_per_s,
                "compute_precision": time.compute_precision,
            }
        else:
            out["time"] = None
        if cost is not None:
            out["cost"] = {
                "usd": cost.usd,
                "usd_per_million_tokens": cost.usd_per_million_tokens,
                "usd_per_gpu_hour": cost.usd_per_gpu_hour,
                "pricing": cost.pricing,
                "discount": cost.discount,
                "rate_source": cost.rate_source,
                "quotes": cost.quotes,
                "price_as_of": cost.price_as_of,
                "price_stale": cost.price_stale,
                "discount_range": list(cost.discount_range) if cost.discount_range else None,
                "usd_per_thousand_samples": cost.usd_per_thousand_samples,
            }
        if energy is not None:
            out["energy"] = {
                "kwh": energy.kwh,
                "co2e_kg": energy.co2e_kg,
                "region": energy.region,
                "gco2e_per_kwh": energy.gco2e_per_kwh,
                "gpu_power_w": energy.gpu_power_w,
            }
        if load is not None:
            out["load"] = {
                "seconds": load.seconds,
                "source": load.source,
                "bytes_per_node": load.bytes_per_node,
                "bandwidth_bytes_per_s": load.bandwidth_bytes_per_s,
                "parallel": load.parallel,
            }
        return out


def _sample_dict(sample: TokenShape | None) -> dict[str, Any] | None:
    """One sample's geometry (null for a language model)."""
    if sample is None:
        return None
    return {
        "width_px": sample.width_px,
        "height_px": sample.height_px,
        "frames": sample.frames,
        "latent_width": sample.latent_width,
        "latent_height": sample.latent_height,
        "latent_frames": sample.latent_frames,
        "image_tokens": sample.image_tokens,
        "text_tokens": sample.text_tokens,
    }
