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
   `max_memory_allocated()` or the "active" figure torchtune logs.
"""

from __future__ import annotations

from itertools import pairwise

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
