"""Published diffusion and video training throughput as trainplan scenarios, and our error on each.

Every case cites its entry in calibration/published.yaml (section 'Diffusion, video and JEPA
training throughput'), where the raw figure, the date read and the settings are recorded. Measured
throughput is compared as images (or clips) per second per GPU; the conversion from the raw
figure is stated on the case. `role` says whether the case fixed a per-kind efficiency factor
(terms/timing.py EFFICIENCY_FACTOR_BY_MODEL_KIND: "fit") or only checks it ("held-out"). Used by
tests/reference/test_diffusion_time_reference.py and the table in docs/accuracy.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.timing import efficiency_kind
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.hf.pipeline import PIPELINE_KEY
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import Scenario, scenario_from_mapping

# The Stable Diffusion v2 UNet of the MLPerf Training benchmark, as a diffusers config. The NeMo
# config the submissions ran (mlcommons/training_results_v4.0:NVIDIA/benchmarks/stable_diffusion/
# implementations/nemo/conf/custom.yaml@62f111b7) gives model_channels 320, channel_mult
# [1, 2, 4, 4], num_res_blocks 2, attention at the first three levels, num_head_channels 64 (so
# 5, 10, 20, 20 heads: diffusers' `attention_head_dim` for SD2), linear proj_in/out, one
# transformer per attention block, context_dim 1024 (OpenCLIP ViT-H/14), 4 latent channels at
# 64 x 64 (512 px). Its GroupNorm uses 16 groups where diffusers uses 32: no effect on FLOPs.
SD2_UNET: dict[str, Any] = {
    "_class_name": "UNet2DConditionModel",
    "act_fn": "silu",
    "attention_head_dim": [5, 10, 20, 20],
    "block_out_channels": [320, 640, 1280, 1280],
    "center_input_sample": False,
    "cross_attention_dim": 1024,
    "down_block_types": [
        "CrossAttnDownBlock2D",
        "CrossAttnDownBlock2D",
        "CrossAttnDownBlock2D",
        "DownBlock2D",
    ],
    "downsample_padding": 1,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_scale_factor": 1,
    "norm_eps": 1e-5,
    "norm_num_groups": 32,
    "out_channels": 4,
    "sample_size": 64,
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
    "use_linear_projection": True,
    PIPELINE_KEY: {
        "text_tokens": 77,
        "vae": {
            "_class_name": "AutoencoderKL",
            "block_out_channels": [128, 256, 512, 512],
            "latent_channels": 4,
        },
    },
}

# MLPerf Training Stable Diffusion (NVIDIA NeMo submissions): full training from scratch at 512 px,
# fp16 (`precision: 16`, `unet_precision: fp16`), fused AdamW, no activation checkpointing
# (`use_checkpoint: False`), EMA off, latents and OpenCLIP caption embeddings precomputed
# (`images_moments`, `clip_encoded`), one micro-batch per step (`accumulate_grad_batches: 1`).
_MLPERF_SD: dict[str, Any] = {
    "method": "full",
    "precision": "fp16-mixed",
    "optimizer": "adamw-fused",
    "grad_accum": 1,
    "resolution": 512,
    "activation_checkpointing": "none",
    "frozen_encoders": "precomputed",
}
# The LoRA targets of DiffSynth-Studio's Wan scripts (q, k, v, o of self- and cross-attention,
# ffn.0 and ffn.2) in diffusers' module names.
# MLPerf Training v5.1 flux1 (mlcommons/training_results_v5.1 NVIDIA tyche_ngpu16_ngc25.09_nemo,
# config_common.sh, conf/flux1_schnell.yaml, conf/model/schnell.yaml, conf/data/cc12m.yaml):
# FLUX.1-schnell's transformer trained from scratch at 256 px (32 x 32 latents, 256 image tokens)
# on precomputed T5 (256 tokens) and CLIP encodings (vae_config, t5_params, clip_params null),
# MXFP8 through Transformer Engine over bf16-mixed, Megatron's distributed optimizer (Adam, the
# state sharded over the data-parallel ranks: ZeRO-1), 32 images per GPU and 512 a step, no
# recompute, CUDA graphs.
_MLPERF_FLUX: dict[str, Any] = {
    "method": "full",
    "precision": "fp8-mixed",
    "optimizer": "adamw-fused",
    "zero_stage": 1,
    "micro_batch": 32,
    "grad_accum": 1,
    "resolution": 256,
    "text_tokens": 256,
    "activation_checkpointing": "none",
    "frozen_encoders": "precomputed",
}
_WAN_TARGETS = "to_q,to_k,to_v,to_out.0,ffn.net.0.proj,ffn.net.2"


@dataclass(frozen=True)
class DiffusionTimeCase:
    """One published measurement as a scenario and a measured images (clips) per second per GPU."""

    id: str
    model: str | dict[str, Any]
    scenario: dict[str, Any]
    measured_samples_per_s_per_gpu: float
    conversion: str
    role: str  # "fit" (fixed the kind's efficiency factor) | "held-out"
    note: str = ""

    def spec(self) -> ModelSpec:
        """The model of the case."""
        if isinstance(self.model, str):
            return resolve_model(self.model)
        return spec_from_config(self.model, self.id)


CASES: tuple[DiffusionTimeCase, ...] = (
    DiffusionTimeCase(
        id="mlperf-v40-sd2-h200-8gpu",
        model=SD2_UNET,
        scenario={**_MLPERF_SD, "gpu": "H200 SXM 141GB", "gpus": 8, "micro_batch": 64},
        measured_samples_per_s_per_gpu=51_200 / 49.718 / 8,
        conversion="51,200 samples per 100-step block / 49.718 s (MLLOG block_start to block_stop) / 8 GPUs",
        role="fit",
    ),
    DiffusionTimeCase(
        id="mlperf-v40-sd2-h100-64gpu",
        model=SD2_UNET,
        scenario={**_MLPERF_SD, "gpu": "H100 SXM 80GB", "gpus": 64, "micro_batch": 16},
        measured_samples_per_s_per_gpu=102_400 / 14.478 / 64,
        conversion="102,400 samples per 100-step block / 14.478 s / 64 GPUs",
        role="held-out",
    ),
    DiffusionTimeCase(
        id="mlperf-v31-sd2-h100-512gpu",
        model=SD2_UNET,
        scenario={**_MLPERF_SD, "gpu": "H100 SXM 80GB", "gpus": 512, "micro_batch": 4},
        measured_samples_per_s_per_gpu=24_160.04 / 512,
        conversion="MLLOG tracked_stats throughput 24,160.04 samples/s at step 2200 / 512 GPUs",
        role="held-out",
        note="v3.1 code not read: the v4.0 NeMo settings assumed; the step is mostly gradient all-reduce",
    ),
    DiffusionTimeCase(
        id="mlperf-v40-sd2-l40s-64gpu",
        model=SD2_UNET,
        scenario={**_MLPERF_SD, "gpu": "L40S", "gpus": 64, "gpus_per_node": 4, "micro_batch": 16},
        measured_samples_per_s_per_gpu=102_400 / 51.963 / 64,
        conversion="102,400 samples per 100-step block / 51.963 s / 64 GPUs",
        role="held-out",
        note=(
            "16 nodes of 4; the cluster network is not in the catalog (the stated 100 Gb/s "
            "per-GPU assumption applies)"
        ),
    ),
    DiffusionTimeCase(
        id="diffsynth-wan21-1.3b-lora-a100",
        model="Wan2.1-T2V-1.3B",
        scenario={
            "method": "lora",
            "precision": "bf16",
            "optimizer": "adamw",
            "gpu": "A100 40GB SXM4",
            "gpus": 1,
            "micro_batch": 1,
            "grad_accum": 1,
            "resolution": "832x480",
            "frames": 81,
            "activation_checkpointing": "full",
            "frozen_encoders": "precomputed",
            # DiffSynth-Studio's add_lora_to_model upcasts the adapters to fp32 after
            # inject_adapter_in_model ("Upcast LoRA parameters into fp32")
            "lora": {"rank": 16, "targets": _WAN_TARGETS, "dtype": "fp32"},
        },
        measured_samples_per_s_per_gpu=1 / 8.30,
        conversion="1 clip per step / 8.30 s per step (tqdm s/it)",
        role="fit",
        note="Colab A100 taken as the 40 GB SXM4; frames and size are the script defaults",
    ),
    DiffusionTimeCase(
        id="ijepa-vith14-in1k-300ep-16xa100",
        model="I-JEPA-ViT-H-14",
        scenario={
            # facebookresearch/ijepa configs/in1k_vith14_ep300.yaml: 128 images per GPU at 224 px
            # (2,048 per step on 16 GPUs), use_bfloat16 autocast over fp32 weights, AdamW, no
            # activation checkpointing (the repo has none), the published masks
            "method": "full",
            "precision": "bf16-mixed",
            "optimizer": "adamw",
            "gpu": "A100 80GB SXM4",
            "gpus": 16,
            "micro_batch": 128,
            "grad_accum": 1,
            "resolution": 224,
            "activation_checkpointing": "none",
        },
        measured_samples_per_s_per_gpu=300 * 1_281_167 / (72 * 3600 * 16),
        conversion="300 epochs x 1,281,167 ImageNet-1K images / 72 h / 16 GPUs",
        role="fit",
        note="'under 72 hours': a lower bound on the throughput; the A100 variant and the network "
        "between the two 8-GPU nodes are not stated (the 80 GB SXM4 and the catalog's network taken)",
    ),
    DiffusionTimeCase(
        id="diffusers-blog-flux-qlora-4090",
        model="FLUX.1-dev",
        scenario={
            "recipe": "diffusers",
            "method": "qlora",
            "precision": "bf16",
            "optimizer": "adamw-8bit",
            "gpu": "RTX 4090",
            "gpus": 1,
            "micro_batch": 1,
            "grad_accum": 4,
            "resolution": "512x768",
            "text_tokens": 77,
            "activation_checkpointing": "full",
            "frozen_encoders": "precomputed",
            "lora": {"rank": 4, "targets": "to_k,to_q,to_v,to_out.0"},
        },
        measured_samples_per_s_per_gpu=700 * 4 / (41 * 60),
        conversion="700 optimizer steps x 4 images / ~41 min of the whole run",
        role="held-out",
        note="whole-run wall time (loading included): a lower bound on the step throughput",
    ),
    DiffusionTimeCase(
        id="mlperf-v51-flux1-gb200-16gpu",
        model="FLUX.1-schnell",
        # 4 x 4 GB200s in one NVLink domain (SEGMENT 4: the distributed optimizer spans it)
        scenario={**_MLPERF_FLUX, "gpu": "GB200", "gpus": 16, "gpus_per_node": 16},
        measured_samples_per_s_per_gpu=262_144 / 289.345 / 16,
        conversion="262,144 samples per 512-step block / 289.345 s (MLLOG block_start to block_stop) "
        "/ 16 GPUs",
        role="held-out",
        note="fp8 on Blackwell: the architecture's efficiency (0.45, no Blackwell data) is applied to the "
        "fp8 peak; the run reaches 0.46 of the bf16 peak, so at the bf16 rate the estimate is within 3%",
    ),
    DiffusionTimeCase(
        id="mlperf-v51-flux1-b200-16gpu-oracle",
        model="FLUX.1-schnell",
        scenario={
            # mlcommons/training_results_v5.1 Oracle config_B200_02x08x32.sh: NVIDIA's flux1 code
            # and settings as above on 2 x 8 B200s (BM.GPU.B200.8, RoCE between the nodes)
            **_MLPERF_FLUX,
            "gpu": "B200",
            "gpus": 16,
            "gpus_per_node": 8,
        },
        measured_samples_per_s_per_gpu=262_144 / 321.996 / 16,
        conversion="262,144 samples per 512-step block / 321.996 s (MLLOG block_start to block_stop) "
        "/ 16 GPUs",
        role="held-out",
        note="the flat ring all-reduce over the network (0.87 s of the 1.20 s step) against a measured "
        "0.63 s step: Megatron reduce-scatters over 8 NICs a node; the compute alone (fp8 at the "
        "Blackwell default) is 0.33 s, the GB200 run's over-prediction again",
    ),
)


@dataclass(frozen=True)
class DiffusionTimeRow:
    """Our prediction for one case and its error."""

    case: DiffusionTimeCase
    kind: str
    predicted_samples_per_s_per_gpu: float
    efficiency: float
    mfu: float
    dominant_overhead: str

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_samples_per_s_per_gpu / self.case.measured_samples_per_s_per_gpu - 1


def evaluate(case: DiffusionTimeCase) -> DiffusionTimeRow:
    """Run the case through estimate() with trainplan's own efficiency (no mfu given)."""
    spec = case.spec()
    result = estimate(scenario_from_mapping(case.scenario, base=Scenario(model=case.id)), model=spec)
    assert result.time is not None and result.time.samples_per_s_per_gpu is not None
    return DiffusionTimeRow(
        case,
        efficiency_kind(spec),
        result.time.samples_per_s_per_gpu,
        result.time.efficiency,
        result.time.mfu,
        result.time.step.dominant_overhead(),
    )
