"""Measured mode: the storage tracker against hand-computed peaks and against real-tensor runs.

Skipped when torch is not installed (measured mode is the optional `measure` extra).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from configs import TINY_LLAMA  # noqa: E402

from trainplan.engine.measure import measure_training_step  # noqa: E402
from trainplan.engine.measure.loop import trace_steps  # noqa: E402
from trainplan.engine.measure.model import make_optimizer  # noqa: E402
from trainplan.engine.measure.replay import ALLOC, CHECK, FREE, PHASE, Cat, Rec, replay  # noqa: E402
from trainplan.engine.measure.tracker import rounded  # noqa: E402
from trainplan.specs.errors import InputError  # noqa: E402

# transformers/peft emit deprecation and user warnings on model construction; they are not ours.
pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

TINY = TINY_LLAMA
WIDTH = 1024  # 1024 x 1024 fp32 weights: 4 MiB each, a multiple of 512 B, so rounding adds nothing
PARAMS = 2 * WIDTH * WIDTH


def _mlp_run(optimizer: str) -> dict[str, Any]:
    """Two bias-free 1024x1024 fp32 linears, batch 4, two AdamW steps, real tensors."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
    )
    opt, fused = make_optimizer(optimizer, list(model.parameters()))
    return trace_steps(
        model,
        opt,
        fused=fused,
        make_batch=lambda: {"x": torch.randn(4, WIDTH)},
        loss_of=lambda m, b: m(b["x"]).square().mean(),
        steps=2,
    )


def test_rounding_to_cuda_blocks() -> None:
    assert [rounded(n) for n in (0, 1, 512, 513, 4096)] == [0, 512, 512, 1024, 4096]


def test_foreach_adamw_peaks_at_20_bytes_per_param() -> None:
    # Step 2's optimizer step holds weights (4 B/param), grads (4), exp_avg + exp_avg_sq (8) and
    # foreach AdamW's sqrt(exp_avg_sq) scratch list (4): 20 B/param. Batch, loss and graph are
    # gone by then, and foreach keeps `step` on the host, so nothing else is counted.
    r = _mlp_run("adamw")
    assert r["peak_bytes"] == 20 * PARAMS
    assert (r["peak_phase"], r["peak_step"], r["peak_op"]) == ("optimizer", 2, "_foreach_sqrt.default")
    assert r["params_bytes"] == r["grads_bytes"] == r["temporaries_bytes"] == 4 * PARAMS
    assert r["optimizer_bytes"] == 8 * PARAMS
    assert r["activations_bytes"] == r["buffers_bytes"] == 0


def test_fused_adamw_holds_16_bytes_per_param() -> None:
    # Fused AdamW has no scratch: its step holds 4 + 4 + 8 = 16 B/param, plus one fp32 `step`
    # scalar per parameter tensor on the device (2 x 512 B after rounding).
    r = _mlp_run("adamw-fused")
    steps_on_device = 2 * 512
    assert r["phase_peaks_bytes"]["step2.optimizer"] == 16 * PARAMS + steps_on_device
    at_step = r["phase_breakdowns_bytes"]["step2.optimizer"]
    assert at_step == {
        "params": 4 * PARAMS,
        "buffers": 0,
        "grads": 4 * PARAMS,
        "optimizer": 8 * PARAMS + steps_on_device,
        "activations": 0,
        "temporaries": 0,
        "ema": 0,  # no EMA copy for a language model
    }
    # The overall peak is in step 2's backward, when the first layer's weight gradient is made:
    # all 16 B/param are resident, plus the input x (4 x 1024 fp32 = 16 KiB, saved for that mm)
    # and the loss (512 B) as activations, and dL/dh (16 KiB) and the autograd seed (512 B) as
    # temporaries.
    extra = 16384 + 512
    assert (r["peak_phase"], r["peak_step"]) == ("backward", 2)
    assert r["peak_bytes"] == 16 * PARAMS + steps_on_device + 2 * extra
    assert (r["activations_bytes"], r["temporaries_bytes"]) == (extra, extra)


