"""Measured mode for diffusion, video and JEPA models: small configs traced end to end, with the
state terms checked by hand against the parameter count, the EMA copy, and the CLI path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from configs import TINY_DC_AE, TINY_LTX_VAE
from typer.testing import CliRunner

from trainplan.engine.measure.result import MeasuredStep
from trainplan.engine.terms.geometry import token_shape
from trainplan.engine.terms.params import lora_params
from trainplan.inputs.hf import spec_from_config
from trainplan.interfaces.cli.main import app
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import LoraSettings, Scenario, scenario_from_mapping
from trainplan.specs.weights import total_params

pytest.importorskip("diffusers")
pytest.importorskip("torch")

from trainplan.engine.measure.compare import NO_ESTIMATE, check_traceable, measure_scenario
from trainplan.engine.measure.sample import measure_sample_step

# Every tensor of these configs holds a multiple of 256 elements, so the 512-byte rounding of the
# CUDA caching allocator adds nothing to a bf16 or fp32 tensor: a term's bytes are its elements
# times the bytes per element. SD3 MMDiT: one 256-wide head, 2 joint blocks, 64 latent channels
# (patch 2 x 2 x 64 = 256 outputs per token).
TINY_SD3: dict[str, Any] = {
    "_class_name": "SD3Transformer2DModel", "attention_head_dim": 256, "num_attention_heads": 1,
    "caption_projection_dim": 256, "in_channels": 64, "out_channels": 64, "joint_attention_dim": 256,
    "pooled_projection_dim": 256, "num_layers": 2, "patch_size": 2, "pos_embed_max_size": 16,
    "sample_size": 16, "qk_norm": "rms_norm",
}  # fmt: skip
TINY_VAE = {"_class_name": "AutoencoderKL", "block_out_channels": [8, 8, 8, 8], "latent_channels": 64}
SD3_PARAMS = 4_473_600  # diffusers builds the same count (test_sd3_count_is_the_diffusers_build)
POS_EMBED_BYTES = 16 * 16 * 256 * 4  # the fixed sin-cos table: pos_embed_max_size^2 x width, fp32
# V-JEPA 2 with a 256-wide, one-layer encoder and a 128-wide, one-layer predictor, on 64 px clips
# of 4 frames: (64 / 16)^2 x (4 / 2) = 32 tubelet tokens.
TINY_JEPA: dict[str, Any] = {
    "model_type": "vjepa2", "hidden_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2,
    "mlp_ratio": 4.0, "patch_size": 16, "tubelet_size": 2, "crop_size": 64, "frames_per_clip": 4,
    "in_chans": 3, "qkv_bias": True, "pred_hidden_size": 128, "pred_num_hidden_layers": 1,
    "pred_num_attention_heads": 1, "pred_num_mask_tokens": 10, "pred_mlp_ratio": 4.0,
}  # fmt: skip
# The encoder the target copies: patch embedding Conv3d 3 x 2 x 16 x 16 -> 256 (393,216 + 256),
# one block (2 LayerNorms 2 x 512, qkv 3 x (256^2 + 256), proj 256^2 + 256, MLP 256 -> 1024 -> 256:
# 263,168 + 262,400) = 789,760, the final LayerNorm 512
JEPA_ENCODER = 393_472 + 789_760 + 512


def _sd3_shape(resolution: int = 128, text_tokens: int = 16) -> Any:
    spec = spec_from_config({**TINY_SD3, "_pipeline": {"vae": TINY_VAE}}, "tiny-sd3")
    return token_shape(spec, resolution, 1, text_tokens)


def _sd3(**kwargs: Any) -> MeasuredStep:
    return measure_sample_step(dict(TINY_SD3), _sd3_shape(), **kwargs)


def _at_optimizer(m: MeasuredStep) -> dict[str, int]:
    """The breakdown at the second step's optimizer peak, when every state is resident."""
    return m.phase_breakdowns_bytes["step2.optimizer"]


def test_sd3_count_is_the_diffusers_build() -> None:
    import diffusers
    import torch

    assert total_params(spec_from_config(TINY_SD3, "x")) == SD3_PARAMS
    with torch.device("meta"):
        kwargs = {key: value for key, value in TINY_SD3.items() if key != "_class_name"}
        model = diffusers.SD3Transformer2DModel.from_config(kwargs)
    assert sum(p.numel() for p in model.parameters()) == SD3_PARAMS
    assert all(p.numel() % 256 == 0 for p in model.parameters())


