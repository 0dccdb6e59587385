"""The catalog listings, one record shape per catalog: the JSON of `trainplan models/gpus/regions
--json` and of the web's `/api/models`, `/api/gpus` and `/api/regions`.

Both interfaces call these functions, so a key added here reaches both. Each record carries the
row's `source` (and a GPU its `as_of`), as every catalog row does (data/*.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trainplan.inputs.catalogs.cost_inputs import Region, rates
from trainplan.inputs.catalogs.gpus import GpuSpec
from trainplan.inputs.catalogs.models import ModelRecord
from trainplan.inputs.resolve import catalog_spec


def model_listing(records: Iterable[ModelRecord]) -> list[dict[str, Any]]:
    """One record per catalog model: names (the `model` field accepts the name, an alias or the
    Hub id), family, modality, kind (which sample fields apply) and the published parameter count
    with its source."""
    return [
        {
            "name": record.name,
            "family": record.family,
            "hub_id": record.hub_id,
            "modality": record.modality,
            "kind": catalog_spec(record.name).kind,
            "aliases": list(record.aliases),
            "published_params": record.published_params,
            "source": record.published_params_source,
        }
        for record in records
    ]


def gpu_listing(gpus: Iterable[GpuSpec]) -> list[dict[str, Any]]:
    """One record per catalog GPU: names, vendor, class, memory (bytes), dense FLOP/s per dtype,
    TDP, whether the price catalog has an on-demand rate for it, whether the planner searches it
    unless GPU types are named (plan_request.default_gpu_types), and the row's source and date."""
    from trainplan.engine.plan_request import default_gpu_types

    priced = rates()
    planned = set(default_gpu_types())
    return [
        {
            "name": gpu.name,
            "aliases": list(gpu.aliases),
            "vendor": gpu.vendor,
            "class": gpu.gpu_class,
            "memory_bytes": gpu.memory_bytes,
            "dense_flops_per_s": dict(gpu.dense_flops_per_s),
            "tdp_w": gpu.tdp_w,
            "has_price": gpu.name in priced,
            "planned_by_default": gpu.name in planned,
            "source": gpu.source,
            "as_of": gpu.as_of,
        }
        for gpu in gpus
    ]


def region_listing(found: Iterable[Region]) -> list[dict[str, Any]]:
    """One record per grid region: id, name, kind (cloud region or country), carbon intensity
    (gCO2e/kWh), the year of that figure and its source."""
    return [
        {
            "id": region.id,
            "name": region.name,
            "kind": region.kind,
            "gco2e_per_kwh": region.gco2e_per_kwh,
            "year": region.year,
            "source": region.source,
        }
        for region in found
    ]
