"""`trainplan measure`: live traces vs the estimate (a small CI subset), the CLI and its errors."""

from __future__ import annotations

import json
import statistics

import pytest
from typer.testing import CliRunner

from trainplan.engine.measure.compare import check_traceable
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario

LIVE = [
    {"model": "Qwen2.5-0.5B", "method": "lora", "micro_batch": 2, "seq_len": 512},
    {"model": "GPT-2", "method": "full", "precision": "amp-bf16", "micro_batch": 2, "seq_len": 256},
    {"model": "Llama-3.2-1B", "method": "full", "precision": "bf16", "optimizer": "adamw-fused",
     "seq_len": 512, "activation_checkpointing": "full"},
    {"model": "Qwen3-0.6B", "method": "full", "precision": "amp-bf16", "optimizer": "sgd-momentum",
     "seq_len": 256, "activation_checkpointing": "none"},
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"method": "qlora"}, "method"),
        ({"gpus": 2}, "gpus"),
        ({"optimizer": "lion"}, "optimizer"),
        ({"activation_checkpointing": "selective"}, "activation_checkpointing"),
        ({"activation_checkpointing": "full:2"}, "activation_checkpointing"),
        ({"loss": "fused"}, "loss"),
        ({"activation_offload": True}, "activation_offload"),
        ({"kernels": "liger"}, "kernels"),
    ],
)
def test_untraceable_settings_are_clear_errors(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as error:
        check_traceable(Scenario(**fields))  # type: ignore[arg-type]
    assert error.value.field == field


@pytest.mark.slow
def test_live_traces_match_the_estimate() -> None:
    pytest.importorskip("torch")
    from trainplan.engine.measure.compare import measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    errors = []
    for fields in LIVE:
        comparison = measure_scenario(scenario_from_mapping({"gpus": 1, **fields}))
        error = comparison.estimate.allocated_peak_bytes / comparison.measured.peak_bytes - 1
        assert abs(error) < 0.08, (fields, error)
        errors.append(abs(error))
    assert statistics.median(errors) < 0.05


def test_measure_cli_json() -> None:
    pytest.importorskip("torch")
    result = CliRunner().invoke(
        app, ["measure", "--model", "Qwen2.5-0.5B", "--seq-len", "128", "--gpus", "1", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("peak_bytes", "params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes"):
        assert data["measured"][key] >= 0
    assert data["estimate"]["memory"]["per_gpu"]["overhead_bytes"] == 0
    assert abs(data["error"]) < 0.08
    assert any("CUDA context" in note for note in data["notes"])


def test_measure_cli_error_exit() -> None:
    result = CliRunner().invoke(app, ["measure", "--model", "GPT-2", "--method", "qlora", "--gpus", "1"])
    assert result.exit_code == 2 and "bitsandbytes" in result.output


SSM_CONFIGS = {
    # Mamba-2: 2 layers, h 256, 8 heads of 64, state 32, chunks of 64
    "mamba2": {"model_type": "mamba2", "hidden_size": 256, "num_hidden_layers": 2, "num_heads": 8,
               "head_dim": 64, "expand": 2, "n_groups": 1, "state_size": 32, "vocab_size": 512,
               "chunk_size": 64, "conv_kernel": 4},
    # Bamba-style hybrid: Mamba-2 layers 0, 1, 3 and attention at layer 2, each with an MLP
    "bamba": {"model_type": "bamba", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 512,
              "attn_layer_indices": [2], "mamba_n_heads": 8, "mamba_d_head": 64, "mamba_n_groups": 1,
              "mamba_d_state": 32, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 64},
    # Zamba2: Mamba-2 layers; layers 1 and 3 also run the one shared attention + MLP block
    "zamba2": {"model_type": "zamba2", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
               "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"], "num_attention_heads": 4,
               "num_key_value_heads": 4, "n_mamba_heads": 4, "mamba_d_state": 32, "mamba_expand": 2,
               "mamba_d_conv": 4, "mamba_ngroups": 1, "vocab_size": 512, "chunk_size": 64,
               "num_mem_blocks": 1, "adapter_rank": 16},
    # Zamba (v1): multi-head Mamba layers (2 heads); layers 1 and 3 also run the one shared block
    "zamba": {"model_type": "zamba", "hidden_size": 256, "num_hidden_layers": 4, "intermediate_size": 512,
              "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"], "num_attention_heads": 4,
              "num_key_value_heads": 4, "n_mamba_heads": 2, "mamba_d_state": 16, "mamba_expand": 2,
              "mamba_d_conv": 4, "vocab_size": 512},
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "fields", "tolerance"),
    [
        ("mamba2", {"method": "full", "precision": "bf16"}, 0.03),  # traced -1.5%
        ("mamba2", {"method": "full", "precision": "amp-bf16"}, 0.03),  # traced +1.1%
        ("bamba", {"method": "full", "precision": "amp-bf16"}, 0.03),  # traced +1.3%
        ("bamba", {"method": "full", "precision": "bf16"}, 0.03),  # traced -0.3%
        ("bamba", {"method": "lora", "precision": "bf16"}, 0.08),  # traced +5.7%
        ("zamba2", {"method": "full", "precision": "bf16"}, 0.03),  # traced -0.3%
        ("zamba2", {"method": "lora", "precision": "bf16"}, 0.08),  # traced +6.3%
        # traced -8.8%: the activations resident when backward starts are within 1%; the peak comes
        # later, in backward, where the naive sequential scan's gradients of exp(delta A) and delta B
        # (fp32, D x N per token each) are alive at once, a working set the estimate does not model
        ("zamba", {"method": "full", "precision": "bf16"}, 0.10),
    ],
)
def test_ssm_traces_match_the_naive_estimate(
    tmp_path: object, name: str, fields: dict[str, object], tolerance: float
) -> None:
    pytest.importorskip("torch")
    from pathlib import Path

    from trainplan.engine.measure.compare import SSM_NOTE, measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    path = Path(str(tmp_path)) / "config.json"
    path.write_text(json.dumps(SSM_CONFIGS[name]))
    scenario = scenario_from_mapping(
        {"model": str(path), "gpus": 1, "seq_len": 256, "grad_accum": 1, "activation_checkpointing": "none",
         "attention": "sdpa", **fields}
    )  # fmt: skip
    comparison = measure_scenario(scenario)
    assert comparison.scenario.ssm_kernel == "naive" and SSM_NOTE in comparison.notes
    error = comparison.estimate.allocated_peak_bytes / comparison.measured.peak_bytes - 1
    assert abs(error) < tolerance, error


