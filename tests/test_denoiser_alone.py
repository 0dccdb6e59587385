"""A diffusers denoiser's own config.json, given without its pipeline folder: the VAE and text
encoders of the closest catalog pipeline are assumed, said so, and `vae` overrides them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainplan.engine.estimate import estimate
from trainplan.inputs.catalogs.models import find_model_record
from trainplan.specs.errors import InputError


def denoiser_config(tmp_path: Path, name: str) -> str:
    """The catalog model's transformer/config.json (unet/config.json for a UNet), alone."""
    record = find_model_record(name)
    assert record is not None and record.pipeline
    folder = tmp_path / name / "transformer"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(dict(record.config)))
    return str(folder / "config.json")


@pytest.mark.parametrize(
    ("name", "resolution"), [("FLUX.1-dev", 512), ("SDXL-base-1.0", 1024), ("SD-1.5", 512)]
)
def test_a_denoiser_alone_is_estimated_as_its_catalog_pipeline(
    tmp_path: Path, name: str, resolution: int
) -> None:
    alone = estimate({"model": denoiser_config(tmp_path, name), "method": "lora", "resolution": resolution})
    pipeline = estimate({"model": name, "method": "lora", "resolution": resolution})
    assert alone.total_bytes == pipeline.total_bytes
    # an SDXL UNet and an SD 1.5 UNet are both UNet2DConditionModel with in_channels 4: the
    # closest by the rest of the config (cross_attention_dim 2048 against 768) is chosen
    said = [line for line in alone.warnings if line.startswith("no VAE config beside it")]
    assert said == [
        f"no VAE config beside it: the VAE and text encoders of {name} assumed (the closest catalog "
        f"{find_model_record(name).config['_class_name']} with in_channels "  # type: ignore[union-attr]
        f"{find_model_record(name).config['in_channels']}); give the pipeline folder or --vae to change them"  # type: ignore[union-attr]
    ]


def test_vae_names_the_pipeline_to_take(tmp_path: Path) -> None:
    path = denoiser_config(tmp_path, "FLUX.1-dev")
    chosen = estimate({"model": path, "method": "lora", "resolution": 512, "vae": "FLUX.1-schnell"})
    schnell = find_model_record("FLUX.1-schnell")
    assert schnell is not None and schnell.pipeline
    assert "the VAE and text encoders of FLUX.1-schnell (--vae)" in chosen.warnings
    # FLUX.1-schnell's pipeline runs 256 T5 tokens where FLUX.1-dev's runs 512: fewer tokens
    dev = estimate({"model": path, "method": "lora", "resolution": 512})
    assert chosen.total_bytes < dev.total_bytes
    with pytest.raises(InputError, match=r"vae: Llama-3\.1-8B is not a diffusion pipeline"):
        estimate({"model": path, "method": "lora", "resolution": 512, "vae": "Llama-3.1-8B"})


def test_a_language_model_takes_no_vae() -> None:
    with pytest.raises(InputError) as caught:
        estimate({"model": "Llama-3.1-8B", "vae": "FLUX.1-dev"})
    assert caught.value.field == "vae"