def test_sd3_full_fine_tune_with_an_fp32_ema_copy() -> None:
    # amp-bf16 full fine-tune (train_text_to_image_sdxl.py recipe): fp32 weights 4 B x N, fp32
    # grads 4 B x N, AdamW moments 2 x 4 B x N (step counters on the host), EMAModel's shadow
    # copy 4 B x N; the sin-cos position table is a buffer
    m = _sd3(method="full", precision="amp-bf16", ema="fp32")
    assert m.trainable_params == m.total_params == SD3_PARAMS
    states = _at_optimizer(m)
    assert states["params"] == 4 * SD3_PARAMS == 17_894_400
    assert states["buffers"] == POS_EMBED_BYTES
    assert states["grads"] == 4 * SD3_PARAMS
    assert states["optimizer"] == 8 * SD3_PARAMS
    assert states["ema"] == 4 * SD3_PARAMS
    assert m.sample["image_tokens"] == (128 // 16) ** 2 == 64 and m.sample["text_tokens"] == 16
    forward_end = m.phase_breakdowns_bytes["step2.forward_end"]
    assert forward_end["activations"] > 0 and forward_end["grads"] == 0


def test_ema_in_bf16_is_half_the_fp32_copy() -> None:
    m = _sd3(method="full", precision="amp-bf16", ema="bf16")
    assert _at_optimizer(m)["ema"] == 2 * SD3_PARAMS
    assert m.ema == "bf16"


def test_lora_keeps_adapters_at_the_base_dtype() -> None:
    # diffusers LoRA scripts: base and adapters in bf16; rank 8 on the four attention projections
    # of the image stream adds 8 x (256 + 256) per matrix: 2 blocks x 4 matrices x 4,096
    targets = ("to_q", "to_k", "to_v", "to_out.0")
    adapters = lora_params(spec_from_config(TINY_SD3, "x"), LoraSettings(rank=8, targets=targets))
    assert adapters == 2 * 4 * 8 * 512 == 32_768
    m = _sd3(method="lora", lora_rank=8, lora_targets=targets, base_weights="bf16", adapter_dtype="bf16")
    assert m.trainable_params == adapters
    states = _at_optimizer(m)
    assert states["params"] == 2 * (SD3_PARAMS + adapters)
    assert states["grads"] == 2 * adapters
    assert states["optimizer"] == 4 * adapters  # AdamW moments at the adapters' dtype
    assert states["ema"] == 0
    fp32 = _sd3(method="lora", lora_rank=8, lora_targets=targets, base_weights="bf16", adapter_dtype="fp32")
    assert _at_optimizer(fp32)["params"] == 2 * SD3_PARAMS + 4 * adapters
    assert _at_optimizer(fp32)["optimizer"] == 8 * adapters


def test_gradient_checkpointing_keeps_fewer_activations() -> None:
    plain = _sd3(method="full", precision="bf16")
    checkpointed = _sd3(method="full", precision="bf16", gradient_checkpointing=True)
    saved = plain.phase_breakdowns_bytes["step2.forward_end"]["activations"]
    kept = checkpointed.phase_breakdowns_bytes["step2.forward_end"]["activations"]
    assert 0 < kept < saved
    # bf16 weights, grads and moments: 2 B each
    assert _at_optimizer(plain)["params"] == 2 * SD3_PARAMS
    assert _at_optimizer(plain)["optimizer"] == 4 * SD3_PARAMS


def test_larger_images_keep_more_activations() -> None:
    small = _sd3(method="full", precision="bf16")
    large = measure_sample_step(dict(TINY_SD3), _sd3_shape(256), method="full", precision="bf16")
    assert large.sample["image_tokens"] == 4 * small.sample["image_tokens"]
    assert (
        large.phase_breakdowns_bytes["step2.forward_end"]["activations"]
        > 2 * small.phase_breakdowns_bytes["step2.forward_end"]["activations"]
    )


@pytest.mark.parametrize(
    ("config", "resolution", "frames"),
    [
        (
            {
                "_class_name": "FluxTransformer2DModel",
                "attention_head_dim": 64,
                "num_attention_heads": 2,
                "num_layers": 1,
                "num_single_layers": 1,
                "in_channels": 64,
                "joint_attention_dim": 128,
                "pooled_projection_dim": 128,
                "guidance_embeds": True,
                "axes_dims_rope": [16, 24, 24],
                "_pipeline": {"vae": {**TINY_VAE, "latent_channels": 16}},
            },
            64,
            1,
        ),
        (
            {
                "_class_name": "WanTransformer3DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 64,
                "ffn_dim": 256,
                "num_layers": 1,
                "in_channels": 16,
                "out_channels": 16,
                "text_dim": 128,
                "freq_dim": 256,
                "qk_norm": "rms_norm_across_heads",
                "cross_attn_norm": True,
                "_pipeline": {"vae": {"_class_name": "AutoencoderKLWan", "z_dim": 16}},
            },
            64,
            5,
        ),
        (
            {
                "_class_name": "UNet2DConditionModel",
                "block_out_channels": [32, 64],
                "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
                "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
                "layers_per_block": 1,
                "cross_attention_dim": 64,
                "attention_head_dim": 8,
                "norm_num_groups": 8,
                "addition_embed_type": "text_time",
                "addition_time_embed_dim": 8,
                "projection_class_embeddings_input_dim": 6 * 8 + 32,
                "sample_size": 8,
                "_pipeline": {"vae": TINY_VAE | {"latent_channels": 4}},
            },
            64,
            1,
        ),
        (
            {
                "_class_name": "CogVideoXTransformer3DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 64,
                "num_layers": 1,
                "in_channels": 16,
                "out_channels": 16,
                "text_embed_dim": 128,
                "time_embed_dim": 64,
                "use_rotary_positional_embeddings": True,
                "_pipeline": {"vae": {"_class_name": "AutoencoderKLCogVideoX", "latent_channels": 16}},
            },
            64,
            5,
        ),
        (
            {
                "_class_name": "HunyuanVideoTransformer3DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 64,
                "num_layers": 1,
                "num_single_layers": 1,
                "num_refiner_layers": 1,
                "in_channels": 16,
                "out_channels": 16,
                "text_embed_dim": 128,
                "pooled_projection_dim": 64,
                "rope_axes_dim": [16, 24, 24],
                "_pipeline": {"vae": {"_class_name": "AutoencoderKLHunyuanVideo", "latent_channels": 16}},
            },
            64,
            5,
        ),
    ],
    ids=["flux-dev", "wan", "sdxl-unet", "cogvideox", "hunyuanvideo"],
)
def test_each_denoiser_traces_a_full_step(config: dict[str, Any], resolution: int, frames: int) -> None:
    # packing (FLUX), video latents (Wan: 1 + (5 - 1) / 4 = 2 latent frames), SDXL's time ids and
    # pooled text embeddings (UNet), CogVideoX's frames-first latents, v-prediction and RoPE
    # tables, HunyuanVideo's text mask and guidance: each runs forward, backward and two
    # optimizer steps
    spec = spec_from_config(config, "tiny")
    shape = token_shape(spec, resolution, frames, 8)
    m = measure_sample_step(
        {k: v for k, v in config.items() if k != "_pipeline"}, shape, precision="amp-bf16"
    )
    assert m.total_params == total_params(spec)
    assert _at_optimizer(m)["grads"] >= 4 * m.total_params  # fp32 grads, each storage rounded up
    assert m.phase_breakdowns_bytes["step2.forward_end"]["activations"] > 0


def test_jepa_step_keeps_the_target_encoder_as_the_ema_copy() -> None:
    spec = spec_from_config(TINY_JEPA, "tiny-jepa")
    shape = token_shape(spec, 64, 4)
    assert shape.image_tokens == 32
    m = measure_sample_step(dict(TINY_JEPA), shape, precision="amp-bf16", mask_ratios=(0.75,))
    # the context encoder and predictor train (fp32, AdamW); the target encoder is an fp32
    # copy of the encoder, updated without gradients
    assert m.trainable_params == total_params(spec) == 1_449_472
    states = _at_optimizer(m)
    assert states["params"] == 4 * 1_449_472
    assert states["grads"] == 4 * 1_449_472
    assert states["optimizer"] == 8 * 1_449_472
    assert states["ema"] == 4 * JEPA_ENCODER == 4_734_976
    assert any("8/24 of 32" in note for note in m.notes)  # 75% of 32 tokens hidden
    bf16 = measure_sample_step(dict(TINY_JEPA), shape, mask_ratios=(0.75, 0.5), ema="bf16")
    assert _at_optimizer(bf16)["ema"] == 2 * JEPA_ENCODER
    assert bf16.mask_ratios == (0.75, 0.5)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mask_ratios": ()}, "mask_ratio"),
        ({"mask_ratios": (1.0,)}, "mask_ratio"),
        ({"mask_ratios": (0.01,)}, "mask_ratio"),  # hides no token of 32
        ({"method": "lora"}, "method"),
        ({"precision": "fp16"}, "precision"),
    ],
)
def test_jepa_settings_are_checked(kwargs: dict[str, Any], field: str) -> None:
    shape = token_shape(spec_from_config(TINY_JEPA, "j"), 64, 4)
    with pytest.raises(InputError) as error:
        measure_sample_step(dict(TINY_JEPA), shape, **{"mask_ratios": (0.5,), **kwargs})
    assert error.value.field == field


