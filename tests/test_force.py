"""`force`: a refused architecture is estimated with the closest modelled reading, labelled
approximate with the refusal reason; without it the refusal stays. The same field through the
engine, the CLI and the web API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from configs import TINY_LLAMA
from typer.testing import CliRunner

from trainplan.engine.estimate import estimate
from trainplan.inputs.architecture_families import refused_model_types
from trainplan.inputs.hf import spec_from_config
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import ConfigError
from trainplan.specs.weights import total_params

# A Llama-shaped config under a refused model type whose closest modelled reading is Qwen 3's
# (data/architectures.yaml: the MoE / MLA group names qwen3_moe).
INKLING = {**TINY_LLAMA, "model_type": "inkling2_text"}


def test_refused_without_force_and_the_error_says_how_to_force() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config(INKLING, "tiny")
    assert error.value.field == "model_type"
    assert "set force" in error.value.message


def test_forced_reading_is_the_closest_family_with_the_reason_attached() -> None:
    spec = spec_from_config(INKLING, "tiny", force=True)
    closest = spec_from_config({**TINY_LLAMA, "model_type": "qwen3_moe"}, "tiny")
    # Qwen 3's reading: the Llama layout plus per-head q/k norms (2 x head_dim 16 per layer, 2 layers)
    assert total_params(spec) == total_params(closest) == total_params(spec_from_config(TINY_LLAMA, "t")) + 64
    (note,) = spec.approximations
    assert note.startswith("force: model_type 'inkling2_text' is not modelled")
    assert refused_model_types()["inkling2_text"] in note and "Qwen 3 reading" in note


def test_force_changes_nothing_for_a_modelled_config() -> None:
    assert spec_from_config(TINY_LLAMA, "t", force=True) == spec_from_config(TINY_LLAMA, "t")


def test_forced_multimodal_wrapper_reads_its_language_model_alone() -> None:
    # MusicGen is refused for its codebook decoder; here a wrapper of a Qwen2 language model
    text = {**TINY_LLAMA, "model_type": "qwen2"}
    wrapper = {
        "model_type": "musicgen",
        "text_config": text,
        "audio_encoder": {"model_type": "encodec"},
    }
    with pytest.raises(ConfigError):
        spec_from_config(wrapper, "w")
    spec = spec_from_config(wrapper, "w", force=True)
    assert total_params(spec) == total_params(spec_from_config(text, "t"))
    assert "its language model (qwen2) is read alone" in spec.approximations[0]


def test_forced_unknown_layout_is_read_with_the_llama_keys_and_names_the_key() -> None:
    config = {**TINY_LLAMA, "model_type": "mystery", "parallel_attn": True}
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "m")
    assert error.value.field == "parallel_attn"
    spec = spec_from_config(config, "m", force=True)
    assert total_params(spec) == total_params(spec_from_config(TINY_LLAMA, "t"))
    assert spec.approximations[0].startswith("force: parallel_attn=True names a layout")


def test_forced_reading_that_cannot_read_the_config_is_still_an_error() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({"model_type": "inkling2_text", "vocab_size": 10}, "x", force=True)
    assert error.value.field == "hidden_size"
    assert "force: the closest modelled reading cannot read this config either" in error.value.message


@pytest.fixture
def inkling_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(INKLING))
    return path


def test_estimate_with_force_is_approximate(inkling_file: Path) -> None:
    with pytest.raises(ConfigError):
        estimate({"model": str(inkling_file)})
    result = estimate({"model": str(inkling_file), "force": True})
    assert result.approximations and result.approximations[0].startswith("force: ")
    assert result.to_dict()["params"]["approximate"] is True
    closest = spec_from_config({**TINY_LLAMA, "model_type": "qwen3_moe"}, "tiny")
    assert result.params.total == total_params(closest)


def test_cli_force_flag(inkling_file: Path) -> None:
    refused = CliRunner().invoke(app, ["estimate", "--model", str(inkling_file)])
    assert refused.exit_code == 2 and "set force" in refused.output
    forced = CliRunner().invoke(app, ["estimate", "--model", str(inkling_file), "--force", "true", "--json"])
    assert forced.exit_code == 0, forced.output
    data: dict[str, Any] = json.loads(forced.output)
    assert data["params"]["approximate"] is True
    assert data["approximations"][0].startswith("force: model_type 'inkling2_text'")


def test_cli_plan_with_force_says_it_is_approximate(inkling_file: Path) -> None:
    refused = CliRunner().invoke(app, ["plan", "--model", str(inkling_file), "--max-gpus", "1"])
    assert refused.exit_code == 2
    forced = CliRunner().invoke(
        app, ["plan", "--model", str(inkling_file), "--max-gpus", "1", "--force", "true"]
    )
    assert forced.exit_code == 0, forced.output
    assert "approximate: force: model_type 'inkling2_text' is not modelled" in " ".join(forced.output.split())


def test_web_api_force_field() -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from trainplan.interfaces.web.app import create_app

    with TestClient(create_app(), base_url="http://localhost") as client:
        refused = client.post("/api/estimate", json={"model_config": INKLING})
        assert refused.status_code == 422 and refused.json()["field"] == "model_config.model_type"
        forced = client.post("/api/estimate", json={"model_config": INKLING, "force": True})
        assert forced.status_code == 200, forced.text
        assert forced.json()["approximations"][0].startswith("force: model_type 'inkling2_text'")
        bad = client.post("/api/estimate", json={"model_config": INKLING, "force": "maybe"})
        assert bad.status_code == 422 and bad.json()["field"] == "force"
