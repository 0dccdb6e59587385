"""The frozen encoders of diffusion pipelines: counts against diffusers / transformers builds and
published figures, hand-computed memory, FLOPs and PCIe terms, and the config errors."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from trainplan.engine.terms import encoders
from trainplan.engine.terms.geometry import TokenShape, token_shape
from trainplan.inputs.catalogs.models import find_model_record, model_records
from trainplan.inputs.hf.encoders import frozen_components, text_encoder_component
from trainplan.inputs.hf.vae import vae_component
from trainplan.inputs.resolve import catalog_spec, record_spec, resolve_model
from trainplan.specs.errors import ConfigError, InputError
from trainplan.specs.model import FrozenComponent

PIPELINES = [record for record in model_records() if record.pipeline]


def _components() -> list[tuple[str, str, dict[str, Any]]]:
    """(pipeline, folder, config) of every distinct counted frozen component in the catalog (a
    geometry-only one would have no count to compare)."""
    seen: set[str] = set()
    found = []
    for record in PIPELINES:
        assert record.pipeline is not None
        configs = {"vae": record.pipeline["vae"], **record.pipeline["text_encoders"]}
        for folder, config in configs.items():
            key = json.dumps(config, sort_keys=True)
            if key not in seen and _component(folder, dict(config)).counted:
                seen.add(key)
                found.append((record.name, folder, dict(config)))
    return found


def _config_class(transformers: Any, model_type: str) -> Any:
    """The transformers config class of a text encoder's model type."""
    return {
        "clip_text_model": transformers.CLIPTextConfig,
        "t5": transformers.T5Config,
        "umt5": transformers.UMT5Config,
        "gemma2": transformers.Gemma2Config,
        "llama": transformers.LlamaConfig,
    }[model_type]


@cache
def _built(config_json: str) -> tuple[int, int]:
    """(all parameters, the encoder half: encoder + quant_conv) of the model diffusers or
    transformers builds from the config on the meta device (text encoders: both the same)."""
    torch = pytest.importorskip("torch")
    config = json.loads(config_json)
    with torch.device("meta"):
        if "_class_name" in config:
            diffusers = pytest.importorskip("diffusers")
            kwargs = {key: value for key, value in config.items() if key != "_class_name"}
            vae = getattr(diffusers, config["_class_name"]).from_config(kwargs)
            encoder = sum(p.numel() for p in vae.encoder.parameters())
            if getattr(vae, "quant_conv", None) is not None:  # LTX-Video's has none at all
                encoder += sum(p.numel() for p in vae.quant_conv.parameters())
            return sum(p.numel() for p in vae.parameters()), encoder
        transformers = pytest.importorskip("transformers")
        kwargs = {key: value for key, value in config.items() if key not in ("architectures", "model_type")}
        config_class = _config_class(transformers, config["model_type"])
        model = getattr(transformers, config["architectures"][0])(config_class(**kwargs))
        total = sum(p.numel() for p in model.parameters())
        return total, total


def _component(folder: str, config: dict[str, Any]) -> FrozenComponent:
    return vae_component(config) if folder == "vae" else text_encoder_component(folder, config)


