"""The closed-form yardstick `make bench` measures estimate() against computes what it says:
Llama-3.1-8B's published parameter count and ZeRO-3's 16 bytes per parameter over 8 GPUs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from trainplan.inputs.resolve import model_config

_SPEC = importlib.util.spec_from_file_location(
    "closed_form", Path(__file__).resolve().parents[1] / "bench" / "closed_form.py"
)
assert _SPEC is not None and _SPEC.loader is not None
_YARDSTICK = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_YARDSTICK)
GIB, closed_form_estimate = _YARDSTICK.GIB, _YARDSTICK.closed_form_estimate


def test_the_yardstick_counts_llama_8b_and_zero3_states() -> None:
    config = model_config("Llama-3.1-8B")[0]
    result = closed_form_estimate(
        config,
        seq_len=1024,
        micro_batch=1,
        gpus=8,
        zero_stage=3,
        gpu_memories=[("small", 16 * GIB), ("large", 80 * GIB)],
        peak_flops=989e12,
    )
    params = 8_030_261_248  # Meta's model card: 8.03B; embedding and head untied
    assert result["params"] == params
    memory = result["memory"]
    assert memory["weights"] == memory["gradients"] == 2 * params / 8
    assert memory["optimizer"] == 12 * params / 8
    assert memory["activations"] == 32 * 1024 * 4096 * 34  # layers x s x h x 34 bytes
    assert memory["logits"] == 4 * 1024 * 128_256
    assert result["fits"] == {"small": False, "large": True}  # 21.7 GiB
    assert memory["total"] / GIB == pytest.approx(21.70, abs=0.01)
    # 6 N per token at 40% of 989 TFLOP/s
    assert result["tokens_per_s_per_gpu"] == pytest.approx(989e12 * 0.4 / (6 * params))