def _memtracker_peak(optimizer: str) -> int:
    """Peak of torch's own MemTracker on the same MLP run, with its 512-B rounding applied on CPU."""
    import math

    from torch.distributed._tools import mem_tracker

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
        torch.nn.ReLU(),
        torch.nn.Linear(WIDTH, WIDTH, bias=False),
    )
    opt, _ = make_optimizer(optimizer, list(model.parameters()))
    info = mem_tracker._WeakRefInfo
    original = info._calculate_mem_consumed
    info._calculate_mem_consumed = lambda self: math.ceil(self.size * self.element_size / 512) * 512
    try:
        tracker = mem_tracker.MemTracker()
        tracker.track_external(model, opt)
        with tracker:
            for _ in range(2):
                x = torch.randn(4, WIDTH)
                loss = model(x).square().mean()
                loss.backward()
                del loss, x
                opt.step()
                opt.zero_grad(set_to_none=True)
                tracker.reset_mod_stats()
        return int(next(iter(tracker.get_tracker_snapshot("peak").values()))["Total"])
    finally:
        info._calculate_mem_consumed = original


def test_peak_agrees_with_torch_memtracker() -> None:
    # Same mechanism, same peak. The one difference: MemTracker also counts foreach AdamW's two
    # host-side `step` scalars (2 x 512 B), which a CUDA run keeps in host memory.
    assert _mlp_run("adamw-fused")["peak_bytes"] == _memtracker_peak("adamw-fused")
    assert _mlp_run("adamw")["peak_bytes"] + 2 * 512 == _memtracker_peak("adamw")


def _pair(**kwargs: Any) -> tuple[Any, Any]:
    real = measure_training_step(TINY, fake=False, seq_len=64, micro_batch=2, **kwargs)
    fake = measure_training_step(TINY, fake=True, seq_len=64, micro_batch=2, **kwargs)
    return real, fake


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"gradient_checkpointing": True, "optimizer": "adamw-fused"},
        {"method": "lora", "precision": "bf16", "optimizer": "sgd-momentum"},
        {"attention": "eager", "precision": "fp32"},
    ],
)
def test_fake_tensors_match_real_tensors_to_the_byte(kwargs: dict[str, Any]) -> None:
    real, fake = _pair(**kwargs)
    assert fake.peak_bytes == real.peak_bytes
    assert fake.breakdown() == real.breakdown()
    assert fake.phase_peaks_bytes == real.phase_peaks_bytes
    assert (fake.peak_phase, fake.peak_step) == (real.peak_phase, real.peak_step)
    assert sum(fake.breakdown().values()) == fake.peak_bytes


def test_tied_embeddings_fake_matches_real() -> None:
    tied = dict(TINY, tie_word_embeddings=True)
    real = measure_training_step(tied, fake=False, seq_len=32)
    fake = measure_training_step(tied, fake=True, seq_len=32)
    assert (fake.peak_bytes, fake.breakdown()) == (real.peak_bytes, real.breakdown())


def _lora_count(rank: int, shapes: list[tuple[int, int]], layers: int) -> int:
    """A (rank x in) + B (out x rank) per targeted linear, per layer."""
    return layers * sum(rank * (fan_in + fan_out) for fan_in, fan_out in shapes)


def test_lora_trainable_params_match_hand_count() -> None:
    # Tiny llama: hidden 64, 4 heads of 16, 2 KV heads -> q 64->64, v 64->32, k 64->32, o 64->64,
    # gate/up 64->128, down 128->64.
    qv = measure_training_step(TINY, method="lora", lora_rank=8, seq_len=16)
    assert qv.trainable_params == _lora_count(8, [(64, 64), (64, 32)], layers=2)
    every = measure_training_step(TINY, method="lora", lora_rank=4, lora_targets=("all-linear",), seq_len=16)
    linears = [(64, 64), (64, 32), (64, 32), (64, 64), (64, 128), (64, 128), (128, 64)]
    assert every.trainable_params == _lora_count(4, linears, layers=2)
    dora = measure_training_step(TINY, method="dora", lora_rank=8, seq_len=16)
    # DoRA adds one magnitude per output feature of each targeted linear.
    assert dora.trainable_params == qv.trainable_params + 2 * (64 + 32)
    assert qv.total_params == 106816 + qv.trainable_params  # base model + adapters