def test_lora_targets_that_match_nothing_name_the_field() -> None:
    with pytest.raises(InputError) as error:
        _sd3(method="lora", lora_targets=("q_proj",))
    assert error.value.field == "lora.targets"


def _pipeline(folder: Path) -> Path:
    (folder / "transformer").mkdir(parents=True)
    (folder / "vae").mkdir()
    index = {"transformer": ["diffusers", "SD3Transformer2DModel"], "vae": ["diffusers", "AutoencoderKL"]}
    (folder / "model_index.json").write_text(json.dumps(index))
    (folder / "transformer" / "config.json").write_text(json.dumps(TINY_SD3))
    (folder / "vae" / "config.json").write_text(json.dumps(TINY_VAE))
    return folder


def _no_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """estimate() refusing the model by its `model` field, as it refuses a kind whose memory
    trainplan does not model (so the test holds whether or not this kind is estimated)."""
    from trainplan.engine.measure import compare

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise InputError(
            "model", "tiny-sd3 is a diffusion model: memory is modelled for language models only"
        )

    monkeypatch.setattr(compare, "estimate", refuse)


def test_measure_cli_traces_a_pipeline_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_estimate(monkeypatch)
    folder = str(_pipeline(tmp_path / "tiny-sd3"))
    flags = ["measure", "--model", folder, "--method", "full", "--precision", "amp-bf16"]
    flags += [
        "--resolution",
        "128",
        "--text-tokens",
        "16",
        "--ema",
        "fp32",
        "--activation-checkpointing",
        "none",
    ]
    result = CliRunner().invoke(app, [*flags, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    measured = data["measured"]
    assert data["estimate"] is None and data["error"] is None
    assert data["notes"][0].startswith(NO_ESTIMATE)
    assert measured["ema_bytes"] == 4 * SD3_PARAMS
    assert measured["params_bytes"] == 4 * SD3_PARAMS + POS_EMBED_BYTES
    text = CliRunner().invoke(app, flags)
    assert text.exit_code == 0, text.output
    shown = " ".join(text.output.split())
    assert "tiny-sd3: traced step (GiB)" in shown and "estimate is not available" in shown
    assert "│ ema │ 0.02 │" in shown  # 4 B x 4,473,600 = 0.017 GiB


def test_measure_cli_needs_the_sample_size(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from trainplan.engine.measure import compare

    monkeypatch.setattr(compare, "sample_shape", lambda *_args: None)  # a scenario without one
    folder = str(_pipeline(tmp_path / "tiny-sd3"))
    result = CliRunner().invoke(
        app, ["measure", "--model", folder, "--method", "full", "--precision", "bf16"]
    )
    assert result.exit_code == 2
    assert "resolution" in result.output


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"frozen_encoders": "gpu"}, "frozen_encoders"),
        ({"gpus": 2, "zero_stage": 3, "method": "full"}, "gpus"),
        ({"activation_checkpointing": "op"}, "activation_checkpointing"),
        ({"lora": {"dora": True}}, "lora.dora"),
        ({"method": "qlora"}, "method"),
    ],
)
def test_untraceable_sample_settings(fields: dict[str, Any], field: str) -> None:
    scenario = scenario_from_mapping({"model": "FLUX.1-dev", "resolution": 512, **fields})
    with pytest.raises(InputError) as error:
        check_traceable(scenario, "diffusion")
    assert error.value.field == field


