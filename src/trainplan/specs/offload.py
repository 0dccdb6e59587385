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
