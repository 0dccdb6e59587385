"""The estimate JSON comes from the result dataclasses through one serialiser (`result.json_tree`):
every field reaches the JSON under its own name unless `JSON_SHAPES` declares a different key,
value or home. These tests hold the declarations to the types and to hand-computed figures."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from trainplan import estimate
from trainplan.engine.largest_fit import largest_that_fits
from trainplan.engine.result import JSON_SHAPES, field_names, json_tree
from trainplan.inputs.catalogs.gpus import GPU_CLASSES


def test_every_declared_name_is_a_field_of_its_type() -> None:
    """A renamed or removed field cannot leave a stale declaration behind."""
    for kind, shape in JSON_SHAPES.items():
        names = set(field_names(kind))
        declared = set(shape.keys) | set(shape.values) | set(shape.elsewhere)
        assert declared <= names, (kind.__name__, declared - names)
        assert not set(shape.derived) & names, kind.__name__  # a derived key never hides a field


def test_a_type_without_a_shape_is_written_field_by_field() -> None:
    @dataclass(frozen=True)
    class Figure:
        seconds: float
        parts: tuple[int, ...]
        by_name: dict[str, float]

    assert json_tree(Figure(1.5, (1, 2), {"a": 0.5})) == {
        "seconds": 1.5,
        "parts": [1, 2],
        "by_name": {"a": 0.5},
    }


def test_figures_kept_elsewhere_are_where_the_declaration_says() -> None:
    result = estimate({"gpus": 8})
    data = result.to_dict()
    assumptions = data["assumptions"]
    assert result.time is not None
    assert assumptions["efficiency_source"] == result.time.efficiency_source == "trainplan default"
    assert result.energy is not None
    assert assumptions["pue"] == result.energy.pue
    assert data["model"] == {"name": result.model_name, "source": result.model_source}
    assert data["memory"]["phases"].keys() == {phase.name for phase in result.phases}
    assert data["memory"]["peak_phase"] == result.peak.name


def test_derived_figures_by_hand() -> None:
    """8 GPUs, micro-batch 2, accumulation 4, 2,048 tokens: 2 x 4 x 8 = 64 sequences of 2,048
    tokens = 131,072 tokens a step; tokens/s per GPU is the cluster's rate over 8; the step is the
    sum of its causes."""
    data = estimate({"gpus": 8, "micro_batch": 2, "grad_accum": 4, "seq_len": 2048}).to_dict()
    assert data["batch"]["global_sequences"] == 64
    assert data["batch"]["global_tokens"] == 131_072
    time = data["time"]
    assert time["tokens_per_s"] == pytest.approx(131_072 / time["step_s"], rel=1e-12)
    assert time["tokens_per_s_per_gpu"] == pytest.approx(time["tokens_per_s"] / 8, rel=1e-12)
    assert time["step_s"] == pytest.approx(sum(time["step_breakdown_s"].values()), rel=1e-12)
    params = data["params"]
    assert params["trainable_fraction"] == pytest.approx(params["trainable"] / params["total"], rel=1e-12)
    assert params["approximate"] is False
    assert {row["class"] for row in data["fit"]} == set(GPU_CLASSES)


def test_the_max_object_leaves_the_estimate_out() -> None:
    """The default scenario's largest micro-batch: rounded down to its multiple, never above the limit."""
    data = largest_that_fits(estimate({}).scenario, "micro_batch", None).to_dict()
    assert sorted(data) == ["exact", "field", "headroom", "limit", "multiple", "value"]
    assert data["field"] == "micro_batch"
    assert data["value"] <= data["exact"]
    assert data["value"] % data["multiple"] == 0
