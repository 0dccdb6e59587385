# mypy: disable-error-code="no-untyped-call"
# (torch, transformers and peft are only partly typed; their untyped calls are expected here.)
"""FSDP2 on a fake process group: rank 0 of N ranks traced on fake tensors, no GPUs, no traffic.

`torch.distributed` with the `fake` backend (`torch.testing._internal.distributed.fake_pg`,
a `FakeStore`) accepts every collective and returns at once; `fully_shard` then shards the
parameters as on N ranks, and every all-gather output, unsharded parameter, gradient and
reduce-scatter buffer is allocated on rank 0 as on a GPU. Collective outputs hold no data, which
a fake-tensor trace never reads. The device mesh is built before fake mode (it reads its rank
list), and FSDP2's storage resizes, which free and re-allocate the unsharded parameters without
an op a dispatch mode sees, are reported to the tracker.

What the trace cannot see: the all-gather stream's allocator pool (streams do not exist on the
CPU; the estimate reports it as `stream_pool_bytes`) and the allocator's fragmentation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainplan.specs.errors import InputError

if TYPE_CHECKING:  # torch is imported where it runs: the engine works without it
    import torch

FSDP_WRAPS = ("layers", "root")


@dataclass(frozen=True)
class FsdpTrace:
    """How the traced model is sharded: ranks, wrapping, dtypes and resharding."""

    ranks: int
    wrap: str = "layers"
    reduce_fp32: bool = False
    reshard_after_forward: bool = True


@contextlib.contextmanager
def fake_process_group(ranks: int) -> Iterator[Any]:
    """A `fake` process group of `ranks` ranks with this process as rank 0; yields its 1-D CPU
    device mesh and tears the group down afterwards."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        yield init_device_mesh("cpu", (ranks,))
    finally:
        dist.destroy_process_group()


def shard_model(model: torch.nn.Module, mesh: Any, plan: FsdpTrace, param_dtype: torch.dtype | None) -> None:
    """`fully_shard` every decoder layer; with wrap `layers` also the embedding and the head as
    their own groups (torchtune's `custom_sharded_layers`); then the root, which keeps whatever
    is left (under wrap `root`: embedding, final norm and head, as torchtitan's 2024
    `apply_fsdp`, which also leaves its last block gathered after forward)."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    reduce_dtype = torch.float32 if plan.reduce_fp32 else None
    config: dict[str, Any] = {"mesh": mesh, "mp_policy": MixedPrecisionPolicy(param_dtype, reduce_dtype)}
    lm: Any = getattr(model, "get_base_model", lambda: model)()
    decoder: Any = lm.get_decoder()
    layers = list(decoder.layers)
    for index, layer in enumerate(layers):
        last = plan.wrap == "root" and index == len(layers) - 1
        fully_shard(layer, **config, reshard_after_forward=plan.reshard_after_forward and not last)
    if plan.wrap == "layers":
        head = lm.get_output_embeddings()
        if head is None or head.weight is decoder.embed_tokens.weight:
            raise InputError(
                "fsdp_wrap",
                "a tied embedding and head are one parameter, so FSDP2 needs them in one group, "
                "gathered for the whole forward: trace this model with fsdp_wrap root",
            )
        fully_shard(decoder.embed_tokens, **config, reshard_after_forward=plan.reshard_after_forward)
        fully_shard(head, **config, reshard_after_forward=plan.reshard_after_forward)
    fully_shard(model, **config)


@contextlib.contextmanager
def storage_resizes(resized: Callable[[torch.Tensor], None]) -> Iterator[None]:
    """Call `resized(tensor)` after FSDP2 frees or re-allocates an unsharded parameter's storage
    (`_fsdp_param.free_storage` / `alloc_storage`: `untyped_storage().resize_()`)."""
    from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group

    original_alloc, original_free = _fsdp_param.alloc_storage, _fsdp_param.free_storage

    def alloc(tensor: torch.Tensor) -> None:
        original_alloc(tensor)
        resized(tensor)

    def free(tensor: torch.Tensor) -> None:
        original_free(tensor)
        resized(tensor)

    _fsdp_param.alloc_storage, _fsdp_param.free_storage = alloc, free
    setattr(_fsdp_param_group, "alloc_storage", alloc)  # noqa: B010 (imported by name there)
    try:
        yield
    finally:
        _fsdp_param.alloc_storage, _fsdp_param.free_storage = original_alloc, original_free
        setattr(_fsdp_param_group, "alloc_storage", original_alloc)  # noqa: B010
