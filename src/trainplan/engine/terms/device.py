"""Device memory outside PyTorch's caching allocator, and the allocator's cache beyond the live
tensors: what separates max_memory_allocated from max_memory_reserved, and that from the used
memory nvidia-smi shows (figures and sources: data/device_memory.yaml).

- the CUDA context (driver state and the kernels loaded so far; lazy module loading, the
  default since CUDA 11.7, keeps it near 0.4 GiB);
- one cuBLAS workspace on the compute stream (PyTorch's CublasHandlePool.cpp: 32 MiB from
  compute capability 9.0, 8.125 MiB before), which PyTorch allocates through its own allocator,
  so a real max_memory_allocated includes it;
- NCCL's buffers, per communicator: one communicator per parallel dimension with more than one
  GPU (data, tensor, pipeline), a pair's figure for 2 ranks, a group's for more, plus NVLink
  SHARP buffers where NCCL sets them up (Hopper or later NVIDIA GPUs on an NVSwitch domain of
  more than 2, a communicator of more than 2 GPUs).

GPUs of other vendors keep one flat figure (no public source for their runtimes). Every field
may be a numpy array (the planner's candidates): only `where` branches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.scalar_or_array import minimum, where
from trainplan.inputs.catalogs.device_memory import device_memory
from trainplan.inputs.catalogs.gpus import GpuSpec
from trainplan.specs.units import GIB
from trainplan.specs.validity import shard_group

#: Architectures on which NCCL builds NVLink SHARP (NVLS) buffers over an NVSwitch domain.
NVLS_ARCHITECTURES = frozenset({"Hopper", "Blackwell"})
#: Architectures of compute capability 9.0 or later (PyTorch's larger cuBLAS workspace).
SM90_ARCHITECTURES = NVLS_ARCHITECTURES


@dataclass(frozen=True)
class DeviceRates:
    """One GPU type's figures for memory outside the allocator (bytes). Fields may be arrays."""

    context: Any  # the CUDA context (or another vendor's flat figure)
    workspace: Any  # cuBLAS workspace on the compute stream
    nccl_pair: Any  # per communicator of 2 ranks (0 for another vendor)
    nccl_group: Any  # per communicator of more ranks
    nvls: Any  # NVLS buffers per communicator of more than 2 GPUs (0 without NVLS)
    domain_gpus: Any  # the scale-up domain's GPUs


def device_rates(gpu: GpuSpec) -> DeviceRates:
    """The figures that apply to `gpu` (data/device_memory.yaml)."""
    data = device_memory()
    if gpu.vendor != "NVIDIA":
        return DeviceRates(data.other_vendors, 0.0, 0.0, 0.0, 0.0, gpu.scale_up_domain_gpus)
    nvls = gpu.architecture in NVLS_ARCHITECTURES and gpu.scale_up_domain_gpus > 2
    workspace = (
        data.cublas_workspace_hopper
        if gpu.architecture in SM90_ARCHITECTURES
        else data.cublas_workspace_earlier
    )
    return DeviceRates(
        data.cuda_context,
        workspace,
        data.nccl_pair,
        data.nccl_group,
        data.nvls if nvls else 0.0,
        gpu.scale_up_domain_gpus,
    )


@dataclass(frozen=True)
class DeviceOverhead:
    """A GPU's memory outside the caching allocator, by part (bytes; fields may be arrays)."""

    context: Any
    workspace: Any
    nccl: Any
    communicators: Any
    flat: Any = 0.0  # a scenario's overhead_gib, in place of the parts

    @property
    def total(self) -> Any:
        return self.context + self.workspace + self.nccl + self.flat


def _communicator(rates: DeviceRates, ranks: Any) -> tuple[Any, Any]:
    """One parallel dimension's communicator: (bytes, 1) with more than one rank, else (0, 0)."""
    nvls = where(minimum(ranks, rates.domain_gpus) > 2, rates.nvls, 0.0)
    per = where(ranks > 2, rates.nccl_group + nvls, rates.nccl_pair)
    used = ranks > 1
    return where(used, per, 0.0), where(used, 1, 0)


def device_overhead(
    rates: DeviceRates,
    tensor_parallel: Any,
    pipeline_parallel: Any,
    data_parallel: Any,
    context_parallel: Any = 1,
    data_parallel_replicate: Any = 1,
    expert_parallel: Any = 1,
) -> DeviceOverhead:
    """The context, the workspace and one NCCL communicator per parallel dimension of more than
    one GPU (its ranks decide the pair or group figure and whether NVLS buffers apply): the
    data-parallel one over the ranks the states shard over (specs/validity.py shard_group), one
    for the HSDP replicas, the context-parallel and the expert-parallel ranks where used."""
    nccl: Any = 0.0
    count: Any = 0
    shard = shard_group(data_parallel, context_parallel, data_parallel_replicate)
    dimensions = (shard, tensor_parallel, pipeline_parallel, context_parallel, data_parallel_replicate)
    for ranks in (*dimensions, expert_parallel):
        bytes_, used = _communicator(rates, ranks)
        nccl = nccl + bytes_
        count = count + used
    return DeviceOverhead(rates.context, rates.workspace, nccl, count)


def flat_overhead(bytes_: float) -> DeviceOverhead:
    """A scenario's own overhead figure, in place of the derived parts."""
    return DeviceOverhead(0.0, 0.0, 0.0, 0, bytes_)


def cache_fraction(expandable_segments: bool, override: float | None) -> float:
    """The allocator's cache as a fraction of the allocated bytes: the scenario's, or the one
    fitted on traced steps replayed through the allocator's rules (data/device_memory.yaml)."""
    if override is not None:
        return override
    data = device_memory()
    return data.cache_fraction_expandable if expandable_segments else data.cache_fraction


def layout_overhead(overhead_gib: float | None, rates: DeviceRates, *degrees: Any) -> DeviceOverhead:
    """A scenario's memory outside the allocator: its own flat figure where it sets overhead_gib,
    else the parts derived for its GPU and its layout's `degrees` (device_overhead's, in its
    order)."""
    if overhead_gib is not None:
        return flat_overhead(overhead_gib * GIB)
    return device_overhead(rates, *degrees)
