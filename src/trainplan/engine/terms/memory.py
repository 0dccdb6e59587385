"""Model-state and loss-buffer sizes; their per-GPU composition is in per_gpu.memory.

Model states follow ZeRO (Rajbhandari et al. 2020, sec. 5): stage 1 shards optimizer state,
stage 2 also gradients, stage 3 also weights, each over the data-parallel ranks; tensor and
pipeline parallelism split every state by their degree (Shoeybi et al. 2019; Narayanan et al.
2021). The first pipeline stage holds activations of min(pp, grad_accum) in-flight micro-batches
under 1F1B (Korthikanti et al. 2022, sec. 4.2.3). The peak is the largest of: end of forward,
start and end of backward, optimizer step, with optimizer state resident (second step on) and,
with gradient accumulation, gradients resident from the first micro-batch on.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.engine.terms.precisions import OptimizerBytes, PrecisionBytes
from trainplan.specs.model import ModelSpec, derived
from trainplan.specs.weights import block_linears


def optimizer_state_bytes(
    trainable: float,
    matrix_rows_cols: float,
    recipe: PrecisionBytes,
    optimizer: OptimizerBytes,
) -> float:
    """Optimizer bytes per replica: master copy + states.

    Adam-type: states x state bytes per parameter (fp32 = 4, pure bf16 = 2, 8-bit = 1 + absmax);
    Adafactor: factored second moment = rows + columns per matrix (Shazeer & Stern 2018, sec. 3),
    in fp32.
    """
    master = recipe.master_bytes * trainable
    state_bytes = optimizer.state_bytes if optimizer.state_bytes is not None else recipe.state_bytes
    if optimizer.factored:
        return master + 4 * matrix_rows_cols
    return master + optimizer.states * state_bytes * trainable


def optimizer_transient_bytes(
    trainable: float, largest_tensor: float, recipe: PrecisionBytes, optimizer: OptimizerBytes
) -> float:
    """Temporaries during optimizer.step(): multi-tensor (foreach) AdamW materialises one
    state-sized tensor per parameter (sqrt of the variance) for all parameters at once
    (torch.optim.adamw._multi_tensor_adamw); per-parameter optimizers only for the largest
    tensor; fused kernels none."""
    state_bytes = optimizer.state_bytes if optimizer.state_bytes is not None else recipe.state_bytes
    if optimizer.transient == "all":
        return optimizer.transient_tensors * state_bytes * trainable
    if optimizer.transient == "largest":
        return optimizer.transient_tensors * 4 * largest_tensor
    return 0.0


def layer_weight_bytes(model: ModelSpec, bytes_per_param: float) -> float:
    """Weights of the largest single layer (what ZeRO-3 gathers at a time)."""
    return max(derived(model, block_linear_params), default=0) * bytes_per_param


def block_linear_params(model: ModelSpec) -> tuple[int, ...]:
    """Linear-layer parameters of one layer of each block group, in forward order."""
    return tuple(
        sum(linear.params for linear in block_linears(block, model.hidden_size)) for block in model.blocks
    )


def logits_bytes(vocab_size: int, activation_bytes: int, softcap: bool = False) -> tuple[float, float, float]:
    """(held from the loss to backward, peak while computing the loss, peak in its backward), per
    token (the layout formulas divide by tensor parallelism).

    The LM head writes logits at the activation dtype; the loss upcasts them to fp32 (a no-op in
    fp32 training) and cross-entropy keeps only its fp32 log-softmax for backward (the logits
    themselves are dropped once the loss is computed, as the HF Trainer does). Backward holds
    that log-softmax, the fp32 gradient of the log-probabilities and the fp32 gradient of the
    logits at once: 12 bytes per element. Measured on fake-tensor traces with a 131K vocabulary
    (calibration/fake_trace.json): 10 / 4 / 12 bytes per element for bf16, 8 / 4 / 12 for fp32.
    Vocab-parallel heads shard all of it by TP (Megatron-LM's vocab-parallel cross-entropy).
    Final-logit soft-capping (Gemma 2: cap x tanh(logits / cap)) keeps the tanh output at the
    activation dtype throughout (measured: 6 / 12 / 14 bytes per element with bf16).
    """
    per_token = float(vocab_size)
    upcast = 4 if activation_bytes < 4 else 0
    cap = activation_bytes if softcap else 0
    return (
        (4 + cap) * per_token,
        (activation_bytes + upcast + 4 + cap) * per_token,
        (12 + cap) * per_token,
    )


#: TRL 1.16.0's fused log-prob head tiles: tokens per tile (trl/kernels/chunked_logprob.py
#: TOKEN_CHUNK_SIZE) and vocabulary columns per tile (trl/trainer/utils.py
#: _CHUNKED_LOGPROB_CHUNK_SIZE).
LOGPROB_TOKEN_TILE = 4096
LOGPROB_VOCAB_TILE = 32768


@dataclass(frozen=True)
class LogprobHead:
    """TRL's fused log-prob head (trl/kernels/chunked_logprob.py `ChunkedLogProbFunction` at
    TRL 1.16.0, applied by trl/trainer/utils.py `add_fused_lm_head`), in bytes.

    Per token: `saved`, the head's input copy it saves for backward (`hidden_states[mask]`,
    at the hidden states' dtype); `loss`, its seven fp32 online-logsumexp statistics, the
    int64 targets, the label mask and the fp32 log-probs and log-normaliser while it runs;
    `backward`, the fp32 gradient of its input it accumulates (`grad_hidden`), with the fp32
    incoming gradient and what it saved; `held`, the gradient handed on to the last layer (at
    the hidden states' dtype). The [tile, vocab-tile] logits buffer (`mm_buf`, at the compute
    dtype) and a tile of the input cast to the compute dtype are allocated per call in forward
    and again in backward: `tile_per_token` for each of at most `tile_tokens` tokens;
    `tile_fixed` is the head-weight tile cast to the compute dtype (none when the head is
    stored in it). The Triton kernels fold each tile in place, and the gradient GEMMs
    accumulate in fp32 without upcast copies (torch.addmm out_dtype)."""

    saved: float
    loss: float
    backward: float
    held: float
    tile_tokens: int
    tile_per_token: float
    tile_fixed: float


def logprob_head_bytes(
    hidden_size: int, vocab_size: int, compute_bytes: int, hidden_bytes: int, head_weight_bytes: float
) -> LogprobHead:
    """TRL's fused log-prob head for `hidden_size` x `vocab_size` (LogprobHead)."""
    columns = min(vocab_size, LOGPROB_VOCAB_TILE)
    recast = hidden_bytes != compute_bytes
    return LogprobHead(
        saved=float(hidden_bytes * hidden_size),
        loss=7 * 4 + 8 + 1 + 2 * 4,
        backward=4.0 * hidden_size + 4 + 8 + 1 + 4,
        held=float(hidden_bytes * hidden_size),
        tile_tokens=LOGPROB_TOKEN_TILE,
        tile_per_token=float(compute_bytes * (columns + (hidden_size if recast else 0))),
        tile_fixed=float(compute_bytes * columns * hidden_size if head_weight_bytes != compute_bytes else 0),
    )


