"""Memory and time of diffusion, video and JEPA models: hand-computed activations of each block
type on tiny configs, the per-sample figures, and invariants on the catalog models."""

from __future__ import annotations

from typing import Any

import pytest
from configs import TINY_DC_AE, TINY_LTX_VAE

from trainplan.engine.estimate import estimate
from trainplan.engine.per_replica import coefficients
from trainplan.engine.terms.activations import ActivationMode
from trainplan.engine.terms.denoisers import denoiser_activations, denoiser_flops
from trainplan.engine.terms.geometry import token_shape
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.hf import denoiser_spec
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import scenario_from_mapping
from trainplan.specs.units import GIB
from trainplan.specs.weights import block_params

VAE = {"_class_name": "AutoencoderKL", "block_out_channels": [8, 8, 8, 8], "latent_channels": 16}

# d = 2 heads x 8 = 16, MLP 4 d = 64; 64 px -> 8 x 8 latents -> 4 x 4 packed tokens; 4 text tokens
TINY_FLUX: dict[str, Any] = {
    "_class_name": "FluxTransformer2DModel",
    "attention_head_dim": 8,
    "num_attention_heads": 2,
    "num_layers": 1,
    "num_single_layers": 1,
    "in_channels": 64,
    "joint_attention_dim": 32,
    "pooled_projection_dim": 8,
    "guidance_embeds": False,
    "_pipeline": {"vae": VAE, "text_tokens": 4},
}
ATTENTION = frozenset({"attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0"})


def _flux() -> ModelSpec:
    return denoiser_spec(TINY_FLUX, "tiny-flux")


def _mode(
    trainable: bool, targets: frozenset[str] = frozenset(), *, autocast: bool = False
) -> ActivationMode:
    return ActivationMode(
        activation_bytes=2,
        residual_bytes=4 if autocast else 2,
        weights_trainable=trainable,
        lora_targets=targets,
        attention="sdpa",
        checkpointing="none",
        adapter_bytes=2,
    )


def test_flux_lora_blocks_by_hand() -> None:
    """bf16 weights and bf16 adapters on attention (to_q/k/v, to_out.0), per token (d = 16, h = 2):
    LayerNorm input + mean/rstd 2*16 + 8 = 40; the adapted q/k/v share one input 32; each q/k
    torch.nn.RMSNorm (CUDA's fused kernel) keeps its input 32 and 1/rms per head 8 = 40 (x2 = 80);
    the adapted to_out reads the kernel's output (a view, kept by SDPA already); GELU input
    2*64 = 128; frozen modulation keeps no normed x.
    Double block: image 40+32+80+40+128 = 320 x 16 tokens; text (add_* not adapted)
    40+80+40+128 = 288 x 4; joint SDPA over 20 tokens: q 32 + k, v 64 + out 32 + lse 8 = 136 x 20.
    Single block over 20 tokens: 40 + 32 + 128 + 80 = 280, + the same SDPA. Output: the norm_out
    LayerNorm 40 x 16."""
    model = _flux()
    shape = token_shape(model, 64)
    assert (shape.image_tokens, shape.text_tokens, shape.latent_elements) == (16, 4, 64)
    acts = denoiser_activations(model, shape, _mode(False, ATTENTION), fp32_weights=False)
    by_role = {block.role: value for block, value in acts.layers}
    sdpa = 136 * 20
    assert by_role["double_stream"] == 320 * 16 + 288 * 4 + sdpa
    assert by_role["single_stream"] == 280 * 20 + sdpa
    assert by_role["output"] == 40 * 16
    assert by_role["embed"] == 0
    # inputs: noisy latents, noise and target at 2 B (8 x 8 x 16 = 1024 values) + 4 x 32 text embeds
    assert acts.outside == 3 * 2 * 1024 + 2 * 32 * 4
    assert (acts.loss_held, acts.loss_peak, acts.loss_backward) == (4 * 1024, 12 * 1024, 8 * 1024)
    # checkpointing keeps each block's input: (16 + 4) tokens x 16 x 2 B
    assert acts.block_inputs[1:3] == (640, 640)


def test_flux_full_fine_tune_keeps_what_trained_weights_need() -> None:
    """Full bf16 fine-tune, double block image stream per token: LayerNorm 40 + modulated x 32;
    one shared q/k/v input 32; the fused q/k RMSNorms keep the same 40 each whether the weight
    trains or not (their backward rebuilds the normed tensor); to_out reads the kernel's output
    (kept by SDPA) and the gate keeps the attention output 32; LayerNorm 40 + modulated 32; ff
    input 32, GELU 128, down input 128, gate's ff output 32. Total 40+32+32+80+32+40+32+32+128+128+32."""
    model = _flux()
    shape = token_shape(model, 64)
    acts = denoiser_activations(model, shape, _mode(True), fp32_weights=False)
    image = 40 + 32 + 32 + 80 + 32 + 40 + 32 + 32 + 128 + 128 + 32
    by_role = {block.role: value for block, value in acts.layers}
    assert by_role["double_stream"] == image * 16 + image * 4 + 136 * 20
    # single: LayerNorm 40 + modulated 32 + shared input 32 + GELU 128 + norms 80 + proj_out
    # input (16 + 64) x 2 = 160 + gated output 32
    assert by_role["single_stream"] == (40 + 32 + 32 + 128 + 80 + 160 + 32) * 20 + 136 * 20