def test_the_comparison_appears_once_an_estimate_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """compare.py matches terms by name: once estimate() accepts a model, the rows carry its
    values (stood in for here by a language model's estimate)."""
    from trainplan.engine.estimate import estimate as real_estimate
    from trainplan.engine.measure import compare

    stand_in = real_estimate(
        Scenario(model="GPT-2", method="full", precision="bf16", seq_len=64, grad_accum=1)
    )
    monkeypatch.setattr(compare, "estimate", lambda *_args, **_kwargs: stand_in)
    folder = str(_pipeline(tmp_path / "tiny-sd3"))
    scenario = scenario_from_mapping(
        {
            "model": folder,
            "method": "full",
            "precision": "bf16",
            "resolution": 128,
            "text_tokens": 16,
            "activation_checkpointing": "none",
        }
    )
    comparison = measure_scenario(scenario)
    rows = {name: (measured, estimated) for name, measured, estimated in comparison.terms()}
    assert set(rows) == {"weights", "optimizer", "gradients", "activations + logits + temporaries", "peak"}
    weights = next(t.value for t in (stand_in.allocated_peak or stand_in.peak).terms if t.name == "weights")
    assert rows["weights"] == (2 * SD3_PARAMS + POS_EMBED_BYTES // 2, weights)  # bf16 weights and table
    assert comparison.error == pytest.approx(
        stand_in.allocated_peak_bytes / comparison.measured.peak_bytes - 1
    )
    assert not any(note.startswith(NO_ESTIMATE) for note in comparison.notes)


@pytest.mark.parametrize("name", ["FLUX.1-dev", "SD-1.5"])
def test_preset_targets_become_diffusers_module_paths(name: str) -> None:
    # "attention" names each projection by its path inside the block (attn.to_out.0, not "0"),
    # and peft, given those paths, adapts the matrices trainplan counts
    import diffusers
    import peft
    import torch

    from trainplan.engine.measure.compare import _lora_targets
    from trainplan.inputs.catalogs.models import find_model_record
    from trainplan.inputs.resolve import resolve_model

    record = find_model_record(name)
    assert record is not None
    scenario = Scenario(model=name, lora=LoraSettings(rank=4, targets="attention"))
    targets = _lora_targets(scenario, dict(record.config))
    assert all(target.endswith(("to_q", "to_k", "to_v", "to_out.0", "proj", "_out")) for target in targets)
    assert "0" not in targets and all("." in target for target in targets)
    with torch.device("meta"):
        kwargs = {key: value for key, value in record.config.items() if key != "_class_name"}
        model = getattr(diffusers, record.config["_class_name"]).from_config(kwargs)
        before = sum(p.numel() for p in model.parameters())
        peft.inject_adapter_in_model(peft.LoraConfig(r=4, target_modules=list(targets)), model)
    added = sum(p.numel() for p in model.parameters()) - before
    assert added == lora_params(resolve_model(name), scenario.lora)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"method": "full", "precision": "amp-bf16", "ema": "fp32"},
        {"method": "lora", "lora_rank": 8, "base_weights": "bf16", "adapter_dtype": "bf16"},
        {"jepa": True},
    ],
    ids=["sd3-full-ema", "sd3-lora", "vjepa2"],
)
def test_fake_tensors_allocate_as_real_ones(kwargs: dict[str, Any]) -> None:
    # the same step on real CPU tensors gives the same storages, byte for byte, in every phase
    if kwargs.pop("jepa", False):
        config, shape = dict(TINY_JEPA), token_shape(spec_from_config(TINY_JEPA, "j"), 64, 4)
        kwargs = {"mask_ratios": (0.75,)}
    else:
        config, shape = dict(TINY_SD3), _sd3_shape()
    fake = measure_sample_step(config, shape, **kwargs)
    real = measure_sample_step(config, shape, fake=False, **kwargs)
    assert (fake.peak_bytes, fake.breakdown()) == (real.peak_bytes, real.breakdown())
    assert fake.phase_peaks_bytes == real.phase_peaks_bytes