def selective_logits_bytes(
    vocab_size: int,
    hidden_size: int,
    activation_bytes: int,
    upcast: bool,
    reference_after: bool,
    metric_copies: bool = False,
) -> tuple[float, float, float]:
    """(held, peak while the loss is formed, peak in its backward) per token for DPO and KTO as
    TRL 1.10 and before ran them (trl v1.8.0 trl/trainer/dpo_trainer.py `_compute_loss`,
    kto_trainer.py; ORPO's and CPO's trainers there add a cross-entropy not counted here): the
    model's full logits, upcast to fp32 under autocast (`upcast`: accelerate's
    ConvertOutputsToFp32), through `selective_log_softmax` (trl/trainer/utils.py), the policy's
    logits referenced until the loss is formed and the reference scored after the policy
    (`reference_after`: a frozen copy or the adapter-disabled policy).

    fp32 logits (upcast, or fp32 training): the per-row logsumexp saves the logits themselves
    (4 bytes per element held); forming them from 16-bit ones holds both (2 + 4); the reference's
    own pass adds its logits in both dtypes beside the policy's (4 + 2 + 4); backward holds the
    saved logits with the gather's zeros, its scatter and the stacked rows' gradient (4 + 12).
    16-bit logits (pure bf16, no autocast): each row's log-softmax is saved at 2 bytes, beside the
    logits (2 + 2), the reference adds its logits (+ 2); in backward each row's saved log-softmax
    goes as its gradient comes, beside the stacked rows' gradient (2 + 2). Checked on fake-tensor
    traces of that step (calibration/preference_trace.json). After the head's backward only the hidden states'
    gradient is left (`held`), as with the standard loss. KTO (`metric_copies`) also keeps
    index_select copies of the policy's logits for its metrics (chosen_logits, rejected_logits:
    one more copy at the logits' dtype) to the end of the loss; its KL batches' logits are
    dropped as they are scored (kto_trainer.py _compute_kl_logps)."""
    v = float(vocab_size)
    if upcast or activation_bytes == 4:
        cast = 2 if upcast and activation_bytes < 4 else 0
        held_logits = 4 + (4 if metric_copies else 0)
        loss = max(4 + cast, held_logits + (4 + cast if reference_after else 0))
        backward = 16.0
    else:
        held_logits = 4 + (2 if metric_copies else 0)
        loss = held_logits + (2 if reference_after else 0)
        backward = 4.0
    return float(hidden_size * activation_bytes), loss * v, backward * v


