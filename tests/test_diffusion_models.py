"""Diffusion and JEPA models: parameter counts against diffusers / transformers, hand-computed
layouts, latent geometry, pipeline folders and the config errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainplan.engine.terms.params import lora_params, resolved_lora
from trainplan.inputs.catalogs.models import ModelRecord, find_model_record, model_records
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import record_spec, resolve_model
from trainplan.specs.errors import ConfigError
from trainplan.specs.scenario import LoraSettings
from trainplan.specs.weights import total_params

NON_LLM = [record for record in model_records() if record_spec(record).kind != "llm"]


def _meta_device_count(config: dict[str, Any]) -> int:
    """Build the model diffusers / transformers builds from `config` on the meta device and count it."""
    torch = pytest.importorskip("torch")
    with torch.device("meta"):
        if "_class_name" in config:
            diffusers = pytest.importorskip("diffusers")
            kwargs = {key: value for key, value in config.items() if key != "_class_name"}
            model = getattr(diffusers, config["_class_name"]).from_config(kwargs)
        else:
            transformers = pytest.importorskip("transformers")
            kwargs = {key: value for key, value in config.items() if key != "model_type"}
            model = transformers.VJEPA2Model(transformers.VJEPA2Config(**kwargs))
    return sum(parameter.numel() for parameter in model.parameters())


def test_catalog_has_the_diffusion_and_jepa_models() -> None:
    kinds = {record.name: record_spec(record).kind for record in NON_LLM}
    assert kinds == {
        "FLUX.1-dev": "diffusion", "FLUX.1-schnell": "diffusion", "SD3.5-Large": "diffusion",
        "SD3.5-Medium": "diffusion", "SDXL-base-1.0": "diffusion", "SD-1.5": "diffusion",
        "PixArt-Sigma-XL-2-1024": "diffusion",
        "Sana-1600M-1024px": "diffusion",
        "LTX-Video-2B": "video",
        "Wan2.1-T2V-1.3B": "video", "Wan2.1-T2V-14B": "video", "CogVideoX-2b": "video",
        "CogVideoX-5b": "video", "HunyuanVideo": "video", "V-JEPA-2-ViT-L": "jepa",
        "V-JEPA-2-ViT-H": "jepa", "V-JEPA-2-ViT-g": "jepa", "I-JEPA-ViT-H-14": "jepa",
        "V-JEPA-ViT-L-16": "jepa", "V-JEPA-ViT-H-16": "jepa",
    }  # fmt: skip


# I-JEPA's predictor and V-JEPA 1 have no library class: counted by hand in tests/test_jepa.py
LIBRARY_BUILT = [record for record in NON_LLM if record.config.get("model_type") not in ("ijepa", "vjepa")]


@pytest.mark.parametrize("record", LIBRARY_BUILT, ids=lambda r: r.name)
def test_params_equal_the_meta_device_build(record: ModelRecord) -> None:
    # the analytic count, the recorded count and the library's own build of the same config: equal
    built = _meta_device_count(dict(record.config))
    assert total_params(record_spec(record)) == record.meta_device_params == built


TINY_FLUX = {
    "_class_name": "FluxTransformer2DModel", "attention_head_dim": 4, "num_attention_heads": 2,
    "num_layers": 1, "num_single_layers": 1, "in_channels": 4, "joint_attention_dim": 6,
    "pooled_projection_dim": 5, "guidance_embeds": False, "patch_size": 1, "axes_dims_rope": [2, 2, 0],
}  # fmt: skip


def test_tiny_flux_hand_count() -> None:
    # width 8 (2 heads x 4), MLP 32; every linear has a bias: in x out + out
    # embedders: timestep 256->8->8 (2056 + 72), pooled text 5->8->8 (48 + 72), context 6->8 (56),
    #   x 4->8 (40)                                                                  = 2344
    # double block: 2 modulations 8->48 (2 x 432), 8 attention projections 8->8 (8 x 72),
    #   4 RMSNorms over a head (4 x 4), 2 MLPs 8->32->8 (2 x (288 + 264))            = 2560
    # single block: modulation 8->24 (216), q/k/v (3 x 72), proj_mlp 8->32 (288),
    #   proj_out 40->8 (328), 2 head norms (8)                                       = 1056
    # output: norm_out 8->16 (144), proj_out 8->4 (36)                               = 180
    spec = spec_from_config(TINY_FLUX, "tiny")
    assert total_params(spec) == 2344 + 2560 + 1056 + 180 == 6140


def test_tiny_flux_meta_device_count() -> None:
    assert _meta_device_count(TINY_FLUX) == 6140


TINY_COGVIDEOX = {
    "_class_name": "CogVideoXTransformer3DModel", "num_attention_heads": 2, "attention_head_dim": 8,
    "num_layers": 1, "in_channels": 4, "out_channels": 4, "text_embed_dim": 6, "time_embed_dim": 5,
    "sample_width": 8, "sample_height": 8, "sample_frames": 9, "max_text_seq_length": 3,
}  # fmt: skip


def test_tiny_cogvideox_hand_count() -> None:
    # width 16 (2 heads x 8), FFN 64, time embedding 5; every linear has a bias: in x out + out
    # embedders: patch conv 4 x 2 x 2 -> 16 (272), text_proj 6 -> 16 (112), time_embedding
    #   16 -> 5 -> 5 (85 + 30)                                                       = 499
    # block: norm1/norm2 linears 5 -> 96 (2 x 576) and LayerNorms (2 x 32); q/k/v/out 16 -> 16
    #   (4 x 272); q/k LayerNorms over a head with bias (2 x 16); FFN 16 -> 64 -> 16 (1088 + 1040)
    #                                                                                = 4464
    # output: norm_final, norm_out.norm (2 x 32), norm_out.linear 5 -> 32 (192), proj_out
    #   16 -> 2 x 2 x 4 (272)                                                        = 528
    spec = spec_from_config(TINY_COGVIDEOX, "tiny")
    assert total_params(spec) == 499 + 4464 + 528 == 5491
    assert _meta_device_count(TINY_COGVIDEOX) == 5491
    # the sin-cos table (a buffer): 3 text rows + (8 / 2)^2 patches x (1 + 8 / 4) latent frames
    assert spec.buffer_elements == (3 + 16 * 3) * 16


TINY_HUNYUAN_VIDEO = {
    "_class_name": "HunyuanVideoTransformer3DModel", "num_attention_heads": 2, "attention_head_dim": 8,
    "num_layers": 1, "num_single_layers": 1, "num_refiner_layers": 1, "text_embed_dim": 12,
    "pooled_projection_dim": 6, "in_channels": 4, "out_channels": 4, "rope_axes_dim": [2, 2, 4],
    "mlp_ratio": 3.0, "guidance_embeds": False,
}  # fmt: skip


def test_tiny_hunyuan_video_hand_count() -> None:
    # width 16, MLP 48 (mlp_ratio 3), refiner FFN 64 (its fixed ratio 4); biased linears
    # embedders: x_embedder conv 4 x 1 x 2 x 2 -> 16 (272); refiner time 256 -> 16 -> 16
    #   (4112 + 272), refiner pooled text 12 -> 16 -> 16 (208 + 272), proj_in 12 -> 16 (208);
    #   time 256 -> 16 -> 16 (4384), pooled CLIP 6 -> 16 -> 16 (112 + 272)          = 10112
    # refiner block: 2 affine LayerNorms (64), q/k/v/out (4 x 272), FFN 16 -> 64 -> 16
    #   (1088 + 1040), norm_out.linear 16 -> 32 (544)                                = 3824
    # dual-stream block: 2 modulations 16 -> 96 (2 x 1632), 8 projections (8 x 272), 4 head
    #   RMSNorms (32), 2 FFNs 16 -> 48 -> 16 (2 x (816 + 784))                       = 8672
    # single-stream block: 16 -> 48 (816), q/k/v (816), proj_mlp 16 -> 48 (816), proj_out
    #   64 -> 16 (1040), 2 head norms (16)                                           = 3504
    # output: norm_out 16 -> 32 (544), proj_out 16 -> 16 (272)                       = 816
    spec = spec_from_config(TINY_HUNYUAN_VIDEO, "tiny")
    assert total_params(spec) == 10112 + 3824 + 8672 + 3504 + 816 == 26928
    assert _meta_device_count(TINY_HUNYUAN_VIDEO) == 26928


def test_flux_lora_on_the_attention_projections() -> None:
    # diffusers' FLUX LoRA scripts target to_k, to_q, to_v, to_out.0; rank 16 adds 16 x (3072 + 3072)
    # per matrix: 4 matrices in each of 19 double-stream blocks, 3 (no to_out) in each of 38 single
    # blocks: (19 x 4 + 38 x 3) x 98,304 = 18,677,760 (peft's inject_adapter_in_model counts the same)
    spec = resolve_model("FLUX.1-dev")
    lora = LoraSettings(rank=16, targets=("to_k", "to_q", "to_v", "to_out.0"))
    assert lora_params(spec, lora) == (19 * 4 + 38 * 3) * 16 * (3072 + 3072) == 18_677_760
    # the "attention" preset also takes the text stream's add_*_proj and to_add_out in double blocks
    assert lora_params(spec, LoraSettings(rank=16, targets="attention")) == (19 * 8 + 38 * 3) * 98_304


@pytest.mark.parametrize(
    ("name", "published"),
    [
        # finetrainers docs/training/cogvideox.md and hunyuan_video.md, "Memory Usage": LoRA rank
        # 128 on to_q, to_k, to_v, to_out.0, the logged "trainable parameters" (exact)
        ("CogVideoX-5b", 132_120_576),  # 42 blocks x 4 matrices x 128 x (3072 + 3072)
        # 20 dual-stream blocks x 4 + 40 single-stream x 3 (no to_out) + 2 refiner blocks x 4
        # matrices, each 128 x (3072 + 3072): (80 + 120 + 8) x 786,432
        ("HunyuanVideo", 163_577_856),
    ],
)
def test_video_lora_counts_equal_the_published_trainable_parameters(name: str, published: int) -> None:
    lora = LoraSettings(rank=128, targets=("to_q", "to_k", "to_v", "to_out.0"))
    assert lora_params(resolve_model(name), lora) == published


def test_unet_lora_on_the_attention_projections() -> None:
    # SD 1.5: 16 transformer blocks (6 down, 1 mid, 9 up) at widths 320 (5), 640 (5), 1280 (6);
    # per block: self-attention q/k/v/out C x C, cross-attention q/out C x C, k/v 768 -> C;
    # rank 4 adds 4 x (in + out) per matrix
    def per_block(width: int) -> int:
        return 4 * (6 * 2 * width + 2 * (768 + width))

    expected = 5 * per_block(320) + 5 * per_block(640) + 6 * per_block(1280)
    spec = resolve_model("SD-1.5")
    assert lora_params(spec, LoraSettings(rank=4, targets=("to_q", "to_k", "to_v", "to_out.0"))) == expected


@pytest.mark.parametrize(
    ("name", "stride", "channels", "patch", "temporal", "text_tokens"),
    [
        ("FLUX.1-dev", 8, 16, 2, 1, 512),  # 64 input channels = 2 x 2 packed 16-channel latents
        ("SD3.5-Large", 8, 16, 2, 1, 333),
        ("SDXL-base-1.0", 8, 4, 1, 1, 77),
        ("Wan2.1-T2V-14B", 8, 16, 2, 4, 512),
        ("CogVideoX-5b", 8, 16, 2, 4, 226),  # CogVideoXPipeline: 4 x 8 x 8, 226 T5 tokens
        ("HunyuanVideo", 8, 16, 2, 4, 256),  # HunyuanVideoPipeline: 256 LLaMA tokens
        ("V-JEPA-2-ViT-L", 1, 3, 16, 2, 0),  # tubelets of 2 frames x 16 x 16 pixels
    ],
)
def test_latent_geometry(
    name: str, stride: int, channels: int, patch: int, temporal: int, text_tokens: int
) -> None:
    geometry = resolve_model(name).geometry
    assert geometry is not None
    assert (geometry.spatial_stride, geometry.latent_channels, geometry.patch) == (stride, channels, patch)
    assert (geometry.temporal_stride, geometry.text_tokens) == (temporal, text_tokens)


def test_pipeline_folder_reads_the_denoiser_and_the_vae(tmp_path: Path) -> None:
    record = find_model_record("Wan2.1-T2V-1.3B")
    assert record is not None and record.pipeline is not None
    (tmp_path / "transformer").mkdir()
    (tmp_path / "vae").mkdir()
    index = {
        "_class_name": "WanPipeline",
        "transformer": ["diffusers", "WanTransformer3DModel"],
        "vae": ["diffusers", "AutoencoderKLWan"],
    }
    (tmp_path / "model_index.json").write_text(json.dumps(index))
    (tmp_path / "transformer" / "config.json").write_text(json.dumps(dict(record.config)))
    (tmp_path / "vae" / "config.json").write_text(json.dumps(dict(record.pipeline["vae"])))
    spec = resolve_model(str(tmp_path))
    assert total_params(spec) == 1_418_996_800
    assert spec.geometry is not None and spec.geometry.temporal_stride == 4
    assert spec.geometry.text_tokens == 512  # WanPipeline's max_sequence_length


def test_pipeline_folder_without_a_denoiser(tmp_path: Path) -> None:
    (tmp_path / "model_index.json").write_text(json.dumps({"vae": ["diffusers", "AutoencoderKL"]}))
    with pytest.raises(ConfigError, match="transformer or unet"):
        resolve_model(str(tmp_path))


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"_class_name": "MochiTransformer3DModel"}, "_class_name"),
        ({**TINY_COGVIDEOX, "patch_size_t": 2}, "patch_size_t"),
        ({**TINY_HUNYUAN_VIDEO, "image_condition_type": "token_replace"}, "image_condition_type"),
        (
            {
                "_class_name": "PixArtTransformer2DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 4,
                "norm_type": "ada_norm_zero",
            },
            "norm_type",
        ),
        ({**TINY_FLUX, "_class_name": "SD3Transformer2DModel", "qk_norm": "layer_norm"}, "qk_norm"),
        (
            {
                "_class_name": "WanTransformer3DModel",
                "num_attention_heads": 2,
                "attention_head_dim": 4,
                "ffn_dim": 8,
                "num_layers": 1,
                "image_dim": 1280,
            },
            "image_dim",
        ),
        (
            {
                "_class_name": "UNet2DConditionModel",
                "down_block_types": ["DownBlock2D"],
                "up_block_types": ["UpBlock2D"],
                "class_embed_type": "timestep",
            },
            "class_embed_type",
        ),
    ],
)
def test_unmodelled_configs_are_refused_by_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "x")
    assert error.value.field == field


def test_models_family_filter() -> None:
    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    runner = CliRunner()
    rows = json.loads(runner.invoke(app, ["models", "--family", "jepa", "--json"]).output)
    assert [row["name"] for row in rows] == [
        "V-JEPA-2-ViT-L", "V-JEPA-2-ViT-H", "V-JEPA-2-ViT-g",
        "I-JEPA-ViT-H-14", "V-JEPA-ViT-L-16", "V-JEPA-ViT-H-16",
    ]  # fmt: skip
    assert {row["kind"] for row in rows} == {"jepa"}
    video = json.loads(runner.invoke(app, ["models", "wan", "--family", "video", "--json"]).output)
    assert [row["published_params"] for row in video] == [1_418_996_800, 14_000_000_000]
    llms = json.loads(runner.invoke(app, ["models", "--family", "llm", "--json"]).output)
    assert len(llms) == len(model_records()) - len(NON_LLM)
    bad = runner.invoke(app, ["models", "--family", "gan"])
    assert bad.exit_code == 2 and "family: 'gan' is not a model family" in bad.output


def _peft_adapter_count(config: dict[str, Any], rank: int, targets: str | list[str]) -> int:
    """Adapter parameters peft adds to the meta-device build of `config` (`targets`: module-name
    suffixes, or "linear" for every nn.Linear: peft takes "all-linear" only on transformers models)."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    diffusers = pytest.importorskip("diffusers")
    with torch.device("meta"):
        kwargs = {key: value for key, value in config.items() if key != "_class_name"}
        model = getattr(diffusers, config["_class_name"]).from_config(kwargs)
        if targets == "linear":
            targets = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]
        before = sum(parameter.numel() for parameter in model.parameters())
        peft.inject_adapter_in_model(peft.LoraConfig(r=rank, target_modules=targets), model)
    return sum(parameter.numel() for parameter in model.parameters()) - before


