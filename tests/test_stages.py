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
    memory phase is the SFT step's through the same fused log-prob head at twice the
    micro-batch (the same tokens)."""
    dpo = estimate(dataclasses.replace(BASE, stage="dpo"))
    sft = estimate(dataclasses.replace(BASE, micro_batch=4, loss="logprob"))
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
    sft = estimate(dataclasses.replace(BASE, loss="logprob"))
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
        ({"stage": "grpo", "reference": "precomputed"}, "reference", "each generation batch"),
        ({"stage": "dpo", "generations": 4}, "generations", "the stage here is dpo"),
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


def test_reward_model_trades_the_lm_head_for_one_score() -> None:
    """TRL's RewardTrainer trains AutoModelForSequenceClassification(num_labels=1): Llama-3.1-8B
    loses its untied 128,256 x 4,096 LM head and gains a 1 x 4,096 score (no bias); a tied
    model (Llama-3.2-1B) keeps its embedding and gains the score."""
    untied = estimate(dataclasses.replace(BASE, stage="rm", method="full"))
    sft = estimate(dataclasses.replace(BASE, method="full"))
    assert sft.params.total - untied.params.total == 128_256 * 4_096 - 4_096
    assert untied.params.head == 4_096
    tied = estimate({"model": "Llama-3.2-1B", "stage": "rm", "method": "full"})
    assert tied.params.total == estimate({"model": "Llama-3.2-1B", "method": "full"}).params.total + 2_048
    assert untied.batch.sequences_per_sample == 2
    assert not any("one-score" in note for note in untied.warnings)


def test_reward_model_has_no_vocabulary_logits() -> None:
    """The score head's logits are one value per token: the loss side holds no vocab-wide
    tensor, so the step's peak falls by at least the standard loss's fp32 log-softmax
    (4 bytes x 128,256 x 2 x 2 x 1,024 tokens)."""
    rm = estimate(dataclasses.replace(BASE, stage="rm", loss="standard"))
    sft = estimate(dataclasses.replace(BASE, micro_batch=4))
    assert sft.peak.total - rm.peak.total >= 4 * 128_256 * 4 * 1024


def test_preference_stages_default_to_trls_fused_head() -> None:
    """DPO, KTO, ORPO and SimPO score through TRL's fused log-prob head unless a loss is given;
    sft, pt and rm keep the standard loss; a reward model refuses an LM-head loss."""
    from trainplan.specs.stages import resolved_loss

    for stage, loss in (("dpo", "logprob"), ("kto", "logprob"), ("orpo", "logprob"), ("sft", "standard")):
        assert resolved_loss(dataclasses.replace(BASE, stage=stage)) == loss
    assert resolved_loss(dataclasses.replace(BASE, stage="dpo", loss="fused")) == "fused"
    with pytest.raises(InputError) as error:
        estimate(dataclasses.replace(BASE, stage="rm", loss="fused"))
    assert error.value.field == "loss"


def test_measured_mode_traces_a_preference_stage_on_one_gpu_only() -> None:
    from trainplan.engine.measure.compare import check_traceable

    check_traceable(dataclasses.replace(BASE, stage="dpo", gpus=1))  # traced, TRL's step
    with pytest.raises(InputError) as error:
        check_traceable(dataclasses.replace(BASE, stage="dpo", method="full", gpus=8, zero_stage=3))
    assert error.value.field == "stage"
    with pytest.raises(InputError) as error:
        check_traceable(dataclasses.replace(BASE, stage="dpo", gpus=1, loss="fused"))
    assert error.value.field == "loss"
    # TRL 1.10 and before scored the full logits (selective); no trainer runs Hugging Face's loss
    check_traceable(dataclasses.replace(BASE, stage="dpo", gpus=1, loss="selective"))
    with pytest.raises(InputError) as error:
        check_traceable(dataclasses.replace(BASE, stage="dpo", gpus=1, loss="standard"))
    assert error.value.field == "loss"


def test_trl_fused_head_bytes_by_hand() -> None:
    """TRL 1.16.0 ChunkedLogProbFunction on Qwen2.5-0.5B (hidden 896, vocab 151,936) under
    amp-bf16 (fp32 hidden states and head, bf16 compute): it saves its fp32 input copy (4 x 896
    per token), holds 7 fp32 statistics + int64 targets + a bool mask + fp32 log-probs and
    log-normaliser while it runs (28 + 8 + 1 + 8), accumulates an fp32 input gradient in
    backward (4 x 896 + fp32 incoming gradient 4 + saved 13), and allocates per call a 4,096 x
    32,768 bf16 logits tile, a bf16 cast of 4,096 rows of its input, and a bf16 cast of a
    32,768-row tile of the fp32 head."""
    from trainplan.engine.terms.memory import logprob_head_bytes

    head = logprob_head_bytes(896, 151_936, compute_bytes=2, hidden_bytes=4, head_weight_bytes=4)
    assert head.saved == head.held == 4 * 896
    assert head.loss == 45
    assert head.backward == 4 * 896 + 17
    assert head.tile_tokens == 4096
    assert head.tile_per_token == 2 * (32_768 + 896)
    assert head.tile_fixed == 2 * 32_768 * 896
    # a bf16 head and bf16 hidden states need no casts; a vocabulary under one tile is one tile
    small = logprob_head_bytes(4096, 32_000, compute_bytes=2, hidden_bytes=2, head_weight_bytes=2)
    assert (small.tile_per_token, small.tile_fixed) == (2 * 32_000, 0)


def test_fused_head_tiles_stop_growing_at_4096_tokens() -> None:
    """The tile buffers are sized by min(tokens, 4,096): past 4,096 tokens per micro-batch a
    LoRA DPO step's loss-side bytes grow by the per-token terms only. Llama-3.1-8B LoRA over a
    bf16 base: bf16 hidden states (no input cast), a 32,768-column bf16 tile."""
    spec = resolve_model("Llama-3.1-8B")
    c = coefficients(spec, dataclasses.replace(BASE, stage="dpo"))
    assert c.loss.tile_tokens == 4096
    assert c.loss.tile_per_token == 2 * 32_768
    assert c.loss.tile_fixed == 0  # the frozen head is bf16 already

    def loss_bytes(pairs: int) -> float:
        result = estimate(dataclasses.replace(BASE, stage="dpo", micro_batch=pairs))
        return next(p for p in result.phases if p.name == "forward").values[4]  # the logits term

    # 1 -> 2 pairs (2,048 -> 4,096 tokens): the tile grows with the tokens; 4 -> 8 pairs
    # (8,192 -> 16,384): only the per-token statistics do
    assert loss_bytes(2) - loss_bytes(1) == pytest.approx(2048 * (c.loss.logits_loss + 2 * 32_768))
    assert loss_bytes(8) - loss_bytes(4) == pytest.approx(8192 * c.loss.logits_loss)


def test_the_console_names_the_stage_and_the_reference_share() -> None:
    """`trainplan estimate` text: the stage in the title, the frozen copy's GiB under weights
    (Llama-3.1-8B full DPO on 8 GPUs under ZeRO-3: 8,030,261,248 x 2 bytes / 8)."""
    from rich.console import Console

    from trainplan.interfaces.cli.console import print_estimate

    console = Console(record=True, width=120)
    print_estimate(
        estimate({"model": "Llama-3.1-8B", "method": "full", "stage": "dpo", "gpus": 8, "zero_stage": 3}),
        console,
    )
    text = console.export_text()
    assert "Llama-3.1-8B — DPO, full, bf16-mixed" in text
    row = next(line for line in text.splitlines() if "of it the frozen reference model" in line)
    assert f"{8_030_261_248 * 2 / 8 / 2**30:,.2f}" in row
    sft = Console(record=True, width=120)
    print_estimate(estimate({"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3}), sft)
    assert "reference" not in sft.export_text()


def test_full_logits_scoring_of_trl_1_10_by_hand() -> None:
    """DPO as TRL 1.10 and before scored it (selective_log_softmax over the full logits), per
    token and vocabulary entry: under amp the fp32 logits with their 16-bit source (6), with the
    reference's pass after the policy's (4 + 2 + 4 = 10), backward 4 held + 12; pure bf16 the
    logits and the rows' log-softmax (4), the reference's logits (+ 2), backward 2 + 2."""
    from trainplan.engine.terms.memory import selective_logits_bytes

    v = 128_256
    assert selective_logits_bytes(v, 2048, 2, upcast=True, reference_after=True) == (
        4096.0,
        10.0 * v,
        16.0 * v,
    )
    assert selective_logits_bytes(v, 2048, 2, upcast=True, reference_after=False)[1] == 6.0 * v
    assert selective_logits_bytes(v, 2048, 4, upcast=False, reference_after=True)[1] == 8.0 * v
    assert selective_logits_bytes(v, 2048, 2, upcast=False, reference_after=True) == (
        4096.0,
        6.0 * v,
        4.0 * v,
    )
    assert selective_logits_bytes(v, 2048, 2, upcast=False, reference_after=False)[1] == 4.0 * v
    # KTO's metric copies of the policy's logits: one more at the logits' dtype
    assert (
        selective_logits_bytes(v, 2048, 2, upcast=True, reference_after=True, metric_copies=True)[1]
        == 14.0 * v
    )
    assert (
        selective_logits_bytes(v, 2048, 2, upcast=False, reference_after=True, metric_copies=True)[1]
        == 8.0 * v
    )


def test_llama_factory_dpo_scoring_by_hand() -> None:
    """LLaMA-Factory's DPO trainer, per token and vocabulary entry: the policy's fp32 logits and
    their log-softmax (4 + 4), the reference's the same beside them (+ 8), backward 12."""
    from trainplan.engine.terms.memory import logsoftmax_logits_bytes

    v = 151_936
    assert logsoftmax_logits_bytes(v, 896, 2, reference_after=True) == (1792.0, 16.0 * v, 12.0 * v)
    assert logsoftmax_logits_bytes(v, 896, 2, reference_after=False)[1] == 8.0 * v
    assert logsoftmax_logits_bytes(v, 896, 4, reference_after=False)[1] == 8.0 * v