def grpo_selective_logits_bytes(
    vocab_size: int, hidden_size: int, activation_bytes: int, upcast: bool
) -> tuple[float, float, float]:
    """(held, peak while the loss is formed, peak in its backward) per completion token for GRPO
    as TRL 1.10 and before scored it (huggingface/trl@f2cd5771 trl/trainer/grpo_trainer.py
    `_get_per_token_logps_and_entropies`): the model's logits of the completion's positions
    (`logits_to_keep`), upcast to fp32 by accelerate under autocast (`upcast`), through
    `selective_log_softmax`; the entropy under no_grad a chunk of rows at a time. Unlike DPO's,
    no logits stay referenced once the log-probs are formed (the function returns them alone).

    Forward: forming the fp32 logits from the 16-bit ones holds both (2 + 4); without the upcast
    the 16-bit logits and each row's saved log-softmax (2 + 2), at the compute dtype. Backward:
    8 bytes per element at its peak (the saved logits or log-softmax, the gather's zeros and the
    softmax's gradient at their widest), with or without the upcast: measured on four traced
    development steps (Qwen2.5-0.5B, 256 and 512 completion tokens, amp-bf16 LoRA and bf16 full;
    the slope of the peak over the completion tokens, calibration/grpo_trace.json). After the
    head's backward only the hidden states' gradient is left (`held`)."""
    v = float(vocab_size)
    if upcast or activation_bytes == 4:
        loss = 4.0 + (2.0 if upcast and activation_bytes < 4 else 0.0)
    else:
        loss = 2.0 * activation_bytes
    return float(hidden_size * activation_bytes), loss * v, 8.0 * v


def ppo_logits_bytes(
    vocab_size: int,
    hidden_size: int,
    num_layers: int,
    activation_bytes: int,
    upcast: bool,
    completion_share: float,
    kv_bytes_per_token: float,
) -> tuple[float, float, float, float]:
    """(held, peak while the loss is formed, peak in its backward, kept after backward) per
    token of the policy's loss as TRL's PPOTrainer forms it (huggingface/trl@f2cd5771
    trl/experimental/ppo/ppo_trainer.py lines 820-850): the policy's logits over every position
    (no logits_to_keep), copied to fp32 by accelerate's output conversion under autocast
    (`upcast`), the completion's rows divided in place by the temperature and put through
    `selective_log_softmax` (its fp32 path saves views and the logsumexp; its 16-bit path each
    row's log-softmax); `completion_share` is the completion's part of each sequence.

    Read off the four development traces of calibration/ppo_trace.json (slopes over seq_len and
    completion_len, bytes per element of the logits): forward, the conversion holds the 16-bit and
    the fp32 logits (2 + 4), or 16-bit logits and saved log-softmax rows (2, and 2 a completion
    element); held into backward, the logits (4, or 2) and the hidden states' gradient; backward,
    the logits, the slice's gradient and CopySlices' result over every position (3 x 4, or 3 x
    2) and the in-place division's clone and result over the completion (2 x 4, or 2 x 2). After
    backward the policy's outputs stay referenced until the mini-batch ends (through the
    optimizer step and the no-grad entropy): its logits, its num_layers + 1 hidden states (fp32
    under autocast, whose residual stream is fp32) and its KV cache (PPOTrainer leaves
    use_cache on)."""
    v = float(vocab_size)
    value = 4.0 if upcast or activation_bytes == 4 else float(activation_bytes)
    logits = value * v
    if upcast and activation_bytes < 4:
        loss = (activation_bytes + 4.0) * v
    elif value == 4:
        loss = logits
    else:
        loss = logits + value * v * completion_share
    backward = 3 * logits + 2 * value * v * completion_share
    stream = 4.0 if upcast else float(activation_bytes)
    kept = logits + (num_layers + 1) * hidden_size * stream + kv_bytes_per_token
    return logits + hidden_size * activation_bytes, loss, backward, kept


