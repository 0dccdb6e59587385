"""The three memory figures: live tensors (allocated), the caching allocator's pool (reserved)
and the device's used memory (total), and the parts outside the allocator, hand-computed from
data/device_memory.yaml's sourced rows."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.engine.result import Estimate
from trainplan.inputs.catalogs.device_memory import device_memory

MIB = 2**20
GIB = 2**30
CONTEXT = 426 * MIB  # unsloth-zoo PR 1053: nvidia-smi 426 MiB for a bare CUDA context
HOPPER_WORKSPACE = 32 * MIB  # CublasHandlePool.cpp: 4096 KiB x 8 from sm90
EARLIER_WORKSPACE = 4096 * 1024 * 2 + 16 * 1024 * 8  # ':4096:2:16:8' before sm90
PAIR, GROUP, NVLS = 544 * MIB, 688 * MIB, 301_989_888  # nccl 964; vllm 9699 nvlsPerRankSize
BASE = {"model": "Llama-3.1-8B", "method": "full", "micro_batch": 1, "seq_len": 2048}


def _device(**fields: object) -> dict[str, float]:
    result: dict[str, float] = estimate({**BASE, **fields}).to_dict()["memory"]["device_overhead"]
    return result


def test_data_rows_are_the_sourced_figures() -> None:
    data = device_memory()
    assert (data.cuda_context, data.nccl_pair, data.nccl_group, data.nvls) == (CONTEXT, PAIR, GROUP, NVLS)
    assert (data.cublas_workspace_hopper, data.cublas_workspace_earlier) == (
        HOPPER_WORKSPACE,
        EARLIER_WORKSPACE,
    )


@pytest.mark.parametrize(
    ("fields", "workspace", "nccl", "communicators"),
    [
        ({"gpu": "H100-SXM"}, HOPPER_WORKSPACE, 0, 0),
        ({"gpu": "RTX 4090"}, EARLIER_WORKSPACE, 0, 0),
        # one data-parallel communicator of 8: NVLS buffers on a Hopper NVSwitch domain
        ({"gpu": "H100-SXM", "gpus": 8, "zero_stage": 3}, HOPPER_WORKSPACE, GROUP + NVLS, 1),
        # no NVLS before Hopper
        ({"gpu": "A100 80GB SXM4", "gpus": 8, "zero_stage": 3}, EARLIER_WORKSPACE, GROUP, 1),
        # a pair: no NVLS (more than 2 GPUs needed)
        ({"gpu": "H100-SXM", "gpus": 2, "zero_stage": 3}, HOPPER_WORKSPACE, PAIR, 1),
        # tensor parallel 2 inside data parallel 8: two communicators
        (
            {"gpu": "H100-SXM", "gpus": 16, "tensor_parallel": 2, "zero_stage": 3},
            HOPPER_WORKSPACE,
            GROUP + NVLS + PAIR,
            2,
        ),
        # H100 PCIe pairs have no NVSwitch domain: no NVLS
        ({"gpu": "H100 PCIe", "gpus": 4, "zero_stage": 3}, HOPPER_WORKSPACE, GROUP, 1),
    ],
)
def test_outside_the_allocator_by_part(
    fields: dict[str, object], workspace: int, nccl: int, communicators: int
) -> None:
    device = _device(**fields)
    assert device["context_bytes"] == CONTEXT
    assert device["workspace_bytes"] == workspace
    assert device["nccl_bytes"] == nccl
    assert device["communicators"] == communicators
    assert device["total_bytes"] == CONTEXT + workspace + nccl
    assert device["flat_bytes"] == 0


def test_other_vendors_and_a_set_overhead_are_flat() -> None:
    amd = _device(gpu="MI300X", gpus=8, zero_stage=3)
    assert (amd["context_bytes"], amd["nccl_bytes"], amd["total_bytes"]) == (2 * GIB, 0, 2 * GIB)
    own = _device(gpu="H100-SXM", gpus=8, zero_stage=3, overhead_gib=1.5)
    assert own == {
        "context_bytes": 0.0,
        "workspace_bytes": 0.0,
        "nccl_bytes": 0.0,
        "communicators": 0,
        "flat_bytes": 1.5 * GIB,
        "total_bytes": 1.5 * GIB,
    }


def _figures(**fields: object) -> Estimate:
    return estimate({**BASE, "gpu": "H100-SXM", **fields})


@pytest.mark.parametrize(
    ("fields", "fraction"),
    [
        ({}, 0.072),
        ({"expandable_segments": True}, 0.039),
        ({"cache_fraction": 0.2}, 0.2),
        ({"cache_fraction": 0}, 0.0),
    ],
)
def test_reserved_is_allocated_plus_the_cache(fields: dict[str, object], fraction: float) -> None:
    # one GPU, no side streams: the peak moment of all three figures is the same, and the cache
    # is the fraction of its live tensors
    result = _figures(**fields)
    assert result.reserved_peak_bytes == pytest.approx(
        result.allocated_peak_bytes * (1 + fraction), rel=1e-12
    )
    assert result.peak.term("cache").value == pytest.approx(result.allocated_peak_bytes * fraction, rel=1e-12)
    assert result.total_bytes == pytest.approx(
        result.reserved_peak_bytes + CONTEXT + HOPPER_WORKSPACE, rel=1e-12
    )


def test_fsdp_reserved_holds_the_side_stream_pools() -> None:
    result = _figures(gpus=8, zero_stage=3)
    memory = result.to_dict()["memory"]
    cache = memory["per_gpu"]["cache_bytes"]
    assert result.stream_pool_bytes > 0
    # the cache is the fraction of the peak moment's live tensors, pools left out
    live = (
        memory["per_gpu"]["total_bytes"]
        - cache
        - memory["per_gpu"]["overhead_bytes"]
        - result.stream_pool_bytes
    )
    assert cache == pytest.approx(0.072 * live, rel=1e-12)
    assert memory["reserved_peak_bytes"] == pytest.approx(live + result.stream_pool_bytes + cache, rel=1e-12)
    assert memory["per_gpu"]["total_bytes"] == pytest.approx(
        memory["reserved_peak_bytes"] + memory["device_overhead"]["total_bytes"], rel=1e-12
    )


def test_fits_is_decided_on_the_device_figure() -> None:
    result = _figures()
    row = result.chosen_fit
    assert row.free_bytes == pytest.approx(row.memory_bytes - result.total_bytes)
    # a GPU file's capacity just above the reserved figure but below the device figure does not fit
    between = (result.reserved_peak_bytes + result.total_bytes) / 2 / GIB
    tight = estimate({**BASE, "gpu": "H100-SXM", "gpu_memory_gib": between})
    assert not tight.fits
