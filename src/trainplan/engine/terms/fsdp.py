"""What FSDP2 (ZeRO-3) holds unsharded on a rank besides the sharded model states.

Read from PyTorch's `torch/distributed/fsdp/_fully_shard/` (torch 2.13; the behaviours below
are the same in the 2.5-2.6 releases torchtitan's 2024 benchmarks ran on) and torchtitan's
wrapping (`torchtitan/parallelisms/parallelize_llama.py` `apply_fsdp` at 004b3148, 2024;
`torchtitan/models/llama3/infra/parallelize.py` at 018740b7, 2025):

1. Gathered layers. `fully_shard` on every transformer block makes one parameter group per
   block; its parameters are all-gathered at the parameter dtype before its forward and again
   before its backward, and freed after (`reshard_after_forward=True`). The next group is
   prefetched while one computes (implicitly in forward, `_backward_prefetch` one group ahead
   in backward): 1 + prefetch groups are gathered at once. With `reshard_after_forward=False`
   every block stays gathered from its forward to its backward.
2. Reduce-scatter buffer. `foreach_reduce` copies a group's unsharded gradients into one flat
   buffer at `reduce_dtype` (`MixedPrecisionPolicy(reduce_dtype=torch.float32)` in torchtitan)
   and frees the gradients after the copy: per layer, the larger of the gradients and that
   buffer (4 bytes per parameter at fp32).
3. The root group. `FSDPState._lazy_init` sets the root group's `post_forward_mesh_info = None`:
   the root does not reshard after forward. torchtitan's 2024 wrapping (blocks, then
   `fully_shard(model)`) leaves the embeddings, the final norm and the head to the root, so they
   stay gathered for the whole forward and backward, and their unsharded gradients (the head's
   from the start of backward) are reduce-scattered only when the root's backward ends. The
   2025 wrapping shards the embedding and [norm, head] as their own groups (trainplan's
   `layers`).
4. The all-gather stream's pool. `foreach_all_gather` allocates each flat all-gather output on
   the all-gather copy-in stream (a side stream in forward and before backward), and keeps the
   previous output until the next copy-in. The CUDA caching allocator keeps one pool per stream
   and never lends a block freed on one stream to another, so the largest two consecutive
   groups' gathered bytes stay reserved on that stream for the whole step: seen by nvidia-smi
   and by `torch.cuda.max_memory_reserved()` (what torchtitan logs), not by
   `max_memory_allocated()` or the "active" figure torchtune logs. The same holds for the
   reduce-scatter stream: `foreach_reduce` allocates each reduce-scatter output there and the
   sharded gradients are views of it, so once `zero_grad` frees them their blocks stay reserved
   on that stream, unusable by forward and the start of backward.
5. The master is the shard. With `MixedPrecisionPolicy(param_dtype=bfloat16)` over an fp32
   model, the sharded parameter is fp32 (the optimizer's master at once), the optimizer keeps
   only its moments, and the reduce-scatter output is cast to the sharded parameter's dtype:
   4 + 8 + 4 bytes per parameter over N, instead of DeepSpeed's 2 + 12 + 2.
6. End of backward. `post_backward` reshards a group before it reduces, and frees the previous
   group's reduce-scatter input before allocating its own: the last group reduced (the root, or
   the embedding) holds its 16-bit gradients and its buffer at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from trainplan.engine.terms.memory import block_linear_params
from trainplan.specs.model import ModelSpec, derived

if TYPE_CHECKING:
    from trainplan.engine.terms.params import ParamCounts
    from trainplan.specs.scenario import Scenario

# Reduce-scatter dtype -> bytes per gradient element ("compute": the gradient's own dtype).
REDUCE_BYTES = {"fp32": 4}


def gathered_layer_bytes(layer_bytes: float, prefetch: int) -> float:
    """Weights of the layers gathered at once: the one computing and `prefetch` ahead (1.)."""
    return (1 + prefetch) * layer_bytes


def reduce_buffer_bytes(layer_params: float, grad_bytes: float, reduce_dtype: str) -> float:
    """The larger of one layer's unsharded gradients and the flat reduce-scatter buffer they are
    copied into at the reduce dtype (2.); 0 when nothing is trained in the layer."""
    return layer_params * max(grad_bytes, REDUCE_BYTES.get(reduce_dtype, grad_bytes))


def root_params(embedding: int, head: int, final_norm: int) -> int:
    """Parameters the root group holds under torchtitan's 2024 wrapping (3.)."""
    return embedding + head + final_norm


