# mypy: disable-error-code="no-untyped-call"
# (torch, transformers, peft and trl are only partly typed; their untyped calls are expected here.)
"""The loss side of a preference or reward step, for the traced loop: as TRL 1.16.0 runs it, or
scored as TRL 1.10 (selective) or LLaMA-Factory (logsoftmax) score it (`preference_step`).

What each stage runs, read from TRL 1.16.0 (trl/trainer/...):
- dpo (dpo_trainer.py `DPOTrainer._compute_loss`): the policy on the concatenated [chosen;
  rejected] batch through TRL's fused head (`add_fused_lm_head`: per-token log-probs from
  `ChunkedLogProbFunction`, never the [N, V] logits), then the reference on the same batch under
  no_grad (the adapter-disabled policy, `use_adapter`, or the frozen copy), or the precomputed
  log-probs from the batch; the sigmoid loss on the log-ratios.
- kto (kto_trainer.py `KTOTrainer._compute_loss`, `calculate_kl` True): the policy scores the KL
  batch under no_grad, then the examples with a gradient; the reference scores both.
- orpo, simpo: the policy's log-probs on the paired batch, no reference; the loss here is a
  sigmoid of the log-prob margin (ORPO adds the chosen NLL, which the log-probs already give).
- rm (reward_trainer.py `RewardTrainer.compute_loss`): a sequence-classification model with one
  label on the paired batch; -logsigmoid(chosen - rejected).
- grpo (grpo_trainer.py `GRPOTrainer._compute_loss`), the training round of a step whose
  completions are given: the policy on prompt + completion through the fused head with its
  entropy output (`add_fused_lm_head(outputs=("log_probs", "entropy"))`), the prompt's labels
  -100; the old (and the reference's) per-token log-probs and the advantages come with the batch,
  scored before training; the clipped ratio loss of loss_type dapo, normalised by the completion
  tokens.
- ppo (huggingface/trl@f2cd5771 trl/experimental/ppo/ppo_trainer.py, the last TRL with
  PPOTrainer; `_ppo_step`), one micro-step of the training round: the policy and the value
  model as one PolicyAndValueWrapper, the policy's full logits through selective_log_softmax,
  the clipped policy and value losses, then the entropy after the optimizer step.

The traced step scores every position (the fused head's `compact=False` path, which TRL takes off
Triton devices; on CUDA it scores only completion tokens, the same set when every label counts),
with the head's CUDA kernels' memory (`cuda_logprob_kernels`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from trainplan.specs.stages import PAIRED_STAGES, sequences_per_sample


@dataclass
class PreferenceStep:
    """How a traced preference step makes its batch and forms its loss, and what it adds."""

    make_batch: Callable[[], dict[str, Any]]
    loss_of: Callable[[torch.nn.Module, dict[str, Any]], torch.Tensor]
    frozen: list[torch.Tensor] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Run after optimizer.step and zero_grad (trace_steps' `after_step`): PPO's no_grad entropy.
    after_step: Callable[[], None] | None = None


def fused_head(model: Any) -> None:
    """TRL's fused log-prob head on a causal LM (before peft wraps it, as TRL adds it)."""
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model)


def fused_head_with_entropy(model: Any) -> None:
    """The fused head as GRPOTrainer adds it to the policy: log-probs and each position's entropy."""
    from trl.trainer.utils import add_fused_lm_head

    add_fused_lm_head(model, outputs=("log_probs", "entropy"))


