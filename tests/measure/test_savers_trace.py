"""The memory savers' derivations against traced storages (real CPU tensors, the storage tracker).

Each test runs the technique as the framework implements it on a small problem whose tensors are
multiples of 512 bytes (so the allocator rounding adds nothing but a few scalars) and compares
what stays alive after forward (held for backward) and the peak of the new storages with the
bytes terms/savers.py derives. Skipped when torch is not installed (the `measure` extra).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from trainplan.engine.measure.replay import ALLOC, FREE, Cat  # noqa: E402
from trainplan.engine.measure.tracker import StorageTracker  # noqa: E402
from trainplan.engine.terms.savers import chunked_loss_bytes, lora_dropout_input_bytes  # noqa: E402

F = torch.nn.functional


class Window:
    """Storages born inside a traced call: those alive at its end, and the peak of their sum."""

    def __init__(self, tracker: StorageTracker, start: int, end: int) -> None:
        self.tracker, self.start, self.end = tracker, start, end

    def _new(self, rid: int) -> bool:
        rec = self.tracker.recs[rid]
        return rec.alloc >= self.start and rec.fixed is not Cat.PARAM

    @property
    def held(self) -> int:
        recs = self.tracker.recs
        return sum(
            r.nbytes
            for rid, r in enumerate(recs)
            if self._new(rid) and r.alloc < self.end and (r.free is None or r.free >= self.end)
        )

    @property
    def peak(self) -> int:
        """Largest sum of the storages born in the window."""
        return self._peak(lambda rid: self._new(rid), 0)

    @property
    def absolute_peak(self) -> int:
        """Largest sum of every non-parameter storage alive during the window (older ones too)."""
        recs = self.tracker.recs
        counted = [r.fixed is not Cat.PARAM for r in recs]
        alive = sum(
            r.nbytes
            for rid, r in enumerate(recs)
            if counted[rid] and r.alloc < self.start and (r.free is None or r.free >= self.start)
        )
        return self._peak(lambda rid: counted[rid], alive)

    def _peak(self, counts: Callable[[int], bool], total: int) -> int:
        best = total
        kinds = self.tracker.kinds[self.start : self.end]
        args = self.tracker.args[self.start : self.end]
        for kind, arg in zip(kinds, args, strict=True):
            if kind == ALLOC and counts(arg):
                total += self.tracker.recs[arg].nbytes
            elif kind == FREE and counts(arg):
                total -= self.tracker.recs[arg].nbytes
            best = max(best, total)
        return best


def _no_patch() -> Any:
    import contextlib

    return contextlib.nullcontext()


def traced(tracker: StorageTracker, fn: Callable[[], Any]) -> tuple[Any, Window]:
    start = len(tracker.kinds)
    with tracker:
        out = fn()
    return out, Window(tracker, start, len(tracker.kinds))


def test_chunked_cross_entropy_matches_its_derivation() -> None:
    # torchtune CEWithChunkedOutputLoss: a frozen bf16 head applied per chunk of the hidden
    # states, each chunk upcast and put through cross-entropy on its own
    torch.manual_seed(0)
    tokens, hidden, vocab, chunks = 256, 64, 4096, 8
    head = torch.randn(vocab, hidden, dtype=torch.bfloat16)
    h = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    tracker = StorageTracker()
    tracker.register([head, h], Cat.PARAM)

    def logits_of() -> list[Any]:
        return [F.linear(chunk, head) for chunk in h.tensor_split(chunks)]

    held_logits = {"chunks": traced(tracker, logits_of)[0]}

    def loss_of() -> Any:
        parts = zip(held_logits["chunks"], labels.tensor_split(chunks), strict=True)
        return sum(F.cross_entropy(c.float(), y, reduction="sum") for c, y in parts)

    loss, forward = traced(tracker, loss_of)
    held_logits.clear()  # the recipe deletes the logits once the loss is computed
    held_expected, loss_expected, backward_expected = chunked_loss_bytes(vocab, 2, chunks)
    elements = tokens  # chunked_loss_bytes is per token (x vocab inside)
    # while the loss runs: log-softmax of every chunk + one chunk's upcast (the logits, made
    # before, are in the derivation's `a` term)
    assert forward.peak == pytest.approx((loss_expected - 2 * vocab) * elements, rel=0.02)
    _, backward = traced(tracker, loss.backward)
    assert forward.held == pytest.approx(held_expected * elements, rel=0.02)
    # backward: all of the log-softmax plus the first chunk's two fp32 gradients. (The head's
    # matmuls were recorded before the losses, so the engine runs every chunk's loss backward
    # first: the bf16 logit gradients pile up while the log-softmax is freed, a smaller sum.)
    assert backward.absolute_peak == pytest.approx(backward_expected * elements, rel=0.02)


def test_lora_dropout_keeps_a_mask_per_module() -> None:
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    tokens, width = 512, 256

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj = torch.nn.Linear(width, width, bias=False, dtype=torch.bfloat16)
            self.v_proj = torch.nn.Linear(width, width, bias=False, dtype=torch.bfloat16)

        def forward(self, x: Any) -> Any:
            return self.q_proj(x) + self.v_proj(x)

    from trainplan.engine.measure.emulation import _cuda_dropout, _patched

    held: dict[float, int] = {}
    cuda_dropout = _patched(F, "dropout", _cuda_dropout(F.dropout))  # a bool mask, as on CUDA
    for dropout in (0.0, 0.1):
        config = peft.LoraConfig(r=8, target_modules=["q_proj", "v_proj"], lora_dropout=dropout)
        model = peft.get_peft_model(Attention(), config)
        x0 = torch.randn(tokens, width, dtype=torch.bfloat16, requires_grad=True)
        tracker = StorageTracker()
        tracker.register([*model.parameters(), x0], Cat.PARAM)
        x = x0 * 1  # a hidden state, not a leaf
        with cuda_dropout if dropout else _no_patch():
            _, window = traced(tracker, lambda model=model, x=x: model(x))
        held[dropout] = window.held
    # without dropout each adapter keeps an fp32 copy of x (4 B); with it the dropped fp32 copy
    # and a bool mask (4 + 1 B): the difference is one mask per adapted module
    with_dropout = lora_dropout_input_bytes(2, False, width) * tokens
    assert held[0.1] - held[0.0] == pytest.approx(2 * (with_dropout - 4 * width * tokens), rel=0.02)


def test_op_level_sac_saves_every_second_matmul() -> None:
    from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

    from trainplan.engine.terms.savers import op_sac_saved
    from trainplan.inputs.hf import spec_from_config

    torch.manual_seed(0)
    tokens, hidden, heads, kv_heads, inner = 256, 128, 4, 2, 256
    head_dim = hidden // heads
    spec = spec_from_config(
        {
            "model_type": "llama",
            "hidden_size": hidden,
            "intermediate_size": inner,
            "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "num_hidden_layers": 1,
            "vocab_size": 512,
        },
        "tiny",
    )
    shapes = {"q": hidden, "k": kv_heads * head_dim, "v": kv_heads * head_dim, "o": hidden}
    w = {name: torch.randn(out, hidden, dtype=torch.bfloat16) for name, out in shapes.items()}
    w["gate"] = torch.randn(inner, hidden, dtype=torch.bfloat16)
    w["up"] = torch.randn(inner, hidden, dtype=torch.bfloat16)
    w["down"] = torch.randn(hidden, inner, dtype=torch.bfloat16)
    for weight in w.values():
        weight.requires_grad_(True)

    def block(x: Any) -> Any:
        q = F.linear(x, w["q"]).view(1, tokens, heads, head_dim).transpose(1, 2)
        k = F.linear(x, w["k"]).view(1, tokens, kv_heads, head_dim).transpose(1, 2)
        v = F.linear(x, w["v"]).view(1, tokens, kv_heads, head_dim).transpose(1, 2)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(tokens, hidden)
        x = x + F.linear(a, w["o"])
        return x + F.linear(F.silu(F.linear(x, w["gate"])) * F.linear(x, w["up"]), w["down"])

    # torchtitan's rule: save mm and SDPA outputs, except every second mm (count per block);
    # on CPU, SDPA dispatches to the flash kernel's CPU variant
    save = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}

    def context() -> Any:
        counts: dict[str, int] = defaultdict(int)

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            mode = "recompute" if ctx.is_recompute else "forward"
            if func == torch.ops.aten.mm.default:
                counts[mode] += 1
            keep = func in save and not (func == torch.ops.aten.mm.default and counts[mode] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    x0 = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    tracker = StorageTracker()
    tracker.register([*w.values(), x0], Cat.PARAM)
    x = x0 * 1  # the block input, kept by the checkpoint
    _, window = traced(tracker, lambda: checkpoint(block, x, use_reentrant=False, context_fn=context))
    saved, _ = op_sac_saved(spec.blocks[0], spec, 2)
    # the output (bf16, hidden) is also alive; the block input x was made before the window
    output = 2 * hidden
    assert window.held - output * tokens == pytest.approx(saved * tokens, rel=0.01)


def test_optimizer_in_backward_holds_one_gradient_at_a_time() -> None:
    torch.manual_seed(0)
    sizes = [(256, 512), (512, 1024), (1024, 256)]
    layers = [torch.nn.Linear(i, o, bias=False) for i, o in sizes]
    model = torch.nn.Sequential(*layers)
    steps = {p: torch.optim.SGD([p], lr=0.1) for p in model.parameters()}

    def step_and_free(p: Any) -> None:
        steps[p].step()
        p.grad = None

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step_and_free)
    x = torch.randn(64, 256)
    tracker = StorageTracker()
    tracker.register(model.parameters(), Cat.PARAM)
    loss = model(x).square().sum()
    _, backward = traced(tracker, loss.backward)
    largest = max(i * o for i, o in sizes) * 4
    # every gradient is freed right after its step: the peak of new storages is the largest
    # gradient plus activation gradients, far below all gradients together
    activation_grads = 2 * 64 * 1024 * 4  # at most two activation gradients of the widest layer
    assert largest <= backward.peak <= largest + activation_grads
    assert backward.peak < sum(i * o for i, o in sizes) * 4
    assert all(p.grad is None for p in model.parameters())


def test_rms_norm_is_traced_as_cuda_fused_kernel() -> None:
    """With matching dtypes CUDA runs F.rms_norm as `_fused_rms_norm`, whose backward reads the
    bf16 input and the fp32 1/rms per row; the emulation keeps exactly those (CPU's decomposition
    keeps an fp32 upcast instead) and gives the same gradients."""
    import torch
    import torch.nn.functional as F

    from trainplan.engine.measure.emulation import _cuda_rms_norm

    rms_norm = _cuda_rms_norm(F.rms_norm)
    x = torch.randn(3, 5, 64, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(64, dtype=torch.bfloat16, requires_grad=True)
    saved: list[tuple[torch.dtype, int]] = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append((t.dtype, t.numel())) or t, lambda t: t
    ):
        out = rms_norm(x, (64,), weight, 1e-6)
    assert sorted(saved, key=str) == sorted(
        [(torch.bfloat16, 3 * 5 * 64), (torch.float32, 3 * 5), (torch.bfloat16, 64)], key=str
    )
    (out.float() ** 2).sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    w_ref = weight.detach().clone().requires_grad_(True)
    (F.rms_norm(x_ref, (64,), w_ref, 1e-6).float() ** 2).sum().backward()
    assert x.grad is not None and weight.grad is not None
    assert torch.allclose(x.grad.float(), x_ref.grad.float(), rtol=5e-2, atol=1e-1)
    assert torch.allclose(weight.grad.float(), w_ref.grad.float(), rtol=5e-2, atol=1e-1)
    # an fp32 weight on a bf16 input is not fused on CUDA either: the original path runs
    import warnings

    fp32 = torch.ones(64, requires_grad=True)
    kept: list[tuple[torch.dtype, int]] = []
    with (
        warnings.catch_warnings(),  # torch notes that the dtypes differ and it cannot fuse
        torch.autograd.graph.saved_tensors_hooks(
            lambda t: kept.append((t.dtype, t.numel())) or t, lambda t: t
        ),
    ):
        warnings.simplefilter("ignore", UserWarning)
        rms_norm(x, (64,), fp32, 1e-6)
    assert (torch.float32, 3 * 5 * 64) in kept and (torch.bfloat16, 3 * 5 * 64) not in kept