@pytest.mark.parametrize("name", ["SD-1.5", "Wan2.1-T2V-1.3B", "SD3.5-Medium"])
def test_all_linear_adapters_equal_peft(name: str) -> None:
    # every nn.Linear gets rank x (in + out); convolutions (UNet resnets, patch embedders) are not linear
    record = find_model_record(name)
    assert record is not None
    ours = lora_params(record_spec(record), LoraSettings(rank=8, targets="all-linear"))
    assert ours == _peft_adapter_count(dict(record.config), 8, "linear")


def test_conv_adapters_equal_peft() -> None:
    # peft's Conv2d LoRA: A is a k x k conv in -> r (r x in x k x k), B a 1x1 conv r -> out (out x r)
    record = find_model_record("SD-1.5")
    assert record is not None
    targets = ("conv1", "conv2", "conv_shortcut")
    ours = lora_params(record_spec(record), LoraSettings(rank=4, targets=targets))
    assert ours == _peft_adapter_count(dict(record.config), 4, list(targets))


def test_hub_pipeline_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A diffusers repository has no root config.json: its model_index.json, transformer and VAE
    configs are read instead, through the same cached, retry-free lookup."""
    pytest.importorskip("huggingface_hub")
    from huggingface_hub.utils import EntryNotFoundError

    from trainplan.inputs import resolve

    record = find_model_record("FLUX.1-dev")
    assert record is not None and record.pipeline is not None
    files = {
        "model_index.json": {
            "transformer": ["diffusers", "FluxTransformer2DModel"],
            "vae": ["diffusers", "AutoencoderKL"],
        },
        "transformer/config.json": dict(record.config),
        "vae/config.json": dict(record.pipeline["vae"]),
    }
    asked: list[str] = []

    def hub_path(hub_id: str, download: Any, metadata: Any, url: Any, filename: str = "config.json") -> str:
        asked.append(filename)
        if filename not in files:
            raise EntryNotFoundError(f"{hub_id} has no {filename}")
        path = tmp_path / filename.replace("/", "_")
        path.write_text(json.dumps(files[filename]))
        return str(path)

    monkeypatch.setattr(resolve, "_hub_config_path", hub_path)
    spec = resolve_model("someone/flux-finetune")
    assert asked == ["config.json", "model_index.json", "transformer/config.json", "vae/config.json"]
    assert total_params(spec) == 11_901_408_320
    assert spec.geometry is not None and spec.geometry.patch == 2


def test_a_pasted_unet_config_is_bounded_before_any_work() -> None:
    # layers_per_block drives a loop: a config asking for 10^9 resnets per stage is refused first
    config = {**dict(find_model_record("SD-1.5").config), "layers_per_block": 10**9}  # type: ignore[union-attr]
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "x")
    assert error.value.field == "layers_per_block" and "4,096" in error.value.message


TINY_SANA = {
    "_class_name": "SanaTransformer2DModel", "num_attention_heads": 2, "attention_head_dim": 4,
    "num_layers": 1, "num_cross_attention_heads": 2, "cross_attention_head_dim": 4,
    "cross_attention_dim": 8, "caption_channels": 6, "in_channels": 4, "out_channels": 4,
    "mlp_ratio": 2.5, "sample_size": 2,
}  # fmt: skip


def test_tiny_sana_hand_count() -> None:
    # width 8 (2 heads x 4), GLUMBConv h = int(2.5 x 8) = 20
    # embed: patch conv 4->8 (40), timestep 256->8->8 (2056 + 72), modulation 8->48 (432),
    #   caption 6->8->8 (56 + 72), caption_norm weight 8                                  = 2736
    # block: attn1 q/k/v without bias 3 x 64, out 72; attn2 q/k/v/out biased 4 x 72;
    #   conv_inverted 8->40 (360), depthwise 3x3 over 40 (360 + 40), conv_point 20->8 (160);
    #   scale_shift_table 6 x 8 (48)                                                       = 1520
    # output: scale_shift_table 2 x 8 (16), proj_out 8->4 (36)                             = 52
    assert total_params(spec_from_config(TINY_SANA, "tiny")) == 2736 + 1520 + 52 == 4308
    assert _meta_device_count(TINY_SANA) == 4308


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({**TINY_SANA, "cross_attention_dim": 6}, "cross_attention_dim"),
        ({**TINY_SANA, "cross_attention_head_dim": 2}, "cross_attention_head_dim"),
        ({**TINY_SANA, "qk_norm": "layer_norm"}, "qk_norm"),
        ({**TINY_SANA, "mlp_ratio": 0}, "mlp_ratio"),
        ({**TINY_SANA, "norm_elementwise_affine": True}, "norm_elementwise_affine"),
        (
            {"_class_name": "LTXVideoTransformer3DModel", "num_attention_heads": 2, "attention_head_dim": 4,
             "activation_fn": "geglu"},
            "activation_fn",
        ),
        (
            {"_class_name": "LTXVideoTransformer3DModel", "num_attention_heads": 2, "attention_head_dim": 4,
             "qk_norm": "rms_norm"},
            "qk_norm",
        ),
        (
            {"_class_name": "LTXVideoTransformer3DModel", "num_attention_heads": 2, "attention_head_dim": 4,
             "cross_attention_dim": 16},
            "cross_attention_dim",
        ),
    ],
)  # fmt: skip
def test_unmodelled_sana_and_ltx_configs_are_refused_by_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "x")
    assert error.value.field == field


def test_sana_latents_must_match_the_vae() -> None:
    vae = {
        "_class_name": "AutoencoderDC", "latent_channels": 8, "downsample_block_type": "conv",
        "upsample_block_type": "interpolate", "encoder_qkv_multiscales": [[], [], []],
        "decoder_qkv_multiscales": [[], [], []], "encoder_layers_per_block": [1, 1, 1],
        "decoder_layers_per_block": [1, 1, 1],
        "encoder_block_out_channels": [8, 8, 8], "decoder_block_out_channels": [8, 8, 8],
    }  # fmt: skip
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_SANA, "_pipeline": {"vae": vae}}, "x")  # in_channels 4 vs 8 latents
    assert error.value.field == "in_channels"
    assert "need 8" in error.value.message


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        # the Wan and FLUX training scripts pass peft target_modules as a string like these
        ("Wan2.1-T2V-1.3B", r"blocks.*(to_q|to_k|to_v|to_out.0)"),
        ("FLUX.1-dev", r"(single_)?transformer_blocks\.\d+\.attn\.(to_q|to_k|to_v)"),
        ("FLUX.1-dev", r".*transformer_blocks.*(to_out\.0|to_add_out|ff\.net\.2)"),
        ("SD3.5-Medium", r"transformer_blocks\.\d+\.attn\.(add_)?[qkv]_proj|.*\.to_[qkv]"),
        ("SDXL-base-1.0", r".*attentions\.\d+\.transformer_blocks\.\d+\.attn[12]\.to_(q|k|v|out\.0)"),
        ("HunyuanVideo", r"single_transformer_blocks\.\d+\.(proj_mlp|norm\.linear)"),
        ("CogVideoX-2b", r"transformer_blocks\.\d+\.(attn1\.to_[qkv]|ff\.net\.2)"),
    ],
)
def test_regular_expression_targets_adapt_what_peft_adapts(name: str, pattern: str) -> None:
    """peft fullmatches a target_modules string against every module's full name; our module paths
    (hf/diffusers.py BLOCK_PATHS, the UNet's) select the same modules, so the adapter counts agree."""
    record = find_model_record(name)
    assert record is not None
    ours = lora_params(
        record_spec(record), resolved_lora(record_spec(record), LoraSettings(rank=4, targets=pattern))
    )
    assert ours == _peft_adapter_count(dict(record.config), 4, pattern)


@pytest.mark.parametrize(
    ("name", "pattern", "message"),
    [
        (
            "Wan2.1-T2V-1.3B",
            r"blocks\.(0|1)\.attn1\.to_q",
            "selects attn1.to_q in some layers or blocks but not in",
        ),
        (
            "Wan2.1-T2V-1.3B",
            r"transformer_blocks.*to_q",
            "matches no module of Wan2.1-T2V-1.3B (its names look like blocks.0.attn1.to_q)",
        ),
        ("Wan2.1-T2V-1.3B", r"blocks.(to_q", "is not a regular expression"),
        # proj_out is a module at the top and in every FLUX single block: only some of them
        (
            "FLUX.1-dev",
            r".*transformer_blocks.*proj_out",
            "selects proj_out in some layers or blocks but not in",
        ),
    ],
)
def test_regular_expression_targets_we_cannot_count_are_refused(
    name: str, pattern: str, message: str
) -> None:
    from trainplan.engine.estimate import estimate
    from trainplan.specs.errors import InputError

    extra = {"frames": 17} if name.startswith("Wan") else {"resolution": 512}
    with pytest.raises(InputError) as caught:
        estimate({"model": name, "method": "lora", "lora": {"targets": pattern}, **extra})
    assert caught.value.field == "lora.targets" and message in caught.value.message
