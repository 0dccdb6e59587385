"""Training stages: what a preference or reward stage runs beside the supervised step.

The stage names are LLaMA-Factory's `stage` values where it has one (pt, sft, rm, dpo, kto;
src/llamafactory/hparams/finetuning_args.py) and TRL's trainers' for ORPO and SimPO (TRL's
CPOTrainer with `loss_type: simpo`). What each stage runs is read from TRL 1.16.0:

- dpo (trl/trainer/dpo_trainer.py `DPOTrainer._compute_loss`): chosen and rejected run as one
  concatenated batch of 2 x micro_batch sequences, then the reference scores the same batch under
  no_grad, after the policy's forward, while its activations are held.
- kto (trl/trainer/kto_trainer.py `KTOTrainer._compute_loss`): unpaired examples; a KL batch of
  mismatched prompt/completion pairs of the same size is scored by the policy under no_grad, and
  the reference scores both batches.
- orpo, simpo: paired like DPO, no reference (trl/experimental/orpo, trl/experimental/cpo).
- rm (trl/trainer/reward_trainer.py `RewardTrainer.compute_loss`): paired; a sequence-
  classification model whose head is one score per token, pooled per sequence.
- grpo (trl/trainer/grpo_trainer.py): completions generated per prompt (specs/rollout.py), scored
  under no_grad before training (the reference's log-probs when `beta` > 0, and with vLLM the
  policy's own "old" log-probs for its importance-sampling correction), then trained one
  sequence per example through the fused log-prob head.

Where the reference log-probs come from (`reference`):
- model: a frozen copy of the policy, kept on every GPU as the policy's weights are.
- adapter: the policy with its adapters disabled (TRL's default for a peft policy without a
  `ref_model`): no second copy.
- precomputed: `precompute_ref_log_probs`: one pass over the data before training.
- none: ORPO, SimPO, reward models, supervised stages, and GRPO's default (`beta` 0).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec, derived

STAGES = ("sft", "pt", "rm", "dpo", "kto", "orpo", "simpo", "grpo", "ppo")
REFERENCES = ("model", "precomputed", "adapter", "none")
#: Stages whose micro-batch counts chosen/rejected pairs, run as 2 x micro_batch sequences.
PAIRED_STAGES = frozenset({"rm", "dpo", "orpo", "simpo"})
#: Stages that compare against a reference model's log-probs.
REFERENCE_STAGES = frozenset({"dpo", "kto", "ppo"})
#: Stages whose reference scores each generation batch as it comes (never precomputed).
ROLLOUT_REFERENCE_STAGES = frozenset({"grpo", "ppo"})
#: Stages that train a value model (a critic) beside the policy and score with a reward model.
CRITIC_STAGES = frozenset({"ppo"})
#: Stages that may compare against one (GRPO's KL term, `beta` > 0); none by default, and never
#: precomputed (GRPOTrainer scores each generation batch as it comes).
OPTIONAL_REFERENCE_STAGES = frozenset({"grpo"})
#: Stages TRL 1.16.0 scores through its fused log-prob head (`add_fused_lm_head`, called by
#: DPOTrainer, KTOTrainer, GRPOTrainer and the experimental ORPO and CPO trainers): per-token
#: log-probs without the [tokens, vocab] logits.
LOGPROB_STAGES = frozenset({"dpo", "kto", "orpo", "simpo", "grpo"})
#: The supervised stages: one model, one sequence per example, no reference.
SUPERVISED_STAGES = frozenset({"sft", "pt"})
#: The losses a preference trainer scores with, in place of a cross-entropy: TRL 1.16.0's fused
#: log-prob head, TRL 1.10's full logits through selective_log_softmax, LLaMA-Factory's log-softmax.
PREFERENCE_LOSSES = ("logprob", "selective", "logsoftmax")

_NAMES = {
    "sft": "supervised fine-tuning",
    "pt": "pre-training",
    "rm": "reward-model training",
    "dpo": "DPO",
    "kto": "KTO",
    "orpo": "ORPO",
    "simpo": "SimPO",
    "grpo": "GRPO",
    "ppo": "PPO",
}


class StageChoice(Protocol):
    """The scenario fields the stage rules read."""

    @property
    def stage(self) -> str: ...
    @property
    def reference(self) -> str | None: ...
    @property
    def reference_weights(self) -> str | None: ...
    @property
    def method(self) -> str: ...
    @property
    def loss(self) -> str | None: ...


def stage_name(stage: str) -> str:
    """How a sentence names the stage: 'DPO', 'reward-model training'."""
    return _NAMES[stage]


def sequences_per_sample(stage: str) -> int:
    """Sequences one micro-batch element runs: 2 for a chosen/rejected pair, else 1."""
    return 2 if stage in PAIRED_STAGES else 1


def resolved_reference(c: StageChoice) -> str:
    """The reference that applies: the given one, else TRL's default for the stage and method
    (DPOTrainer/KTOTrainer: a peft policy without a `ref_model` disables its adapters, a full
    fine-tune loads a frozen copy), else none."""
    if c.reference is not None:
        return c.reference
    if c.stage not in REFERENCE_STAGES:
        return "none"
    return "model" if c.method == "full" else "adapter"


def _reward_model(model: ModelSpec) -> ModelSpec:
    """`model` as TRL's RewardTrainer trains it: AutoModelForSequenceClassification with
    num_labels 1 (trl/trainer/reward_trainer.py), whose `score` head maps the last hidden state
    to one value per token without a bias (transformers' *ForSequenceClassification), in place
    of the LM head; the embedding stays, untied from any head."""
    return dataclasses.replace(
        model, head_outputs=1, tied_embeddings=False, head_bias=False, final_logit_softcap=False
    )


def value_model(model: ModelSpec) -> ModelSpec:
    """PPO's value and reward models of `model`'s architecture: AutoModelForSequenceClassification
    with num_labels 1 (huggingface/trl@f2cd5771 examples/scripts/ppo/ppo.py loads both so, from
    reward_model_path), the same spec object for every call on one spec."""
    return derived(model, _reward_model)


def stage_model(model: ModelSpec, stage: str) -> ModelSpec:
    """The model a stage trains: a language model with a one-score head for rm (the same spec
    object for every call on one spec), the model itself otherwise."""
    if stage != "rm" or model.kind != "llm":
        return model
    return derived(model, _reward_model)


def resolved_loss(c: StageChoice) -> str:
    """The loss kernel that applies: the given one, else the stage's trainer's (TRL's fused
    log-prob head for the stages it scores through it; PPOTrainer's full logits through
    selective_log_softmax; Hugging Face's cross-entropy, or a reward model's one-score head,
    otherwise)."""
    if c.loss is not None:
        return c.loss
    if c.stage in CRITIC_STAGES:
        return "selective"
    return "logprob" if c.stage in LOGPROB_STAGES else "standard"


def check_stage(c: StageChoice) -> None:
    """The stage's rules on `reference` and `reference_weights`; an InputError names the field."""
    reference = resolved_reference(c)
    name = stage_name(c.stage)
    if c.stage in REFERENCE_STAGES and reference == "none":
        raise InputError(
            "reference",
            f"none: {name} compares the policy with reference log-probs; give model, precomputed "
            "or adapter (or leave it unset for the trainer's default)",
        )
    if c.stage in ROLLOUT_REFERENCE_STAGES and reference == "precomputed":
        raise InputError(
            "reference",
            f"precomputed: {name} scores each generation batch as it is generated; give model, "
            "adapter or none",
        )
    if c.stage not in REFERENCE_STAGES | OPTIONAL_REFERENCE_STAGES and reference != "none":
        raise InputError(
            "reference",
            f"{reference}: {name} uses no reference model (only dpo, kto, grpo and ppo do); leave it "
            "unset or give none",
        )
    if reference == "adapter" and c.method == "full":
        raise InputError(
            "reference",
            "adapter: a full fine-tune has no adapters to disable; give model (a frozen copy) or precomputed",
        )
    if c.stage == "grpo" and c.loss not in (None, "logprob", "selective"):
        raise InputError(
            "loss",
            f"{c.loss}: GRPO scores the completions' log-probs, through TRL's fused head (logprob, "
            "TRL 1.16) or the completion's full logits (selective, TRL 1.10 and before)",
        )
    if c.stage in CRITIC_STAGES and c.loss not in (None, "selective"):
        raise InputError(
            "loss",
            f"{c.loss}: TRL's PPOTrainer scores the policy's full logits through "
            "selective_log_softmax (selective); leave loss unset",
        )
    if c.stage in CRITIC_STAGES and c.method == "qlora":
        raise InputError(
            "method",
            "qlora: TRL's PPO script loads the value model with the policy's quantization_config, "
            "and a 4-bit value model cannot be trained; give lora or full",
        )
    if c.stage == "rm" and c.loss not in (None, "standard"):
        raise InputError(
            "loss",
            f"{c.loss}: a reward model scores each sequence with a one-label head, not an LM head "
            "over the vocabulary; leave loss unset",
        )
    if c.reference_weights is not None and reference != "model":
        raise InputError(
            "reference_weights",
            f"applies to a reference copy (reference model); the reference here is {reference}",
        )
