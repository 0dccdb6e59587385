"""Measured mode on preference and reward steps (measure/preference.py): TRL 1.16.0's own fused
log-prob head, the reference copy tracked as weights, the reward model's score head.

Skipped when the `measure` extra (torch, transformers, peft, trl) is not installed."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("trl")

from configs import TINY_LLAMA

from trainplan.engine.measure import measure_training_step
from trainplan.specs.errors import InputError

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

# TINY_LLAMA: vocab 256, hidden 64, intermediate 128, 2 layers, 4 heads of 16 (2 KV), untied
EMBED = HEAD = 256 * 64
LAYER = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64  # q, o; k, v; gate, up, down; 2 norms
TOTAL = EMBED + HEAD + 2 * LAYER + 64


def _dpo(**kwargs: object) -> object:
    return measure_training_step(TINY_LLAMA, stage="dpo", loss="logprob", micro_batch=2, seq_len=32, **kwargs)  # type: ignore[arg-type]


def test_the_reference_copy_is_tracked_as_weights() -> None:
    """A full DPO step under amp-bf16: the frozen fp32 reference copy doubles the parameters'
    bytes against precomputed log-probs (no copy); both train every weight."""
    copy = _dpo(method="full", reference="model", reference_dtype="fp32")
    none = _dpo(method="full", reference="precomputed")
    assert none.total_params == copy.total_params == TOTAL  # type: ignore[attr-defined]
    assert none.trainable_params == TOTAL  # type: ignore[attr-defined]
    assert none.params_bytes == pytest.approx(4 * TOTAL, abs=4096)  # type: ignore[attr-defined]
    assert copy.params_bytes - none.params_bytes == pytest.approx(4 * TOTAL, abs=4096)  # type: ignore[attr-defined]
    bf16 = _dpo(method="full", reference="model", reference_dtype="bf16")
    assert bf16.params_bytes - none.params_bytes == pytest.approx(2 * TOTAL, abs=4096)  # type: ignore[attr-defined]


def test_adapters_disabled_add_no_weights() -> None:
    lora = _dpo(method="lora", reference="adapter", precision="bf16")
    sft = measure_training_step(TINY_LLAMA, method="lora", precision="bf16", micro_batch=4, seq_len=32)
    assert lora.params_bytes == sft.params_bytes  # type: ignore[attr-defined]
    assert "dpo step as TRL 1.16.0 runs it: 4 sequences of 32 tokens" in " ".join(lora.notes)  # type: ignore[attr-defined]


def test_a_reward_model_trains_a_score_head_in_place_of_the_lm_head() -> None:
    """AutoModelForSequenceClassification(num_labels=1): the 256 x 64 LM head gives way to a
    1 x 64 score without a bias."""
    rm = measure_training_step(TINY_LLAMA, stage="rm", method="full", micro_batch=2, seq_len=32)
    assert rm.total_params == TOTAL - HEAD + 64
    assert rm.model_class == "LlamaForSequenceClassification"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"stage": "dpo", "loss": "logprob", "method": "full", "reference": "adapter"}, "reference"),
        ({"stage": "dpo", "loss": "standard"}, "loss"),  # no DPO trainer runs Hugging Face's loss
        ({"stage": "sft", "loss": "logprob"}, "loss"),
        ({"stage": "dpo", "reference": "model", "loss": "chunked"}, "stage"),
        ({"stage": "ppo"}, "loss"),  # PPO is traced with its own full-logits scoring (selective)
    ],
)
def test_untraceable_settings_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as error:
        measure_training_step(TINY_LLAMA, **kwargs)  # type: ignore[arg-type]
    assert error.value.field == field
