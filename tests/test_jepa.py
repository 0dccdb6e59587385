"""I-JEPA and V-JEPA 1: parameter counts (transformers' IJepaModel for the I-JEPA encoder, hand
arithmetic against the original repos' modules otherwise), the published mask generators as token
shares, and hand-computed activations and FLOPs."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.terms.activations import ActivationMode
from trainplan.engine.terms.denoisers import denoiser_activations, denoiser_flops
from trainplan.engine.terms.geometry import token_shape
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.inputs.catalogs.models import find_model_record
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import ConfigError
from trainplan.specs.weights import block_params, total_params


def _roles(name: str) -> dict[str, int]:
    spec = resolve_model(name)
    out: dict[str, int] = {}
    for block in spec.blocks:
        out[block.role] = out.get(block.role, 0) + block.count * block_params(block, spec)
    return out


def test_ijepa_encoder_equals_transformers_ijepa_model() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    record = find_model_record("I-JEPA-ViT-H-14")
    assert record is not None
    # transformers' IJepaConfig has no predictor keys: those are the original repo's
    kwargs = {k: v for k, v in record.config.items() if k != "model_type" and not k.startswith("pred_")}
    with torch.device("meta"):
        model = transformers.IJepaModel(transformers.IJepaConfig(**kwargs))
    built = sum(parameter.numel() for parameter in model.parameters())
    roles = _roles("I-JEPA-ViT-H-14")
    assert roles["embed"] + roles["encoder"] + roles["encoder_norm"] == built == 630_762_240


def test_ijepa_vith14_hand_count() -> None:
    # encoder (transformers' IJepaModel): patch conv 3 x 14 x 14 x 1280 + 1280 = 753,920 and the
    #   256 x 1280 position table (a parameter there) = 327,680; 32 layers of qkv 3 x (1280^2 + 1280),
    #   proj 1280^2 + 1280, fc1 1280 x 5120 + 5120, fc2 5120 x 1280 + 1280, 2 LayerNorms 4 x 1280
    #   = 19,677,440 each; final LayerNorm 2,560
    layer = 4 * (1280 * 1280 + 1280) + 1280 * 5120 + 5120 + 5120 * 1280 + 1280 + 4 * 1280
    assert layer == 19_677_440
    # predictor (facebookresearch/ijepa VisionTransformerPredictor): predictor_embed 1280 x 384 +
    #   384, one mask token 384, 12 Blocks 384 wide (MLP 1536) of 1,774,464, predictor_norm 768,
    #   predictor_proj 384 x 1280 + 1280; its fixed 256 x 384 sin-cos table is a buffer
    block = 4 * (384 * 384 + 384) + 384 * 1536 + 1536 + 1536 * 384 + 384 + 4 * 384
    assert block == 1_774_464
    predictor = 1280 * 384 + 384 + 384 + 12 * block + 768 + 384 * 1280 + 1280
    spec = resolve_model("I-JEPA-ViT-H-14")
    assert _roles("I-JEPA-ViT-H-14")["predictor"] == predictor == 22_279_424
    assert total_params(spec) == 753_920 + 327_680 + 32 * layer + 2_560 + predictor
    assert spec.buffer_elements == 256 * 384
    assert spec.modality == "image" and spec.geometry is not None and spec.geometry.resolution == 224


@pytest.mark.parametrize(
    ("name", "width", "depth"), [("V-JEPA-ViT-L-16", 1024, 24), ("V-JEPA-ViT-H-16", 1280, 32)]
)
def test_vjepa_hand_count(name: str, width: int, depth: int) -> None:
    # facebookresearch/jepa: PatchEmbed3D Conv3d 3 x 2 x 16 x 16 -> width (+ bias); Blocks of
    # fused qkv (3 width^2 + 3 width), proj, fc1/fc2 at 4 x width, two LayerNorms; the final
    # LayerNorm; the predictor (384 wide, 12 Blocks, 2 mask tokens, predictor_proj back to width)
    layer = 4 * (width * width + width) + 2 * width * 4 * width + 4 * width + width + 4 * width
    encoder = 3 * 2 * 16 * 16 * width + width + depth * layer + 2 * width
    predictor = width * 384 + 384 + 2 * 384 + 12 * 1_774_464 + 768 + 384 * width + width
    spec = resolve_model(name)
    assert total_params(spec) == encoder + predictor
    # the fixed 3-D sin-cos tables of encoder and predictor: 8 x 14 x 14 = 1568 rows each
    assert spec.buffer_elements == 1568 * (width + 384)


def test_vitl16_count_is_the_repos() -> None:
    # V-JEPA ViT-L/16 encoder: 1,573,888 + 24 x 12,596,224 + 2,048 = 303,885,312 (no class token,
    # the position table fixed); predictor 22,082,944
    assert _roles("V-JEPA-ViT-L-16") == {
        "embed": 1_573_888,
        "encoder": 302_309_376,
        "encoder_norm": 2_048,
        "predictor": 22_082_944,
    }


def test_ijepa_masks_are_the_published_multiblock() -> None:
    # configs/in1k_vith14_ep300.yaml: one context block at scale 0.85-1.0 (midpoint 0.925), four
    # target blocks at 0.15-0.2 (0.175) removed from it; the predictor runs once per block
    (mask,) = jepa_masks(resolve_model("I-JEPA-ViT-H-14"), None)
    assert mask.passes == 4 and mask.target == pytest.approx(0.175)
    assert mask.context == pytest.approx(0.925 * 0.825**4)
    # V-JEPA: the same two generators as V-JEPA 2 (8 blocks at 15%, 2 at 70%)
    short, long = jepa_masks(resolve_model("V-JEPA-ViT-L-16"), None)
    assert short.target == pytest.approx(1 - 0.85**8) and long.context == pytest.approx(0.3**2)


def _mode() -> ActivationMode:
    return ActivationMode(
        activation_bytes=2,
        residual_bytes=2,
        weights_trainable=True,
        lora_targets=frozenset(),
        attention="sdpa",
        checkpointing="none",
        adapter_bytes=2,
    )


TINY_IJEPA: dict[str, Any] = {
    "model_type": "ijepa",
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "image_size": 56,
    "patch_size": 14,
    "pred_hidden_size": 4,
    "pred_num_hidden_layers": 1,
}


def test_ijepa_layer_activations_by_hand() -> None:
    # 56 px / 14 = 4 x 4 = 16 patches; context 16 x c tokens, c = 0.925 x 0.825^4; bf16, full
    # fine-tune, no autocast (a = 2). Per token of an encoder layer: two LayerNorms (2 x 8 + 8 for
    # the fp32 mean and rstd, each), the fused qkv's input 2 x 8, the head-merge copy for proj
    # 2 x 8, fc1's input 2 x 8, GELU's 2 x 32 and fc2's input 2 x 32 = 224; eager attention: the
    # q, k, v copies 2 x 24 = 48 per token, and per head the fp32 softmax and its bf16 cast over
    # every (query, key) pair: 2 x tokens^2 x (4 + 2)
    spec = spec_from_config(TINY_IJEPA, "tiny")
    shape = token_shape(spec, 56, 1, None)
    masks = jepa_masks(spec, None)
    acts = denoiser_activations(spec, shape, _mode(), fp32_weights=False, masks=masks)
    context = 16 * 0.925 * 0.825**4
    encoder = dict((block.role, kept) for block, kept in acts.layers if block.attention is not None)
    expected = (224 + 48) * context + 2 * context**2 * 6
    assert encoder["encoder"] == pytest.approx(expected)
    # the predictor: 4 passes over context + one 2.8-token target block, 4 wide, MLP 16, 2 heads:
    # per token 2 (2 x 4 + 8) + 3 x 2 x 4 (qkv input, merge copy, fc1 input) + 2 x 2 x 16 + 2 x 12
    sequence = context + 16 * 0.175
    per_token = 2 * (8 + 8) + 3 * 8 + 2 * 2 * 16 + 2 * 12
    assert encoder["predictor"] == pytest.approx(4 * (per_token * sequence + 2 * sequence**2 * 6))


def test_ijepa_flops_by_hand() -> None:
    # attention cores, 2 x heads x q x k x (d_qk + d_v) per sequence: the encoder once over the
    # context (16 heads of 80 on ViT-H/14), the predictor 4 times over context + one block (16
    # heads of 24)
    spec = resolve_model("I-JEPA-ViT-H-14")
    shape = token_shape(spec, 224, 1, None)
    masks = jepa_masks(spec, None)
    checkpointed = [0] * len(spec.blocks)
    flops = denoiser_flops(spec, shape, frozen_base=False, adapted=frozenset(), rank=0,
                           checkpointed=checkpointed, masks=masks)  # fmt: skip
    context, target = 256 * 0.925 * 0.825**4, 256 * 0.175
    encoder = 32 * 2 * 16 * context**2 * 160
    predictor = 12 * 4 * 2 * 16 * (context + target) ** 2 * 48
    assert flops.attention_forward == pytest.approx(encoder + predictor)
    # the EMA target encoder runs forward over all 256 tokens: 2 x MACs of the patch conv and the
    # 32 layers' linears per token, plus the attention core
    layer_macs = 4 * 1280 * 1280 + 2 * 1280 * 5120
    target_forward = 256 * 2 * (588 * 1280 + 32 * layer_macs) + 32 * 2 * 16 * 256**2 * 160
    assert flops.target_forward == pytest.approx(target_forward)


def test_vjepa_config_errors_name_the_field() -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config({"model_type": "vjepa", "crop_size": 230}, "bad")
    assert error.value.field == "crop_size"
    with pytest.raises(ConfigError) as error:
        spec_from_config({**TINY_IJEPA, "image_size": 50}, "bad")
    assert error.value.field == "image_size"


# The sections of facebookresearch/ijepa configs/in1k_vith14_ep300.yaml and facebookresearch/jepa
# configs/pretrain/vitl16.yaml that shape the model (the rest: schedule, data paths, logging).
IJEPA_YAML = """
data: {batch_size: 128, crop_size: 224}
mask: {allow_overlap: false, aspect_ratio: [0.75, 1.5], enc_mask_scale: [0.85, 1.0], min_keep: 10,
       num_enc_masks: 1, num_pred_masks: 4, patch_size: 14, pred_mask_scale: [0.15, 0.2]}
