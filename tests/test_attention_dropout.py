"""`attention_dropout` in a Llama-style config: transformers' eager_attention_forward drops out
the probabilities in training (nn.functional.dropout(attn_weights, p=attention_dropout)), which
on CUDA keeps a bool mask per score (native_dropout) and the dropped probabilities in place of
the half copy probs @ v reads; flash and memory-efficient SDPA drop out inside the kernel and
keep nothing more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainplan import estimate
from trainplan.inputs.catalogs.models import find_model_record
from trainplan.specs.errors import InputError

LAYERS, HEADS = 16, 32  # Llama-3.2-1B


def _config(tmp_path: Path, dropout: Any) -> str:
    record = find_model_record("Llama-3.2-1B")
    assert record is not None
    folder = tmp_path / f"llama-{dropout}"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**record.config, "attention_dropout": dropout}))
    return str(folder / "config.json")


def _activations(model: str, attention: str) -> float:
    result = estimate(
        {"model": model, "method": "lora", "precision": "bf16", "micro_batch": 2, "seq_len": 1024,
         "attention": attention, "activation_checkpointing": "none", "cache_fraction": 0}
    )  # fmt: skip
    return result.peak.term("activations").value


def test_eager_attention_keeps_one_mask_byte_per_score(tmp_path: Path) -> None:
    dropped, plain = _config(tmp_path, 0.1), _config(tmp_path, 0.0)
    # layers x heads x batch x seq x seq bytes: 16 x 32 x 2 x 1024 x 1024
    assert _activations(dropped, "eager") - _activations(plain, "eager") == LAYERS * HEADS * 2 * 1024 * 1024
    assert _activations(dropped, "flash") == _activations(plain, "flash")


@pytest.mark.parametrize("value", ["0.1", True, 1.5, -0.1])
def test_a_dropout_that_is_no_probability_is_refused(tmp_path: Path, value: Any) -> None:
    with pytest.raises(InputError) as error:
        estimate({"model": _config(tmp_path, value)})
    assert "attention_dropout" in str(error.value)


def test_null_is_no_dropout(tmp_path: Path) -> None:
    assert _activations(_config(tmp_path, None), "eager") == _activations(_config(tmp_path, 0.0), "eager")


@pytest.mark.slow
def test_a_traced_step_with_attention_dropout(tmp_path: Path) -> None:
    """A traced LoRA step (eager attention, dropout 0.1): within 2% (+0.1% when written; -6.5%
    without the mask)."""
    pytest.importorskip("torch")
    from trainplan.engine.measure.compare import measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    comparison = measure_scenario(
        scenario_from_mapping(
            {
                "model": _config(tmp_path, 0.1),
                "method": "lora",
                "precision": "bf16",
                "micro_batch": 2,
                "seq_len": 1024,
                "attention": "eager",
                "activation_checkpointing": "none",
                "gpus": 1,
            }
        )
    )
    assert comparison.error is not None and abs(comparison.error) < 0.02, comparison.error
