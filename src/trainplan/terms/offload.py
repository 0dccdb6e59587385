"""The CPU offload modes and what each keeps on the host (the scenario's `offload` choices)."""

from __future__ import annotations

#: none; the optimizer state, stepped on the CPU (DeepSpeed offload_optimizer); the parameters
#: too (DeepSpeed offload_param); the parameters and their sharded gradients (FSDP's CPU offload).
OFFLOAD = ("none", "optimizer", "optimizer+params", "optimizer+params+grads")
#: The offload modes that keep the parameters on the CPU (ZeRO-3 / FSDP only).
PARAM_OFFLOADS = ("optimizer+params", "optimizer+params+grads")
#: FSDP's CPU offload (FSDP1 CPUOffload(offload_params=True), FSDP2 CPUOffloadPolicy): the
#: sharded parameters, their gradients and the optimizer step all on the CPU.
FSDP_OFFLOAD = "optimizer+params+grads"


def fsdp_offload_note(offload: str) -> list[str]:
    """What an FSDP config cannot write of `offload` (its CPU offload moves the gradients too)."""
    if offload == "optimizer+params":
        return [f"offload {offload}: FSDP's CPU offload moves the gradients too (written as {FSDP_OFFLOAD})"]
    return []


def deepspeed_offload_note(offload: str) -> list[str]:
    """What a DeepSpeed config cannot write of `offload` (offload_param keeps gradients with the
    optimizer's offload, not FSDP's)."""
    if offload == FSDP_OFFLOAD:
        return [
            f"offload {offload}: FSDP's CPU offload (written as DeepSpeed's offload_param, optimizer+params)"
        ]
    return []