meta: {model_name: vit_huge, pred_depth: 12, pred_emb_dim: 384, use_bfloat16: true}
"""
VJEPA_YAML = """
app: vjepa
data: {batch_size: 24, num_frames: 16, tubelet_size: 2, crop_size: 224, patch_size: 16}
mask:
  - {aspect_ratio: [0.75, 1.5], num_blocks: 8, spatial_scale: [0.15, 0.15], temporal_scale: [1.0, 1.0]}
  - {aspect_ratio: [0.75, 1.5], num_blocks: 2, spatial_scale: [0.7, 0.7], temporal_scale: [1.0, 1.0]}
model: {model_name: vit_large, pred_depth: 12, pred_embed_dim: 384, use_mask_tokens: true}
"""


def test_repo_yaml_configs_read_as_the_catalog_models(tmp_path: Any) -> None:
    # the published pretraining configs give the catalog records' counts exactly
    for text, name in ((IJEPA_YAML, "I-JEPA-ViT-H-14"), (VJEPA_YAML, "V-JEPA-ViT-L-16")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        assert total_params(resolve_model(str(path))) == total_params(resolve_model(name))


def test_repo_yaml_errors_name_the_field(tmp_path: Any) -> None:
    cases = {
        VJEPA_YAML.replace("vit_large", "vit_colossal"): "model.model_name",
        VJEPA_YAML.replace("num_blocks: 8", "num_blocks: 6"): "mask",
        IJEPA_YAML.replace("num_pred_masks: 4", "num_pred_masks: 3"): "mask",
        IJEPA_YAML.replace(
            "enc_mask_scale: [0.85, 1.0]", "enc_mask_scale: [0.5, 1.0]"
        ): "mask.enc_mask_scale",
        VJEPA_YAML.replace("use_mask_tokens: true", "use_mask_tokens: false"): "model.use_mask_tokens",
        "data: {batch_size: 4}\n": "model",
    }
    for index, (text, field) in enumerate(cases.items()):
        path = tmp_path / f"bad{index}.yaml"
        path.write_text(text)
        with pytest.raises(ConfigError) as error:
            resolve_model(str(path))
        assert error.value.field == field, text


def test_recipe_rows_are_validated_strictly() -> None:
    from trainplan.engine.terms import jepa_masks as recipes
    from trainplan.inputs.hf.jepa_yaml import jepa_recipe_rows

    rows = jepa_recipe_rows()
    assert set(rows) == {"ijepa", "vjepa", "vjepa2"}
    assert all(row["source"] and row["as_of"] for row in rows.values())
    good = dict(rows["vjepa"])
    for bad in (
        {**good, "unknown": 1},
        {**good, "attention": "flash"},
        {**good, "context_scale": [0.9, 1.2]},
        {**good, "generators": [{**good["generators"][0], "blocks_per_frame": 2}]},
    ):
        with pytest.raises(RuntimeError):
            recipes._recipe(bad, 0)