def test_autocast_makes_norms_fp32_and_copies_per_consumer() -> None:
    """amp-bf16 (fp32 weights under autocast), single block per token: the LayerNorm keeps an fp32
    input 4*16 + 8 = 72 and outputs fp32, the modulated x is fp32 64; each of to_q, to_k, to_v and
    proj_mlp keeps its own bf16 cast 4 x 32; with an fp32 weight the RMSNorms run the composite
    form: the fp32 upcast 64, 1/rms per head 8 and the fp32 normed tensor 64 = 136 each."""
    model = _flux()
    shape = token_shape(model, 64)
    acts = denoiser_activations(model, shape, _mode(True, autocast=True), fp32_weights=True)
    by_role = {block.role: value for block, value in acts.layers}
    assert by_role["single_stream"] == (72 + 64 + 4 * 32 + 128 + 2 * 136 + 160 + 32) * 20 + 136 * 20


def test_flux_flops_by_hand() -> None:
    """Forward multiply-accumulates of the double block: image linears (to_q/k/v/out 4 x 256,
    ff 2 x 1024) x 16 tokens, text linears (the same) x 4, modulation (2 x 16 x 96) once; joint
    attention 2 x 2 heads x 20 x 20 x (8 + 8) = 25,600 FLOPs."""
    model = _flux()
    shape = token_shape(model, 64)
    flops = denoiser_flops(
        model, shape, frozen_base=True, adapted=frozenset(), rank=4, checkpointed=[0] * len(model.blocks)
    )
    double = (4 * 256 + 2 * 1024) * 16 + (4 * 256 + 2 * 1024) * 4 + 2 * 16 * 96
    single = (3 * 256 + 16 * 64 + 80 * 16) * 20 + 16 * 48
    output = 16 * 32 + 16 * 64 * 16  # norm_out.linear once; proj_out over 16 tokens
    embed = 256 * 16 + 16 * 16 + 8 * 16 + 16 * 16 + 32 * 16 * 4 + 64 * 16 * 16
    assert flops.matmul_forward == 2 * (double + single + output + embed)
    assert flops.attention_forward == 2 * 2 * 20 * 20 * 16 * 2
    # frozen: forward + input gradients (2x matmuls), attention 3x its forward
    assert flops.total == 2 * flops.matmul_forward + 3 * flops.attention_forward


def test_jepa_masks_follow_the_published_generators() -> None:
    model = resolve_model("V-JEPA-2-ViT-L")
    short, long = jepa_masks(model, None)
    # the union of 8 blocks at 15% and of 2 at 70%, placed independently, the context the rest
    assert short.target == pytest.approx(1 - 0.85**8) and long.target == pytest.approx(1 - 0.3**2)
    assert short.context == pytest.approx(0.85**8) and (short.passes, long.passes) == (1, 1)
    assert jepa_masks(model, 0.75)[0].target == 0.75
    with pytest.raises(InputError) as error:
        jepa_masks(model, 1.0)
    assert error.value.field == "mask_ratio"


def _estimate(**fields: Any) -> Any:
    return estimate({"gpu": "H100 SXM", "micro_batch": 1, "grad_accum": 1, **fields})


def test_flux_lora_at_1024_is_reported_per_image() -> None:
    e = _estimate(
        model="FLUX.1-dev",
        method="lora",
        precision="bf16",
        lora={"targets": sorted(ATTENTION), "dtype": "compute"},
        activation_checkpointing="full",
    )
    assert e.sample is not None and e.batch.seq_len == 4096
    # bf16 base: 11,901,408,320 x 2 B
    assert e.peak.term("weights").value >= 11_901_408_320 * 2
    # 57 checkpointed blocks keep (4096 + 512) x 3072 x 2 B each
    checkpointed = 57 * 4608 * 3072 * 2
    assert e.peak.term("activations").value > checkpointed
    assert e.time is not None and e.time.samples_per_s_per_gpu == pytest.approx(e.time.tokens_per_s / 4096)
    assert e.time.train_samples == 10_000
    assert e.cost is not None and e.cost.usd is not None
    assert e.cost.usd_per_thousand_samples == pytest.approx(e.cost.usd / 10)
    assert e.to_dict()["sample"]["image_tokens"] == 4096


@pytest.mark.parametrize(
    "model",
    [
        "FLUX.1-dev",
        "SD3.5-Medium",
        "SD3.5-Large",
        "SDXL-base-1.0",
        "SD-1.5",
        "PixArt-Sigma-XL-2-1024",
        "Wan2.1-T2V-1.3B",
        "CogVideoX-2b",
        "HunyuanVideo",
        "V-JEPA-2-ViT-L",
    ],
)
def test_invariants_on_the_catalog(model: str) -> None:
    clips = ("Wan", "CogVideoX", "Hunyuan")
    video = {"frames": 17, "resolution": "480x272"} if model.startswith(clips) else {}
    base = {"model": model, "precision": "bf16", **video}
    if model.startswith("V-JEPA"):
        base.update(frames=16, resolution=256)
    full = _estimate(**base, method="full", activation_checkpointing="none")
    lora = _estimate(**base, method="lora", activation_checkpointing="none")
    checkpointed = _estimate(**base, method="full", activation_checkpointing="full")
    assert lora.peak.total < full.peak.total
    act = full.phases[0].term("activations").value
    assert checkpointed.phases[0].term("activations").value < act
    assert lora.phases[0].term("activations").value < act
    two = _estimate(**base, method="full", activation_checkpointing="none", micro_batch=2)
    # per-sample activations, plus the split copies of joint MMDiT blocks above micro-batch 1
    joint = any(block.role in ("double_stream", "joint") for block in resolve_model(model).blocks)
    if joint:
        assert two.phases[0].term("activations").value > 2 * act
    else:
        assert two.phases[0].term("activations").value == pytest.approx(2 * act)
    sharded = _estimate(**base, method="full", gpus=8, zero_stage=3, activation_checkpointing="none")
    assert sharded.peak.total < full.peak.total


