"""data/device_memory.yaml: the allocator's cache fraction and the device memory outside
PyTorch's allocator (CUDA context, NCCL buffers, cuBLAS workspaces), each row sourced and dated."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from trainplan.specs.loader import load_yaml, require, sourced_value

_FILE = "device_memory.yaml"
_SINGLE = ("cuda_context", "nccl_pair", "nccl_group", "nvls", "other_vendors")
_NESTED = {
    "cache_fraction": ("default", "expandable_segments"),
    "cublas_workspace": ("hopper_and_later", "earlier"),
}


@dataclass(frozen=True)
class DeviceMemory:
    """The figures of device_memory.yaml (bytes, or a fraction for the cache)."""

    cache_fraction: float
    cache_fraction_expandable: float
    cuda_context: float
    nccl_pair: float
    nccl_group: float
    nvls: float
    cublas_workspace_hopper: float
    cublas_workspace_earlier: float
    other_vendors: float


def _value(row: object, where: str, upper: float) -> float:
    return sourced_value(row, f"{_FILE} {where}", upper)


@cache
def device_memory() -> DeviceMemory:
    """The file's figures, checked: every row has a value in range, a basis, a source and a date."""
    raw = load_yaml(_FILE)
    require(raw, (*_SINGLE, *_NESTED), {*_SINGLE, *_NESTED}, _FILE)
    for key, inner in _NESTED.items():
        require(raw[key], inner, set(inner), f"{_FILE} {key}")
    cache_row, workspace = raw["cache_fraction"], raw["cublas_workspace"]
    gib = float(2**30)
    return DeviceMemory(
        cache_fraction=_value(cache_row["default"], "cache_fraction default", 1.0),
        cache_fraction_expandable=_value(
            cache_row["expandable_segments"], "cache_fraction expandable_segments", 1.0
        ),
        **{key: _value(raw[key], key, 64 * gib) for key in _SINGLE},
        cublas_workspace_hopper=_value(
            workspace["hopper_and_later"], "cublas_workspace hopper_and_later", gib
        ),
        cublas_workspace_earlier=_value(workspace["earlier"], "cublas_workspace earlier", gib),
    )
