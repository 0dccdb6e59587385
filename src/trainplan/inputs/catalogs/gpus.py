"""The GPU catalog: memory, dense FLOP/s per precision, power, links; one sourced row per GPU."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from trainplan.specs.errors import UnknownNameError
from trainplan.specs.loader import load_yaml, normalise, require

GPU_CLASSES = ("consumer", "workstation", "datacenter")


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator. `memory_bytes` is the capacity the driver reports (nvidia-smi total)."""

    name: str
    aliases: tuple[str, ...]
    vendor: str
    gpu_class: str
    architecture: str
    memory_bytes: int
    memory_source: str
    dense_flops_per_s: dict[str, float | None]
    memory_bandwidth_bytes_per_s: float
    tdp_w: float | None
    idle_w: float | None
    pcie_gen: int | None
    pcie_lanes: int | None
    scale_up_bandwidth_bytes_per_s: float | None
    scale_up_domain_gpus: int
    scale_out_bytes_per_s: float | None
    source: str
    as_of: str
    verified: bool
    flags: tuple[str, ...]
    # GPUs per node (compute tray) of a system whose scale-up domain spans several nodes (an
    # NVL72 rack: 4); None where the domain lies within one node (HGX, PCIe cards)
    system_node_gpus: int | None = None

    @property
    def short_name(self) -> str:
        """The shortest name that still finds this GPU (aliases are unique): 'H100' for
        'H100 SXM 80GB', for narrow tables."""
        return min((self.name, *self.aliases), key=len)


# Every key of a record, each required (null where a figure is not published: the power and
# link figures); an unknown key is an error.
_KEYS = (
    "name", "aliases", "vendor", "class", "architecture", "year", "memory_bytes", "memory_source",
    "memory_marketed_gb", "memory_type", "memory_bandwidth_bytes_per_s", "dense_flops_per_s", "tdp_w",
    "idle_w", "pcie_gen", "pcie_lanes", "scale_up_bandwidth_bytes_per_s", "scale_up_domain_gpus",
    "scale_out_bytes_per_s", "source", "sources", "as_of", "verified", "flags",
)  # fmt: skip
# The keys that may not be null.
_NOT_NULL = (
    "name", "vendor", "class", "architecture", "memory_bytes", "memory_bandwidth_bytes_per_s",
    "dense_flops_per_s", "scale_up_domain_gpus", "source", "as_of",
)  # fmt: skip


# Keys a record may leave out.
_OPTIONAL = ("system_node_gpus",)


def _gpu_from(raw: dict[str, Any], index: int, file: str = "gpus.yaml") -> GpuSpec:
    where = f"{file}[{index}] ({raw.get('name')})"
    require(raw, _KEYS, set(_KEYS) | set(_OPTIONAL), where)
    missing = [key for key in _NOT_NULL if raw.get(key) is None]
    if missing:
        raise RuntimeError(f"{where}: null {missing}")
    if not float(raw["memory_bandwidth_bytes_per_s"]) > 0 or int(raw["scale_up_domain_gpus"]) < 1:
        raise RuntimeError(f"{where}: memory bandwidth must be positive, the scale-up domain at least 1")
    if raw["class"] not in GPU_CLASSES:
        raise RuntimeError(f"{where}: class {raw['class']!r} not in {GPU_CLASSES}")
    flops = {str(k): (float(v) if v is not None else None) for k, v in raw["dense_flops_per_s"].items()}

    def opt_float(key: str) -> float | None:
        value = raw.get(key)
        return float(value) if value is not None else None

    def opt_int(key: str) -> int | None:
        value = raw.get(key)
        return int(value) if value is not None else None

    source = raw["source"]
    if isinstance(raw.get("sources"), dict):
        source = "; ".join(f"{key}: {text}" for key, text in raw["sources"].items())
    return GpuSpec(
        name=str(raw["name"]),
        aliases=tuple(str(alias) for alias in raw.get("aliases") or []),
        vendor=str(raw["vendor"]),
        gpu_class=str(raw["class"]),
        architecture=str(raw["architecture"]),
        memory_bytes=int(raw["memory_bytes"]),
        memory_source=str(raw.get("memory_source", "")),
        dense_flops_per_s=flops,
        memory_bandwidth_bytes_per_s=float(raw["memory_bandwidth_bytes_per_s"]),
        tdp_w=opt_float("tdp_w"),
        idle_w=opt_float("idle_w"),
        pcie_gen=opt_int("pcie_gen"),
        pcie_lanes=opt_int("pcie_lanes"),
        scale_up_bandwidth_bytes_per_s=opt_float("scale_up_bandwidth_bytes_per_s"),
        scale_up_domain_gpus=int(raw["scale_up_domain_gpus"]),
        scale_out_bytes_per_s=opt_float("scale_out_bytes_per_s"),
        source=str(source),
        as_of=str(raw["as_of"]),
        verified=bool(raw.get("verified", False)),
        flags=tuple(str(flag) for flag in raw.get("flags") or []),
        system_node_gpus=opt_int("system_node_gpus"),
    )


@cache
def gpu_catalog() -> tuple[GpuSpec, ...]:
    """Every GPU in the catalog, validated, in file order."""
    return tuple(_gpu_from(raw, index) for index, raw in enumerate(load_yaml("gpus.yaml")))


@cache
def _gpu_index() -> dict[str, GpuSpec]:
    index: dict[str, GpuSpec] = {}
    for gpu in gpu_catalog():
        for key in (gpu.name, *gpu.aliases):
            index.setdefault(normalise(key), gpu)
    return index


def scale_up_domain(gpu: GpuSpec, gpus_per_node: int, given: int | None = None) -> int:
    """The GPUs one scale-up domain joins in a run: the scenario's figure where given; else the
    record's where its system spans nodes (an NVL72 rack's 72 over trays of 4); else the record's
    within one node of `gpus_per_node` (an HGX H100 in nodes of 4 has a domain of 4)."""
    if given is not None:
        return given
    if gpu.system_node_gpus is not None:
        return gpu.scale_up_domain_gpus
    return min(gpu.scale_up_domain_gpus, gpus_per_node)


def find_gpu(name: str) -> GpuSpec:
    """The GPU called `name` (any alias, case and separators ignored) or UnknownNameError."""
    gpu = _gpu_index().get(normalise(name))
    if gpu is None:
        raise UnknownNameError("gpu", name, [g.name for g in gpu_catalog()], "gpu")
    return gpu


def matching_gpus(query: str, exact_first: bool = False) -> tuple[GpuSpec, ...]:
    """GPUs whose name, alias, vendor or class contains `query` (case-insensitive); with
    `exact_first`, a whole name or alias (separators ignored) gives just that GPU. An empty query
    matches every GPU."""
    if not query.strip():
        return gpu_catalog()
    exact = _gpu_index().get(normalise(query)) if exact_first else None
    if exact is not None:
        return (exact,)
    needle = query.lower()
    return tuple(
        g
        for g in gpu_catalog()
        if any(needle in text.lower() for text in (g.name, g.vendor, g.gpu_class, *g.aliases))
    )


def user_gpu(raw: dict[str, Any], index: int, where: str) -> GpuSpec:
    """A GPU record of a user's file, validated as the catalog's rows are (RuntimeError with the
    key on a bad one); the keys that may be null in the catalog may be left out."""
    filled = {key: None for key in _KEYS if key not in _NOT_NULL} | {"scale_up_domain_gpus": 8} | raw
    if filled.get("aliases") is None:
        filled["aliases"] = []
    return _gpu_from(filled, index, where)
