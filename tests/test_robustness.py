"""No input makes estimate() or plan() fail with anything but a clear InputError."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainplan.engine.estimate import estimate
from trainplan.inputs.catalogs.gpus import gpu_catalog
from trainplan.inputs.catalogs.models import model_records
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import (
    ATTENTION,
    BASE_WEIGHTS,
    CHECKPOINTING,
    METHODS,
    OFFLOAD,
    OPTIMIZERS,
    PRECISIONS,
    PRICING,
    scenario_from_mapping,
)

MODELS = [record.name for record in model_records()]
GPUS = [gpu.name for gpu in gpu_catalog()]

fields = st.fixed_dictionaries(
    {
        "model": st.sampled_from(MODELS),
        "method": st.sampled_from(METHODS),
        "precision": st.sampled_from(PRECISIONS),
        "optimizer": st.sampled_from(OPTIMIZERS),
        "activation_checkpointing": st.sampled_from(CHECKPOINTING),
        "attention": st.sampled_from(ATTENTION),
        "gpu": st.sampled_from(GPUS),
        "pricing": st.sampled_from(PRICING),
    },
    optional={
        "base_weights": st.sampled_from(BASE_WEIGHTS),
        "micro_batch": st.integers(-2, 64),
        "seq_len": st.integers(-1, 200_000),
        "grad_accum": st.integers(0, 64),
        "gpus": st.sampled_from([1, 2, 3, 8, 16, 64, 1024]),
        "zero_stage": st.integers(-1, 4),
        "tensor_parallel": st.sampled_from([1, 2, 3, 4, 8, 16]),
        "pipeline_parallel": st.sampled_from([1, 2, 3, 4, 8, 200]),
        "offload": st.sampled_from(OFFLOAD),
        "mfu": st.one_of(st.none(), st.floats(-1, 2) | st.just(float("nan"))),
        "lora": st.fixed_dictionaries(
            {
                "rank": st.integers(-1, 512),
                "targets": st.sampled_from(["qv", "attention", "all-linear", "o_proj,down_proj", "nothing"]),
            }
        ),
        "train_tokens": st.floats(-1, 1e13),
        "load_source": st.sampled_from(["local-nvme", "object-store", "network-fs", "3.5", "-1", "tape"]),
        "region": st.sampled_from(["us-east-1", "FR", "nowhere"]),
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields)
def test_estimate_never_crashes(data: dict[str, Any]) -> None:
    try:
        result = estimate(scenario_from_mapping(data))
    except InputError as error:
        assert error.field and error.message
        return
    assert result.total_bytes > 0
    assert all(term.value >= 0 for term in result.peak.terms)
    if result.time is not None:
        assert result.time.total_s > 0
