"""Scenario fields of image, video and JEPA samples: parsing, defaults and the model-dependent rules."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.engine.estimate import estimate, resolved_ema, sample_shape
from trainplan.inputs.resolve import resolve_model
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario, scenario_from_mapping, scenario_to_mapping

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


@pytest.mark.parametrize(
    ("model", "sides", "frames", "tokens", "text"),
    [
        # FluxPipeline's default_sample_size 128 x VAE stride 8 = 1024 px: (1024 / 16)^2 tokens
        ("FLUX.1-dev", (1024, 1024), 1, 4096, 512),
        # SD3.5 Large: sample_size 128 latents x 8 = 1024 px, 2x2 patches: 64 x 64; 77 CLIP + 256 T5
        ("SD3.5-Large", (1024, 1024), 1, 4096, 333),
        # SD 1.5: sample_size 64 x 8 = 512 px
        ("SD-1.5", (512, 512), 1, 4096, 77),
        # WanPipeline's defaults 832x480, 81 frames: 21 latent frames x 52 x 30 tokens
        ("Wan2.1-T2V-1.3B", (832, 480), 81, 32_760, 512),
        # VJEPA2Config crop_size 256, frames_per_clip 64: 16 x 16 patches x 32 tubelets
        ("V-JEPA-2-ViT-L", (256, 256), 64, 8192, 0),
    ],
)
def test_without_a_resolution_the_pipeline_default_is_used(
    model: str, sides: tuple[int, int], frames: int, tokens: int, text: int
) -> None:
    shape = shape_of(model=model)
    assert shape is not None
    assert ((shape.width_px, shape.height_px), shape.frames) == (sides, frames)
    assert (shape.image_tokens, shape.text_tokens) == (tokens, text)


def test_frames_alone_keep_the_default_resolution() -> None:
    shape = shape_of(model="Wan2.1-T2V-1.3B", frames=33)
    assert shape is not None and (shape.width_px, shape.latent_frames) == (832, 9)


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


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"model": "FLUX.1-dev", "seq_len": 4096}, "seq_len"),
        ({"model": "FLUX.1-dev", "dataset_tokens": 1e9}, "dataset_tokens"),
        ({"model": "FLUX.1-dev", "train_tokens": 1e9}, "train_tokens"),
        ({"model": "Llama-3.1-8B", "dataset_size": 1000}, "dataset_size"),
        ({"model": "Llama-3.1-8B", "train_samples": 1000}, "train_samples"),
        ({"model": "FLUX.1-dev", "tensor_parallel": 2, "gpus": 2}, "tensor_parallel"),
    ],
)
def test_token_and_sample_budgets_follow_the_family(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as error:
        estimate(fields)
    assert error.value.field == field


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
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    with pytest.raises(InputError) as error:
        plan(PlanRequest(base=scenario_from_mapping(fields)))
    assert error.value.field == field
