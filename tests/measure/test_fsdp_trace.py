"""FSDP2 on a fake process group (rank 0 traced) against the estimate, and what is refused.

The traced model is a small untied Llama (hidden 512, 4 layers, MLP 1536, vocabulary 16384): its
embedding and head (8.4M parameters each) outweigh a layer (3.4M), so the root group, the
embedding's reduce-scatter at the end of backward and the all-gather pool are visible next to
the layers. Skipped when torch is not installed (the `measure` extra).
"""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.measure.compare import check_traceable
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario, scenario_from_mapping

SMALL_LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 512,
    "intermediate_size": 1536,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "num_hidden_layers": 4,
    "vocab_size": 16384,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
FSDP_8 = {"method": "full", "precision": "bf16-mixed", "gpus": 8, "zero_stage": 3, "grad_accum": 1}


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"fsdp_wrap": "root", "fsdp_reduce_dtype": "fp32"},
        {"activation_checkpointing": "none"},
        {"reshard_after_forward": False},
    ],
)
def test_rank0_trace_matches_the_estimate(fields: dict[str, Any]) -> None:
    pytest.importorskip("torch")
    from trainplan.engine.estimate import estimate
    from trainplan.engine.measure.fsdp import FsdpTrace
    from trainplan.engine.measure.trace import measure_training_step
    from trainplan.inputs.hf import spec_from_config

    scenario = scenario_from_mapping(
        {"model": "x", **FSDP_8, "optimizer": "adamw-fused", "micro_batch": 2, "seq_len": 512}
        | {"activation_checkpointing": "full", "overhead_gib": 0.0}
        | fields
    )
    check_traceable(scenario)
    measured = measure_training_step(
        SMALL_LLAMA,
        method="full",
        precision="bf16-mixed",
        optimizer="adamw-fused",
        micro_batch=2,
        seq_len=512,
        gradient_checkpointing=scenario.activation_checkpointing == "full",
        fsdp=FsdpTrace(
            8, scenario.fsdp_wrap, scenario.fsdp_reduce_dtype == "fp32", scenario.reshard_after_forward
        ),
    )
    result = estimate(scenario, model=spec_from_config(SMALL_LLAMA, "small"))
    # FSDP2's fp32 shards and Adam moments: 12 bytes per parameter over 8 ranks, exactly (the
    # shards are padded to whole rows; this model's rows divide by 8)
    params = result.params.total
    assert measured.params_bytes + measured.optimizer_bytes == pytest.approx(12 * params / 8, rel=1e-3)
    # the trace allocates what max_memory_allocated() would count: the estimate without the
    # side streams' reserved pools; within 5% (derived from the source, not fitted to this)
    assert result.allocated_peak_bytes / measured.peak_bytes - 1 == pytest.approx(0, abs=0.05)


def test_fsdp_traceable_and_refused_settings() -> None:
    check_traceable(Scenario(**FSDP_8))  # type: ignore[arg-type]
    cases = [
        ({**FSDP_8, "method": "lora"}, "method"),
        ({**FSDP_8, "fsdp_prefetch": 2}, "fsdp_prefetch"),
        ({**FSDP_8, "zero_stage": 2}, "gpus"),
        ({**FSDP_8, "tensor_parallel": 2}, "gpus"),
    ]
    for fields, field in cases:
        with pytest.raises(InputError) as error:
            check_traceable(Scenario(**fields))
        assert error.value.field == field, fields
    from trainplan.engine.measure.compare import _trace_precision

    with pytest.raises(InputError) as error:
        _trace_precision(Scenario(**{**FSDP_8, "precision": "amp-bf16"}))
    assert error.value.field == "precision"


def test_tied_embeddings_need_the_root_group() -> None:
    pytest.importorskip("torch")
    from trainplan.engine.measure.fsdp import FsdpTrace
    from trainplan.engine.measure.trace import measure_training_step

    tied = {**SMALL_LLAMA, "tie_word_embeddings": True}
    with pytest.raises(InputError) as error:
        measure_training_step(tied, precision="bf16-mixed", seq_len=64, fsdp=FsdpTrace(4))
    assert error.value.field == "fsdp_wrap"