def all_gather_pool_bytes(group_bytes: list[float]) -> float:
    """Bytes the all-gather copy-in stream keeps reserved: the largest sum of two consecutive
    groups' gathered sizes, in forward order (4.); one group alone when there is only one."""
    if len(group_bytes) < 2:
        return max(group_bytes, default=0.0)
    return max(a + b for a, b in pairwise(group_bytes))


@dataclass(frozen=True)
class FsdpWorkingSet:
    """The ZeRO-3 / FSDP2 working set of one rank before tensor parallelism (fsdp_coefficients):
    all zero or off until weights are sharded."""

    gathered_forward_bytes: float = 0.0  # layers gathered at the end of forward / start of backward
    gathered_backward_bytes: float = 0.0  # layers gathered while backward runs
    layer_reduce_bytes: float = 0.0  # one layer's gradients or their reduce-scatter buffer
    root_gathered_bytes: float = 0.0  # the root group's gathered weights (fsdp_wrap root)
    root_grads_unsharded: bool = False  # the root's gradients wait for the end of backward
    last_group_grad_bytes: float = 0.0  # the last group's gradients and reduce buffer (end of backward)
    all_gather_pool_bytes: float = 0.0  # reserved by the all-gather stream's allocator pool
    reduce_grad_factor: float = 1.0  # reduce-scatter bytes per gradient byte
    reshard_after_forward: bool = True
    # FSDP keeps the fp32 master as the shard itself (zero3_master: shard): these bytes move from
    # the optimizer to the weights, and gradients are fp32 shards
    shard_master_bytes: float = 0.0


def fsdp_coefficients(
    model: ModelSpec,
    counts: ParamCounts,
    scenario: Scenario,
    *,
    weight_bytes: float,
    edge_bytes: float,
    grad_bytes: float,
    master_bytes: float,
) -> FsdpWorkingSet:
    """The ZeRO-3 / FSDP2 working set of one rank before tensor parallelism: gathered layers
    (1 + prefetch, or every group without resharding after forward), one layer's gradients or
    reduce buffer, the root group under `fsdp_wrap: root`, the last group's gradients and buffer
    at the end of backward, the all-gather pool (the two largest consecutive groups in forward
    order), and the fp32 master kept as the shard.

    `weight_bytes` per layer weight as gathered, `edge_bytes` per embedding/head weight,
    `grad_bytes` per 16-bit gradient, `master_bytes` per parameter of the fp32 master (0 without).
    """
    full = scenario.method == "full"
    layer_params = derived(model, block_linear_params)
    largest = max(layer_params) * weight_bytes
    backward = gathered_layer_bytes(largest, scenario.fsdp_prefetch)
    every_layer = sum(p * block.count for p, block in zip(layer_params, model.blocks, strict=True))
    root = scenario.fsdp_wrap == "root"
    # without resharding after forward every group stays gathered until its backward: the layers
    # and (under `layers`) the embedding and head groups
    edges = 0 if root else (counts.embedding + counts.head) * edge_bytes
    forward = backward if scenario.reshard_after_forward else every_layer * weight_bytes + edges
    reduce_dtype = scenario.fsdp_reduce_dtype
    in_root = root_params(counts.embedding, counts.head, model.final_norms * model.norm_params)
    if root:
        groups = [in_root * edge_bytes, largest]
    else:
        groups = [counts.embedding * edge_bytes, largest, largest, counts.head * edge_bytes]
    # the group reduced last, when backward ends: the root, or under `layers` the embedding
    last_group = (in_root if root else counts.embedding) if full else 0
    return FsdpWorkingSet(
        gathered_forward_bytes=forward,
        gathered_backward_bytes=backward,
        layer_reduce_bytes=reduce_buffer_bytes(max(layer_params) if full else 0, grad_bytes, reduce_dtype),
        root_gathered_bytes=in_root * edge_bytes if root else 0.0,
        root_grads_unsharded=root and full,
        last_group_grad_bytes=grad_bytes * last_group
        + reduce_buffer_bytes(last_group, grad_bytes, reduce_dtype),
        all_gather_pool_bytes=all_gather_pool_bytes(groups),
        reduce_grad_factor=reduce_buffer_bytes(1, grad_bytes, reduce_dtype) / grad_bytes,
        reshard_after_forward=scenario.reshard_after_forward,
        shard_master_bytes=master_bytes * counts.trainable
        if full and scenario.zero3_master == "shard"
        else 0.0,
    )
