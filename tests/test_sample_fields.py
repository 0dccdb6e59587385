"""Scenario fields of image, video and JEPA samples: parsing, defaults and the model-dependent rules."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.catalog import resolve_model
from trainplan.cli import app
from trainplan.errors import InputError
from trainplan.estimate import estimate, resolved_ema, sample_shape
from trainplan.scenario import Scenario, scenario_from_mapping, scenario_to_mapping

LLAMA = "Llama-3.1-8B"


def shape_of(**fields: Any) -> Any:
    scenario = scenario_from_mapping(fields)
    return sample_shape(resolve_model(scenario.model), scenario)


def test_defaults() -> None:
    scenario = Scenario()
    assert (scenario.resolution, scenario.frames, scenario.text_tokens) == (None, None, None)
    assert (scenario.frozen_encoders, scenario.ema, scenario.mask_ratio) == ("precomputed", None, None)


@pytest.mark.parametrize(
    ("raw", "stored"),
    [(1024, "1024x1024"), ("1024", "1024x1024"), ("832x480", "832x480"), (" 768 X 1344 ", "768x1344")],
)
def test_resolution_is_stored_as_wxh(raw: Any, stored: str) -> None:
    scenario = scenario_from_mapping({"resolution": raw})
    assert scenario.resolution == stored
    assert scenario_from_mapping(scenario_to_mapping(scenario)) == scenario  # round trip


@pytest.mark.parametrize("raw", [None, "null", ""])
def test_resolution_can_be_unset(raw: Any) -> None:
    assert scenario_from_mapping({"resolution": raw}).resolution is None


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"resolution": "1024x"}, "resolution", "is not a resolution"),
        ({"resolution": True}, "resolution", "is not a resolution"),
        ({"resolution": 1024.5}, "resolution", "is not a resolution"),
        ({"resolution": [1024]}, "resolution", "is not a resolution"),
        ({"resolution": "1" * 5000}, "resolution", "is not a resolution"),
        ({"resolution": 10**5000}, "resolution", "outside 1..16,384 per side"),
        ({"resolution": 0}, "resolution", "0 px is outside 1..16,384"),
        ({"frames": 0}, "frames", "must be between 1 and 4,096"),
        ({"text_tokens": -1}, "text_tokens", "must be between 0 and 1,000,000"),
        ({"frozen_encoders": "cpu"}, "frozen_encoders", "is not one of: precomputed, gpu, offload"),
        ({"ema": "fp16"}, "ema", "is not one of: none, fp32, bf16"),
        ({"mask_ratio": 0}, "mask_ratio", "must be strictly between 0 and 1"),
        ({"mask_ratio": 1.0}, "mask_ratio", "must be strictly between 0 and 1"),
        ({"mask_ratio": 1.5}, "mask_ratio", "must be strictly between 0 and 1 (got 1.5)"),
        ({"mask_ratio": "1e400"}, "mask_ratio", "not a finite number"),
    ],
)
def test_bad_values_name_the_field(data: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping(data)
    assert error.value.field == field
    assert message in error.value.message


def test_accepted_values() -> None:
    scenario = scenario_from_mapping(
        {"frames": "81", "text_tokens": 0, "frozen_encoders": "GPU", "ema": "bf16", "mask_ratio": "0.9"}
    )
    assert (scenario.frames, scenario.text_tokens, scenario.frozen_encoders) == (81, 0, "gpu")
    assert (scenario.ema, scenario.mask_ratio) == ("bf16", 0.9)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("resolution", 1024),
        ("frames", 1),
        ("text_tokens", 77),
        ("ema", "none"),
        ("mask_ratio", 0.5),
        ("frozen_encoders", "gpu"),
    ],
)
def test_a_language_model_takes_no_sample_field(field: str, value: Any) -> None:
    with pytest.raises(InputError) as error:
        shape_of(model=LLAMA, **{field: value})
    assert error.value.field == field
    assert "is a language model: it reads seq_len tokens" in error.value.message
    with pytest.raises(InputError) as error:
        estimate({"model": LLAMA, field: value})
    assert error.value.field == field


def test_a_language_model_with_the_defaults_has_no_sample() -> None:
    assert shape_of(model=LLAMA) is None
    assert estimate({"model": LLAMA}).total_bytes > 0


def test_flux_defaults_come_from_the_model() -> None:
    # FLUX.1-dev at 1024 px: 1024 / 8 = 128 latents a side, 2x2 packing: 64 x 64 = 4096 tokens;
    # frames default to 1 for an image model, text to the pipeline's 512 T5 tokens
    shape = shape_of(model="FLUX.1-dev", resolution=1024)
    assert (shape.frames, shape.latent_frames, shape.image_tokens, shape.text_tokens) == (1, 1, 4096, 512)
    assert shape_of(model="FLUX.1-dev", resolution=1024, text_tokens=256).text_tokens == 256
    # SD3.5: 77 CLIP + 256 T5 tokens by default
    assert shape_of(model="SD3.5-Large", resolution="1024x768").text_tokens == 333


def test_no_resolution_means_no_sample_yet() -> None:
    assert shape_of(model="FLUX.1-dev") is None
    assert shape_of(model="FLUX.1-dev", frames=1) is None


def test_video_needs_frames() -> None:
    # Wan 2.1 at 832x480, 81 frames: 1 + 80 / 4 = 21 latent frames, 21 x 52 x 30 = 32,760 tokens
    shape = shape_of(model="Wan2.1-T2V-14B", resolution="832x480", frames=81)
    assert (shape.latent_frames, shape.image_tokens, shape.text_tokens) == (21, 32_760, 512)
    with pytest.raises(InputError) as error:
        shape_of(model="Wan2.1-T2V-14B", resolution="832x480")
    assert error.value.field == "frames" and "give frames per clip (1 + 4 x k)" in error.value.message
    with pytest.raises(InputError) as error:
        shape_of(model="V-JEPA-2-ViT-L", resolution=256)
    assert error.value.field == "frames" and "(a multiple of 2)" in error.value.message


def test_frames_are_checked_without_a_resolution() -> None:
    with pytest.raises(InputError) as error:
        shape_of(model="Wan2.1-T2V-1.3B", frames=80)
    assert error.value.field == "frames" and "e.g. 77 or 81" in error.value.message
    with pytest.raises(InputError) as error:
        shape_of(model="FLUX.1-dev", frames=2)
    assert error.value.field == "frames" and "image model: frames must be 1" in error.value.message


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"model": "FLUX.1-dev", "resolution": 1000}, "resolution", "e.g. 992 or 1008"),
        ({"model": "FLUX.1-dev", "mask_ratio": 0.5}, "mask_ratio", "mask_ratio applies to JEPA"),
        ({"model": "V-JEPA-2-ViT-L", "ema": "none"}, "ema", "target encoder is always there"),
        ({"model": "V-JEPA-2-ViT-L", "frozen_encoders": "gpu"}, "frozen_encoders", "no VAE or text"),
        ({"model": "V-JEPA-2-ViT-L", "resolution": 256, "frames": 16, "text_tokens": 8}, "text_tokens",
         "0 for a JEPA"),
    ],
)  # fmt: skip
def test_model_rules_name_the_field(fields: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InputError) as error:
        shape_of(**fields)
    assert error.value.field == field and message in error.value.message
    with pytest.raises(InputError) as error:  # estimate checks the sample before refusing the model
        estimate(fields)
    assert error.value.field == field


def test_jepa_masking_and_target_encoder() -> None:
    # V-JEPA 2 at 256 px and 16 frames: 16 x 16 patches x 8 tubelets = 2048 tokens, no text
    shape = shape_of(model="V-JEPA-2-ViT-L", resolution=256, frames=16, mask_ratio=0.9, ema="bf16")
    assert (shape.image_tokens, shape.text_tokens) == (2048, 0)


@pytest.mark.parametrize(
    ("model", "ema", "resolved"),
    [
        ("FLUX.1-dev", None, "none"),
        ("FLUX.1-dev", "fp32", "fp32"),
        ("V-JEPA-2-ViT-L", None, "fp32"),
        ("V-JEPA-2-ViT-L", "bf16", "bf16"),
    ],
)
def test_ema_default_follows_the_family(model: str, ema: str | None, resolved: str) -> None:
    assert resolved_ema(resolve_model(model), scenario_from_mapping({"model": model, "ema": ema})) == resolved


def test_a_valid_sample_still_leaves_memory_refused() -> None:
    with pytest.raises(InputError) as error:
        estimate({"model": "FLUX.1-dev", "resolution": 1024})
    assert error.value.field == "model" and "modelled for language models only" in error.value.message


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--model", "FLUX.1-dev", "--resolution", "1000"], "resolution (--resolution): 1000 px is not a"),
        (["--model", LLAMA, "--resolution", "1024"], "is a language model"),
        (["--mask-ratio", "1"], "mask_ratio (--mask-ratio): must be strictly between 0 and 1"),
        (["--model", "Wan2.1-T2V-1.3B", "--frames", "80"], "frames (--frames): 80 does not fit"),
    ],
)
def test_cli_errors(args: list[str], text: str) -> None:
    result = CliRunner().invoke(app, ["estimate", *args])
    assert result.exit_code == 2
    assert text in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("fields", "field"),
    [({"model": "FLUX.1-dev", "resolution": 1000}, "resolution"), ({"model": LLAMA, "frames": 1}, "frames")],
)
def test_the_planner_asks_the_same_rules(fields: dict[str, Any], field: str) -> None:
    from trainplan.plan import PlanRequest, plan

    with pytest.raises(InputError) as error:
        plan(PlanRequest(base=scenario_from_mapping(fields)))
    assert error.value.field == field
