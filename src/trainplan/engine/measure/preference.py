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
    while compute_reference_log_probs scores the reference)."""
    rows = micro_batch * sequences_per_sample(stage)
    notes = [
        f"{stage} step as TRL 1.16.0 runs it: {rows} sequences of {seq_len} tokens"
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