def test_activations_grow_with_resolution() -> None:
    small = _estimate(model="FLUX.1-dev", resolution=512, activation_checkpointing="none")
    large = _estimate(model="FLUX.1-dev", resolution=1024, activation_checkpointing="none")
    ratio = large.phases[0].term("activations").value / small.phases[0].term("activations").value
    # 4x the image tokens (1024 -> 4096) with 512 text tokens fixed: the joint-token terms grow
    # 4608 / 1536 = 3x, the image-only ones 4x (flash attention keeps nothing quadratic)
    assert 2.99 < ratio < 4


def test_ema_is_counted_per_gpu() -> None:
    without = _estimate(model="FLUX.1-dev", method="full", precision="bf16")
    fp32 = _estimate(model="FLUX.1-dev", method="full", precision="bf16", ema="fp32")
    gap = fp32.peak.term("weights").value - without.peak.term("weights").value
    assert gap == 4 * 11_901_408_320


def test_jepa_target_encoder_is_an_fp32_copy_of_the_context_encoder() -> None:
    e = _estimate(model="V-JEPA-2-ViT-L", frames=16, resolution=256, method="full", precision="amp-bf16")
    coeffs = coefficients(
        resolve_model("V-JEPA-2-ViT-L"),
        scenario_from_mapping({"model": "V-JEPA-2-ViT-L", "frames": 16, "resolution": 256}),
    )
    # the context encoder: the patch embedding, 24 ViT-L layers and the final LayerNorm, in fp32
    encoder = sum(
        block.count * block_params(block, coeffs.model)
        for block in coeffs.model.blocks
        if block.role in ("embed", "encoder", "encoder_norm")
    )
    assert 300e6 < encoder < 310e6  # ViT-L/16 with a 2-frame tubelet: about 304M
    assert coeffs.states.ema_bytes == 4 * encoder and e.assumptions["ema"] == "fp32"
    assert len(e.assumptions["jepa_masks"]) == 2


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"model": "FLUX.1-dev", "activation_checkpointing": "selective"}, "activation_checkpointing"),
        ({"model": "Wan2.1-T2V-1.3B", "pipeline_parallel": 2, "gpus": 2}, "pipeline_parallel"),
        ({"model": "V-JEPA-2-ViT-L", "frozen_encoders": "gpu"}, "frozen_encoders"),
    ],
)
def test_unmodelled_settings_are_refused_by_name(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as error:
        _estimate(**fields)
    assert error.value.field == field


def test_flux_lora_fits_a_24_gib_card_only_with_checkpointing() -> None:
    lora = {"targets": sorted(ATTENTION), "dtype": "compute"}
    base = {"model": "FLUX.1-dev", "method": "lora", "precision": "bf16", "lora": lora, "resolution": 512}
    checkpointed = _estimate(**base, activation_checkpointing="full", overhead_gib=1.0)
    plain = _estimate(**base, activation_checkpointing="none", overhead_gib=1.0)
    assert checkpointed.peak.total < plain.peak.total
    assert plain.peak.total > 24 * GIB


TINY_UNET: dict[str, Any] = {
    "_class_name": "UNet2DConditionModel",
    "block_out_channels": [32, 64],
    "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"],
    "layers_per_block": 1,
    "cross_attention_dim": 16,
    "attention_head_dim": 2,
    "in_channels": 4,
    "out_channels": 4,
    "sample_size": 8,
    "_pipeline": {"vae": {**VAE, "latent_channels": 4}, "text_tokens": 4},
}


def _unet_layers(trainable: bool, targets: frozenset[str] = frozenset()) -> dict[str, float]:
    model = denoiser_spec(TINY_UNET, "tiny-unet")
    shape = token_shape(model, 64)
    acts = denoiser_activations(model, shape, _mode(trainable, targets), fp32_weights=False)
    return {block.linears[0].name if block.linears else block.role: value for block, value in acts.layers}


def test_unet_resnet_by_hand() -> None:
    """down_blocks.0.resnets.0 (32 -> 32 channels at 8 x 8 = 64 latent positions), bf16: each
    GroupNorm keeps its input and SiLU the norm's output, 2 x 2 x 32 = 128 per norm; a full
    fine-tune adds each conv's input, 2 x 32 = 64 twice; frozen convs keep nothing."""
    assert _unet_layers(False, ATTENTION)["down_blocks.0.resnets.0.conv1"] == 2 * 128 * 64
    assert _unet_layers(True)["down_blocks.0.resnets.0.conv1"] == (2 * 128 + 2 * 64) * 64
    # the up stage at level 1 runs over 4 x 4 = 16 positions: 64 + 64 -> 64 channels
    up = _unet_layers(True)["up_blocks.0.resnets.0.conv1"]
    assert up == (2 * 2 * 128 + 2 * 128 + 2 * 2 * 64 + 2 * 64) * 16


