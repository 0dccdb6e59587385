"""Time, cost, energy and load: hand-derived cases, properties and errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import LLAMA_8B
from hypothesis import given, settings
from hypothesis import strategies as st

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.cost import co2e_kg, cost_usd, energy_kwh, gpu_power_w
from trainplan.engine.terms.flops import flops_per_token
from trainplan.engine.terms.loading import checkpoint_writes, load_bandwidth, node_share
from trainplan.engine.terms.pipeline import pipeline_bubble_seconds
from trainplan.engine.terms.timing import ring_allreduce_seconds
from trainplan.inputs.catalogs.cost_inputs import no_price_reasons, rates
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import InputError, UnknownNameError
from trainplan.specs.scenario import Scenario, scenario_from_mapping

SPEC = spec_from_config(LLAMA_8B, "l8b")
MATMUL = 32 * (41_943_040 + 176_160_768)  # layer matrices per token (each used once)
HEAD = 128256 * 4096


def run(**fields: Any) -> Any:
    return estimate(Scenario(model="x", **fields), model=SPEC)


def test_flops_per_token_by_hand() -> None:
    # forward: 2 x matmul params + 2 x head + attention 2 x heads x (s/2) x (d_qk + d_v) per layer
    attention = 32 * 2 * 32 * (2048 / 2) * (128 + 128)
    full = flops_per_token(SPEC, 2048, frozen_base=False, lora_params=0, checkpointing="none")
    assert full.total == 6 * (MATMUL + HEAD) + 3 * attention
    # full checkpointing re-runs the layers' forward: + 2 x matmul + attention
    ckpt = flops_per_token(SPEC, 2048, frozen_base=False, lora_params=0, checkpointing="full")
    assert ckpt.total - full.total == 2 * MATMUL + attention
    # LoRA: no weight gradients for the frozen base (4N), adapters 6 x their params
    lora = flops_per_token(SPEC, 2048, frozen_base=True, lora_params=6_815_744, checkpointing="none")
    assert lora.total == 4 * (MATMUL + HEAD) + 3 * attention + 6 * 6_815_744
    # PaLM's MFU convention: 6N + 12 L H Q T (unmasked) with T = 2048
    assert full.palm_model_flops == 6 * (MATMUL + HEAD) + 12 * 32 * 32 * 128 * 2048


def test_roofline_with_given_mfu() -> None:
    # time per step = global tokens x FLOPs/token / (GPUs x peak x MFU); nothing added
    result = run(method="full", mfu=0.5, gpus=8, zero_stage=3, micro_batch=2, grad_accum=4)
    time = result.time
    tokens = 2 * 2048 * 4 * 8
    peak = find_gpu("H100-SXM").dense_flops_per_s["bf16"]
    assert time.step.total == pytest.approx(tokens * time.flops.total / (8 * peak * 0.5))
    assert time.step.data_parallel_comm == 0
    assert time.hfu == pytest.approx(0.5)
    assert time.mfu < time.hfu  # model FLOPs exclude the recompute of checkpointing


def test_own_model_adds_overheads() -> None:
    result = run(method="full", gpus=64, zero_stage=1, pipeline_parallel=4, tensor_parallel=2, grad_accum=8)
    step = result.time.step
    assert step.pipeline_bubble == pytest.approx(step.compute * 3 / 8)
    assert step.data_parallel_comm > 0 and step.tensor_parallel_comm > 0
    assert step.total == pytest.approx(
        step.compute + step.pipeline_bubble + step.data_parallel_comm + step.tensor_parallel_comm
    )
    assert result.time.mfu < 0.45


def test_collective_formulas() -> None:
    assert ring_allreduce_seconds(8e9, 8, 1e11) == pytest.approx(2 * 7 / 8 * 8e9 / 1e11)
    assert ring_allreduce_seconds(8e9, 1, 1e11) == 0
    assert pipeline_bubble_seconds(10.0, 4, 16) == pytest.approx(10.0 * 3 / 16)


def test_cost_energy_load_formulas() -> None:
    assert cost_usd(100, 2.95, 0.6) == pytest.approx(118.0)
    assert gpu_power_w(700, 0.3, 1.0) == 700
    assert gpu_power_w(700, 0.3, 0.0) == pytest.approx(210)
    # 8 GPUs x 700 W x 1 h x 1.3 host x 1.2 PUE = 8.736 kWh
    assert energy_kwh(700, 8, 3600, 0.3, 1.2) == pytest.approx(8.736)
    assert co2e_kg(1000, 400) == 400
    # 16 GB over min(7 GB/s NVMe, 8 x 25 GB/s PCIe) = 16/7 s; one stream: min(100, 25) GB/s
    assert 16e9 / load_bandwidth(7e9, 7e9, 25e9, 8, True) == pytest.approx(16 / 7)
    assert 16e9 / load_bandwidth(100e9, 100e9, 25e9, 8, False) == pytest.approx(16 / 25)
    # a ZeRO-3 checkpoint read by 16 GPUs on nodes of 8: each node its half; one node, all
    assert node_share(True, 16, 8) == 0.5
    assert node_share(True, 8, 8) == 1.0 and node_share(False, 16, 8) == 1.0


def test_checkpoint_writes_are_one_every_interval_and_one_at_the_end() -> None:
    """transformers' Trainer saves at every multiple of save_steps, and the final model at the
    end: 1,000 steps at 500 write at 500 and 1,000; 1,001 a third at the end; 10 only the end."""
    assert checkpoint_writes(1000, 500) == 2
    assert checkpoint_writes(1001, 500) == 3
    assert checkpoint_writes(10, 500) == 1
    # 0: one write at the end of each epoch (torchtune's recipes save once per epoch)
    assert checkpoint_writes(1000, 0) == 1 and checkpoint_writes(1000, 0, 3) == 3
    per_epoch = run(checkpoint_every=0, dataset_tokens=1e7, epochs=2.5)
    assert per_epoch.time.fixed.checkpoint_writes == 3  # epochs 1, 2 and the half third
    assert run(checkpoint_every=0, train_tokens=1e7).time.fixed.checkpoint_writes == 1


def test_fixed_time_and_cost_by_hand() -> None:
    """A full fine-tune of Llama-3.1-8B (8,030,261,248 parameters) on 16 H100s in two nodes with
    FSDP: the weights load at 2 bytes each, each node its half at the NVMe's 7 GB/s; a
    checkpoint holds the fp32 master and two AdamW moments (12 bytes per parameter: FSDP's fp32
    shard is the weight itself), each node writing its half at the same rate, once every 250
    of 1,000 steps; launch as given. The fixed time's GPU-hours cost the same rate, and the GPUs
    draw their idle power (H100 SXM: 70 W measured) through it."""
    params = 8_030_261_248
    result = run(method="full", gpus=16, zero_stage=3, steps=1000, checkpoint_every=250, launch_s=60, mfu=0.4)
    fixed = result.time.fixed
    assert fixed.load_s == pytest.approx(params * 2 * 0.5 / 7e9)
    assert fixed.checkpoint_bytes == params * 12
    assert fixed.checkpoint_writes == 4
    assert fixed.checkpoints_s == pytest.approx(4 * params * 12 * 0.5 / 7e9)
    assert fixed.launch_s == 60
    assert result.time.fixed_s == pytest.approx(60 + params * (1 + 24) / 7e9)
    assert result.time.run_s == pytest.approx(result.time.total_s + result.time.fixed_s)
    rate = rates()["H100 SXM 80GB"].usd_per_gpu_hour
    assert result.cost.fixed_usd == pytest.approx(result.time.fixed_s * 16 / 3600 * rate)
    assert result.cost.run_usd == pytest.approx(result.cost.usd + result.cost.fixed_usd)
    assert result.energy.fixed_kwh == pytest.approx(70 * 16 * result.time.fixed_s * 1.3 * 1.2 / 3.6e6)
    # a LoRA checkpoint is the adapters (fp32, as peft keeps them: no separate master) and
    # their two fp32 moments, 12 bytes per adapter parameter: no frozen base is written
    lora = run(steps=1000)
    assert lora.time.fixed.checkpoint_bytes == lora.params.trainable * (4 + 2 * 4)


def test_cost_and_energy_end_to_end() -> None:
    result = run(method="full", mfu=0.4, gpus=8, zero_stage=3, train_tokens=1e9, region="FR")
    time, cost, energy = result.time, result.cost, result.energy
    assert cost.usd == pytest.approx(time.gpu_hours * rates()["H100 SXM 80GB"].usd_per_gpu_hour)
    assert cost.usd_per_million_tokens == pytest.approx(cost.usd / 1e3)
    # given mfu: every second is compute, so utilisation 1 and the GPU draws its TDP
    assert energy.gpu_power_w == 700
    assert energy.kwh == pytest.approx(700 * 8 * time.total_s * 1.3 * 1.2 / 3.6e6)
    assert energy.co2e_kg == pytest.approx(energy.kwh * 44.2 / 1000)


def test_idle_draw_is_the_gpus_measured_one_where_the_data_has_it() -> None:
    """gpus.yaml measures H100 SXM idle at 70 W of its 700 W TDP (nvidia-smi midpoint, data-sources
    5.1): idle fraction 0.10. H100 PCIe has no measurement: energy.yaml's 0.30 default. A given
    idle_fraction wins over both. Power is TDP x (idle + (1 - idle) x utilisation)."""
    sxm = run(gpu="H100 SXM 80GB", gpus=4, pipeline_parallel=4, train_tokens=1e9)
    assert sxm.energy.idle_fraction == pytest.approx(70 / 700)
    utilisation = sxm.time.step.compute / sxm.time.step.total
    assert 0 < utilisation < 1
    assert sxm.energy.gpu_power_w == pytest.approx(700 * (0.1 + 0.9 * utilisation))
    pcie = run(gpu="H100 PCIe 80GB", gpus=4, pipeline_parallel=4, train_tokens=1e9)
    assert find_gpu("H100 PCIe 80GB").idle_w is None and pcie.energy.idle_fraction == 0.3
    given = run(gpu="H100 SXM 80GB", gpus=4, pipeline_parallel=4, train_tokens=1e9, idle_fraction=0.25)
    assert given.energy.idle_fraction == 0.25
    assert given.energy.gpu_power_w == pytest.approx(700 * (0.25 + 0.75 * utilisation))


def test_planner_energy_uses_each_gpus_idle_draw() -> None:
    """The planner's kWh for a plan on a measured GPU and on an unmeasured one equal estimate()'s."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    base = scenario_from_mapping({"model": "Qwen2.5-0.5B", "train_tokens": 1e8})
    request = PlanRequest(
        base=base, gpu_types=("H100 SXM 80GB", "H100 PCIe 80GB"), gpu_counts=(1,), max_gpus=1,
        micro_batches=(4,), tensor_parallel=(1,), pipeline_parallel=(1,), zero_stages=(0,),
        checkpointing=(base.activation_checkpointing,), offloads=("none",), target_global_sequences=4,
        objective="energy", top_k=2,
    )  # fmt: skip
    result = plan(request)
    assert {item.scenario.gpu for item in result.plans} == {"H100 SXM 80GB", "H100 PCIe 80GB"}
    for item in result.plans:
        assert item.kwh == pytest.approx(item.estimate.energy.run_kwh, rel=1e-9)