@pytest.mark.parametrize(
    ("config", "resolution", "frames"),
    [
        (
            {
                "_class_name": "SanaTransformer2DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 32,
                "num_layers": 1,
                "num_cross_attention_heads": 2,
                "cross_attention_head_dim": 32,
                "cross_attention_dim": 64,
                "caption_channels": 32,
                "in_channels": 8,
                "out_channels": 8,
                "sample_size": 4,
                "_pipeline": {"vae": TINY_DC_AE},
            },
            32,
            1,
        ),
        (
            {
                "_class_name": "LTXVideoTransformer3DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 32,
                "num_layers": 1,
                "cross_attention_dim": 64,
                "caption_channels": 32,
                "in_channels": 8,
                "out_channels": 8,
                "_pipeline": {"vae": TINY_LTX_VAE},
            },
            32,
            5,
        ),
    ],
    ids=["sana", "ltx-video"],
)
def test_sana_and_ltx_video_trace_a_full_step(config: dict[str, Any], resolution: int, frames: int) -> None:
    # Sana's 4D latents and caption; LTX-Video's packed video tokens (1 + (5 - 1) / 2 = 3 latent
    # frames of 8 x 8): each runs forward, backward and two optimizer steps
    spec = spec_from_config(config, "tiny")
    shape = token_shape(spec, resolution, frames, 8)
    m = measure_sample_step(
        {k: v for k, v in config.items() if k != "_pipeline"}, shape, precision="amp-bf16"
    )
    assert m.total_params == total_params(spec)
    assert _at_optimizer(m)["grads"] >= 4 * m.total_params  # fp32 grads, each storage rounded up
    assert m.phase_breakdowns_bytes["step2.forward_end"]["activations"] > 0
