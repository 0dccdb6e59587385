"""Prices, discounts, grid intensities, energy defaults and storage bandwidths from data files.

Each row keeps its source and date; unknown names are errors with suggestions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from trainplan.inputs.catalogs.gpus import GpuSpec
from trainplan.inputs.catalogs.prices import Discount, price_index
from trainplan.specs.errors import InputError, UnknownNameError
from trainplan.specs.loader import load_yaml, require, sourced_section


@dataclass(frozen=True)
class Rate:
    """Default on-demand price of one GPU type: the median of its quotes (see catalogs/prices.py)."""

    gpu: str
    usd_per_gpu_hour: float
    basis: str
    source: str
    as_of: str
    quotes: int


@cache
def rates() -> dict[str, Rate]:
    """GPU name -> default on-demand rate, for every GPU with at least one on-demand quote."""
    return {
        name: Rate(
            name,
            price.usd_per_gpu_hour,
            price.basis(),
            f"`trainplan prices '{name}'` lists the quotes",
            price.as_of,
            len(price.counted),
        )
        for name, price in price_index().prices.items()
    }


def no_price_reasons() -> dict[str, str]:
    """GPU name -> why no default price is given."""
    return dict(price_index().no_price)


def discounts() -> dict[str, Discount]:
    """'committed' / 'spot' -> discounts per provider class (`.fraction_off` is the default)."""
    return dict(price_index().discounts)


@dataclass(frozen=True)
class Region:
    """Grid carbon intensity of one country or cloud region."""

    id: str
    name: str
    kind: str
    gco2e_per_kwh: float
    year: int
    source: str
    country: str | None = None  # ISO code of the country the grid or data centre is in


@cache
def regions() -> dict[str, Region]:
    """Region id (as written) -> Region."""
    return {
        str(row["id"]): Region(
            str(row["id"]),
            str(row["name"]),
            str(row["kind"]),
            float(row["gco2e_per_kwh"]),
            int(row["year"]),
            str(row["source"]),
            str(row["country"]) if row.get("country") else None,
        )
        for row in load_yaml("regions.yaml")["regions"]
    }


_GROUP_KEYS = ("id", "name", "members", "source", "as_of")


@cache
def region_groups() -> dict[str, tuple[str, frozenset[str]]]:
    """Group id ('EU', 'Europe') -> (its name, the ISO codes of its member countries)."""
    groups = {}
    for row in load_yaml("regions.yaml")["groups"]:
        where = f"regions.yaml group {row.get('id')}"
        require(row, _GROUP_KEYS, set(_GROUP_KEYS), where)
        if not row["source"] or not row["as_of"]:
            raise RuntimeError(f"{where}: no source/date")
        groups[str(row["id"])] = (str(row["name"]), frozenset(str(code) for code in row["members"]))
    return groups


def matching_regions(query: str) -> list[Region]:
    """Regions whose id, name or kind contains `query`, or whose country is in a group ('eu',
    'europe') that the query names."""
    needle = query.strip().lower()
    members: set[str] = set()
    for group_id, (name, codes) in region_groups().items():
        if needle and needle in (group_id.lower(), name.lower()):
            members |= codes
    return [
        region
        for region in regions().values()
        if needle in f"{region.id} {region.name} {region.kind}".lower() or region.country in members
    ]


def find_region(region_id: str) -> Region:
    """Exact id match first (GCP 'us-east1' and AWS 'us-east-1' differ by a hyphen), then
    case-insensitive; else an error with suggestions."""
    table = regions()
    if region_id in table:
        return table[region_id]
    lowered = {key.lower(): value for key, value in table.items()}
    if region_id.lower() in lowered:
        return lowered[region_id.lower()]
    raise UnknownNameError("region", region_id, list(table), "region")


@cache
def energy_defaults() -> dict[str, float]:
    """idle_fraction_of_tdp, host_overhead_fraction_of_gpu_power, pue."""
    return {key: float(row["value"]) for key, row in load_yaml("energy.yaml")["defaults"].items()}


@dataclass(frozen=True)
class StorageSource:
    """A place checkpoints are read from, with single-stream and parallel bandwidths."""

    kind: str
    single_stream_bytes_per_s: float
    parallel_bytes_per_s: float
    source: str


@cache
def storage_sources() -> dict[str, StorageSource]:
    """kind -> bandwidths: object stores differ between one stream and parallel ranged reads;
    a local drive or a network file system gives the same rate either way."""
    rows = {row["id"]: row for row in load_yaml("load_sources.yaml")["storage"]}

    def bandwidth(row_id: str) -> float:
        return float(rows[row_id]["bandwidth_bytes_per_s"])

    return {
        "local-nvme": StorageSource(
            "local-nvme", bandwidth("local-nvme-gen4"), bandwidth("local-nvme-gen4"),
            rows["local-nvme-gen4"]["source"],
        ),
        "network-fs": StorageSource(
            "network-fs", bandwidth("network-fs"), bandwidth("network-fs"), rows["network-fs"]["source"]
        ),
        "object-store": StorageSource(
            "object-store", bandwidth("object-store-single-stream"), bandwidth("object-store-parallel"),
            rows["object-store-parallel"]["source"],
        ),
    }  # fmt: skip


@cache
def pcie_practical_bytes_per_s() -> dict[int, float]:
    """PCIe generation -> practical pinned host-to-device bandwidth of one x16 link."""
    return {
        int(row["gen"]): float(row["practical_bytes_per_s"])
        for row in load_yaml("load_sources.yaml")["pcie_host_to_device"]
    }


@dataclass(frozen=True)
class UnpublishedLinks:
    """The host link and network a GPU record without its own figure is timed with."""

    pcie_gen: int
    network_bytes_per_s: float
    pcie_basis: str
    network_basis: str


_LINK_KEYS = ("pcie_gen", "pcie_basis", "network_bytes_per_s", "network_basis", "as_of")


@cache
def unpublished_links() -> UnpublishedLinks:
    """load_sources.yaml `unpublished_links`: the figures used where a GPU record has none."""
    raw = load_yaml("load_sources.yaml")["unpublished_links"]
    require(raw, _LINK_KEYS, set(_LINK_KEYS), "load_sources.yaml unpublished_links")
    return UnpublishedLinks(
        int(raw["pcie_gen"]),
        float(raw["network_bytes_per_s"]),
        str(raw["pcie_basis"]),
        str(raw["network_basis"]),
    )


@cache
def run_fixed_defaults() -> dict[str, float]:
    """load_sources.yaml `run_fixed`: launch_s (seconds to the first step) and checkpoint_every
    (steps between checkpoint writes)."""
    raw = load_yaml("load_sources.yaml")["run_fixed"]
    return sourced_section(raw, ("launch_s", "checkpoint_every"), "load_sources.yaml run_fixed")


@cache
def host_memory_defaults() -> tuple[float, float]:
    """load_sources.yaml `host_memory`: the host's peak memory bandwidth (bytes/s) and the share a
    streaming kernel sustains."""
    raw = load_yaml("load_sources.yaml")["host_memory"]
    rows = sourced_section(raw, ("bandwidth_bytes_per_s", "efficiency"), "load_sources.yaml host_memory")
    return rows["bandwidth_bytes_per_s"], rows["efficiency"]


def host_link_bytes_per_s(gpu: GpuSpec) -> float:
    """Practical pinned host-to-device bytes/s of the GPU's PCIe generation (x16), or of the
    assumed one where its record has none (`unpublished_links`)."""
    gen = gpu.pcie_gen if gpu.pcie_gen is not None else unpublished_links().pcie_gen
    rates = pcie_practical_bytes_per_s()
    if gen not in rates:
        raise RuntimeError(f"gpus.yaml {gpu.name}: PCIe gen {gen} has no row in load_sources.yaml")
    return rates[gen]


def network_bytes_per_s(gpu: GpuSpec) -> float:
    """Per-GPU bytes/s between nodes: the record's scale-out figure, or the assumed one."""
    if gpu.scale_out_bytes_per_s is not None:
        return gpu.scale_out_bytes_per_s
    return unpublished_links().network_bytes_per_s


def parse_load_source(text: str) -> StorageSource:
    """A named source, or a bandwidth in GB/s (decimal) as a number."""
    sources = storage_sources()
    if text in sources:
        return sources[text]
    try:
        gb_per_s = float(text)
    except ValueError:
        raise UnknownNameError("load_source", text, list(sources), "load source") from None
    if not 0.001 <= gb_per_s <= 10_000:
        raise InputError("load_source", f"a bandwidth must be between 0.001 and 10000 GB/s (got {text})")
    return StorageSource("custom", gb_per_s * 1e9, gb_per_s * 1e9, "user-given bandwidth")
