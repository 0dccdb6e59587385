"""Measured mode on PPO's training round (measure/preference.py `_ppo_step`): one micro-step of
huggingface/trl@f2cd5771's PPOTrainer, the policy and the value model trained as one
PolicyAndValueWrapper, the reward model and the reference copy frozen.

Skipped when the `measure` extra (torch, transformers, peft, trl, accelerate) is not installed."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("trl")
pytest.importorskip("accelerate")

import torch
from configs import TINY_LLAMA

from trainplan.engine.measure import measure_training_step
from trainplan.engine.measure.compare import check_traceable
from trainplan.engine.measure.preference import PolicyAndValueWrapper, selective_log_softmax_f2cd5771
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)

# TINY_LLAMA with a vocabulary large enough that the logits stand out: hidden 64,
# intermediate 128, 2 layers, 4 heads of 16 (2 KV), untied
VOCAB = 4096
CONFIG = {**TINY_LLAMA, "vocab_size": VOCAB}
EMBED = HEAD = VOCAB * 64
LAYER = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64  # q, o; k, v; gate, up, down; 2 norms
POLICY = EMBED + HEAD + 2 * LAYER + 64
VALUE = EMBED + 2 * LAYER + 64 + 64  # the one-label score head (64 x 1, no bias) for the LM head
ROWS, SEQ, COMPLETION = 2, 64, 48
MIB = 2**20


def _ppo(**kwargs: Any) -> Any:
    return measure_training_step(
        CONFIG,
        stage="ppo",
        loss="selective",
        micro_batch=ROWS,
        seq_len=SEQ,
        completion_len=COMPLETION,
        **kwargs,
    )


@pytest.fixture(scope="module")
def full_amp() -> Any:
    return _ppo(
        method="full", precision="amp-bf16", reference="model", reference_dtype="fp32", reward_dtype="fp32"
    )


def test_the_value_model_trains_beside_the_policy(full_amp: Any) -> None:
    """One optimizer over the wrapper: the policy's and the value model's weights are trained,
    fp32 AdamW moments for both (8 bytes each); the reference and reward copies are weights
    only, fp32 here."""
    assert full_amp.trainable_params == full_amp.total_params == POLICY + VALUE
    assert full_amp.model_class == "PolicyAndValueWrapper(LlamaForCausalLM, LlamaForSequenceClassification)"
    assert full_amp.optimizer_bytes == pytest.approx(8 * (POLICY + VALUE), rel=0.01)
    frozen = 4 * (POLICY + VALUE)  # the reference copy of the policy, the reward model of the value's shape
    assert full_amp.params_bytes == pytest.approx(4 * (POLICY + VALUE) + frozen, rel=0.01)


def test_lora_adapts_the_policy_only() -> None:
    """With LoRA the value model is still fully trained (PPOTrainer runs get_peft_model on the
    policy only); reference adapter adds no weights, the reward model does."""
    lora = _ppo(method="lora", precision="bf16", reference="adapter", lora_targets=("q_proj", "v_proj"))
    adapters = 2 * (16 * 64 + 64 * 16 + 16 * 64 + 32 * 16)  # A and B of q and v, 2 layers
    assert lora.trainable_params == VALUE + adapters
    assert lora.total_params == POLICY + VALUE + adapters
    assert lora.model_class == "PolicyAndValueWrapper(PeftModelForCausalLM, LlamaForSequenceClassification)"


def test_the_fp32_logits_and_the_generation_scores_are_at_the_peak(full_amp: Any) -> None:
    """Under amp, accelerate's conversion copies the policy's full [rows, seq_len, vocab] logits
    to fp32, and the rollout's fp32 generation scores [rows, completion_len, vocab] stay resident."""
    top = " | ".join(full_amp.peak_top_tensors)
    assert f"float32[{ROWS}, {SEQ}, {VOCAB}] _to_copy.default" in top
    assert f"float32[{ROWS}, {COMPLETION}, {VOCAB}] zeros.default" in top


def test_the_outputs_live_through_the_optimizer_step(full_amp: Any) -> None:
    """The entropy runs after optimizer.step with `output` still referenced: the optimizer
    phase holds the fp32 logits and the generation scores as activations, and the entropy's
    softmax and product of the completion's logits as temporaries."""
    logits = 4 * ROWS * SEQ * VOCAB
    scores = 4 * ROWS * COMPLETION * VOCAB
    optimizer = full_amp.phase_breakdowns_bytes["step2.optimizer"]
    assert optimizer["activations"] >= logits + scores
    assert full_amp.phase_peaks_bytes["step2.optimizer"] > full_amp.params_bytes + full_amp.optimizer_bytes


def test_selective_log_softmax_matches_the_naive_gather() -> None:
    """f2cd5771's selective_log_softmax: its fp32 logsumexp path and its bf16 per-row
    log-softmax path give log_softmax then gather."""
    logits = torch.randn(3, 5, 11)
    index = torch.randint(0, 11, (3, 5))
    naive = torch.gather(logits.log_softmax(-1), -1, index.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(selective_log_softmax_f2cd5771(logits, index), naive, atol=1e-6)
    low = selective_log_softmax_f2cd5771(logits.bfloat16(), index)
    assert low.dtype == torch.bfloat16
    assert torch.allclose(low.float(), naive, atol=0.1)


def test_the_wrapper_returns_the_policy_output_and_the_values() -> None:
    """PolicyAndValueWrapper.forward: the value model's backbone and score head, then the policy."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    raw = dict(TINY_LLAMA)
    config = AutoConfig.for_model(raw.pop("model_type"), **raw, num_labels=1, pad_token_id=0)
    wrapper = PolicyAndValueWrapper(
        AutoModelForCausalLM.from_config(config), AutoModelForSequenceClassification.from_config(config)
    )
    ids = torch.randint(1, 256, (2, 7))
    output, values = wrapper(
        input_ids=ids, attention_mask=ids != 0, return_dict=True, output_hidden_states=True
    )
    assert output.logits.shape == (2, 7, 256)
    assert values.shape == (2, 7, 1)
    assert len(output.hidden_states) == 3


def test_a_ppo_scenario_is_traceable_with_its_own_loss() -> None:
    base = {"model": "Qwen2.5-0.5B", "stage": "ppo", "micro_batch": 2, "seq_len": 512}
    check_traceable(scenario_from_mapping({**base, "method": "full"}))
    check_traceable(scenario_from_mapping({**base, "method": "lora", "precision": "amp-bf16"}))
    with pytest.raises(InputError, match="ppo is traced with selective"):
        measure_training_step(
            CONFIG, stage="ppo", loss="logprob", micro_batch=1, seq_len=16, completion_len=8
        )