@pytest.mark.parametrize(
    ("pipeline", "folder", "config"), _components(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_catalog_components_equal_the_meta_device_build(
    pipeline: str, folder: str, config: dict[str, Any]
) -> None:
    # every VAE (both halves, and the encoder half training runs) and text encoder of the catalog
    component = _component(folder, config)
    assert (component.params, component.forward_params) == _built(json.dumps(config, sort_keys=True))


def test_published_figures() -> None:
    flux = {c.name: c for c in catalog_spec("FLUX.1-dev").frozen}
    sdxl = {c.name: c for c in catalog_spec("SDXL-base-1.0").frozen}
    wan = {c.name: c for c in catalog_spec("Wan2.1-T2V-14B").frozen}
    # FLUX.1 repositories, text_encoder_2/model.safetensors.index.json: total_size 9,524,621,312
    # bytes of bf16 weights = 2 x 4,762,310,656 (exact)
    assert 2 * flux["text_encoder_2"].params == 9_524_621_312
    assert flux["text_encoder_2"].architecture == "T5EncoderModel"
    # Stable Diffusion v1 model card: "a 860M UNet and 123M text encoder" (rounded)
    assert round(sdxl["text_encoder"].params, -6) == 123_000_000
    # Podell et al. 2023 (SDXL), sec. 2.1: OpenCLIP ViT-bigG with CLIP ViT-L, "817M" text-encoder
    # parameters in total (817.7M, truncated)
    assert (sdxl["text_encoder"].params + sdxl["text_encoder_2"].params) // 10**6 == 817
    # Wan Team 2025 (Wan), sec. 3.1: the Wan-VAE has 127M parameters (rounded)
    assert round(wan["vae"].params, -6) == 127_000_000
    # the SD VAE (AutoencoderKL, 4 latent channels): 83,653,863 in diffusers' build, about a third
    # of it the encoder; FLUX/SD3's 16-channel VAE has no quant convs
    assert (sdxl["vae"].params, sdxl["vae"].forward_params) == (83_653_863, 34_163_664)
    sana = {c.name: c for c in catalog_spec("Sana-1600M-1024px").frozen}
    hunyuan = {c.name: c for c in catalog_spec("HunyuanVideo").frozen}
    # Gemma Team 2024 (Gemma 2), table 1: the 2B model has 2,024,517,888 non-embedding parameters
    # (its 590,118,912 embedding ones are 256,128 rows of 2304; the config's vocabulary has 256,000)
    assert sana["text_encoder"].params - 256_000 * 2304 == 2_024_517_888
    # HunyuanVideo's LLaVA-LLaMA-3-8B text model: Llama 3 8B's 8,030,261,248 (the Meta-Llama-3-8B
    # index, 16,060,522,496 bf16 bytes) less its LM head 4096 x 128,256, with 64 more
    # vocabulary rows (128,320: LLaVA's image and padding tokens) in the embedding
    assert hunyuan["text_encoder"].params == 8_030_261_248 - 4096 * 128_256 + 64 * 4096


TINY_KL = {
    "_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 2,
    "layers_per_block": 1, "block_out_channels": [4, 8], "norm_num_groups": 2,
    "down_block_types": ["DownEncoderBlock2D"] * 2, "up_block_types": ["UpDecoderBlock2D"] * 2,
}  # fmt: skip
TINY_WAN = {
    "_class_name": "AutoencoderKLWan", "base_dim": 2, "z_dim": 2, "dim_mult": [1, 2], "num_res_blocks": 1,
    "attn_scales": [], "temperal_downsample": [True],
}  # fmt: skip
TINY_CLIP = {
    "architectures": ["CLIPTextModelWithProjection"], "model_type": "clip_text_model", "hidden_size": 8,
    "intermediate_size": 16, "num_attention_heads": 2, "num_hidden_layers": 2, "vocab_size": 10,
    "max_position_embeddings": 6, "projection_dim": 4,
}  # fmt: skip
TINY_T5 = {
    "architectures": ["T5EncoderModel"], "model_type": "t5", "d_model": 8, "d_ff": 16, "d_kv": 4,
    "num_heads": 2, "num_layers": 2, "vocab_size": 10, "feed_forward_proj": "gated-gelu",
    "relative_attention_num_buckets": 4,
}  # fmt: skip


def _shape(width: int, frames: int = 1, text: int = 0) -> TokenShape:
    return TokenShape(width, width, frames, 0, 0, 0, 0, text)


def test_tiny_autoencoder_kl_hand_count() -> None:
    # encoder: conv_in 3->4 3x3 (3*4*9 + 4 = 112); stage 0 resnet 4->4 (two 148 convs, GroupNorms
    # 16: 312) and its stride-2 conv (148); stage 1 resnet 4->8 (296 + 584 + 1x1 shortcut 40 +
    # norms 24 = 944); mid: two resnets 8->8 (2 x 1200) and the attention (4 x (64 + 8) + 16 = 304);
    # conv_norm_out 16, conv_out 8->4 (292), quant_conv 4->4 (20)                       = 4548
    # decoder: conv_in 2->8 (152), mid (2704), up stage 0: two resnets 8->8 (2400) and the upsampling
    # conv (584); up stage 1: resnet 8->4 (292 + 148 + 36 + 24 = 500) and 4->4 (312); conv_norm_out
    # 8, conv_out 4->3 (111), post_quant_conv 2->2 (6)                                   = 6777
    vae = vae_component(TINY_KL)
    assert (
        (vae.params, vae.forward_params) == (4548 + 6777, 4548) == _built(json.dumps(TINY_KL, sort_keys=True))
    )


def test_tiny_autoencoder_kl_flops_and_working_set() -> None:
    vae = vae_component(TINY_KL)
    # 8 x 8 px: 64 pixels at level 0, 16 after the stride-2 conv; a conv costs 2 x in x out x taps
    # per output pixel: conv_in 2*3*4*9*64 = 13,824; stage 0 two convs 2 x 18,432; the down conv
    # 2*4*4*9*16 = 4,608; stage 1: 9,216 + 18,432 + shortcut 1,024; mid: four 8->8 convs 4 x 18,432,
    # four projections 4 x 2*8*8*16, attention 4 x 16^2 x 8 = 8,192; conv_out 9,216; quant_conv 512
    expected = (
        13_824 + 2 * 18_432 + 4_608 + 9_216 + 18_432 + 1_024 + 4 * 18_432 + 4 * 2_048 + 8_192 + 9_216 + 512
    )
    assert encoders.vae_flops(vae, _shape(8)) == expected == 183_808
    # 5 copies of the widest activation (4 channels x 64 pixels at stage 0) and the sample's
    # pixels 3 x 64, at 2 bytes
    assert encoders.vae_working_bytes(vae, _shape(8)) == (5 * 4 * 64 + 3 * 64) * 2


def test_tiny_wan_vae_flops_and_working_set() -> None:
    vae = vae_component(TINY_WAN)
    assert (vae.params, vae.forward_params) == _built(json.dumps(TINY_WAN, sort_keys=True))
    # 8 x 8 px, 5 frames: level 0 has 64 pixels x 5 frames, level 1 (after the spatial and the time
    # downsampling) 16 pixels x 1 + 4/2 = 3 frames; the time conv skips the first frame (2 frames)
    conv_in = 2 * 3 * 2 * 27 * 64 * 5
    stage0 = 2 * (2 * 2 * 2 * 27 * 64 * 5)
    resample = 2 * 2 * 2 * 9 * 16 * 5  # the 2-D stride-2 conv runs on every frame
    time_conv = 2 * 2 * 2 * 3 * 16 * 2
    stage1 = 2 * 2 * 4 * 27 * 16 * 3 + 2 * 4 * 4 * 27 * 16 * 3 + 2 * 2 * 4 * 16 * 3
    mid = 4 * (2 * 4 * 4 * 27 * 16 * 3) + 2 * 4 * 12 * 16 * 3 + 2 * 4 * 4 * 16 * 3 + 4 * 16 * 16 * 4 * 3
    out = 2 * 4 * 4 * 27 * 16 * 3 + 2 * 4 * 4 * 16 * 3
    assert (
        encoders.vae_flops(vae, _shape(8, 5)) == conv_in + stage0 + resample + time_conv + stage1 + mid + out
    )
    # chunks of 2 frames at level 0 (one temporal downsampling), 1 at level 1: the widest activation
    # is 2 channels x 64 pixels x 2 frames, held 6 times; the cache keeps 2 frames of each 3x3x3
    # conv's input and 1 of the time conv's: conv_in 384, stage 0 512, time conv 32, stage 1
    # 64 + 128, mid 512, conv_out 128 = 1,760; the clip's pixels 3 x 64 x 5 = 960
    assert encoders.vae_working_bytes(vae, _shape(8, 5)) == (6 * 256 + 1_760 + 960) * 2


def test_tiny_text_encoders_hand_count() -> None:
    # CLIP: embeddings (10 + 6) x 8 = 128; a layer: q/k/v/out 4 x (64 + 8), fc1 8x16 + 16, fc2 16x8 + 8,
    # two LayerNorms 2 x 16 = 600; final LayerNorm 16; text_projection 8 x 4 = 32
    clip = text_encoder_component("text_encoder", TINY_CLIP)
    assert clip.params == 128 + 2 * 600 + 16 + 32 == _built(json.dumps(TINY_CLIP, sort_keys=True))[0]
    assert clip.context_tokens == 6  # the tokenizer pads to max_position_embeddings
    # T5 encoder: shared embedding 80; a layer: q/k/v/o 4 x 64, gated FFN 3 x 128, two RMSNorms 16;
    # the first layer's relative bias 4 buckets x 2 heads; the final norm 8. UMT5: a bias per layer
    t5 = text_encoder_component("text_encoder_2", TINY_T5)
    assert t5.params == 80 + 2 * 656 + 8 + 8 == _built(json.dumps(TINY_T5, sort_keys=True))[0]
    umt5_config = {**TINY_T5, "architectures": ["UMT5EncoderModel"], "model_type": "umt5"}
    umt5 = text_encoder_component("text_encoder", umt5_config)
    assert umt5.params == t5.params + 8 == _built(json.dumps(umt5_config, sort_keys=True))[0]


def test_tiny_text_encoder_flops_and_working_set() -> None:
    clip = text_encoder_component("text_encoder", TINY_CLIP)
    # 6 tokens whatever the text length: matmuls 2 x (4*64 + 128 + 128) x 6 = 6,144 per layer,
    # scores and weighted sum 2 x 2 heads x 6 x 6 x (4 + 4) = 1,152 per layer; pooled projection 2 x 32
    assert encoders.text_flops(clip, _shape(8, text=100)) == 2 * (6_144 + 1_152) + 64
    # in the MLP: 4 hidden-width tensors 4 x 6 x 8 and quick_gelu's 3 of 6 x 16 = 480 elements
    # (> attention: 3 x 48 + q, k, v, output 4 x 48 = 336)
    assert encoders.text_working_bytes(clip, _shape(8)) == 480 * 2
    t5 = text_encoder_component("text_encoder_2", TINY_T5)
    # 5 tokens: 2 x (4*64 + 3*128) x 5 = 6,400 and 2 x 2 x 5 x 5 x 8 = 800 per layer
    assert encoders.text_flops(t5, _shape(8, text=5)) == 2 * (6_400 + 800)
    # in the MLP: 4 x 5 x 8 and gelu_new's 4 x 5 x 16, plus the stack's position bias 2 x 5 x 5
    # = 530 (> attention: 7 x 40 and the bias with its contiguous copy, 2 x 50 = 380); per sample
    # but the bias
    assert encoders.text_working_bytes(t5, _shape(8, text=5)) == (160 + 320 + 50) * 2
    assert encoders.text_working_bytes(t5, _shape(8, text=5), micro_batch=3) == (3 * 480 + 50) * 2


TINY_LLAMA = {
    "architectures": ["LlamaModel"], "model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
    "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 3, "vocab_size": 10,
}  # fmt: skip
TINY_GEMMA2 = {**TINY_LLAMA, "architectures": ["Gemma2Model"], "model_type": "gemma2", "head_dim": 4}


def test_tiny_decoder_text_encoders() -> None:
    # LlamaModel: embedding 10 x 8 = 80; a layer: q 8x8 + k, v 8x4 each + o 8x8 = 192, gate/up/down
    # 3 x 8 x 16 = 384, two RMSNorms 16: 592; the final norm 8; no LM head
    llama = text_encoder_component("text_encoder", TINY_LLAMA)
    assert llama.params == 80 + 3 * 592 + 8 == _built(json.dumps(TINY_LLAMA, sort_keys=True))[0]
    # Gemma2Model: four norms a layer, 8 more each
    gemma = text_encoder_component("text_encoder", TINY_GEMMA2)
    assert gemma.params == llama.params + 3 * 16 == _built(json.dumps(TINY_GEMMA2, sort_keys=True))[0]
    # FLOPs on the denoiser's 5 text tokens: 2 x (192 + 384) x 5 = 5,760 per layer, and scores with
    # the weighted sum 2 x 2 heads x 5 x 5 x (4 + 4) = 800 per layer
    assert encoders.text_flops(llama, _shape(8, text=5)) == 3 * (5_760 + 800)
    # working set, 5 tokens: in the MLP 4 x 5 x 8 and 3 x 5 x 16 = 400, then the KV cache of the
    # 3 layers 3 x 2 x 1 x 4 x 5 = 120, and the 3 - 2 earlier hidden states the pipeline asks for
    # 40; RoPE's cos and sin 2 x 5 x 4 = 40 once for the micro-batch (> attention: 3 x 40 + 4 x 40)
    assert encoders.text_working_bytes(llama, _shape(8, text=5)) == (400 + 120 + 40 + 40) * 2
    assert encoders.text_working_bytes(llama, _shape(8, text=5), micro_batch=2) == (2 * 560 + 40) * 2
    # Gemma-2's eager attention: the attention weights 2 x 5 x 5 and two masks 2 x 5 x 5, no
    # hidden states kept
    assert encoders.text_working_bytes(gemma, _shape(8, text=5)) == (400 + 120 + 100 + 40) * 2


TINY_HUNYUAN = {
    "_class_name": "AutoencoderKLHunyuanVideo", "latent_channels": 2, "layers_per_block": 1,
    "block_out_channels": [4, 8, 8], "norm_num_groups": 2, "spatial_compression_ratio": 2,
    "down_block_types": ["HunyuanVideoDownBlock3D"] * 3, "up_block_types": ["HunyuanVideoUpBlock3D"] * 3,
}  # fmt: skip


def test_tiny_hunyuan_video_vae() -> None:
    vae = vae_component(TINY_HUNYUAN)
    # encoder, 3x3x3 causal convs (27 taps, biased): conv_in 3->4 328; stage 0 (downsamples space,
    # and time: the 2 stages before the last) resnet 4->4 436 + 436 + GroupNorms 16 and its
    # stride-2 conv 436: 1,324; stage 1 (time only) resnet 4->8 872 + 1,736 + 1x1x1 shortcut 40 +
    # norms 24 and its conv 1,736: 4,408; stage 2 resnet 8->8 3,504; mid block 2 x 3,504 + four
    # 8x8 biased projections 288 + GroupNorm 16; conv_norm_out 16, conv_out 8->4 868, quant_conv 20
    encoder = 328 + 1_324 + 4_408 + 3_504 + (7_008 + 304) + 16 + 868 + 20
    assert (vae.params, vae.forward_params) == _built(json.dumps(TINY_HUNYUAN, sort_keys=True))
    assert vae.forward_params == encoder == 17_780
    # FLOPs on one 4x4 frame (16 pixels at level 0, 4 past stage 0): conv_in 2 x 3 x 4 x 27 x 16;
    # stage 0 resnet 2 x 13,824 and its conv 3,456; stage 1 resnet 6,912 + 13,824 + 256 and its
    # time conv (stride 1 in space) 13,824; stage 2 2 x 13,824; mid resnets 4 x 13,824,
    # projections 4 x 2 x 8 x 8 x 4, attention 4 x 4^2 x 8; conv_out 6,912; quant_conv 128
    flops = 10_368 + 27_648 + 3_456 + 20_992 + 13_824 + 27_648 + 55_296 + 2_048 + 512 + 6_912 + 128
    assert encoders.vae_flops(vae, _shape(4)) == flops
    # the clip's attention spans every latent frame: on 5 frames the mid block sees 1 + 4 / 4 = 2
    # frames of 4 pixels, 4 x 8^2 x 8 = 2,048 (per frame it would be 2 x 512)
    mid = next(layer for layer in vae.layers if layer.kind == "clip-attention")
    assert 4 * (4 * 2) ** 2 * mid.in_channels == 2_048
    # working set on the 4x4 frame: 4 copies of the stage-0 activation 4 x 16, the padded copy
    # conv2 reads 4 x 3 x 6 x 6, the pixels 3 x 16 (> the mask moment: 2 x 8 x 4 and the 4 x 4
    # masks at 3 bytes)
    assert encoders.vae_working_bytes(vae, _shape(4)) == (4 * 64 + 432 + 48) * 2
    # more than 16 frames run in tiles of 17 starting every 12 frames: 129 = 10 x 17 + 9
    assert encoders.frame_tiles(vae, 129) == [17] * 10 + [9]
    assert (encoders.frame_tiles(vae, 16), encoders.frame_tiles(vae, 17)) == ([16], [17, 5])
    hunyuan = resolve_model("HunyuanVideo")
    video = hunyuan.frozen[0]
    flops_of = {f: encoders.vae_flops(video, token_shape(hunyuan, 256, f)) for f in (5, 9, 17, 33)}
    # 33 frames: tiles of 17, 17 and 9; 17 frames: tiles of 17 and 5
    assert flops_of[33] == 2 * (flops_of[17] - flops_of[5]) + flops_of[9]


TINY_COGVIDEOX = {
    "_class_name": "AutoencoderKLCogVideoX", "latent_channels": 2, "layers_per_block": 1,
    "block_out_channels": [4, 8, 8], "norm_num_groups": 2,
    "down_block_types": ["CogVideoXDownBlock3D"] * 3, "up_block_types": ["CogVideoXUpBlock3D"] * 3,
}  # fmt: skip


def test_tiny_cogvideox_vae() -> None:
    vae = vae_component(TINY_COGVIDEOX)
    # encoder: causal 3x3x3 conv_in 3->4 328; stage 0 resnet 4->4 436 + 436 + GroupNorms 16 and
    # its 3x3 stride-2 2-D conv 148: 1,036; stage 1 resnet 4->8 872 + 1,736 + 1x1x1 shortcut 40 +
    # norms 24 and its 2-D conv 584: 3,256; stage 2 resnet 8->8 3,504; mid block 2 x 3,504 (no
    # attention); norm_out 16, conv_out 8->4 868; no quant_conv
    assert vae.forward_params == 328 + 1_036 + 3_256 + 3_504 + 7_008 + 16 + 868 == 16_016
    assert (vae.params, vae.forward_params) == _built(json.dumps(TINY_COGVIDEOX, sort_keys=True))
    # FLOPs on one 4x4 frame (16, 4 and 1 pixels at levels 0, 1, 2): conv_in 2 x 3 x 4 x 27 x 16;
    # stage 0 resnet 2 x 13,824 and its 2-D conv 2 x 4 x 4 x 9 x 4; stage 1 resnet 6,912 +
    # 13,824 + 256 and its conv 2 x 8 x 8 x 9; stage 2 resnet 2 x 3,456; mid 4 x 3,456; conv_out
    # 2 x 8 x 4 x 27
    flops = 10_368 + 27_648 + 1_152 + 20_992 + 1_152 + 6_912 + 13_824 + 1_728
    assert encoders.vae_flops(vae, _shape(4)) == flops == 83_776
    # frames go through in batches of 8, the first taking the remainder: 49 = 9 + 5 x 8
    assert encoders.frame_tiles(vae, 49) == [9, 8, 8, 8, 8, 8]
    assert (encoders.frame_tiles(vae, 5), encoders.frame_tiles(vae, 17)) == ([5], [9, 8])
    cog = resolve_model("CogVideoX-2b")
    video = cog.frozen[0]
    flops_of = {f: encoders.vae_flops(video, token_shape(cog, "720x480", f)) for f in (9, 17, 49)}
    assert flops_of[49] == flops_of[17] + 4 * (flops_of[17] - flops_of[9])


TINY_LTX = {
    "_class_name": "AutoencoderKLLTXVideo", "latent_channels": 2, "patch_size": 2,
    "block_out_channels": [16, 32], "layers_per_block": [2, 1, 1], "spatio_temporal_scaling": [True, False],
    "down_block_types": ["LTXVideoDownBlock3D"] * 2, "decoder_block_out_channels": [16, 32],
    "decoder_layers_per_block": [1, 1, 1], "decoder_spatio_temporal_scaling": [True, False],
}  # fmt: skip


def test_tiny_ltx_video_vae() -> None:
    vae = vae_component(TINY_LTX)
    # encoder, causal 3x3x3 convs (27 taps, biased), weightless RMS norms: conv_in from 2x2
    # patches of 3 channels, 12->16 5,200; stage 0 two resnets 16->16 2 x (6,928 + 6,928), its
    # stride-2 conv 6,928 and the resnet to the next width 16->32 13,856 + 27,680 + 1x1x1
    # shortcut 544 + its LayerNorm 32: 76,752; stage 1 (the last keeps its width) resnet 32->32
    # 2 x 27,680; mid block resnet 55,360; conv_out 32->3 (2 latent means, 1 log-variance) 2,595
    assert vae.forward_params == 5_200 + 76_752 + 55_360 + 55_360 + 2_595 == 195_267
    assert (vae.params, vae.forward_params) == _built(json.dumps(TINY_LTX, sort_keys=True))
    # FLOPs on 3 frames of 4x4 pixels (4 patches a frame at level 1, 1 pixel past the stride-2
    # conv, which also takes the 3 frames to 1 + 2 / 2 = 2): conv_in 2 x 12 x 16 x 27 x 4 x 3;
    # stage 0 four 16->16 convs 4 x 165,888, the strided conv 13,824 x 2, the resnet 16->32
    # 55,296 + 110,592 + shortcut 2,048; stage 1 and mid 2 x 2 x 110,592; conv_out 5,184 x 2
    # (the same as torch.utils.flop_counter counts on the real module)
    flops = 124_416 + 663_552 + 27_648 + 167_936 + 442_368 + 10_368
    assert encoders.vae_flops(vae, _shape(4, 3)) == flops == 1_436_288
    # working set on those 3 frames: stage 0's activation 16 x 4 x 3 = 192, 7 copies (the stage
    # input, the second resnet's input, conv1's output, norm2's fp32 copy and fp32 square) = 1,344,
    # above conv2's moment (4 copies, the 2 repeated first frames and the F + 2 padded frames of
    # 16 x 4: 19 x 64 = 1,216), and the pixels 3 x 16 x 3
    assert encoders.vae_working_bytes(vae, _shape(4, 3)) == (1_344 + 144) * 2
    # one frame: the conv moment wins, (4 + 1 + 4) x 64 against 7 x 64, and the pixels 48
    assert encoders.vae_working_bytes(vae, _shape(4, 1)) == (9 * 64 + 48) * 2
    # the clip runs whole (no tiles or batches), and the encoder's strides are the pipeline's
    assert encoders.frame_tiles(vae, 161) == [161]
    with pytest.raises(ConfigError) as error:
        vae_component({**TINY_LTX, "spatial_compression_ratio": 8})
    assert error.value.field == "vae.spatial_compression_ratio"


TINY_DC = {
    "_class_name": "AutoencoderDC", "latent_channels": 4, "attention_head_dim": 2,
    "encoder_block_types": ["ResBlock", "EfficientViTBlock"],
    "decoder_block_types": ["ResBlock", "EfficientViTBlock"],
    "encoder_block_out_channels": [4, 8], "decoder_block_out_channels": [4, 8],
    "encoder_layers_per_block": [1, 1], "decoder_layers_per_block": [1, 1],
    "encoder_qkv_multiscales": [[], [3]], "decoder_qkv_multiscales": [[], [3]],
    "downsample_block_type": "conv", "upsample_block_type": "interpolate",
}  # fmt: skip


def test_tiny_dc_ae() -> None:
    vae = vae_component(TINY_DC)
    # encoder: conv_in 3->4 3x3 112; stage 0 ResBlock 4: conv1 148, conv2 (no bias) 144, RMS norm
    # weight and bias 8: 300; the stride-2 conv 4->8 296; stage 1 EfficientViTBlock 8 (4 heads
    # of 2, inner 8, q/k/v 24 channels): q/k/v 3 x 64, the 3x3 depthwise conv 24 x 9 and the
    # grouped 1x1 24 x 2, to_out 16 x 8, norm 16: 600; GLUMBConv (hidden 32): 8->64 576,
    # depthwise 3x3 640, 32->8 256, norm 16: 1,488; conv_out 8->4 292
    assert vae.forward_params == 112 + 300 + 296 + 600 + 1_488 + 292 == 3_088
    assert (vae.params, vae.forward_params) == _built(json.dumps(TINY_DC, sort_keys=True))
    # FLOPs on an 8x8 image (64 pixels, 16 past the stride-2 conv): conv_in 2 x 3 x 4 x 9 x 64;
    # ResBlock 2 x 18,432; the stride-2 conv 2 x 4 x 8 x 9 x 16; the EfficientViTBlock: q/k/v
    # 3 x 2,048, depthwise 6,912, grouped 1,536, linear attention 4 x (2 + 1) x 16 x 16 (16 query
    # channels: both scales), to_out 4,096, GLUMBConv 16,384 + 18,432 + 8,192; conv_out 9,216
    # (the same as torch.utils.flop_counter counts on the real module)
    flops = 13_824 + 36_864 + 9_216 + (6_144 + 6_912 + 1_536 + 3_072 + 4_096 + 43_008) + 9_216
    assert encoders.vae_flops(vae, _shape(8)) == flops == 133_888
    # at N = 1 pixel per side past the stride <= head_dim 2 the attention is quadratic:
    # 4 x 16 x 1^2 instead of 4 x 3 x 16 x 1 (8,240 as the FLOP counter counts)
    assert encoders.vae_flops(vae, _shape(2)) == 8_240
    # Sana's DC-AE at 1024 px: 7 copies of stage 0's 128 x 1024^2 activation (the stage input, the
    # second ResBlock's input, conv2's output, the RMS norm's fp32 copy and square) and the pixels
    sana = catalog_spec("Sana-1600M-1024px").frozen[0]
    assert encoders.vae_working_bytes(sana, _shape(1024)) == (7 * 128 + 3) * 1024**2 * 2


FLUX_WEIGHTS = 83_819_683 + 123_060_480 + 4_762_310_656  # VAE, CLIP-L, T5-XXL encoder


def test_resident_and_offload_bytes_by_mode() -> None:
    flux = resolve_model("FLUX.1-dev")
    assert encoders.resident_bytes(flux, "gpu") == 2 * FLUX_WEIGHTS  # bf16, the whole VAE included
    assert encoders.resident_bytes(flux, "precomputed") == encoders.resident_bytes(flux, "offload") == 0
    assert encoders.offload_bytes(flux, "offload") == 2 * 2 * FLUX_WEIGHTS  # to the GPU and back
    assert encoders.offload_bytes(flux, "gpu") == encoders.offload_bytes(flux, "precomputed") == 0
    # the SDXL text-to-image script's fp32 VAE: 4 bytes a weight
    assert encoders.resident_bytes(resolve_model("SD-1.5"), "gpu", weight_bytes=4) == 4 * (
        83_653_863 + 123_060_480
    )


def test_flux_peak_and_flops_at_1024() -> None:
    np = pytest.importorskip("numpy")
    flux = resolve_model("FLUX.1-dev")
    shape = token_shape(flux, 1024)
    # VAE: 5 copies of the 128-channel stage-0 activation at 1024^2, plus 3 x 1024^2 pixels, at 2 bytes
    vae = (5 * 128 + 3) * 1024**2 * 2
    # T5 at 512 tokens, in attention: 7 x 512 x 4096 and the position bias with its contiguous copy
    # 2 x 64 x 512^2 (> MLP: 4 x 512 x 4096 + 4 x 512 x 10240 + 64 x 512^2), at 2 bytes
    t5 = (7 * 512 * 4096 + 2 * 64 * 512**2) * 2
    assert encoders.peak_bytes(flux, shape, 1, "gpu") == vae
    assert encoders.peak_bytes(flux, shape, 1, "precomputed") == 0
    # offload: the component on the GPU brings its weights; the T5's 9.5 GB dominate
    assert encoders.peak_bytes(flux, shape, 1, "offload") == t5 + 2 * 4_762_310_656
    # the planner's arrays go through the same function
    assert list(encoders.peak_bytes(flux, shape, np.array([1, 4]), "gpu")) == [vae, 4 * vae]
    # T5 FLOPs: 2 x (4 x 4096^2 + 3 x 4096 x 10240) x 24 layers x 512 tokens, plus the scores
    # 2 x 64 x 512 x 512 x 128 x 24: about 2 x (params - embedding) x tokens
    t5_flops = 2 * (4 * 4096**2 + 3 * 4096 * 10240) * 24 * 512 + 2 * 64 * 512**2 * 128 * 24
    t5_component = flux.frozen[2]
    assert encoders.text_flops(t5_component, shape) == t5_flops
    assert t5_flops == pytest.approx(2 * (4_762_310_656 - 32128 * 4096) * 512, rel=0.03)
    total = encoders.flops_per_sample(flux, shape, "gpu")
    assert total == encoders.flops_per_sample(flux, shape, "offload") > t5_flops
    assert encoders.flops_per_sample(flux, shape, "precomputed") == 0
    cost = encoders.frozen_encoder_cost(flux, shape, 2, "gpu")
    assert (cost.resident_bytes, cost.peak_bytes, cost.flops_per_sample) == (2 * FLUX_WEIGHTS, 2 * vae, total)
    assert set(encoders.KINDS) == set(cost.__dataclass_fields__)


def test_sd3_t5_reads_the_tokens_after_clip() -> None:
    sd3 = resolve_model("SD3.5-Large")
    t5 = next(c for c in sd3.frozen if c.architecture == "T5EncoderModel")
    clip = next(c for c in sd3.frozen if c.name == "text_encoder_2")
    shape = token_shape(sd3, 1024)  # the pipeline's 77 + 256 text positions
    assert (encoders.encoder_tokens(t5, shape), encoders.encoder_tokens(clip, shape)) == (256, 77)
    with pytest.raises(InputError) as error:
        encoders.encoder_tokens(t5, token_shape(sd3, 1024, text_tokens=77))
    assert error.value.field == "text_tokens" and "at least 78" in error.value.message
    # HunyuanVideo's LLaMA reads the pipeline's 95-token prompt template ahead of the 256 the
    # denoiser sees (HunyuanVideoPipeline pads to max_sequence_length + crop_start), CLIP-L its 77
    hunyuan = resolve_model("HunyuanVideo")
    shape = token_shape(hunyuan, 256, 9)
    assert [encoders.encoder_tokens(c, shape) for c in hunyuan.frozen[1:]] == [256 + 95, 77]
    # FLUX's T5 reads all of them: its CLIP gives only the pooled vector
    flux = resolve_model("FLUX.1-dev")
    assert encoders.encoder_tokens(flux.frozen[2], token_shape(flux, 1024, text_tokens=300)) == 300


def test_wan_vae_flops_scale_with_latent_frames() -> None:
    # 81 frames = 1 + 80: every layer past the first temporal stage runs on 1 + 80 / 2^k frames, so
    # the cost is not 81 x one frame's but close to it at the heavy full-resolution stages
    wan = resolve_model("Wan2.1-T2V-14B")
    vae = wan.frozen[0]
    one, clip = (encoders.vae_flops(vae, token_shape(wan, "832x480", f)) for f in (1, 81))
    assert 40 * one < clip < 81 * one


def test_pipeline_folder_reads_the_text_encoders(tmp_path: Path) -> None:
    record = find_model_record("SDXL-base-1.0")
    assert record is not None and record.pipeline is not None
    index = {
        "unet": ["diffusers", "UNet2DConditionModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        "text_encoder": ["transformers", "CLIPTextModel"],
        "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
    }
    (tmp_path / "model_index.json").write_text(json.dumps(index))
    files = {"unet": dict(record.config), "vae": dict(record.pipeline["vae"])}
    for folder, config in record.pipeline["text_encoders"].items():
        files[folder] = {key: value for key, value in config.items() if key != "architectures"}
    for folder, config in files.items():
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "config.json").write_text(json.dumps(config))
    spec = resolve_model(str(tmp_path))
    # the classes come from model_index.json where the configs name none
    assert [(c.name, c.architecture, c.params) for c in spec.frozen] == [
        (c.name, c.architecture, c.params) for c in catalog_spec("SDXL-base-1.0").frozen
    ]


@pytest.mark.parametrize(
    ("pipeline", "field"),
    [
        ({"vae": {**TINY_KL, "down_block_types": ["DownBlock2D"] * 2}}, "vae.down_block_types"),
        ({"vae": {"_class_name": "AutoencoderTiny"}}, "vae._class_name"),
        ({"vae": {**TINY_WAN, "is_residual": True}}, "vae.is_residual"),
        ({"vae": {**TINY_WAN, "num_res_blocks": 10**9}}, "vae.num_res_blocks"),  # bounded before any loop
        ({"vae": {**TINY_KL, "block_out_channels": [4, 10**9]}}, "vae.block_out_channels"),
        ({"vae": {**TINY_LTX, "timestep_conditioning": True}}, "vae.timestep_conditioning"),
        ({"vae": {**TINY_DC, "downsample_block_type": "pixel_unshuffle"}}, "vae.downsample_block_type"),
        ({"vae": {**TINY_DC, "upsample_block_type": "pixel_shuffle"}}, "vae.upsample_block_type"),
        ({"vae": {**TINY_DC, "encoder_block_types": ["ResBlock", "Attention"]}}, "vae.encoder_block_types"),
        ({"vae": {**TINY_LTX, "layers_per_block": [2, 1]}}, "vae.layers_per_block"),
        ({"vae": {**TINY_LTX, "down_block_types": ["LTXVideo095DownBlock3D"] * 2}}, "vae.down_block_types"),
        ({"vae": TINY_KL, "text_encoders": {"text_encoder": {**TINY_CLIP, "architectures": ["GemmaModel"]}}},
         "text_encoder.architectures"),
        ({"vae": TINY_KL, "text_encoders": {"text_encoder": {**TINY_T5, "d_model": 0}}},
         "text_encoder.d_model"),
        ({"vae": TINY_KL, "text_encoders": {"tokenizer": TINY_CLIP}}, "pipeline.text_encoders.tokenizer"),
        ({"vae": TINY_KL, "scheduler": {}}, "pipeline.scheduler"),
    ],
)  # fmt: skip
def test_unmodelled_components_are_refused_by_field(pipeline: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        frozen_components(pipeline)
    assert error.value.field == field


def test_frozen_components_stay_out_of_the_denoiser_count() -> None:
    from trainplan.specs.weights import total_params

    for record in PIPELINES:
        spec = record_spec(record)
        assert spec.frozen and spec.frozen[0].kind == "vae"  # counted or not, the VAE comes first
        assert total_params(spec) == record.meta_device_params


def _efficient_sdpa(
    query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
    is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False,
) -> Any:  # fmt: skip
    """What CUDA's SDPA runs for these shapes, on fake tensors: the memory-efficient kernel (an
    additive mask, head_dim 512), which keeps the output and its logsumexp, no scores."""
    import torch

    bias = None
    if attn_mask is not None:
        bias = attn_mask.to(query.dtype).expand(*query.shape[:3], key.shape[2])
    op = torch.ops.aten._scaled_dot_product_efficient_attention
    return op(query, key, value, bias, False, dropout_p, is_causal, scale=scale)[0]


@pytest.mark.parametrize(
    ("name", "folder", "resolution", "frames", "text_tokens", "micro_batch"),
    [
        ("SD-1.5", "vae", 128, 1, None, 2),
        ("Wan2.1-T2V-1.3B", "vae", 128, 9, None, 1),
        ("SDXL-base-1.0", "text_encoder", 128, 1, None, 2),
        ("SDXL-base-1.0", "text_encoder_2", 128, 1, None, 1),
        ("FLUX.1-dev", "text_encoder_2", 128, 1, 64, 2),
        ("Wan2.1-T2V-1.3B", "text_encoder", 128, 1, 64, 1),
        ("Sana-1600M-1024px", "text_encoder", 256, 1, 300, 2),
        ("HunyuanVideo", "text_encoder", 256, 9, 256, 1),
        ("HunyuanVideo", "vae", 128, 9, None, 2),
        ("HunyuanVideo", "vae", "1280x720", 33, None, 1),
        ("CogVideoX-2b", "vae", 128, 9, None, 2),
        ("CogVideoX-2b", "vae", "720x480", 49, None, 1),
        ("Sana-1600M-1024px", "vae", 256, 1, None, 2),
        ("LTX-Video-2B", "vae", 128, 1, None, 1),
        ("LTX-Video-2B", "vae", 128, 9, None, 2),
        ("LTX-Video-2B", "vae", "704x480", 41, None, 1),
    ],
)
def test_working_set_matches_a_fake_tensor_trace(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    folder: str,
    resolution: int | str,
    frames: int,
    text_tokens: int | None,
    micro_batch: int,
) -> None:
    """The estimated no-grad forward peak against the storages the real diffusers / transformers
    modules allocate, on fake tensors in bf16 (text encoders cut to a few layers, the estimate made
    for the cut config: an encoder's peak is per layer, a decoder's holds every layer's KV cache)."""
    torch = pytest.importorskip("torch")
    diffusers = pytest.importorskip("diffusers")
    transformers = pytest.importorskip("transformers")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainplan.engine.measure.replay import Cat, replay
    from trainplan.engine.measure.tracker import StorageTracker

    record = find_model_record(name)
    assert record is not None and record.pipeline is not None
    spec = catalog_spec(name)
    shape = token_shape(spec, resolution, frames, text_tokens)
    component = next(c for c in spec.frozen if c.name == folder)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", _efficient_sdpa)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with FakeTensorMode():
            if folder == "vae":
                config = dict(record.pipeline["vae"])
                module = getattr(diffusers, config.pop("_class_name")).from_config(config)
                width, height = (
                    (resolution, resolution)
                    if isinstance(resolution, int)
                    else map(int, resolution.split("x"))
                )
                video = frames > 1 or spec.kind == "video"  # LTX-Video's VAE takes 5-D input only
                dims = (micro_batch, 3, *((frames,) if video else ()), height, width)

                def run() -> Any:
                    encoded = module.encode(torch.randn(*dims))
                    # the DC-AE returns its latents; the KL VAEs a distribution to sample
                    return encoded.latent if hasattr(encoded, "latent") else encoded.latent_dist.sample()

            else:
                config = dict(record.pipeline["text_encoders"][folder])
                architecture, model_type = config.pop("architectures")[0], config.pop("model_type")
                layers = 4 if architecture in encoders.ALL_HIDDEN_STATES else 2
                config["num_layers" if model_type in ("t5", "umt5") else "num_hidden_layers"] = layers
                component = text_encoder_component(
                    folder, {**config, "architectures": [architecture], "model_type": model_type}
                )
                config_class = _config_class(transformers, model_type)
                module = getattr(transformers, architecture)(config_class(**config))
                tokens = encoders.encoder_tokens(component, shape)
                hidden_states = architecture in encoders.ALL_HIDDEN_STATES  # as its pipeline calls it

                def run() -> Any:
                    ids = torch.randint(0, 1000, (micro_batch, tokens))
                    return module(ids, output_hidden_states=hidden_states)[0]

            module.eval()
            tracker = StorageTracker()
            tracker.register(module.parameters(), Cat.PARAM)
            tracker.register(module.buffers(), Cat.BUFFER)
            with tracker, torch.no_grad():
                tracker.phase(1, "forward")
                run()
            peak = replay(tracker.recs, tracker.kinds, tracker.args, tracker.phases).peak
            tracker.close()
    finally:
        torch.set_default_dtype(default_dtype)
    measured = peak.total - peak.by_cat[Cat.PARAM] - peak.by_cat[Cat.BUFFER]
    # within 1%: the tracker rounds each storage to the allocator's 512-byte blocks
    assert encoders.working_bytes(component, shape, micro_batch) == pytest.approx(measured, rel=0.01)


@pytest.mark.parametrize(
    "record", [r for r in PIPELINES if all(c.counted for c in record_spec(r).frozen)], ids=lambda r: r.name
)
def test_mode_invariants(record: Any) -> None:
    # precomputed costs nothing; offload trades the resident weights for traffic and a larger
    # transient (the component on the GPU brings its weights); the same FLOPs run in gpu and offload
    spec = record_spec(record)
    frames = 1 if spec.kind == "diffusion" else 9
    small, large = (token_shape(spec, side, frames) for side in (256, 512))
    for shape in (small, large):
        cost = {
            mode: encoders.frozen_encoder_cost(spec, shape, 2, mode)
            for mode in ("precomputed", "gpu", "offload")
        }
        assert cost["precomputed"] == encoders.FrozenEncoderCost(0, 0, 0.0, 0)
        assert cost["gpu"].resident_bytes > 0 == cost["offload"].resident_bytes
        assert cost["gpu"].peak_bytes < cost["offload"].peak_bytes
        assert cost["gpu"].flops_per_sample == cost["offload"].flops_per_sample > 0
        assert cost["offload"].offload_bytes_per_micro_batch == 2 * cost["gpu"].resident_bytes
        assert encoders.peak_bytes(spec, shape, 1, "gpu") < cost["gpu"].peak_bytes  # micro-batch 1 < 2
    # four times the pixels: the VAE's working set grows fourfold, its FLOPs a little more (the
    # convolutions fourfold, the mid-block attention over the latent pixels sixteenfold); the text
    # encoders' not at all
    # (HunyuanVideo's: its padded copies grow a little less, its attention over the whole clip's
    # latent pixels makes the FLOPs grow more)
    vae = spec.frozen[0]
    padded = vae.architecture in encoders.PADDED_INPUT
    assert encoders.vae_working_bytes(vae, large) == pytest.approx(
        4 * encoders.vae_working_bytes(vae, small), rel=0.01 if padded else 0
    )
    # (CogVideoX's has no attention: exactly fourfold)
    # (Sana's linear attention grows with the pixels too)
    if all(layer.kind in ("conv", "linear-attention") for layer in vae.layers):
        assert encoders.vae_flops(vae, large) == 4 * encoders.vae_flops(vae, small)
    else:
        assert (
            4 * encoders.vae_flops(vae, small)
            < encoders.vae_flops(vae, large)
            < (4.5 if padded else 4.1) * encoders.vae_flops(vae, small)
        )
    for text in spec.frozen[1:]:
        assert encoders.text_flops(text, large) == encoders.text_flops(text, small)