@contextlib.contextmanager
def cuda_logprob_kernels() -> Iterator[None]:
    """The fused head's tile work as CUDA runs it: on a CUDA device TRL folds each logits tile
    into its statistics with a Triton kernel and turns it into the logits gradient in place
    (`_forward_kernel`, `_backward_kernel`), and accumulates the gradient GEMMs in fp32 with
    `torch.addmm(..., out_dtype=float32)` (torch >= 2.8), none of which allocates. Off CUDA its
    torch fallbacks (`_forward_tile`, `_backward_tile`, `_addmm_fp32`'s upcast) make fp32 copies
    of every tile, which a CUDA step never holds; on fake tensors the values do not matter, so
    each is replaced by a no-op."""
    from trl.kernels import chunked_logprob

    names = ("_forward_tile", "_backward_tile", "_addmm_fp32")
    saved = {name: getattr(chunked_logprob, name) for name in names}

    def in_place(*_args: Any, **_kwargs: Any) -> None:
        return None

    for name in names:
        setattr(chunked_logprob, name, in_place)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(chunked_logprob, name, value)


def preference_step(
    stage: str,
    reference: str,
    *,
    vocab: int,
    micro_batch: int,
    seq_len: int,
    amp: bool,
    ref_model: torch.nn.Module | None = None,
    scoring: str = "logprob",
    completion_len: int = 0,
    reward_model: torch.nn.Module | None = None,
    pad_token_id: int = 0,
) -> PreferenceStep:
    """The batch and loss of one TRL step of `stage` with `reference` (model, adapter,
    precomputed, none); `ref_model` is the frozen copy for reference "model". `scoring` is
    the loss the step runs: logprob (TRL 1.16.0's fused head); selective, as TRL 1.10 and before
    did (the axolotl and config readers' pins): the model's full
    logits, upcast to fp32 by accelerate under autocast, through `selective_log_softmax`, the
    policy's logits kept until the loss is formed (trl v1.8.0 trl/trainer/dpo_trainer.py
    `_compute_loss`: `outputs` lives to its end, the reference scored after the policy);
    logsoftmax, as LLaMA-Factory's DPO trainer does (train/dpo/trainer.py at ff6d4d12:
    concatenated_forward upcasts the full logits to fp32 and gathers from their log-softmax
    (train/trainer_utils.py get_batch_logps); get_batch_loss_metrics keeps the policy's logits
    while compute_reference_log_probs scores the reference). For ppo, `model` is the
    PolicyAndValueWrapper, `reward_model` (and `ref_model`, for reference model) are the frozen
    models resident in the training round, `pad_token_id` the id `forward` masks."""
    rows = micro_batch * sequences_per_sample(stage)
    trl = "huggingface/trl@f2cd5771" if stage == "ppo" else "TRL 1.16.0"
    notes = [
        f"{stage} step as {trl} runs it: {rows} sequences of {seq_len} tokens"
        + (" (chosen and rejected concatenated)" if stage in PAIRED_STAGES else "")
    ]
    if stage == "kto":
        notes.append("KTO: a KL batch of the same size scored under no_grad (calculate_kl)")
    if stage == "grpo":
        notes.append(
            f"GRPO's training round: {completion_len} completion tokens of each sequence scored, the old "
            "log-probs and advantages given (the rollout and the scoring are not traced)"
            + ("; TRL 1.10's full logits of the completion tokens" if scoring == "selective" else "")
        )
        return _grpo_step(vocab, rows, seq_len, completion_len, amp, ref_model, notes, scoring)
    if stage == "ppo":
        notes.append(
            f"PPO's training round (TRL f2cd5771): {completion_len} completion tokens of each sequence "
            "scored by the policy's full logits, the value model trained beside it; the rollout's "
            "tensors (its fp32 generation scores included) resident, the entropy taken after the "
            "optimizer step; the rollout and scoring round are not traced"
        )
        frozen_models = [m for m in (ref_model, reward_model) if m is not None]
        return _ppo_step(vocab, rows, seq_len, completion_len, amp, pad_token_id, frozen_models, notes)

    def make_batch() -> dict[str, Any]:
        ids = torch.randint(0, vocab, (rows, seq_len))
        batch: dict[str, Any] = {"input_ids": ids}
        if stage == "kto":
            batch["KL_input_ids"] = torch.randint(0, vocab, (rows, seq_len))
        if reference == "precomputed":
            batch["ref_logps"] = torch.zeros(rows, dtype=torch.float32)
            if stage == "kto":
                batch["ref_KL_logps"] = torch.zeros(rows, dtype=torch.float32)
        return batch

    def autocast() -> Any:
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)

    kept: list[torch.Tensor] = []  # what TRL's _compute_loss keeps referenced until it returns

    def logps(model: torch.nn.Module, ids: torch.Tensor, keep: bool = True) -> torch.Tensor:
        """The summed log-probs of `ids`; `keep` False for a KL batch, whose logits TRL 1.8's
        `_compute_kl_logps` drops before it returns."""
        if scoring == "logsoftmax":
            with autocast():
                logits = model(input_ids=ids, use_cache=False).logits.to(torch.float32)
            if keep and torch.is_grad_enabled():
                kept.append(logits)
            labels = ids[:, 1:]
            gathered = torch.gather(logits[:, :-1].log_softmax(-1), 2, labels.unsqueeze(2)).squeeze(2)
            lf: torch.Tensor = gathered.sum(dim=1)
            return lf
        if scoring == "selective":
            from trl.trainer.utils import selective_log_softmax

            with autocast():
                logits = model(input_ids=ids, use_cache=False).logits
            if amp and logits.dtype == torch.bfloat16:  # accelerate's ConvertOutputsToFp32
                logits = logits.float()
            if keep:
                kept.append(logits)
            if keep and stage == "kto" and torch.is_grad_enabled():
                # kto_trainer.py _compute_loss: chosen_logits and rejected_logits, index_select
                # copies of the policy's logits for its metrics, live to its end
                half = logits.shape[0] // 2
                rows = (torch.arange(half), torch.arange(half, logits.shape[0]))
                kept.extend(logits.index_select(0, index) for index in rows)
            per_token = selective_log_softmax(logits[:, :-1], ids[:, 1:])
            full: torch.Tensor = per_token.sum(dim=1)
            return full
        with autocast():
            out = model(input_ids=ids, labels=ids, fused_lm_head=True, use_cache=False)
        summed: torch.Tensor = out.log_probs.sum(dim=1)
        return summed

    def reference_logps(model: torch.nn.Module, ids: torch.Tensor, keep: bool = True) -> torch.Tensor:
        with torch.no_grad():
            if reference == "adapter":
                with model.disable_adapter():  # type: ignore[operator]
                    return logps(model, ids, keep)
            assert ref_model is not None
            return logps(ref_model, ids, keep)

    def loss_of(model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        ids = batch["input_ids"]
        if stage == "rm":
            with autocast():
                rewards = model(input_ids=ids, use_cache=False).logits.squeeze(-1)
            chosen, rejected = rewards.float().chunk(2)
            return -torch.nn.functional.logsigmoid(chosen - rejected).mean()
        if stage == "kto":
            with torch.no_grad():
                kl_policy = logps(model, batch["KL_input_ids"], keep=False)
        policy = logps(model, ids)
        if reference == "precomputed":
            ref = batch["ref_logps"]
            kl_ref = batch.get("ref_KL_logps")
        elif reference == "none":
            ref, kl_ref = torch.zeros_like(policy), None
        else:
            kl_ref = reference_logps(model, batch["KL_input_ids"], keep=False) if stage == "kto" else None
            ref = reference_logps(model, ids)
        ratios = policy - ref
        if stage == "kto":
            assert kl_ref is not None
            kl = (kl_policy - kl_ref).mean().clamp(min=0).detach()
            loss = (1 - torch.sigmoid(0.1 * (ratios - kl))).mean()
        else:
            chosen, rejected = ratios.chunk(2)
            loss = -torch.nn.functional.logsigmoid(0.1 * (chosen - rejected)).mean()
        kept.clear()  # _compute_loss returns: its locals (the logits) go
        return loss

    frozen = [*ref_model.parameters(), *ref_model.buffers()] if ref_model is not None else []
    return PreferenceStep(make_batch, loss_of, frozen, notes)


def _grpo_step(
    vocab: int,
    rows: int,
    seq_len: int,
    completion_len: int,
    amp: bool,
    ref_model: torch.nn.Module | None,
    notes: list[str],
    scoring: str = "logprob",
) -> PreferenceStep:
    """GRPO's training step (TRL 1.16.0 GRPOTrainer._compute_loss with loss_type dapo, epsilon
    0.2): the reference's log-probs, when there is one, were scored with the old ones before
    training and come with the batch; a frozen reference copy stays resident. `scoring`
    selective: as TRL 1.10 and before (huggingface/trl@f2cd5771 grpo_trainer.py
    `_get_per_token_logps_and_entropies`): the model's logits of the last completion_len + 1
    positions (`logits_to_keep`), upcast to fp32 by accelerate under autocast, the completion's
    rows divided in place by the temperature, `selective_log_softmax`, and the entropy under
    no_grad a chunk of rows at a time (`entropy_from_logits`, no entropy bonus)."""

    def make_batch() -> dict[str, Any]:
        ids = torch.randint(0, vocab, (rows, seq_len))
        labels = ids.clone()
        labels[:, : seq_len - completion_len] = -100
        return {
            "input_ids": ids,
            "labels": labels,
            "old_logps": torch.zeros(rows, completion_len, dtype=torch.float32),
            "advantages": torch.zeros(rows, dtype=torch.float32),
        }

    def per_token_logps(model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        ids = batch["input_ids"]
        if scoring == "selective":
            from trl.trainer.utils import entropy_from_logits, selective_log_softmax

            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                logits = model(input_ids=ids, logits_to_keep=completion_len + 1, use_cache=False).logits
            if amp and logits.dtype == torch.bfloat16:  # accelerate's ConvertOutputsToFp32
                logits = logits.float()
            logits = logits[:, :-1, :][:, -completion_len:, :]
            logits.div_(1.0)
            logps: torch.Tensor = selective_log_softmax(logits, ids[:, -completion_len:])
            with torch.no_grad():
                entropy_from_logits(logits)
            return logps
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = model(input_ids=ids, labels=batch["labels"], fused_lm_head=True, use_cache=False)
        fused: torch.Tensor = out.log_probs[:, -completion_len:]
        return fused

    def loss_of(model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        per_token = per_token_logps(model, batch)
        ratio = torch.exp(per_token - batch["old_logps"])
        advantages = batch["advantages"].unsqueeze(1)
        clipped = torch.clamp(ratio, 0.8, 1.2)
        per_token_loss = -torch.min(ratio * advantages, clipped * advantages)
        loss: torch.Tensor = per_token_loss.sum() / per_token_loss.numel()
        return loss

    frozen = [*ref_model.parameters(), *ref_model.buffers()] if ref_model is not None else []
    return PreferenceStep(make_batch, loss_of, frozen, notes)


# -- PPO (huggingface/trl@f2cd5771, the last TRL with a PPO trainer) ---------------------------

#: PPOConfig's defaults (huggingface/trl@f2cd5771 trl/experimental/ppo/ppo_config.py).
PPO_TEMPERATURE = 0.7
PPO_CLIPRANGE = 0.2
PPO_CLIPRANGE_VALUE = 0.2
PPO_VF_COEF = 0.1
#: ppo_trainer.py's INVALID_LOGPROB, written over the padded completion positions.
INVALID_LOGPROB = 1.0


class PolicyAndValueWrapper(torch.nn.Module):
    """TRL's PolicyAndValueWrapper (huggingface/trl@f2cd5771 trl/experimental/ppo/ppo_trainer.py
    lines 275-294): the policy and the value model as one module, which accelerate prepares and
    one optimizer trains. Its forward runs the value model's backbone
    (`getattr(value_model, value_model.base_model_prefix)`) with the same arguments, the value
    head on its last hidden state, then the policy; it returns (policy output, value logits).
    `gradient_checkpointing_enable` on the wrapper enables it on the policy only (lines 283-285),
    so a checkpointed PPO run checkpoints the policy and not the value model."""

    def __init__(self, policy: torch.nn.Module, value_model: Any) -> None:
        super().__init__()
        self.policy = policy
        self.value_model: Any = value_model
        self.critic_backbone = getattr(value_model, str(value_model.base_model_prefix))

    def forward(self, **kwargs: Any) -> tuple[Any, torch.Tensor]:
        output = self.critic_backbone(**kwargs)
        logits: torch.Tensor = self.value_model.score(output.hidden_states[-1])
        return self.policy(**kwargs), logits


def disable_dropout(model: torch.nn.Module) -> None:
    """TRL's `disable_dropout_in_model` (huggingface/trl@f2cd5771 trl/trainer/utils.py lines
    182-185), which PPOTrainer.__init__ runs on the policy, the reference, the value and the
    reward models (ppo_trainer.py lines 489-491): every nn.Dropout at p 0, peft's LoRA dropout
    included."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0


def selective_log_softmax_f2cd5771(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`selective_log_softmax` as PPOTrainer calls it (huggingface/trl@f2cd5771
    trl/trainer/utils.py lines 479-522). TRL 1.16.0's version adds a temperature, a row mask and
    a fused Triton path, so the f2cd5771 code is replicated: fp32 logits are gathered and each
    sequence's logsumexp taken one row at a time; bf16 logits go through a log-softmax per row,
    every row's [tokens, vocab] output kept for backward."""
    import torch.nn.functional as F

    squeeze = index.ndim == logits.ndim - 1
    if squeeze:
        index = index.unsqueeze(-1)
    per_token_logps: torch.Tensor
    if logits.dtype in [torch.float32, torch.float64]:
        selected_logits = torch.gather(logits, dim=-1, index=index)
        # loop to reduce peak mem consumption
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        per_token_logps = selected_logits - logsumexp_values.unsqueeze(-1)
    else:
        rows = []
        for row_logits, row_labels in zip(logits, index, strict=True):
            row_logps = F.log_softmax(row_logits, dim=-1)
            rows.append(row_logps.gather(dim=-1, index=row_labels))
        per_token_logps = torch.stack(rows)
    if squeeze:
        per_token_logps = per_token_logps.squeeze(-1)
    return per_token_logps


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """ppo_trainer.py `masked_mean` (lines 237-242), over every element."""
    return (values * mask).sum() / mask.sum()


def _ppo_step(
    vocab: int,
    rows: int,
    seq_len: int,
    completion_len: int,
    amp: bool,
    pad_token_id: int,
    frozen_models: list[torch.nn.Module],
    notes: list[str],
) -> PreferenceStep:
    """One micro-step of PPO's training round as PPOTrainer.train runs it (huggingface/trl@f2cd5771
    trl/experimental/ppo/ppo_trainer.py lines 801-880), `model` the PolicyAndValueWrapper:

    - the rollout and scoring round (lines 669-799) ran before, under no_grad, and left its
      tensors referenced by train()'s locals for the whole round: `query_responses`, the
      responses, the old and the reference log-probs, the values, the rewards, advantages and
      returns ([rows, completion_len] each), and `logitss`, the generation scores that
      `batch_generation` returns (fp32 [rows, completion_len, vocab]: transformers' generate keeps
      each step's scores in fp32), which train() never deletes; they are made once, at the first
      micro-step, and kept (num_ppo_epochs 4 passes train on one rollout);
    - the micro-batch's rows are index copies (`advantages[micro_batch_inds]`, ...);
    - `forward` (lines 191-220): the attention mask (`!= pad_token_id`), the position ids (its
      cumulative sum), the pad-masked ids; the wrapper under accelerate's prepared forward:
      autocast, then `convert_to_fp32` over the outputs (under amp: the policy's full
      [rows, seq_len, vocab] logits, any 16-bit hidden state and the value logits become fp32
      copies); `output_hidden_states=True`, so the policy's output keeps every layer's hidden
      state, and its KV cache when the config's use_cache is on (PPOTrainer never turns it off);
    - the completion's logits (`output.logits[:, context_length - 1 : -1]`, a view) divided in
      place by the temperature, `selective_log_softmax` (f2cd5771's), the value predictions, the
      clipped value loss and the clipped policy loss, `loss = pg_loss + vf_coef * vf_loss`;
    - after backward, optimizer.step and zero_grad, under no_grad: the entropy from the full
      softmax of the completion's logits (lines 851-868), while `output`, `logits` and the other
      locals are still referenced: they are deleted at the end of the mini-batch (lines 873-878).
    The reference and reward models are frozen weights only here (`frozen_models`): PPO scores
    with them in the rollout round."""
    from accelerate.utils import convert_to_fp32  # type: ignore[import-untyped]  # trl's dependency

    context = seq_len - completion_len
    rollout: dict[str, torch.Tensor] = {}  # train()'s locals from the rollout round
    held: dict[str, Any] = {}  # the micro-step's locals, deleted at the end of its mini-batch

    def make_rollout() -> None:
        queries = torch.randint(0, vocab, (rows, context))
        query_responses = torch.cat((queries, torch.randint(0, vocab, (rows, completion_len))), 1)
        responses = query_responses[:, context:].clone()  # torch.cat of the chunks' responses
        logprobs = torch.zeros(rows, completion_len)
        ref_logprobs = torch.zeros(rows, completion_len)
        values = torch.zeros(rows, completion_len)
        sequence_lengths = torch.full((rows,), completion_len - 1)
        response_idxs = torch.arange(completion_len).repeat(rows, 1)
        padding_mask = response_idxs > sequence_lengths.unsqueeze(1)
        padding_mask_p1 = response_idxs > (sequence_lengths + 1).unsqueeze(1)
        logr = ref_logprobs - logprobs
        kl = -logr
        non_score_reward = -0.05 * kl
        rewards = non_score_reward.clone()
        advantages = torch.zeros(rows, completion_len)
        returns = advantages + values
        rollout.update(
            queries=queries,
            query_responses=query_responses,
            logitss=torch.zeros(rows, completion_len, vocab, dtype=torch.float32),
            responses=responses,
            postprocessed_responses=responses.clone(),
            logprobs=torch.masked_fill(logprobs, padding_mask, INVALID_LOGPROB),
            ref_logprobs=torch.masked_fill(ref_logprobs, padding_mask, INVALID_LOGPROB),
            values=torch.masked_fill(values, padding_mask_p1, 0),
            scores=torch.zeros(rows),
            sequence_lengths=sequence_lengths,
            response_idxs=response_idxs,
            padding_mask=padding_mask,
            padding_mask_p1=padding_mask_p1,
            logr=logr,
            kl=kl,
            non_score_reward=non_score_reward,
            rewards=rewards,
            advantages=torch.masked_fill(advantages, padding_mask, 0),
            returns=returns,
        )

    def make_batch() -> dict[str, Any]:
        if not rollout:
            make_rollout()
        inds = torch.randperm(rows)
        batch: dict[str, Any] = {"inds": inds}
        for name in ("advantages", "responses", "query_responses", "logprobs", "returns", "values"):
            batch[name] = rollout[name][inds]
        return batch

    def forward(model: torch.nn.Module, query_responses: torch.Tensor) -> Any:
        attention_mask = query_responses != pad_token_id
        position_ids = attention_mask.cumsum(1) - attention_mask.long()
        input_ids = torch.masked_fill(query_responses, ~attention_mask, 0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                return_dict=True,
                output_hidden_states=True,
            )
        return convert_to_fp32(out) if amp else out

    def loss_of(model: torch.nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        inds = batch["inds"]
        padding_mask, padding_mask_p1 = rollout["padding_mask"], rollout["padding_mask_p1"]
        mb_advantage, mb_responses = batch["advantages"], batch["responses"]
        mb_logprobs, mb_return, mb_values = batch["logprobs"], batch["returns"], batch["values"]
        output, vpred_temp = forward(model, batch["query_responses"])
        logits = output.logits[:, context - 1 : -1]
        logits /= PPO_TEMPERATURE + 1e-7
        new_logprobs = selective_log_softmax_f2cd5771(logits, mb_responses)
        new_logprobs = torch.masked_fill(new_logprobs, padding_mask[inds], INVALID_LOGPROB)
        vpred = vpred_temp[:, context - 1 : -1].squeeze(-1)
        vpred = torch.masked_fill(vpred, padding_mask_p1[inds], 0)
        vpredclipped = torch.clamp(vpred, mb_values - PPO_CLIPRANGE_VALUE, mb_values + PPO_CLIPRANGE_VALUE)
        vf_losses1 = torch.square(vpred - mb_return)
        vf_losses2 = torch.square(vpredclipped - mb_return)
        vf_loss_max = torch.max(vf_losses1, vf_losses2)
        vf_loss = 0.5 * _masked_mean(vf_loss_max, ~padding_mask_p1[inds])
        vf_clipfrac = _masked_mean((vf_losses2 > vf_losses1).float(), ~padding_mask_p1[inds])
        logprobs_diff = new_logprobs - mb_logprobs
        ratio = torch.exp(logprobs_diff)
        pg_losses = -mb_advantage * ratio
        pg_losses2 = -mb_advantage * torch.clamp(ratio, 1.0 - PPO_CLIPRANGE, 1.0 + PPO_CLIPRANGE)
        pg_loss_max = torch.max(pg_losses, pg_losses2)
        pg_loss = _masked_mean(pg_loss_max, ~padding_mask[inds])
        loss = pg_loss + PPO_VF_COEF * vf_loss
        held.update(
            batch=batch,
            output=output,
            vpred_temp=vpred_temp,
            logits=logits,
            new_logprobs=new_logprobs,
            vpred=vpred,
            vpredclipped=vpredclipped,
            vf_losses1=vf_losses1,
            vf_losses2=vf_losses2,
            vf_loss=vf_loss,
            vf_clipfrac=vf_clipfrac,
            logprobs_diff=logprobs_diff,
            ratio=ratio,
            pg_losses=pg_losses,
            pg_losses2=pg_losses2,
            pg_loss_max=pg_loss_max,
            pg_loss=pg_loss,
            loss=loss,
        )
        return loss

    def after_step() -> None:
        """The no_grad statistics after optimizer.step and zero_grad (lines 851-868), then the
        mini-batch's `del` (lines 873-878)."""
        inds, logits = held["batch"]["inds"], held["logits"]
        with torch.no_grad():
            held["pg_clipfrac"] = _masked_mean(
                (held["pg_losses2"] > held["pg_losses"]).float(), ~rollout["padding_mask"][inds]
            )
            prob_dist = torch.nn.functional.softmax(logits, dim=-1)
            held["prob_dist"] = prob_dist
            entropy = torch.logsumexp(logits, dim=-1) - torch.sum(prob_dist * logits, dim=-1)
            held["entropy"] = entropy
            held["approxkl"] = 0.5 * (held["logprobs_diff"] ** 2).mean()
            held["stats"] = (entropy.mean(), held["ratio"].mean())
        del prob_dist, entropy, logits
        held.clear()

    frozen = [t for m in frozen_models for t in (*m.parameters(), *m.buffers())]
    return PreferenceStep(make_batch, loss_of, frozen, notes, after_step)
