# mypy: disable-error-code="no-untyped-call"
# (torch, transformers and peft are only partly typed; their untyped calls are expected here.)
"""The traced training loop and its summary; model-agnostic (tests use it on a plain MLP)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from trainplan.engine.measure.replay import Cat, alive_at, replay
from trainplan.engine.measure.result import CATEGORIES
from trainplan.engine.measure.tracker import StorageTracker


def trace_steps(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    *,
    fused: bool,
    make_batch: Callable[[], dict[str, Any]],
    loss_of: Callable[[torch.nn.Module, dict[str, Any]], torch.Tensor],
    steps: int,
    in_backward: dict[torch.nn.Parameter, torch.optim.Optimizer] | None = None,
    fsdp: bool = False,
    ema: Sequence[torch.Tensor] = (),
    after_step: Callable[[], None] | None = None,
    frozen: Sequence[torch.Tensor] = (),
) -> dict[str, Any]:
    """Run `steps` training steps under a StorageTracker; return the MeasuredStep measurement fields.

    A step: make the batch, `loss_of(model, batch)`, backward, drop the batch (HF Trainer deletes
    its inputs before the optimizer step), `optimizer.step()`, `zero_grad(set_to_none=True)`.
    Optimizer `step` counters count as device memory only for the fused AdamW (the foreach and
    single-tensor implementations keep them on the host). With `in_backward` (one optimizer per
    parameter), each parameter steps in its post-accumulate-grad hook and its gradient is freed
    there, as torchtune's optimizer_in_bwd does; `optimizer` is then not stepped. With `fsdp`
    (an FSDP2-sharded model) the tracker follows FSDP2's storage resizes, and the sharded
    gradients, which FSDP2 assigns without running gradient hooks, are marked after backward.
    `ema` tensors (an EMA copy of the weights, a JEPA's target encoder) are tracked as EMA, and
    `after_step` (their update) runs after `zero_grad`, in the optimizer phase, as the diffusers
    training scripts call `EMAModel.step` and V-JEPA its momentum update. `frozen` tensors (a
    frozen reference model's weights) are tracked as parameters.
    """
    trainable = [p for p in model.parameters() if p.requires_grad]
    tracker = StorageTracker()
    tracker.register(model.parameters(), Cat.PARAM)
    tracker.register(model.buffers(), Cat.BUFFER)
    if frozen:
        tracker.register(frozen, Cat.PARAM)
    if ema:
        tracker.register(ema, Cat.EMA)
    handles = [
        p.register_post_accumulate_grad_hook(lambda p: tracker.mark(p.grad, Cat.GRAD)) for p in trainable
    ]
    if in_backward is not None:

        def step_and_free(p: torch.nn.Parameter) -> None:
            single = in_backward[p]
            single.step()
            _mark_state(tracker, single, fused)
            p.grad = None

        handles += [p.register_post_accumulate_grad_hook(step_and_free) for p in trainable]
    resizes: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if fsdp:
        from trainplan.engine.measure.fsdp import storage_resizes

        resizes = storage_resizes(tracker.resized)
    try:
        with tracker, tracker.module_context(model), _recompute_marks(tracker), resizes:
            for step in range(1, steps + 1):
                tracker.phase(step, "forward")
                batch = make_batch()
                loss = loss_of(model, batch)
                tracker.phase(step, "backward")
                loss.backward()
                del loss, batch
                if fsdp:
                    for p in trainable:
                        tracker.mark(p.grad, Cat.GRAD)
                tracker.phase(step, "optimizer")
                if in_backward is None:
                    optimizer.step()
                    _mark_state(tracker, optimizer, fused)
                optimizer.zero_grad(set_to_none=True)
                if after_step is not None:
                    after_step()
        return summarise(tracker, model, trainable)
    finally:
        for handle in handles:
            handle.remove()
        tracker.close()


def _mark_state(tracker: StorageTracker, optimizer: torch.optim.Optimizer, fused: bool) -> None:
    """Optimizer state is OPT; step counters are host memory except for the fused AdamW."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                host = key == "step" and not fused
                tracker.mark(value, Cat.HOST if host else Cat.OPT)


@contextlib.contextmanager
def _recompute_marks(tracker: StorageTracker) -> Iterator[None]:
    """Flag tensors that non-reentrant checkpointing re-saves during backward (activations)."""
    import torch.utils.checkpoint as ckpt

    original = ckpt._recomputation_hook

    class Marking(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            inner: Callable[[Any], Any] = vars(self)["pack_hook"]

            def pack(x: Any) -> Any:
                tracker.mark_recomputed(x)
                return inner(x)

            self.pack_hook = pack

    setattr(ckpt, "_recomputation_hook", Marking)  # noqa: B010 (restored below)
    try:
        yield
    finally:
        setattr(ckpt, "_recomputation_hook", original)  # noqa: B010


def _math_sdpa_note(tracker: StorageTracker) -> tuple[str, ...]:
    """A note if SDPA ran the CPU math path (b*h*s*s probabilities), which CUDA would avoid."""
    calls = sum(1 for op, _ in tracker.checks if op == "_safe_softmax.default")
    if not calls:
        return ()
    return (
        f"SDPA ran the math path in {calls} calls over all steps (a mask needing a gradient, or a mask "
        "with dropout): attention probabilities b*h*s*s are materialised; CUDA would use "
        "memory-efficient attention, so attention activations are overstated",
    )


def summarise(
    tracker: StorageTracker, model: torch.nn.Module, trainable: list[torch.nn.Parameter]
) -> dict[str, Any]:
    """Replay the log and turn it into MeasuredStep measurement fields."""
    result = replay(tracker.recs, tracker.kinds, tracker.args, tracker.phases)
    peak = result.peak
    step, kind = tracker.phases[peak.phase] if peak.phase >= 0 else (0, "setup")
    op, where = tracker.checks[peak.check]
    recs = tracker.recs
    live = alive_at(recs, result.cats, peak.event)
    live.sort(key=lambda i: -recs[i].nbytes)
    top = tuple(
        f"{result.cats[i].name.lower()} {recs[i].nbytes / 2**20:.1f} MiB {recs[i].desc}" for i in live[:8]
    )
    phase_peaks: dict[str, int] = {}
    breakdowns: dict[str, dict[str, int]] = {}
    copies: dict[str, int] = {}
    for index, (s, k) in enumerate(tracker.phases):
        snaps = [(f"step{s}.{k}", result.phase_peaks.get(index))]
        if k == "backward":
            snaps.insert(0, (f"step{s}.forward_end", result.forward_ends.get(index)))
        for label, snap in snaps:
            if snap is not None:
                phase_peaks[label] = snap.total
                breakdowns[label] = snap.breakdown()
                copies[label] = snap.weight_copies
    unique = {id(p): p.numel() for p in model.parameters()}
    breakdown = peak.breakdown()
    assert sum(breakdown.values()) == peak.total
    return {
        "peak_bytes": peak.total,
        "peak_phase": kind,
        "peak_step": step,
        **{f"{name}_bytes": breakdown[name] for name in CATEGORIES},
        "phase_peaks_bytes": phase_peaks,
        "phase_breakdowns_bytes": breakdowns,
        "trainable_params": sum(p.numel() for p in trainable),
        "total_params": sum(unique.values()),
        "weight_copies_bytes": peak.weight_copies,
        "phase_weight_copies_bytes": copies,
        "peak_op": op,
        "peak_context": where,
        "peak_top_tensors": top,
        "reserved_peak_bytes": result.reserved_peak,
        "reserved_peak_expandable_bytes": result.reserved_peak_expandable,
        "notes": _math_sdpa_note(tracker),
    }
