"""A collective stays on NVLink while its GPUs fit one scale-up domain, even across nodes.

The GB200 NVL72 rack is 18 compute trays of 4 GPUs in one NVLink domain of 72 (the catalog's
GB200 record, scale_up_domain_gpus 72; NVIDIA GB200 NVL72 datasheet): 16 GPUs on 4 trays reduce
over NVLink, as the MLPerf FLUX GB200 submission runs them (SEGMENT=4, calibration/published.yaml).
An HGX H100 node's domain is its 8 GPUs: 16 over two nodes cross the network.
"""

from __future__ import annotations

import dataclasses

import pytest

from trainplan import Scenario, estimate
from trainplan.engine.terms.timing import INTER_NODE_EFFICIENCY, INTRA_NODE_EFFICIENCY, ring_allreduce_seconds
from trainplan.inputs.catalogs.gpus import find_gpu

DDP = Scenario(
    model="llama-3.2-1b",
    method="full",
    gpus=16,
    zero_stage=0,
    micro_batch=1,
    grad_accum=1,
    seq_len=2048,
    comm_overlap=0.0,
)


def _dp_seconds(scenario: Scenario) -> float:
    result = estimate(scenario)
    assert result.time is not None
    return result.time.step.data_parallel_comm


def _gradient_bytes(scenario: Scenario) -> float:
    states = {state.name: state.value for state in estimate(scenario).states}
    return states["gradients"]


@pytest.mark.parametrize("gpu", ["GB200", "GB300"])
@pytest.mark.parametrize("per_node", [4, 8, 16])
def test_nvl72_trays_reduce_over_nvlink(gpu: str, per_node: int) -> None:
    """The plain all-reduce of 16 GB200s or GB300s (nothing overlapped; both NVL72 racks, the
    GB300 record from verda.com's GB300 NVL72 article): 2 (n - 1) / n x the gradients at the
    NVLink figure (1.8 TB/s both ways, 900 GB/s each) and the intra-node bus efficiency, whether a
    node holds 4, 8 or 16 of them."""
    assert find_gpu(gpu).scale_up_domain_gpus == 72
    scenario = dataclasses.replace(DDP, gpu=gpu, gpus_per_node=per_node)
    nvlink = (find_gpu(gpu).scale_up_bandwidth_bytes_per_s or 0.0) / 2 * INTRA_NODE_EFFICIENCY
    expected = ring_allreduce_seconds(_gradient_bytes(scenario), 16, nvlink)
    assert _dp_seconds(scenario) == pytest.approx(expected, rel=1e-12)


def test_hgx_nodes_reduce_over_the_network() -> None:
    """16 H100s on two 8-GPU nodes: the same all-reduce at the network figure (the record's
    scale-out bandwidth at the inter-node efficiency)."""
    scenario = dataclasses.replace(DDP, gpu="H100 SXM 80GB", gpus_per_node=8)
    network = (find_gpu("H100 SXM 80GB").scale_out_bytes_per_s or 0.0) * INTER_NODE_EFFICIENCY
    expected = ring_allreduce_seconds(_gradient_bytes(scenario), 16, network)
    assert _dp_seconds(scenario) == pytest.approx(expected, rel=1e-12)


def test_an_hgx_record_in_smaller_nodes_has_the_nodes_domain() -> None:
    """The H100 SXM record's domain is its HGX node's 8; a run in nodes of 4 reduces 8 GPUs over
    the network, where an NVL72 rack in trays of 4 stays on NVLink."""
    scenario = dataclasses.replace(DDP, gpu="H100 SXM 80GB", gpus=8, gpus_per_node=4)
    network = (find_gpu("H100 SXM 80GB").scale_out_bytes_per_s or 0.0) * INTER_NODE_EFFICIENCY
    expected = ring_allreduce_seconds(_gradient_bytes(scenario), 8, network)
    assert _dp_seconds(scenario) == pytest.approx(expected, rel=1e-12)


def test_the_scenario_gives_its_own_links() -> None:
    """scale_up_domain 16 joins two 8-GPU H100 nodes in one domain (the record's NVLink figure);
    scale_out_bytes_per_s 1e11 (800 Gb/s) is the network figure; both are reported as
    overrides of the GPU record."""
    joined = dataclasses.replace(DDP, gpu="H100 SXM 80GB", scale_up_domain=16)
    nvlink = (find_gpu("H100 SXM 80GB").scale_up_bandwidth_bytes_per_s or 0.0) / 2 * INTRA_NODE_EFFICIENCY
    assert _dp_seconds(joined) == pytest.approx(
        ring_allreduce_seconds(_gradient_bytes(joined), 16, nvlink), rel=1e-12
    )
    faster = dataclasses.replace(DDP, gpu="H100 SXM 80GB", scale_out_bytes_per_s=1e11)
    assert _dp_seconds(faster) == pytest.approx(
        ring_allreduce_seconds(_gradient_bytes(faster), 16, 1e11 * INTER_NODE_EFFICIENCY), rel=1e-12
    )
    assert estimate(joined).assumptions["gpu_record"]["overrides"] == {"scale_up_domain": 16}


@pytest.mark.parametrize(
    ("gpu", "per_node", "tensor_parallel", "refused"),
    [
        ("GB200", 4, 8, None),  # an NVL72 rack: tensor parallelism over trays of 4
        ("GB200", 4, 128, "exceeds the 72 GPUs of the scale-up domain"),
        ("H100 SXM 80GB", 4, 8, "exceeds gpus_per_node=4"),
        ("H100 SXM 80GB", 8, 8, None),
        ("GeForce RTX 4090", 8, 8, None),  # PCIe within the node, as before
    ],
)
def test_tensor_parallelism_stays_within_the_fast_link(
    gpu: str, per_node: int, tensor_parallel: int, refused: str | None
) -> None:
    from trainplan.specs.errors import InputError

    scenario = Scenario(
        model="llama-3.1-8b",
        method="lora",
        gpu=gpu,
        gpus=128 if tensor_parallel == 128 else 8,
        gpus_per_node=per_node,
        tensor_parallel=tensor_parallel,
    )
    if refused is None:
        assert estimate(scenario).total_bytes > 0
        return
    with pytest.raises(InputError) as error:
        estimate(scenario)
    assert error.value.field == "tensor_parallel" and refused in error.value.message


def test_a_tpu_v5e_slice_reduces_over_ici_across_its_hosts() -> None:
    """TPU v5e: 8-chip hosts in a 256-chip ICI pod (Google Cloud's TPU v5e docs, the catalog
    record): 16 chips on two hosts all-reduce at the ICI figure (400 GB/s both ways)."""
    scenario = dataclasses.replace(DDP, gpu="TPU v5e", gpus_per_node=8)
    ici = (find_gpu("TPU v5e").scale_up_bandwidth_bytes_per_s or 0.0) / 2 * INTRA_NODE_EFFICIENCY
    assert _dp_seconds(scenario) == pytest.approx(
        ring_allreduce_seconds(_gradient_bytes(scenario), 16, ici), rel=1e-12
    )
