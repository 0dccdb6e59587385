"""Step time and time to train: a roofline with first-order overheads.

compute = FLOPs / (GPUs x dense peak FLOP/s of the compute precision x efficiency)
(the training roofline; efficiency is the sustained fraction of peak on the work done,
recompute included; Narayanan et al. 2021, sec. 5.1). When the user gives `mfu` it is taken
as the all-in efficiency and nothing is added. Otherwise trainplan adds, each documented:
- pipeline bubble: compute x (pp - 1) / m for m micro-batches per step (Narayanan et al. 2021,
  sec. 2.2.1, 1F1B schedule);
- data-parallel gradient sync: ring all-reduce moves 2 (n - 1)/n x the gradient bytes per GPU
  (Patarasuk & Yuan 2009; ZeRO sec. 7: stages 1-2 have the same volume, stage 3 adds two
  weight all-gathers per micro-batch); up to `comm_overlap` x the compute it runs under
  (backward for gradients, forward and backward for ZeRO-3 gathers) is hidden;
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer of b x s x h activations
  (Shoeybi et al. 2019, fig. 4), on the intra-node link, not overlapped;
- CPU offload: gradients down and updated weights up over PCIe each step (ZeRO-Offload,
  Ren et al. 2021, sec. 4), not overlapped;
- QLoRA: dequantising the 4-bit base before each matmul slows the frozen-weight matmuls.
Link speeds come from the GPU catalog; the bus-bandwidth efficiencies are stated judgements.
"""

from __future__ import annotations

from typing import Any

from trainplan.arrays import minimum

# Judgement, from the hardware sheet's rules of thumb: NCCL bus bandwidth reaches ~70-85% of the
# one-direction NVLink figure within a node, and ~40-45 of 50 GB/s on 400 Gb/s networks.
INTRA_NODE_EFFICIENCY = 0.8
INTER_NODE_EFFICIENCY = 0.85
FALLBACK_NETWORK_BYTES_PER_S = 12.5e9  # 100 Gb/s Ethernet where the catalog has no figure
DEFAULT_EFFICIENCY = 0.45  # the seed calculator's MFU
# Sustained fraction of dense peak on training matmul work, by GPU architecture, from published
# single-job measurements with little communication (calibration/published.yaml):
# Ampere A100: MosaicML MPT-7B 64% MFU (8 GPUs, no recompute), torchtitan Llama 3 8B 58%,
# IBM fms-fsdp Llama 2 7B 57%; Hopper H100: MosaicML MPT-7B 46%, Megatron-Core 42-47%,
# Llama 3 405B 38-43%; Ada RTX 4090: torchtune Llama 3.1 8B full fine-tune 1,650 tok/s = 64% of
# the dense bf16 peak with recompute counted. Other architectures: the seed's 0.45 (no data).
EFFICIENCY_BY_ARCHITECTURE = {"Ampere": 0.58, "Hopper": 0.47, "Ada": 0.6}


def default_efficiency(architecture: str) -> float:
    """trainplan's compute efficiency for a GPU architecture."""
    return EFFICIENCY_BY_ARCHITECTURE.get(architecture, DEFAULT_EFFICIENCY)


def ring_allreduce_seconds(num_bytes: Any, ranks: Any, bytes_per_s: Any) -> Any:
    """Ring all-reduce: each rank sends and receives 2 (n - 1)/n x the buffer (zero for n = 1)."""
    return 2 * (ranks - 1) / ranks * num_bytes / bytes_per_s


def gather_or_scatter_seconds(num_bytes: Any, ranks: Any, bytes_per_s: Any) -> Any:
    """Ring all-gather or reduce-scatter: (n - 1)/n x the full buffer (zero for n = 1)."""
    return (ranks - 1) / ranks * num_bytes / bytes_per_s


def pipeline_bubble_seconds(
    compute: Any, pipeline_parallel: Any, micro_batches: Any, virtual_stages: Any = 1
) -> Any:
    """1F1B bubble: (p - 1)/m of the ideal compute time; the interleaved schedule with v
    model chunks per GPU divides it by v (Narayanan et al. 2021, sec. 2.2.2)."""
    return compute * (pipeline_parallel - 1) / (micro_batches * virtual_stages)


def exposed_seconds(comm: Any, window: Any, overlap: float) -> Any:
    """Communication left on the critical path: up to `overlap` x the compute window it can
    run under is hidden (bucketed all-reduce under backward, prefetched all-gathers under
    forward and backward)."""
    return comm - minimum(comm, overlap * window)