MIXER_CONFIGS = {
    # Qwen3-Next-style: Gated DeltaNet layers 0-2 (2 key heads, 4 value heads of 64), gated
    # attention at layer 3, dense MLPs
    "qwen3_next": {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                   "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
                   "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4, "num_experts": 0,
                   "intermediate_size": 512, "vocab_size": 512,
                   "layer_types": ["linear_attention"] * 3 + ["full_attention"]},
    # LFM2-style: short convolutions at layers 0, 1, 3, attention at layer 2
    "lfm2": {"model_type": "lfm2", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 768, "vocab_size": 512,
             "layer_types": ["conv", "conv", "full_attention", "conv"], "pad_token_id": 0, "bos_token_id": 1,
             "eos_token_id": 2},
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "tolerance"),
    [
        ("qwen3_next", 0.045),  # traced -3.1%
        ("lfm2", 0.03),  # traced -0.0%
    ],
)
def test_linear_mixer_traces_match_the_naive_estimate(tmp_path: object, name: str, tolerance: float) -> None:
    pytest.importorskip("torch")
    from pathlib import Path

    from trainplan.engine.measure.compare import MIXER_NOTE, measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    path = Path(str(tmp_path)) / "config.json"
    path.write_text(json.dumps(MIXER_CONFIGS[name]))
    scenario = scenario_from_mapping(
        {"model": str(path), "gpus": 1, "seq_len": 256, "grad_accum": 1, "activation_checkpointing": "none",
         "attention": "sdpa", "method": "full", "precision": "bf16"}
    )  # fmt: skip
    comparison = measure_scenario(scenario)
    assert comparison.scenario.ssm_kernel == "naive" and MIXER_NOTE in comparison.notes
    error = comparison.estimate.allocated_peak_bytes / comparison.measured.peak_bytes - 1
    assert abs(error) < tolerance, error


@pytest.mark.slow
@pytest.mark.parametrize("model", ["Llama-3.2-1B", "Qwen2.5-0.5B"])
def test_the_modelled_reserved_pool_of_small_lora_steps(model: str) -> None:
    """docs/methodology.md states that on these traced LoRA steps (1,024 tokens, one sequence)
    the caching allocator's rules reserve 8-13% above the allocated peak, and that expandable
    segments reserve no more than the default."""
    pytest.importorskip("torch")
    from trainplan.engine.measure.compare import measure_scenario
    from trainplan.specs.scenario import scenario_from_mapping

    comparison = measure_scenario(
        scenario_from_mapping({"model": model, "method": "lora", "seq_len": 1024, "gpus": 1})
    )
    measured = comparison.measured
    above = measured.reserved_peak_bytes / measured.peak_bytes - 1
    assert 0.08 <= above <= 0.135, above
    assert measured.peak_bytes <= measured.reserved_peak_expandable_bytes <= measured.reserved_peak_bytes
    # the estimate's reserved figure is its allocated one plus the 7.2% cache: against the
    # replay, within the held-out claim of docs/methodology.md (worst 25%)
    assert comparison.estimate is not None and comparison.error is not None
    reserved_error = comparison.reserved_error
    assert reserved_error == pytest.approx((1 + comparison.error) * 1.072 / (1 + above) - 1)
    assert abs(reserved_error) <= 0.25
    assert comparison.to_dict()["reserved_error"] == reserved_error