def ppo_cache_bytes_per_token(model: ModelSpec, compute_bytes: int, upcast: bool) -> float:
    """Bytes a token of the policy's KV cache takes in PPOTrainer's training forward (use_cache
    left on, the cache kept in the output until the mini-batch ends): each attention layer's
    post-rotary keys, fp32 under autocast (HF's rotary casts cos and sin to the fp32 residual
    stream's dtype), and its values at the compute dtype (traced, calibration/ppo_trace.json)."""
    key_bytes = 4 if upcast else compute_bytes
    total = 0.0
    for block in model.blocks:
        attention = block.attention
        if attention is None or attention.kv_shared or attention.kind == "mla":
            continue
        per = attention.num_kv_heads * (attention.head_dim * key_bytes + attention.v_head_dim * compute_bytes)
        total += block.count * per
    return total


def padded_sdpa_bytes_per_token(model: ModelSpec, seq_len: int, compute_bytes: int) -> float:
    """Bytes per token each attention layer saves beyond an unpadded batch's when HF's SDPA
    attention runs with a padding mask (PPOTrainer masks its padded prompts and completions):
    the boolean mask made an additive one at the compute dtype inside each SDPA call and saved
    for backward (seq_len values a query token), and, for grouped-query attention, the key and
    value repeated to every head (`repeat_kv`, since enable_gqa is off once a mask is given) in
    place of the grouped ones. Traced (helper investigation of calibration/ppo_trace.json: the
    mask [B, 1, S, S] from convert_boolean_attn_mask, the repeated [B, H, S, d] copies)."""
    total = 0.0
    for block in model.blocks:
        attention = block.attention
        if attention is None or attention.kind == "mla":
            continue
        repeated = attention.num_heads - attention.num_kv_heads
        per = seq_len * compute_bytes + repeated * (attention.head_dim + attention.v_head_dim) * compute_bytes
        total += block.count * per
    return total


def logsoftmax_logits_bytes(
    vocab_size: int, hidden_size: int, activation_bytes: int, reference_after: bool
) -> tuple[float, float, float]:
    """(held, peak while the loss is formed, peak in its backward) per token for LLaMA-Factory's
    DPO trainer (train/dpo/trainer.py at ff6d4d12 `concatenated_forward`: the full logits
    `.to(torch.float32)`, then train/trainer_utils.py `get_batch_logps`: a gather from their
    log-softmax; `get_batch_loss_metrics` keeps the policy's logits while
    `compute_reference_log_probs` runs the same on the reference, `reference_after`).

    The policy holds its fp32 logits and their saved log-softmax (4 + 4), having formed them from
    the compute-dtype logits; the reference's pass adds its fp32 logits and their log-softmax
    (+ 4 + 4); backward holds the log-softmax, the gather's gradient and the log-softmax's (12,
    as Hugging Face's own loss). After the head's backward only the hidden states' gradient is
    left (`held`)."""
    v = float(vocab_size)
    policy = max(activation_bytes + 4, 8)
    loss = policy + (8 if reference_after else 0)
    return float(hidden_size * activation_bytes), loss * v, 12.0 * v


def fused_loss_bytes(hidden_size: int, activation_bytes: int) -> tuple[float, float, float]:
    """(held, peak while computing the loss, peak in its backward) per token for a fused linear +
    cross-entropy kernel (Liger-Kernel's FusedLinearCrossEntropy, Hsu et al. 2024, sec. 3;
    Cut Cross-Entropy, Wijmans et al. 2024): logits are made chunk by chunk, with chunks sized
    so that chunk x vocab ~ tokens x hidden, and the gradient of the hidden states is computed in
    forward. Held: that gradient (hidden x activation bytes); while the loss runs, one chunk of
    logits and its fp32 softmax on top (~ hidden x (activation + 4) bytes per token)."""
    held = activation_bytes * hidden_size
    return held, held + (activation_bytes + 4) * hidden_size, held
