"""The frozen encoders' forward in the step time (per_gpu.step_seconds, `frozen_encoders`)."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.samples import sample_shape
from trainplan.engine.terms.encoders import flops_per_sample
from trainplan.inputs.catalogs.cost_inputs import pcie_practical_bytes_per_s
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.scenario import scenario_from_mapping

FLUX_FP8: dict[str, Any] = {
    "model": "FLUX.1-dev",
    "method": "lora",
    "precision": "fp8-torchao",
    "gpu": "H100 SXM",
    "micro_batch": 2,
    "grad_accum": 3,
    "resolution": "512x768",
    "activation_checkpointing": "full",
}
# FLUX.1-dev's T5-XXL encoder, CLIP-L text model and VAE (docs/methodology.md, frozen encoders)
FLUX_ENCODER_PARAMS = 4_762_310_656 + 123_060_480 + 83_819_683


def _run(**fields: Any) -> Any:
    result = estimate({**FLUX_FP8, **fields})
    assert result.time is not None
    return result


def test_encoders_run_at_the_16_bit_rate_beside_the_denoiser() -> None:
    """6 samples a step (2 x 3), each costing the VAE encoder's and both text encoders' forward
    FLOPs F; an fp8 recipe converts only the denoiser's linears, so they run at the H100's bf16
    dense peak (989.4 TFLOP/s, half its fp8 figure) at the step's efficiency (Hopper 0.47, the
    diffusion-transformer kind has no factor): seconds = 6 F / (989.4e12 x 0.47). The
    denoiser's compute is the same with or without them."""
    cached, resident = _run(), _run(frozen_encoders="gpu")
    model = resolve_model("FLUX.1-dev")
    shape = sample_shape(model, scenario_from_mapping({**FLUX_FP8, "frozen_encoders": "gpu"}))
    per_sample = flops_per_sample(model, shape, "gpu")
    bf16 = find_gpu("H100 SXM").dense_flops_per_s["bf16"]
    assert bf16 == pytest.approx(989.4e12, rel=1e-3)
    assert resident.time.efficiency == 0.47
    expected = 6 * per_sample / (bf16 * 0.47)
    assert resident.time.step.frozen_encoders == pytest.approx(expected, rel=1e-12)
    assert cached.time.step.frozen_encoders == 0
    assert resident.time.step.compute == pytest.approx(cached.time.step.compute, rel=1e-12)
    assert resident.time.step.total == pytest.approx(cached.time.step.total + expected, rel=1e-12)
    # T5-XXL over 512 tokens and the VAE encoder over 512 x 768 px: several TFLOPs a sample
    assert 5e12 < per_sample < 8e12
    breakdown = resident.to_dict()["time"]["step_breakdown_s"]
    assert breakdown["frozen_encoders"] == resident.time.step.frozen_encoders


def test_offloaded_encoders_run_on_the_gpu_after_their_weights_arrive() -> None:
    """`offload`: the same forward on the GPU, plus every weight host -> device and back for
    each of the 3 micro-batches at the H100's practical PCIe 5 rate: 3 x 2 x params x 2 B / rate."""
    resident, offloaded = _run(frozen_encoders="gpu"), _run(frozen_encoders="offload")
    pcie = pcie_practical_bytes_per_s()[5]
    assert find_gpu("H100 SXM").pcie_gen == 5
    moved = 3 * 2 * FLUX_ENCODER_PARAMS * 2
    assert offloaded.time.step.frozen_encoders == resident.time.step.frozen_encoders
    assert offloaded.time.step.offload == pytest.approx(moved / pcie, rel=1e-12)
    assert offloaded.time.step.dominant_overhead() == "offload"


def test_a_given_mfu_times_the_encoders_too() -> None:
    """With `mfu` the encoders' FLOPs run at that efficiency: twice the mfu, half the seconds."""
    low, high = _run(frozen_encoders="gpu", mfu=0.2), _run(frozen_encoders="gpu", mfu=0.4)
    assert low.time.step.frozen_encoders == pytest.approx(2 * high.time.step.frozen_encoders, rel=1e-12)
    assert high.time.step.frozen_encoders > 0
