"""Token geometry of diffusion, video and JEPA models: hand-computed shapes and the errors."""

from __future__ import annotations

import pytest

from trainplan.engine.terms.geometry import token_shape
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import parse_resolution


@pytest.mark.parametrize(
    ("name", "resolution", "frames", "latent", "image_tokens", "text_tokens"),
    [
        # 1024 px / VAE stride 8 = 128 latents a side; 2x2 packing: 64 x 64 = 4096 tokens; 512 T5 tokens
        ("FLUX.1-dev", 1024, 1, (128, 128, 1), 4096, 512),
        # 512 px: 64 latents, 32 x 32 = 1024 tokens
        ("FLUX.1-dev", 512, 1, (64, 64, 1), 1024, 512),
        # SD3.5: 2x2 patches of 16-channel latents; 77 CLIP + 256 T5 tokens
        ("SD3.5-Large", "1024x768", 1, (128, 96, 1), 64 * 48, 333),
        # SDXL UNet: every latent pixel at the first stage
        ("SDXL-base-1.0", 1024, 1, (128, 128, 1), 128 * 128, 77),
        # Wan 2.1 at 832x480, 81 frames: 1 + 80 / 4 = 21 latent frames of 104 x 60, 1x2x2 patches:
        # 21 x 52 x 30 = 32,760 tokens (the sequence length Wan's own generate script uses at 480p)
        ("Wan2.1-T2V-14B", "832x480", 81, (104, 60, 21), 32_760, 512),
        # V-JEPA 2 at 256 px, 64 frames: 16 x 16 patches x 32 tubelets of 2 frames = 8192 tokens
        ("V-JEPA-2-ViT-L", 256, 64, (256, 256, 32), 8192, 0),
    ],
)
def test_token_shapes(
    name: str,
    resolution: int | str,
    frames: int,
    latent: tuple[int, int, int],
    image_tokens: int,
    text_tokens: int,
) -> None:
    shape = token_shape(resolve_model(name), resolution, frames)
    assert (shape.latent_width, shape.latent_height, shape.latent_frames) == latent
    assert (shape.image_tokens, shape.text_tokens) == (image_tokens, text_tokens)
    assert shape.latent_elements == latent[0] * latent[1] * latent[2]


def test_text_tokens_override() -> None:
    assert token_shape(resolve_model("FLUX.1-dev"), 1024, text_tokens=256).text_tokens == 256


def test_parse_resolution() -> None:
    assert parse_resolution(1024) == (1024, 1024)
    assert parse_resolution("832x480") == (832, 480)
    assert parse_resolution(" 768 X 1344 ") == (768, 1344)
    assert parse_resolution("512") == (512, 512)


@pytest.mark.parametrize(
    ("name", "resolution", "frames", "field", "message"),
    [
        ("FLUX.1-dev", 1000, 1, "resolution",
         "1000 px is not a multiple of 16 (pixels per latent 8 x latents per token 2); valid sides are "
         "multiples of 16, e.g. 992 or 1008"),
        ("SDXL-base-1.0", 1020, 1, "resolution", "e.g. 1016 or 1024"),
        ("FLUX.1-dev", "1024x", 1, "resolution", "is not a resolution"),
        ("FLUX.1-dev", 0, 1, "resolution", "outside 1..16,384"),
        ("FLUX.1-dev", 1024, 2, "frames", "image model: frames must be 1"),
        ("Wan2.1-T2V-1.3B", "832x480", 80, "frames", "frames must be 1 + 4 x k, e.g. 77 or 81"),
        ("V-JEPA-2-ViT-L", 256, 63, "frames", "not a multiple of the tubelet size 2: e.g. 62 or 64"),
        ("V-JEPA-2-ViT-L", 256, 64, "text_tokens", "0 for a JEPA"),
        ("Llama-3.1-8B", 1024, 1, "resolution", "is a language model: it reads seq_len tokens"),
    ],
)  # fmt: skip
def test_geometry_errors_name_the_field(
    name: str, resolution: int | str, frames: int, field: str, message: str
) -> None:
    text = 16 if field == "text_tokens" else None
    with pytest.raises(InputError) as error:
        token_shape(resolve_model(name), resolution, frames, text)
    assert error.value.field == field
    assert message in error.value.message


def test_sana_and_ltx_video_token_shapes() -> None:
    # Sana: the DC-AE's 32x compression, patch 1: 1024 px -> 32 x 32 latents = 1024 tokens, next
    # to SanaPipeline's 300 Gemma-2 tokens
    sana = token_shape(resolve_model("Sana-1600M-1024px"), 1024)
    assert (sana.latent_width, sana.latent_height, sana.image_tokens, sana.text_tokens) == (32, 32, 1024, 300)
    # LTX-Video: 32 x 32 x 8 pixels per token (VAE patch 4 x three 2x stages; patch 1); 768x512 and
    # 49 frames: 1 + 48 / 8 = 7 latent frames of 24 x 16 = 2,688 tokens, 128 T5 tokens
    ltx = token_shape(resolve_model("LTX-Video-2B"), "768x512", 49)
    assert (ltx.latent_width, ltx.latent_height, ltx.latent_frames) == (24, 16, 7)
    assert (ltx.image_tokens, ltx.text_tokens) == (2688, 128)


@pytest.mark.parametrize(
    ("name", "resolution", "frames", "field", "message"),
    [
        ("Sana-1600M-1024px", 1000, 1, "resolution", "not a multiple of 32 (pixels per latent 32 x latents "
         "per token 1); valid sides are multiples of 32, e.g. 992 or 1024"),
        ("LTX-Video-2B", "768x500", 49, "resolution", "e.g. 480 or 512"),
        ("LTX-Video-2B", "768x512", 48, "frames", "frames must be 1 + 8 x k, e.g. 41 or 49"),
    ],
)  # fmt: skip
def test_sana_and_ltx_video_geometry_errors(
    name: str, resolution: int | str, frames: int, field: str, message: str
) -> None:
    with pytest.raises(InputError) as error:
        token_shape(resolve_model(name), resolution, frames)
    assert error.value.field == field
    assert message in error.value.message