def test_amp_uses_cuda_fp32_policy_and_caches_weight_copies() -> None:
    from trainplan.engine.measure.emulation import cuda_autocast_policy

    x = torch.ones(4, dtype=torch.bfloat16)
    with cuda_autocast_policy(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert x.exp().dtype == torch.float32  # CUDA: fp32; CPU autocast alone keeps bf16
        assert x.sum().dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert x.exp().dtype == torch.bfloat16  # registration is undone on exit
    amp = measure_training_step(TINY, seq_len=64, micro_batch=2)
    # bf16 copies of all linear weights (q/k/v/o/gate/up/down per layer, and lm_head) are saved
    # for backward, so they are alive at this run's peak (early in step 2's backward).
    assert (amp.peak_phase, amp.peak_step) == ("backward", 2)
    linear_params = 2 * (4096 + 2048 + 2048 + 4096 + 3 * 8192) + 256 * 64
    assert amp.weight_copies_bytes == 2 * linear_params
    assert amp.phase_weight_copies_bytes["step2.forward_end"] == 2 * linear_params
    fp32 = measure_training_step(TINY, precision="fp32", seq_len=64, micro_batch=2)
    assert fp32.weight_copies_bytes == 0


def test_replay_classifies_with_hindsight() -> None:
    # Forward makes a (still alive when backward starts: activation) and b (freed in forward:
    # temporary); backward makes c (temporary). Event indices are positions in `kinds`.
    recs = [Rec(512, 1, 0, "a"), Rec(1024, 2, 0, "b"), Rec(2048, 7, 1, "c")]
    recs[0].free, recs[1].free, recs[2].free = 10, 4, 9
    kinds = [PHASE, ALLOC, ALLOC, CHECK, FREE, PHASE, CHECK, ALLOC, CHECK, FREE, FREE]
    args = [0, 0, 1, 0, 1, 1, 1, 2, 2, 2, 0]
    result = replay(recs, kinds, args, [(1, "forward"), (1, "backward")])
    assert result.cats == [Cat.ACT, Cat.TEMP, Cat.TEMP]
    assert result.peak.total == 2560
    assert result.peak.breakdown()["activations"] == 512
    assert result.peak.breakdown()["temporaries"] == 2048
    assert result.phase_peaks[0].breakdown()["temporaries"] == 1024
    assert result.forward_ends[1].total == 512
    # the caching allocator packs the three small blocks into one 2 MiB segment
    assert result.reserved_peak == result.reserved_peak_expandable == 2 << 20


def test_replay_models_the_reserved_pool() -> None:
    """Two 10 MiB tensors, the first freed, then a 12 MiB one: 22 MiB allocated at the peak,
    and by the allocator's rules 32 MiB reserved (the free 10 MiB block cannot serve 12)."""
    mib = 1 << 20
    recs = [Rec(10 * mib, 1, 0, "a"), Rec(10 * mib, 2, 0, "b"), Rec(12 * mib, 4, 0, "c")]
    recs[0].free, recs[1].free, recs[2].free = 3, 6, 7
    kinds = [PHASE, ALLOC, ALLOC, FREE, ALLOC, CHECK, FREE, FREE]
    args = [0, 0, 1, 0, 2, 0, 1, 2]
    result = replay(recs, kinds, args, [(1, "forward")])
    assert result.peak.total == 22 * mib
    assert result.reserved_peak == result.reserved_peak_expandable == 32 * mib


def test_bad_settings_raise_input_errors() -> None:
    with pytest.raises(InputError, match="precision"):
        measure_training_step(TINY, precision="fp8")
    with pytest.raises(InputError, match="seq_len"):
        measure_training_step(TINY, seq_len=0)