def test_unet_transformer_by_hand() -> None:
    """down_blocks.0.attentions.0's BasicTransformerBlock (width 32, 2 heads, GEGLU inner 128) at
    64 positions, LoRA on to_q/k/v/out.0 (the suffixes match attn1 and attn2): per position three
    LayerNorms 2 x 32 + 8 = 72 each, the shared q/k/v input 64 (the adapted outs read the
    kernels' outputs), attn2.to_q's input 64, GEGLU's gate, value and GELU(gate) 3 x 2 x 128 = 768
    -> 1112.
    Self SDPA: (64 + 128 + 64 + 8) x 64; cross SDPA: q and out + lse (64 + 64 + 8) x 64 and k, v
    over the 4 text tokens 2 x 2 x 32 x 4."""
    model = denoiser_spec(TINY_UNET, "tiny-unet")
    shape = token_shape(model, 64)
    targets = frozenset({f"attn{i}.{n}" for i in (1, 2) for n in ("to_q", "to_k", "to_v", "to_out.0")})
    acts = denoiser_activations(model, shape, _mode(False, targets), fp32_weights=False)
    first = next(v for block, v in acts.layers if block.role == "transformer")
    assert first == 1112 * 64 + 264 * 64 + 136 * 64 + 2 * 2 * 32 * 4


def test_sdxl_full_fine_tune_states_and_flops() -> None:
    """SDXL's UNet (2,567,463,684 parameters) fully fine-tuned under amp-bf16 with AdamW: fp32
    weights, gradients and two moments = 16 B per parameter; the forward at 1024 px is about
    6.8 TFLOP (published estimates of SDXL's UNet are 6-7 TFLOP per denoising step at 1024 px)."""
    e = _estimate(model="SDXL-base-1.0", method="full", precision="amp-bf16", activation_checkpointing="none")
    states = sum(e.peak.term(name).value for name in ("weights", "gradients", "optimizer"))
    assert states >= 16 * 2_567_463_684
    assert e.time is not None
    forward = (e.time.flops.matmul_forward + e.time.flops.attention_forward) * e.batch.seq_len
    assert 6.0e12 < forward < 7.5e12


def test_the_diffusers_recipe_runs_a_bf16_base_under_autocast() -> None:
    """diffusers' LoRA scripts: the frozen denoiser in bf16, bf16 adapters (upcast only for fp16),
    the forward under autocast, so LayerNorms keep fp32 tensors: more activations than pure bf16,
    the same weights."""
    lora = {"targets": sorted(ATTENTION)}
    recipe = _estimate(model="FLUX.1-dev", recipe="diffusers", method="lora", lora=lora, resolution=512)
    assert (recipe.scenario.precision, recipe.scenario.base_weights, recipe.scenario.lora.dtype) == (
        "amp-bf16",
        "bf16",
        "compute",
    )
    pure = _estimate(
        model="FLUX.1-dev",
        method="lora",
        precision="bf16",
        lora={**lora, "dtype": "compute"},
        resolution=512,
        activation_checkpointing="none",
    )
    assert recipe.phases[0].term("weights").value == pure.phases[0].term("weights").value
    assert recipe.phases[0].term("activations").value > pure.phases[0].term("activations").value