def test_budget_forms() -> None:
    global_tokens = 1 * 2048 * 16
    # with a given MFU, a step is its FLOPs (recompute included) at that share of the GPU's bf16
    # peak: 100 steps x 32,768 tokens x FLOPs per token / (0.5 x 989.4 TFLOP/s)
    timed = run(steps=100, mfu=0.5, method="full", activation_checkpointing="none").time
    per_token = flops_per_token(SPEC, 2048, frozen_base=False, lora_params=0, checkpointing="none").total
    peak = find_gpu("H100 SXM 80GB").dense_flops_per_s["bf16"]
    assert peak is not None
    assert timed.total_s == pytest.approx(100 * global_tokens * per_token / (0.5 * peak))
    epochs = run(dataset_tokens=1e8, epochs=3).time
    assert epochs.train_tokens == 3e8 and epochs.steps == -(-3e8 // global_tokens)
    assert run().time.train_tokens == 2e9


def test_own_rate_and_no_rate() -> None:
    assert run(usd_per_gpu_hour=1.0, mfu=0.5).cost.usd == pytest.approx(run(mfu=0.5).time.gpu_hours)
    no_rate = run(gpu="H20 96GB")
    assert no_rate.cost.usd is None and "usd_per_gpu_hour" in no_rate.cost.rate_source
    assert no_price_reasons()["H20 96GB"] in no_rate.cost.rate_source


scenarios = st.builds(
    Scenario,
    model=st.just("x"),
    method=st.sampled_from(["full", "lora", "qlora"]),
    micro_batch=st.integers(1, 4),
    grad_accum=st.integers(1, 8),
    gpus=st.sampled_from([1, 2, 8, 16, 64]),
    zero_stage=st.integers(0, 3),
    mfu=st.floats(0.1, 0.9),
    pricing=st.sampled_from(["on-demand", "committed", "spot"]),
)


@settings(max_examples=50, deadline=None)
@given(scenarios)
def test_more_gpus_never_slower_at_fixed_mfu(scenario: Scenario) -> None:
    base = estimate(scenario, model=SPEC).time.total_s
    doubled = estimate(dataclasses.replace(scenario, gpus=scenario.gpus * 2), model=SPEC).time.total_s
    assert doubled <= base * (1 + 1e-9)


@settings(max_examples=50, deadline=None)
@given(scenarios, st.floats(1e8, 1e11))
def test_time_proportional_to_tokens(scenario: Scenario, tokens: float) -> None:
    one = estimate(dataclasses.replace(scenario, steps=1000), model=SPEC).time.total_s
    two = estimate(dataclasses.replace(scenario, steps=2000), model=SPEC).time.total_s
    assert two == pytest.approx(2 * one)


@settings(max_examples=50, deadline=None)
@given(scenarios)
def test_spot_le_committed_le_on_demand(scenario: Scenario) -> None:
    usd = {
        plan: estimate(dataclasses.replace(scenario, pricing=plan), model=SPEC).cost.usd
        for plan in ("on-demand", "committed", "spot")
    }
    assert usd["spot"] <= usd["committed"] <= usd["on-demand"]


@pytest.mark.parametrize(
    ("data", "field", "text"),
    [
        ({"mfu": 0}, "mfu", "between 0.001 and 1 (got 0)"),
        ({"mfu": 1.5}, "mfu", "between 0.001 and 1 (got 1.5)"),
        ({"spot_discount": 1.2}, "spot_discount", "between 0 and 0.99"),
        ({"pue": 0.9}, "pue", "between 1 and 3"),
        ({"steps": 10, "train_tokens": 1e9}, "train_tokens", "one training budget"),
        ({"pricing": "reserved"}, "pricing", "on-demand, committed, spot"),
    ],
)
def test_bad_runtime_inputs(data: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping(data)
    assert error.value.field == field and text in str(error.value)


def test_tensor_parallel_beyond_the_fast_link_is_refused_where_the_gpu_is_known() -> None:
    """The limit is the node or the GPU's scale-up domain, so the parser, which does not resolve
    the GPU, accepts the layout and estimate() refuses it, naming the field."""
    scenario = scenario_from_mapping({"tensor_parallel": 16, "gpus": 16})
    with pytest.raises(InputError) as error:
        estimate(scenario)
    assert error.value.field == "tensor_parallel" and "gpus_per_node" in str(error.value)


def test_unknown_region_and_load_source() -> None:
    with pytest.raises(UnknownNameError) as error:
        run(region="us-east-9")
    assert "us-east-1" in error.value.suggestions
    with pytest.raises(UnknownNameError):
        run(load_source="floppy")
    assert run(load_source="2.5").load.bandwidth_bytes_per_s == 2.5e9


@pytest.mark.parametrize(
    ("model", "gpu", "kind", "expected"),
    [
        # the architecture's figure (terms/timing.py) times the kind's fitted factor
        ("SD-1.5", "H100 SXM 80GB", "unet", 0.47 * 0.67),
        ("Wan2.1-T2V-1.3B", "A100 80GB SXM4", "video", 0.58 * 0.70),
        ("V-JEPA-2-ViT-L", "H100 SXM 80GB", "jepa", 0.47 * 0.43),
        ("I-JEPA-ViT-H-14", "A100 80GB SXM4", "jepa", 0.58 * 0.43),
        # no factor: the language models' figure
        ("FLUX.1-dev", "H100 SXM 80GB", "diffusion-transformer", 0.47),
        ("Qwen2.5-0.5B", "H100 SXM 80GB", "llm", 0.47),
    ],
)
def test_efficiency_per_model_kind(model: str, gpu: str, kind: str, expected: float) -> None:
    from trainplan.engine.terms.timing import efficiency_kind
    from trainplan.inputs.resolve import resolve_model

    assert efficiency_kind(resolve_model(model)) == kind
    result = estimate(Scenario(model=model, gpu=gpu, method="lora"))
    assert result.time is not None
    assert result.time.efficiency == pytest.approx(expected, rel=1e-12)
    calibrated = [w for w in result.warnings if "fitted to few published training runs" in w]
    uncalibrated = [w for w in result.warnings if "not yet calibrated" in w]
    assert (len(calibrated), len(uncalibrated)) == {
        "unet": (1, 0), "video": (1, 0), "diffusion-transformer": (0, 1), "jepa": (1, 0), "llm": (0, 0)
    }[kind]  # fmt: skip
    given = estimate(Scenario(model=model, gpu=gpu, method="lora", mfu=0.3))
    assert given.time is not None and given.time.efficiency == 0.3
    assert not [w for w in given.warnings if "calibrated" in w or "fitted" in w]


def test_planner_uses_the_unet_efficiency_of_estimate() -> None:
    """The planner's step time for a UNet comes from the same per-kind efficiency as estimate()."""
    from trainplan.engine.plan import plan
    from trainplan.engine.plan_request import PlanRequest

    base = scenario_from_mapping({"model": "SD-1.5", "method": "lora", "train_samples": 10_000})
    result = plan(PlanRequest(base=base, objective="time", max_gpus=2, gpu_types=("H100 SXM",)))
    assert result.plans
    for found in result.plans:
        assert found.estimate.time is not None
        assert found.estimate.time.efficiency == pytest.approx(0.47 * 0.67, rel=1e-12)
        assert found.total_s == pytest.approx(found.estimate.time.run_s, rel=1e-9)
