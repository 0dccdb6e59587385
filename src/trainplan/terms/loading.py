"""Time to load the weights: bytes / min(source bandwidth, host-to-GPU PCIe bandwidth).

A single stream reads through one connection into one GPU's PCIe link; a sharded parallel
loader (e.g. FSDP with parallel range reads) reads every GPU's shard at once, so the node's
aggregate PCIe bandwidth (one x16 link per GPU) and the source's parallel rate bound it.
"""

from __future__ import annotations


def load_seconds(
    checkpoint_bytes_per_node: float,
    source_bytes_per_s: float,
    pcie_bytes_per_s: float,
    links: int,
) -> float:
    """Seconds to move the node's share of the checkpoint onto its GPUs."""
    return checkpoint_bytes_per_node / min(source_bytes_per_s, pcie_bytes_per_s * links)