@pytest.mark.parametrize(
    ("model", "extra"),
    [("FLUX.1-dev", {"resolution": 1024}), ("Wan2.1-T2V-1.3B", {"frames": 33}), ("V-JEPA-2-ViT-L", {})],
)
def test_the_planner_searches_these_kinds_data_parallel(model: str, extra: dict[str, Any]) -> None:
    """The cheapest plan for 10,000 samples: data-parallel only, whole-block checkpointing only,
    and each plan's own estimate agrees with the search's time and cost."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    base = scenario_from_mapping({"model": model, "method": "lora", "train_samples": 10_000, **extra})
    result = plan(PlanRequest(base=base, objective="cost", max_gpus=8, gpu_types=("H100 SXM", "L40S")))
    assert result.plans
    for found in result.plans:
        assert (found.scenario.tensor_parallel, found.scenario.pipeline_parallel) == (1, 1)
        assert found.scenario.activation_checkpointing in ("none", "full")
        assert found.estimate.time is not None and found.estimate.time.train_samples == 10_000
        assert found.total_s == pytest.approx(found.estimate.time.run_s, rel=1e-9)
        assert found.estimate.peak.total <= find_gpu(found.scenario.gpu).memory_bytes
    assert result.rejected.get("invalid: tensor parallel on a diffusion, video or JEPA model", 0) > 0


def test_the_planner_asks_for_images_not_tokens_per_step() -> None:
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    request = PlanRequest(base=scenario_from_mapping({"model": "FLUX.1-dev"}), target_global_tokens=65536)
    with pytest.raises(InputError) as error:
        plan(request)
    assert error.value.field == "target_global_tokens"


def test_frozen_encoders_on_the_gpu_or_offloaded() -> None:
    """FLUX.1-dev's T5-XXL encoder (4,762,310,656), CLIP-L text model (123,060,480) and VAE
    (83,819,683) in bf16: `gpu` adds their 2 B per parameter to the weights and their forward to
    the step; `offload` keeps them off the GPU but brings them over PCIe for each micro-batch."""
    base = {
        "model": "FLUX.1-dev",
        "recipe": "diffusers",
        "method": "lora",
        "activation_checkpointing": "full",
    }
    cached = _estimate(**base)
    resident = _estimate(**base, frozen_encoders="gpu")
    offloaded = _estimate(**base, frozen_encoders="offload")
    encoders = 2 * (4_762_310_656 + 123_060_480 + 83_819_683)
    gap = resident.peak.term("weights").value - cached.peak.term("weights").value
    assert gap == encoders
    assert offloaded.peak.term("weights").value == cached.peak.term("weights").value
    assert cached.peak.total < offloaded.peak.total < resident.peak.total
    assert resident.time is not None and cached.time is not None and offloaded.time is not None
    assert resident.time.step.frozen_encoders > 0 == cached.time.step.frozen_encoders
    assert offloaded.time.step.offload > 0 == cached.time.step.offload


TINY_PIXART: dict[str, Any] = {
    "_class_name": "PixArtTransformer2DModel",
    "attention_head_dim": 8,
    "num_attention_heads": 2,
    "num_layers": 1,
    "cross_attention_dim": 16,
    "caption_channels": 32,
    "in_channels": 4,
    "out_channels": 8,
    "patch_size": 2,
    "sample_size": 8,
    "use_additional_conditions": False,
    "_pipeline": {"vae": {**VAE, "latent_channels": 4}, "text_tokens": 4},
}


def test_pixart_block_by_hand() -> None:
    """A PixArt block (d = 16, 2 heads, FFN 64) over 16 image tokens and 4 text tokens, LoRA in
    bf16 on attn1's q/k/v/out: per token LayerNorm 40 twice, the shared q/k/v input 32 (the
    adapted out reads the kernel's output), GELU 128 (cross-attention reads the residual; frozen,
    it keeps nothing) = 240; self SDPA 136 per token; cross SDPA q + out + lse 72 per image token
    and k, v 64 per text token."""
    model = denoiser_spec(TINY_PIXART, "tiny-pixart")
    shape = token_shape(model, 64)
    assert (shape.image_tokens, shape.text_tokens) == (16, 4)
    targets = frozenset({"attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0"})
    acts = denoiser_activations(model, shape, _mode(False, targets), fp32_weights=False)
    block = next(value for block, value in acts.layers if block.role == "pixart")
    assert block == 240 * 16 + 136 * 16 + 72 * 16 + 64 * 4
    # the text embeddings (4 x 32 at 2 B) are an input; the caption projection's GELU keeps 4 x 16 x 2
    assert acts.outside == 3 * 2 * (8 * 8 * 4) + 2 * 32 * 4
    assert next(value for block, value in acts.layers if block.role == "embed") == 4 * 16 * 2


def test_sd3_position_table_is_a_buffer_on_the_gpu() -> None:
    """SD3.5-Medium's PatchEmbed keeps a sin-cos table over pos_embed_max_size^2 = 384^2
    positions x 1536 channels as a buffer: not a parameter, but on the GPU at the weights' dtype
    (bf16 for the LoRA scripts' cast model, fp32 for a full fine-tune under autocast)."""
    from trainplan.specs.weights import total_params

    model = resolve_model("SD3.5-Medium")
    assert model.buffer_elements == 384 * 384 * 1536
    lora = _estimate(model="SD3.5-Medium", recipe="diffusers", method="lora")
    full = _estimate(model="SD3.5-Medium", method="full", precision="amp-bf16")
    params = total_params(model)
    adapters = lora.params.lora * 2  # bf16 adapters
    assert lora.peak.term("weights").value == pytest.approx(2 * params + adapters + 2 * model.buffer_elements)
    assert full.phases[2].term("weights").value == pytest.approx(4 * params + 4 * model.buffer_elements)


def test_wan_always_has_its_qk_norms() -> None:
    """WanAttention builds its q/k RMSNorms over all heads whatever the config's qk_norm says
    (diffusers 0.42 builds 37,336 parameters for this config with and without qk_norm: null)."""
    from trainplan.specs.weights import total_params

    wan: dict[str, Any] = {
        "_class_name": "WanTransformer3DModel",
        "num_attention_heads": 2,
        "attention_head_dim": 4,
        "ffn_dim": 8,
        "num_layers": 1,
        "_pipeline": {"vae": {"_class_name": "AutoencoderKLWan"}},
    }
    default = total_params(denoiser_spec(wan, "wan"))
    without = total_params(denoiser_spec({**wan, "qk_norm": None}, "wan"))
    assert default == without == 37_336


# d = 2 heads x 8 = 16, cross-attention 2 x 8, GLUMBConv h = int(2.5 x 16) = 40; a 3-stage DC-AE
# (stride 4): 16 px -> 4 x 4 latents -> 16 tokens (patch 1); 4 caption tokens
TINY_SANA: dict[str, Any] = {
    "_class_name": "SanaTransformer2DModel",
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "num_layers": 1,
    "num_cross_attention_heads": 2,
    "cross_attention_head_dim": 8,
    "cross_attention_dim": 16,
    "caption_channels": 32,
    "in_channels": 8,
    "out_channels": 8,
    "sample_size": 4,
    "_pipeline": {
        "vae": TINY_DC_AE,
        "text_tokens": 4,
    },
}
SELF_ATTENTION = frozenset({"attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0"})


def test_sana_block_by_hand() -> None:
    """A Sana block, bf16 adapters on attn1's q/k/v/out over a frozen bf16 base, per image token:
    LayerNorm 2*16 + 8 = 40 (twice); the shared q/k/v input 32; the linear attention: ReLU(q),
    ReLU(k) 2*(16 + 16) = 64, the matmuls' 16-bit copies of their fp32 upcasts 64, V padded to
    d + 1 = 9 rows, the un-normalised output (9 rows) and the denominator per head
    2*2*(9 + 9 + 1) = 76; to_out's adapted input 32 (a strided view, copied); cross-attention
    frozen and read off the residual (nothing); GLUMBConv 2*(16 + 8*40) = 672 (conv_inverted's
    input, SiLU's and conv_depth's inputs and conv_depth's output at 2h, SiLU(gate) and
    conv_point's input at h; a conv keeps its input though frozen) = 1020. Per sample: the
    (d + 1) x d scores per head 2*2*9*8 = 288; cross SDPA over 4 text tokens: q + out + lse
    (32 + 32 + 8) x 16 and k, v 64 x 4 = 1408."""
    model = denoiser_spec(TINY_SANA, "tiny-sana")
    shape = token_shape(model, 16)
    assert (shape.image_tokens, shape.text_tokens) == (16, 4)
    acts = denoiser_activations(model, shape, _mode(False, SELF_ATTENTION), fp32_weights=False)
    block = next(value for block, value in acts.layers if block.role == "sana")
    assert block == 1020 * 16 + 288 + 1408 == 18016
    # frozen caption projection and caption_norm: only the projection's GELU input, 2*16 x 4
    assert next(value for block, value in acts.layers if block.role == "embed") == 2 * 16 * 4


def test_sana_flops_by_hand() -> None:
    """Linear attention costs 4 x heads x N x d x (d + 1) = 4*2*16*8*9 = 9216, the cross-attention
    core 2 x heads x N x T x (d_k + d_v) = 2*2*16*4*16 = 4096; the depthwise conv 9 taps x 2h =
    720 multiply-adds per token, the 1x1 convs 16*80 and 40*16."""
    model = denoiser_spec(TINY_SANA, "tiny-sana")
    shape = token_shape(model, 16)
    checkpointed = [0] * len(model.blocks)
    flops = denoiser_flops(
        model, shape, frozen_base=False, adapted=frozenset(), rank=0, checkpointed=checkpointed
    )
    assert flops.attention_forward == 9216 + 4096
    block = next(block for block in model.blocks if block.role == "sana")
    macs = {linear.name: linear.in_features * linear.out_features for linear in block.linears}
    assert macs == {"ff.conv_inverted": 16 * 80, "ff.conv_depth": 9 * 80, "ff.conv_point": 40 * 16}


# d = 2 heads x 8 = 16, FFN 64; an LTX VAE of patch 2 and one scaling step: 4 px per latent,
# 2 frames per latent frame after the first; 16 px x 5 frames -> 4 x 4 x 3 = 48 tokens
TINY_LTX: dict[str, Any] = {
    "_class_name": "LTXVideoTransformer3DModel",
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "num_layers": 1,
    "cross_attention_dim": 16,
    "caption_channels": 32,
    "in_channels": 8,
    "out_channels": 8,
    "_pipeline": {
        "vae": TINY_LTX_VAE,
        "text_tokens": 4,
    },
}


# d = 2 heads x 8 = 16, FFN 64, time embedding 5; 32 px -> 4 x 4 latents -> 2 x 2 tokens per
# latent frame; 5 frames -> 1 + 4 / 4 = 2 latent frames -> 8 video tokens; 4 text tokens
TINY_COGVIDEOX: dict[str, Any] = {
    "_class_name": "CogVideoXTransformer3DModel",
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "num_layers": 1,
    "in_channels": 4,
    "out_channels": 4,
    "text_embed_dim": 32,
    "time_embed_dim": 5,
    "use_rotary_positional_embeddings": True,
    "_pipeline": {
        "vae": {
            "_class_name": "AutoencoderKLCogVideoX",
            "block_out_channels": [8, 8, 8, 8],
            "latent_channels": 4,
        },
        "text_tokens": 4,
    },
}


def test_ltx_video_block_by_hand() -> None:
    """An LTX-Video block, bf16 adapters on attn1 over a frozen bf16 base, per video token: norm1
    (diffusers RMSNorm, no weight): the fp32 copy `pow` keeps 64, the input 32, 1/rms 4 = 100
    (norm2 the same); the shared q/k/v input 32; q and k torch.nn.RMSNorms over all heads (the
    fused kernel: input 32 + 1/rms 4) 72; attn2's q norm 36 (its k norm 36 per text token); the
    GELU input 2*64 = 128; RoPE keeps only the shared cos/sin tables = 468. Self SDPA over 48
    tokens 136 per token; cross SDPA (32 + 32 + 8) x 48 + 64 x 4 = 3712. The embedder keeps the
    fp32 cos and sin tables, 2*4*16 per token, and the caption projection's GELU input 2*16 x 4."""
    model = denoiser_spec(TINY_LTX, "tiny-ltx")
    shape = token_shape(model, 16, frames=5)
    assert (shape.latent_frames, shape.image_tokens, shape.text_tokens) == (3, 48, 4)
    acts = denoiser_activations(model, shape, _mode(False, SELF_ATTENTION), fp32_weights=False)
    by_role = {block.role: value for block, value in acts.layers}
    assert by_role["ltx_video"] == 468 * 48 + 36 * 4 + 136 * 48 + 3712 == 32848
    assert by_role["embed"] == 2 * 4 * 16 * 48 + 2 * 16 * 4


def test_cogvideox_block_by_hand() -> None:
    """A CogVideoX block over 8 video + 4 text tokens (one sequence), bf16 LoRA on attn1's
    q/k/v/out, per token: norm1 and norm2 LayerNorms 2 x (2*16 + 8) = 80 (frozen modulation keeps
    no normed x); the adapted q/k/v share one input 32; the LayerNorms over each head of q and k
    keep their input 2 x 2*16 and an fp32 mean and rstd per head 2 x 2 x 8 = 96; the normed q
    leaves the kernel's output laid out (batch, heads, seq, head_dim), so the adapted to_out
    keeps the reshaped copy 32; GELU input 2*64 = 128 (frozen ff keeps no input): 368.
    SDPA over 12 tokens: q 32 + k, v 64 + out 32 + lse 8 = 136 per token."""
    model = denoiser_spec(TINY_COGVIDEOX, "tiny-cogvideox")
    shape = token_shape(model, 32, 5)
    assert (shape.image_tokens, shape.text_tokens, shape.latent_frames) == (8, 4, 2)
    targets = frozenset({"attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0"})
    acts = denoiser_activations(model, shape, _mode(False, targets), fp32_weights=False)
    by_role = {block.role: value for block, value in acts.layers}
    assert by_role["cogvideox"] == (368 + 136) * 12
    # the head: norm_final and norm_out's LayerNorm, 2 x 40 per video token (frozen: no more)
    assert by_role["cogvideox_output"] == 80 * 8
    # checkpointing keeps the block's input: 12 tokens x 16 x 2 B
    assert acts.block_inputs[1] == 12 * 16 * 2
    # full bf16 fine-tune adds per token the modulated x twice (2 x 32), the q/k/v input and
    # to_out's copy already counted, the attention gate's input 32, the ff input 32, down's input
    # 128, the ff gate 32
    full = denoiser_activations(model, shape, _mode(True), fp32_weights=False)
    by_role = {block.role: value for block, value in full.layers}
    assert by_role["cogvideox"] == (368 + 64 + 32 + 32 + 128 + 32 + 136) * 12


def test_cogvideox_flops_by_hand() -> None:
    """Forward multiply-accumulates: the block's q/k/v/out (4 x 256) and FFN (2 x 1024) over all
    12 tokens, its two modulations 2 x 5 x 96 once; patch_embed.proj 16 x 16 over 8 video tokens,
    text_proj 32 x 16 over 4 text tokens, time_embedding 16 x 5 + 5 x 5 once; norm_out.linear
    5 x 32 once, proj_out 16 x 16 over the video tokens. Attention 2 x 2 heads x 12 x 12 x 16."""
    model = denoiser_spec(TINY_COGVIDEOX, "tiny-cogvideox")
    shape = token_shape(model, 32, 5)
    flops = denoiser_flops(
        model, shape, frozen_base=True, adapted=frozenset(), rank=4, checkpointed=[0] * len(model.blocks)
    )
    block = (4 * 256 + 2 * 1024) * 12 + 2 * 5 * 96
    embed = 256 * 8 + 32 * 16 * 4 + 16 * 5 + 5 * 5
    output = 5 * 32 + 256 * 8
    assert flops.matmul_forward == 2 * (block + embed + output)
    assert flops.attention_forward == 2 * 2 * 12 * 12 * 16


# the same widths as TINY_FLUX (16 = 2 x 8, MLP 64) with HunyuanVideo's 1 x 2 x 2 patches: 32 x 64 px
# -> 4 x 8 latents -> 2 x 4 tokens per latent frame; 5 frames -> 2 latent frames: 16 video tokens
TINY_HUNYUAN_VIDEO: dict[str, Any] = {
    "_class_name": "HunyuanVideoTransformer3DModel",
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "num_layers": 1,
    "num_single_layers": 1,
    "num_refiner_layers": 1,
    "in_channels": 4,
    "out_channels": 4,
    "text_embed_dim": 32,
    "pooled_projection_dim": 8,
    "guidance_embeds": False,
    "_pipeline": {
        "vae": {"_class_name": "AutoencoderKLHunyuanVideo", "latent_channels": 4},
        "text_tokens": 4,
    },
}


def test_hunyuan_video_reuses_the_flux_blocks() -> None:
    """HunyuanVideo's dual- and single-stream blocks have FLUX's weights and keep what FLUX's keep
    over the same 16 image and 4 text tokens (test_flux_lora_blocks_by_hand), except their q/k
    norms: diffusers' RMSNorm (in diffusers' generic Attention) also keeps an fp32 copy of its
    input, 4 x 16 = 64 more per norm, two norms per token: 2 x 64 x 20 per block. Its token
    refiner runs over the 4 text tokens, per token: LayerNorm 40, the adapted attn q/k/v input
    32 (its attention matches the `to_q` targets too), LayerNorm 40, SiLU input 2*64 = 128; SDPA
    136; and the prompt mask repeated per head, 2 heads x 4 x 4 at 2 B."""
    model = denoiser_spec(TINY_HUNYUAN_VIDEO, "tiny-hunyuan")
    shape = token_shape(model, "64x32", 5)
    assert (shape.image_tokens, shape.text_tokens) == (16, 4)
    flux = _flux()
    flux_shape = token_shape(flux, 64)
    for targets in (ATTENTION, frozenset()):
        ours = denoiser_activations(model, shape, _mode(False, targets), fp32_weights=False)
        theirs = denoiser_activations(flux, flux_shape, _mode(False, targets), fp32_weights=False)
        by_role = {block.role: value for block, value in ours.layers}
        flux_roles = {block.role: value for block, value in theirs.layers}
        assert by_role["double_stream"] == flux_roles["double_stream"] + 2 * 64 * 20
        assert by_role["single_stream"] == flux_roles["single_stream"] + 2 * 64 * 20
    lora = denoiser_activations(model, shape, _mode(False, ATTENTION), fp32_weights=False)
    assert {block.role: value for block, value in lora.layers}["text_refiner"] == (240 + 136) * 4 + 2 * 2 * 16
    # with proj_mlp adapted too, the attention reads its own concatenated copy of the normed
    # tokens (HunyuanVideoAttnProcessor2_0), where FLUX's to_q/k/v and proj_mlp share one:
    # 2 x 16 more per token over the 20 tokens
    both = ATTENTION | {"proj_mlp"}
    ours_single = next(
        value
        for block, value in denoiser_activations(model, shape, _mode(False, both), fp32_weights=False).layers
        if block.role == "single_stream"
    )
    flux_single = next(
        value
        for block, value in denoiser_activations(
            flux, flux_shape, _mode(False, both), fp32_weights=False
        ).layers
        if block.role == "single_stream"
    )
    assert ours_single == flux_single + 32 * 20 + 2 * 64 * 20


def test_a_geometry_only_vae_refuses_running_the_encoders(monkeypatch: pytest.MonkeyPatch) -> None:
    """A VAE class read for its geometry alone (none in the catalog now: Sana's DC-AE made one
    here) counts nothing, so gpu and offload are refused, naming the field and the component."""
    from trainplan.engine.samples import sample_shape
    from trainplan.inputs.hf import vae

    readers = {name: reader for name, reader in vae.VAE_READERS.items() if name != "AutoencoderDC"}
    monkeypatch.setattr(vae, "VAE_READERS", readers)
    monkeypatch.setattr(vae, "UNCOUNTED_VAES", ("AutoencoderDC",))
    model = denoiser_spec(TINY_SANA, "tiny-sana")
    assert [(c.architecture, c.counted, c.params) for c in model.frozen[:1]] == [("AutoencoderDC", False, 0)]
    for where in ("gpu", "offload"):
        with pytest.raises(InputError, match="AutoencoderDC") as error:
            sample_shape(model, scenario_from_mapping({"model": "x", "frozen_encoders": where}))
        assert error.value.field == "frozen_encoders"
    assert sample_shape(model, scenario_from_mapping({"model": "x"})) is not None


def test_frozen_encoders_on_the_gpu_add_their_weights() -> None:
    """HunyuanVideo's VAE and text encoders are all counted: on the GPU they add at least their
    bf16 weights (VAE, LLaMA and CLIP-L)."""
    result = _estimate(model="HunyuanVideo", method="lora", resolution="848x480", frames=61)
    assert result.peak.total > 0
    resident = _estimate(
        model="HunyuanVideo", method="lora", resolution="848x480", frames=61, frozen_encoders="gpu"
    )
    weights = 2 * (246_478_803 + 7_505_186_816 + 123_060_480)
    assert resident.peak.total >= result.peak.total + weights


def test_every_catalog_block_has_a_row_and_the_checkpointed_ones_are_the_layers() -> None:
    # diffusers checkpoints each transformer block of a DiT and each resnet / transformer block
    # of a UNet (`_gradient_checkpointing_func` in their forward), the JEPA repos each ViT block;
    # the embedders, heads, HunyuanVideo's token refiner and CogVideoX's head never
    from dataclasses import replace

    from trainplan.engine.terms.denoisers import block_kind
    from trainplan.inputs.catalogs.models import model_records
    from trainplan.inputs.resolve import record_spec

    layers = {"double_stream", "single_stream", "joint", "video_dit", "pixart", "sana", "ltx_video",
              "cogvideox", "resnet", "transformer", "encoder", "predictor"}  # fmt: skip
    seen: set[tuple[str, bool]] = set()
    for record in model_records():
        spec = record_spec(record)
        if spec.kind == "llm":
            continue
        for block in spec.blocks:
            layer = block_kind(block, spec).layer
            jepa_embedding = block.role in ("encoder", "predictor") and block.attention is None
            assert layer == (block.role in layers and not jepa_embedding), (record.name, block.role)
            seen.add((block.role, layer))
    assert {role for role, layer in seen if layer} == layers
    spec = resolve_model("FLUX.1-dev")
    odd = replace(spec, blocks=(replace(spec.blocks[0], role="mystery"),))
    with pytest.raises(InputError, match="'mystery' blocks is not modelled"):
        block_kind(odd.blocks[0], odd)


def test_a_joint_block_copies_its_split_output_only_above_micro_batch_one() -> None:
    """FluxAttnProcessor2_0 splits the joint attention output into text and image rows before
    to_out.0 and to_add_out; above micro-batch 1 the slice is not contiguous, so an adapted (or
    trained) projection at the stream's dtype keeps the matmul's copy: 2 B x 16 channels per row.
    LoRA on to_out.0: the 16 image rows, 512 B per sample; full fine-tune: to_add_out's 4 text
    rows too, 640 B. The single-stream block concatenates again and copies nothing."""
    model = _flux()
    shape = token_shape(model, 64)
    roles = [block.role for block in model.blocks]
    lora = denoiser_activations(model, shape, _mode(False, ATTENTION), fp32_weights=False)
    full = denoiser_activations(model, shape, _mode(True), fp32_weights=False)
    assert dict(zip(roles, lora.batch_splits, strict=True))["double_stream"] == 2 * 16 * 16
    assert dict(zip(roles, full.batch_splits, strict=True))["double_stream"] == 2 * 16 * (16 + 4)
    assert sum(lora.batch_splits) == 512 and sum(full.batch_splits) == 640
    frozen = denoiser_activations(model, shape, _mode(False, frozenset({"attn.to_q"})), fp32_weights=False)
    assert sum(frozen.batch_splits) == 0  # a frozen to_out keeps nothing of its input

    def activations(micro_batch: int) -> float:
        scenario = scenario_from_mapping(
            {"model": "tiny-flux", "method": "lora",
             "lora": {"targets": sorted(ATTENTION), "dtype": "compute"}, "precision": "bf16",
             "base_weights": "bf16", "resolution": 64, "micro_batch": micro_batch,
             "activation_checkpointing": "none", "overhead_gib": 0},
        )  # fmt: skip
        return estimate(scenario, model=model).phases[0].term("activations").value

    # b samples keep b x (layers + split) above micro-batch 1, and no split at 1: the step from
    # 1 to 2 adds a sample and two copies, the step from 2 to 3 a sample and one
    assert (activations(2) - activations(1)) - (activations(3) - activations(2)) == pytest.approx(512)
