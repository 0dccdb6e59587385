"""FSDP's CPU offload (optimizer+params+grads) and the CPU optimizer step, hand-computed.

FSDP2's foreach_reduce copies each sharded gradient to the host once its reduce-scatter is done
and frees the GPU's (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, offload_to_cpu);
the shards live on the host and are copied up for each all-gather; the optimizer steps on the
CPU over the host's memory bandwidth (load_sources.yaml host_memory: 409.6 GB/s x 0.7).
"""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.inputs.configs import scenario_from_config
from trainplan.specs.errors import InputError

P = 8_030_261_248  # Llama-3.1-8B parameters
BASE = {
    "model": "Llama-3.1-8B",
    "method": "full",
    "precision": "bf16",
    "optimizer": "adamw-fused",  # bf16 states: 2 x 2 bytes per parameter
    "gpus": 8,
    "zero_stage": 3,
    "gpu": "H100-SXM",
    "grad_accum": 1,
}
HOST = 409.6e9 * 0.7


def test_every_model_state_is_on_the_host() -> None:
    result = estimate({**BASE, "offload": "optimizer+params+grads"})
    states = {term.name: term.value for term in result.states}
    assert states == {"weights": 0.0, "gradients": 0.0, "optimizer": 0.0}
    # per GPU on the host: its eighth of 2 (weights) + 2 (gradients) + 4 (state) bytes per parameter
    assert result.cpu_offload_bytes == 8 * P / 8
    for phase in result.phases:
        assert phase.term("gradients").value <= result.params.head * 2  # the head's, in flight
    params_only = estimate({**BASE, "offload": "optimizer+params"})
    assert params_only.cpu_offload_bytes == 6 * P / 8
    # the gradient shards no longer hold blocks on the reduce-scatter stream
    assert result.stream_pool_bytes < params_only.stream_pool_bytes
    assert result.reserved_peak_bytes < params_only.reserved_peak_bytes


def test_the_cpu_optimizer_step_and_the_copies() -> None:
    step = estimate({**BASE, "offload": "optimizer+params+grads"}).time.step
    # (2 x 4 + 2 + 2) bytes per parameter of each GPU's eighth, 8 processes on the node at once
    assert step.host_optimizer == pytest.approx(12 * P / 8 * 8 / HOST)
    # down: the gradient shards (2 bytes); up: the weight shards for each all-gather, forward and
    # backward (2 x 2 bytes); the updated shards stay on the host
    pcie = 5.5e10  # H100 SXM's PCIe 5.0 practical rate (load_sources.yaml)
    assert step.offload == pytest.approx((2 + 4) * P / 8 / pcie)
    own = estimate({**BASE, "offload": "optimizer+params+grads", "host_memory_gb_s": 100}).time.step
    assert own.host_optimizer == pytest.approx(12 * P / 100e9)
    assert estimate(BASE).time.step.host_optimizer == 0


def test_deepspeed_optimizer_offload_steps_on_the_host_too() -> None:
    step = estimate({**BASE, "zero_stage": 2, "offload": "optimizer"}).time.step
    assert step.host_optimizer == pytest.approx(12 * P / 8 * 8 / HOST)


def test_fsdp_offload_needs_zero_3() -> None:
    with pytest.raises(InputError) as error:
        estimate({**BASE, "zero_stage": 2, "offload": "optimizer+params+grads"})
    assert error.value.field == "offload"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # accelerate's FSDP plugin: fsdp_offload_params -> CPUOffload(offload_params=True) (FSDP1)
        # or CPUOffloadPolicy (FSDP2), both of which keep the gradients on the CPU
        (
            "accelerate.yaml",
            "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_offload_params: true\n",
        ),
        # (torchtune's fsdp_cpu_offload, CPUOffloadPolicy: tests/test_framework_configs.py 70B_lora.yaml)
    ],
)
def test_fsdp_offload_settings_read_as_fsdp_offload(tmp_path, name: str, text: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text)
    read = scenario_from_config([path])
    assert read.mapping["offload"] == "optimizer+params+grads"
