"""Time to load the weights and to write checkpoints: bytes / min(storage bandwidth, host-to-GPU
PCIe bandwidth).

A single stream reads through one connection into one GPU's PCIe link; a sharded parallel
loader (e.g. FSDP with parallel range reads) reads every GPU's shard at once, so the node's
aggregate PCIe bandwidth (one x16 link per GPU) and the source's parallel rate bound it.
Checkpoints are written back through the same path at the same rate (an estimate: a drive's
or a store's writes are rarely faster than its reads). Every function takes Python numbers or
numpy arrays (the planner's candidates) alike.
"""

from __future__ import annotations

from typing import Any

from trainplan.engine.scalar_or_array import minimum, where


def load_bandwidth(
    single_stream_bytes_per_s: float,
    parallel_bytes_per_s: float,
    pcie_bytes_per_s: Any,
    node_gpus: Any,
    parallel: bool,
) -> Any:
    """Bytes/s into one node: the source's parallel rate against every GPU's PCIe link for a
    sharded parallel loader, else one stream into one GPU's link."""
    if parallel:
        return minimum(parallel_bytes_per_s, pcie_bytes_per_s * node_gpus)
    return minimum(single_stream_bytes_per_s, pcie_bytes_per_s)


def node_share(sharded: Any, gpus: Any, gpus_per_node: int) -> Any:
    """The share of a checkpoint one node reads or writes: its GPUs' shards when every GPU
    reads its own shard of a ZeRO-3 / FSDP checkpoint across several nodes, else all of it."""
    return where(sharded & (gpus > gpus_per_node), minimum(gpus, gpus_per_node) / gpus, 1.0)


def checkpoint_writes(steps: Any, every: float, epochs: int = 1) -> Any:
    """Checkpoints a run writes: one every `every` optimizer steps, the last at the run's end,
    so ceil(steps / every) (transformers' Trainer saves at each multiple of save_steps; the
    final model is written when training ends); `every` 0: one at the end of each of `epochs`
    (torchtune's recipes call save_checkpoint once per epoch)."""
    if not every:
        return steps * 0 + epochs
    return -(-steps // every)
