# mypy: disable-error-code="no-untyped-call"
# (torch, transformers and peft are only partly typed; their untyped calls are expected here.)
"""A storage tracker: logs every tensor storage's birth and death, classifies it afterwards.

Why not `torch.distributed._tools.mem_tracker.MemTracker` as is: it rounds to 512 B only on CUDA
devices, labels every allocation inside `optimizer.step()` as optimizer state (so the foreach
AdamW scratch buffer would count as state), labels forward intermediates that die before backward
as activations, and hooks gradients of frozen parameters (which fails). This tracker keeps the same
mechanism (a TorchDispatchMode that sees every op's outputs, weak references that report each
storage's death) but records an event log and classifies with hindsight, once the run is over:

- params / buffers: registered up front; grads: storages that became a trainable `.grad`;
  optimizer: storages found in `optimizer.state` after a step (host-side step counters excluded).
- activations: produced in forward and alive when backward starts, or re-saved by
  activation-checkpoint recomputation during backward.
- temporaries: everything else.

Peaks are taken after each op, when its outputs are allocated and its inputs are still alive,
which is when the CUDA caching allocator's `max_memory_allocated` would be updated.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

from trainplan.engine.measure.replay import ALLOC, CHECK, FREE, PHASE, Cat, Rec

#: The CUDA caching allocator rounds every block up to this many bytes.
BLOCK_BYTES = 512


@contextlib.contextmanager
def saved_for_backward(skip: Iterable[torch.Tensor]) -> Iterator[dict[int, int]]:
    """Within the block, every storage autograd packs for backward (storage pointer -> bytes,
    each storage once), the storages of `skip` (weights, buffers, shared tables) left out: what
    one forward keeps, without the op-by-op log of StorageTracker."""
    constant = {tensor.untyped_storage().data_ptr() for tensor in skip}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in constant:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield saved


def rounded(nbytes: int) -> int:
    """Bytes the CUDA caching allocator would hand out for a request of `nbytes`."""
    return -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES


class StorageTracker(TorchDispatchMode):  # type: ignore[misc, unused-ignore]
    """Records storage allocations/frees of every op run while active (fake or real tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.recs: list[Rec] = []
        self.kinds: list[int] = []
        self.args: list[int] = []
        self.phases: list[tuple[int, str]] = []
        self.checks: list[tuple[str, str]] = []
        self._rid = WeakIdKeyDictionary()
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._module_names: dict[int, str] = {}
        self._module_stack: list[str] = []
        self._phase_kind = "setup"

    # -- registration ------------------------------------------------------------------------
    def register(self, tensors: Iterable[torch.Tensor], cat: Cat) -> None:
        """Track tensors that exist already (parameters, buffers) with a fixed category."""
        for t in tensors:
            rid = self._track(t, "registered", "")
            if rid is not None and self.recs[rid].fixed is None:
                self.recs[rid].fixed = cat
        self._emit(CHECK, len(self.checks))
        self.checks.append(("registered", "setup"))

    def mark(self, t: torch.Tensor | None, cat: Cat) -> None:
        """Give the storage of `t` a fixed category (grad, optimizer state, host)."""
        if t is None:
            return
        rid = self._track(t, "marked", "")
        if rid is not None and self.recs[rid].fixed not in (Cat.PARAM, Cat.BUFFER):
            self.recs[rid].fixed = cat

    def resized(self, t: torch.Tensor) -> None:
        """Note a storage resized in place outside any op (FSDP2 frees and re-allocates its
        unsharded parameters with `untyped_storage().resize_()`)."""
        self._track(t, "resize_", self._context())
        self._emit(CHECK, len(self.checks))
        self.checks.append(("resize_", self._context()))

    def mark_recomputed(self, t: torch.Tensor) -> None:
        """Flag a tensor saved by activation-checkpoint recomputation."""
        rid = self._track(t, "recompute", "")
        if rid is not None:
            self.recs[rid].recomputed = True

    def phase(self, step: int, kind: str) -> None:
        """Start a phase ("forward", "backward", "optimizer") of training step `step`."""
        self.phases.append((step, kind))
        self._phase_kind = kind
        self._module_stack.clear()
        self._emit(PHASE, len(self.phases) - 1)

    @contextlib.contextmanager
    def module_context(self, root: torch.nn.Module) -> Iterator[None]:
        """Name the module running each op (global forward hooks), for `peak_context`."""
        self._module_names = {id(m): name or "model" for name, m in root.named_modules()}
        stack = self._module_stack

        def pre(module: torch.nn.Module, _args: Any) -> None:
            stack.append(self._module_names.get(id(module), type(module).__name__))

        def post(module: torch.nn.Module, _args: Any, _out: Any) -> None:
            name = self._module_names.get(id(module), type(module).__name__)
            if name in stack:
                del stack[len(stack) - 1 - stack[::-1].index(name) :]

        from torch.nn.modules import module as nn_module

        handles = [
            nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post, always_call=True),
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def close(self) -> None:
        """Stop listening for frees (drops the weak references) once the run is summarised."""
        self._refs.clear()
        self._rid = WeakIdKeyDictionary()

    # -- internals -----------------------------------------------------------------------------
    def _emit(self, kind: int, arg: int) -> None:
        self.kinds.append(kind)
        self.args.append(arg)

    def _context(self) -> str:
        if self._phase_kind == "backward":
            node = torch._C._current_autograd_node()
            where = node.name() if node is not None else "engine"
            if self._module_stack:
                where = f"{where} (recompute {self._module_stack[-1]})"
            return where
        if self._phase_kind == "optimizer":
            return "optimizer"
        return self._module_stack[-1] if self._module_stack else "model"

    def _on_free(self, rid: int, _ref: Any) -> None:
        self.recs[rid].free = len(self.kinds)
        self._emit(FREE, rid)
        self._refs.pop(rid, None)

    def _track(self, t: torch.Tensor, op: str, where: str) -> int | None:
        """Record of the storage behind `t`, creating it (an ALLOC event) if new. A DTensor
        (an FSDP2 shard) stands for its local tensor."""
        local = getattr(t, "_local_tensor", None)
        if isinstance(local, torch.Tensor):
            t = local
        try:
            storage = t.untyped_storage()
        except (NotImplementedError, RuntimeError):
            return None
        nbytes = rounded(int(storage.nbytes()))
        rid = self._rid.get(storage)
        if rid is not None:
            rec = self.recs[rid]
            if rec.nbytes == nbytes:
                return int(rid)
            # Resized in place: the old block goes, a new one comes (same category).
            self._refs.pop(rid, None)
            rec.free = len(self.kinds)
            self._emit(FREE, rid)
            fixed = rec.fixed
        else:
            fixed = None
        rid = len(self.recs)
        desc = f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)} {op}" + (f" @ {where}" if where else "")
        rec = Rec(nbytes, len(self.kinds), len(self.phases) - 1, desc)
        rec.fixed = fixed
        self.recs.append(rec)
        self._rid[storage] = rid
        self._refs[rid] = weakref.ref(storage, functools.partial(self._on_free, rid))
        self._emit(ALLOC, rid)
        return rid

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        name = func.__name__
        where = self._context()
        weight_copy = (
            func is torch.ops.aten._to_copy.default
            and self._phase_kind in ("forward", "backward")
            and self._is_param(args[0])
        )
        for t in outputs:
            rid = self._track(t, name, where)
            if weight_copy and rid is not None:
                self.recs[rid].weight_copy = True
        self._emit(CHECK, len(self.checks))
        self.checks.append((name, where))
        return out

    def _is_param(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        rid = self._rid.get(t.untyped_storage())
        return rid is not None and self.recs[rid].fixed is Cat.PARAM
