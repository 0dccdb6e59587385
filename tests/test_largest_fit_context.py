"""A sequence beyond the model's context window: a warning in the estimate (CLI, JSON, page), and
the largest-sequence search stops at the window unless told to search past it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from trainplan.engine.estimate import estimate
from trainplan.engine.largest_fit import largest_that_fits
from trainplan.inputs.hf import context_window
from trainplan.interfaces.cli.main import app
from trainplan.specs.scenario import scenario_from_mapping


def test_a_sequence_past_the_context_window_is_a_warning_not_an_error() -> None:
    # Llama-2-7B's config.json: max_position_embeddings 4096; Llama-3.1-8B's 131072
    long = estimate(scenario_from_mapping({"model": "Llama-2-7B", "seq_len": 8192}))
    assert any("beyond Llama-2-7B's context window of 4,096 tokens" in note for note in long.warnings)
    within = estimate(scenario_from_mapping({"model": "Llama-3.1-8B", "seq_len": 8192}))
    assert not any("context window" in note for note in within.warnings)
    assert long.total_bytes > 0


def test_the_window_of_a_config_with_rope_scaling() -> None:
    # a YaRN-stretched Qwen2.5 config (its model card's rope_scaling: factor 4, original 32768)
    scaling = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}
    stretched = {"max_position_embeddings": 32768, "rope_scaling": scaling}
    assert context_window(stretched) == 131072
    assert context_window({"n_positions": 1024}) == 1024 and context_window({}) == 0


def test_the_largest_sequence_stops_at_the_window_unless_told() -> None:
    scenario = scenario_from_mapping({"model": "Llama-2-7B", "method": "qlora", "gpu": "H100-SXM"})
    capped = largest_that_fits(scenario, "seq_len")
    assert (capped.value, capped.exact, capped.limit) == (4096, 4096, "context window")
    past = largest_that_fits(scenario, "seq_len", past_context=True)
    assert past.value > 4096 and past.limit == ""
    # the micro-batch search has no such stop
    assert largest_that_fits(scenario, "micro_batch").limit == ""
    args = ["estimate", "--model", "Llama-2-7B", "--method", "qlora", "--max", "seq_len"]
    ran = CliRunner().invoke(app, [*args, "--json"])
    assert json.loads(ran.output)["max"]["limit"] == "context window"
    text = CliRunner().invoke(app, [*args, "--past-context"]).output
    assert "context window" not in text.splitlines()[0] and "Largest sequence length that fits" in text
