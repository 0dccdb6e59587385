"""Preference and reward stages (specs/stages.py): the concatenated pair, the reference copy,
the reference's forwards and its precomputed pass, and the stage rules' errors.

Expected values are worked by hand from what TRL 1.16.0 runs (trl/trainer/dpo_trainer.py
DPOTrainer._compute_loss: chosen and rejected in one batch of 2 x micro_batch sequences, the
reference's no-grad forward on the same batch; kto_trainer.py: the policy's no-grad KL forward
and the reference on the completion and KL batches)."""

from __future__ import annotations

import dataclasses

import pytest

from trainplan.engine.estimate import estimate
from trainplan.engine.per_replica import coefficients
from trainplan.inputs.resolve import resolve_model
from trainplan.interfaces.text.phrasing import batch_line
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario

BASE = Scenario(model="Llama-3.1-8B", gpu="H100-SXM", micro_batch=2, seq_len=1024, grad_accum=4)


def _state(result: object, name: str) -> float:
    """A state's bytes; 0 where the estimate lists no such state (no reference copy)."""
    return next((term.value for term in result.states if term.name == name), 0.0)  # type: ignore[attr-defined]


def test_dpo_with_adapters_disabled_is_the_supervised_step_on_both_sequences() -> None:
    """LoRA DPO's default reference is the policy with adapters off: no second copy, so every
    memory phase is the SFT step's at twice the micro-batch (the same tokens)."""
    dpo = estimate(dataclasses.replace(BASE, stage="dpo"))
    sft = estimate(dataclasses.replace(BASE, micro_batch=4))
    assert dpo.assumptions["reference"] == "adapter"
    assert dpo.assumptions["reference_source"] == "trainer default"
    assert [p.total for p in dpo.phases] == [p.total for p in sft.phases]
    assert _state(dpo, "reference") == 0.0
    assert dpo.batch.global_tokens == 2 * 4 * 1 * 2 * 1024  # pairs x accum x replicas x 2 x seq


def test_full_dpo_reference_copy_is_every_parameter_in_the_trained_dtype() -> None:
    """A full fine-tune's reference is a frozen copy loaded as the policy is: bf16 under
    bf16-mixed (2 bytes per parameter), fp32 under amp-bf16 (4), sharded by ZeRO-3."""
    full = dataclasses.replace(BASE, method="full", stage="dpo")
    params = estimate(full).params.total
    for precision, width in (("bf16-mixed", 2), ("amp-bf16", 4)):
        result = estimate(dataclasses.replace(full, precision=precision))
        sft = estimate(dataclasses.replace(full, precision=precision, stage="sft", micro_batch=4))
        assert result.assumptions["reference"] == "model"
        assert _state(result, "reference") == params * width
        weights = [p.term("weights").value for p in (result.peak, sft.peak)]
        assert weights[0] - weights[1] == pytest.approx(params * width)
    sharded = estimate(dataclasses.replace(full, gpus=8, zero_stage=3))
    assert _state(sharded, "reference") == pytest.approx(params * 2 / 8)


def test_qlora_reference_copy_is_the_quantised_base() -> None:
    """TRL loads ref_model with the policy's quantization_config: the copy is the NF4 base."""
    scenario = dataclasses.replace(BASE, method="qlora", stage="dpo", reference="model")
    coeffs = coefficients(resolve_model(scenario.model), scenario)
    assert coeffs.reference.resident_bytes == coeffs.states.frozen_weight_bytes
    bf16 = dataclasses.replace(scenario, reference_weights="bf16")
    assert estimate(bf16).assumptions["reference_weight_bytes"] == estimate(bf16).params.total * 2


def test_reference_forward_time_is_the_forward_share_of_the_step() -> None:
    """bf16 on an H100 runs attention and linears at one rate, so the reference's forward over
    the same tokens takes compute x forward FLOPs / training FLOPs; KTO runs three forwards (the
    policy's KL batch, the reference's completion and KL batches) over the trained tokens."""
    for stage, forwards in (("dpo", 1), ("kto", 3)):
        result = estimate(dataclasses.replace(BASE, stage=stage, method="full"))
        flops = result.time.flops
        forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
        step = result.time.step
        assert step.reference_forward == pytest.approx(step.compute * forwards * forward / flops.total)


def test_precomputed_reference_is_one_pass_before_training() -> None:
    """Precomputed log-probs: no copy and no per-step forward; one pass over the trained tokens
    before training, as long as the per-step forward of a reference copy summed over the steps'
    tokens."""
    model = estimate(dataclasses.replace(BASE, stage="dpo", method="full"))
    pre = estimate(dataclasses.replace(BASE, stage="dpo", method="full", reference="precomputed"))
    assert _state(pre, "reference") == 0.0
    assert pre.time.step.reference_forward == 0.0
    per_token = model.time.step.reference_forward / model.batch.global_tokens
    assert pre.time.fixed.reference_precompute_s == pytest.approx(per_token * pre.time.train_tokens)
    assert pre.time.fixed_s > model.time.fixed_s


def test_kto_trains_one_sequence_per_example() -> None:
    kto = estimate(dataclasses.replace(BASE, stage="kto"))
    sft = estimate(BASE)
    assert [p.total for p in kto.phases] == [p.total for p in sft.phases]
    assert kto.batch.global_tokens == sft.batch.global_tokens


def test_batch_line_names_pairs() -> None:
    line = batch_line(estimate(dataclasses.replace(BASE, stage="orpo")).batch)
    assert "2 micro pairs" in line and "x 2 x 1,024 seq" in line


@pytest.mark.parametrize(
    ("changes", "field", "phrase"),
    [
        ({"stage": "dpo", "method": "full", "reference": "adapter"}, "reference", "no adapters"),
        ({"stage": "orpo", "reference": "model"}, "reference", "uses no reference"),
        ({"stage": "sft", "reference": "precomputed"}, "reference", "uses no reference"),
        ({"stage": "dpo", "reference": "none"}, "reference", "give model, precomputed or adapter"),
        ({"stage": "dpo", "reference_weights": "nf4"}, "reference_weights", "reference here is adapter"),
        ({"stage": "grpo"}, "stage", "grpo"),
    ],
)
def test_stage_rules_name_the_field(changes: dict[str, str], field: str, phrase: str) -> None:
    with pytest.raises(InputError) as error:
        estimate({"model": "Llama-3.1-8B", **changes})
    assert error.value.field == field
    assert phrase in str(error.value)


def test_stage_on_a_diffusion_model_is_refused() -> None:
    with pytest.raises(InputError) as error:
        estimate({"model": "FLUX.1-dev", "stage": "dpo"})
    assert error.value.field == "stage"


def test_reward_model_says_its_head_is_not_modelled() -> None:
    result = estimate(dataclasses.replace(BASE, stage="rm"))
    assert any("one-score head" in note for note in result.warnings)
    assert result.batch.sequences_per_sample == 2


def test_measured_mode_refuses_a_preference_stage() -> None:
    from trainplan.engine.measure.compare import check_traceable

    with pytest.raises(InputError) as error:
        check_traceable(dataclasses.replace(BASE, stage="dpo"))
    assert error.value.field == "stage"
