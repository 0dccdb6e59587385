"""Per-GPU training memory over the phases of one steady-state step.

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

from trainplan.model import ModelSpec, block_linears
from trainplan.terms.activations import (
    ActivationMode,
    outside_layers,
    recompute_per_layer,
    stored_per_layer,
)
from trainplan.terms.recipes import OptimizerRecipe, PrecisionRecipe


@dataclass(frozen=True)
class Sharding:
    """Parallel layout of one GPU's share."""

    data_parallel: int
    zero_stage: int
    tensor_parallel: int
    pipeline_parallel: int
    offload: str


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes held per GPU, fully materialised (before phase accounting)."""

    weights: float
    gradients: float
    optimizer: float
    optimizer_transient: float
    zero3_working_set: float
    offloaded_to_cpu: float


def optimizer_state_bytes(
    trainable: float,
    matrix_rows_cols: float,
    recipe: PrecisionRecipe,
    optimizer: OptimizerRecipe,
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
    trainable: float, largest_tensor: float, recipe: PrecisionRecipe, optimizer: OptimizerRecipe
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


def shard_states(
    *,
    trainable_weights: float,
    frozen_weights: float,
    gradients: float,
    optimizer: float,
    optimizer_transient: float,
    largest_layer_weights: float,
    largest_layer_grads: float,
    sharding: Sharding,
) -> StateBytes:
    """Divide replica-level state bytes over model parallelism, then ZeRO over data parallelism.

    ZeRO-3 adds a working set: the gathered weights of the current and the prefetched layer
    and the current layer's full gradient before reduce-scatter (FSDP's default prefetch).
    CPU offload moves optimizer state (and with params, the weights) to host memory.
    """
    model_parallel = sharding.tensor_parallel * sharding.pipeline_parallel
    dp = sharding.data_parallel
    stage = sharding.zero_stage if dp > 1 else 0
    weights = (trainable_weights + frozen_weights) / model_parallel
    grads = gradients / model_parallel
    states = optimizer / model_parallel
    transient = optimizer_transient / model_parallel
    if stage >= 1:
        states /= dp
        transient /= dp
    if stage >= 2:
        grads /= dp
    working = 0.0
    if stage >= 3:
        weights /= dp
        working = (2 * largest_layer_weights + largest_layer_grads) / sharding.tensor_parallel
    offloaded = 0.0
    if sharding.offload in ("optimizer", "optimizer+params"):
        offloaded += states
        states, transient = 0.0, 0.0
    if sharding.offload == "optimizer+params":
        offloaded += weights
        weights = 0.0
        working = max(working, (2 * largest_layer_weights) / sharding.tensor_parallel)
    return StateBytes(weights, grads, states, transient, working, offloaded)


def layer_weight_bytes(model: ModelSpec, bytes_per_param: float) -> float:
    """Weights of the largest single layer (what ZeRO-3 gathers at a time)."""
    largest = 0
    for block in model.blocks:
        params = sum(linear.params for linear in block_linears(block, model.hidden_size))
        largest = max(largest, params)
    return largest * bytes_per_param


@dataclass(frozen=True)
class ActivationBytes:
    """Activation bytes per GPU for one micro-batch (times in-flight micro-batches)."""

    stored: float
    recompute: float
    outside: float


def activation_bytes(
    model: ModelSpec,
    mode: ActivationMode,
    *,
    micro_batch: int,
    seq_len: int,
    pipeline_parallel: int,
    grad_accum: int,
    head_trainable: bool,
) -> ActivationBytes:
    """Stored activations of this GPU's layers for the in-flight micro-batches, the one-layer
    recompute buffer (full checkpointing) and the tensors outside the layers."""
    tokens = micro_batch * seq_len
    in_flight = min(pipeline_parallel, grad_accum)
    stored = 0.0
    recompute = 0.0
    for block in model.blocks:
        stored += block.count * stored_per_layer(model, block, mode, seq_len)
        recompute = max(recompute, recompute_per_layer(model, block, mode, seq_len))
    stored_gpu = stored / pipeline_parallel * in_flight * tokens
    outside = outside_layers(model, mode, head_trainable) / mode.tensor_parallel * tokens
    return ActivationBytes(stored_gpu, recompute * tokens, outside)


def logits_bytes(
    vocab_size: int, tokens: int, activation_bytes: int, tensor_parallel: int, softcap: bool = False
) -> tuple[float, float, float]:
    """(held from the loss to backward, peak while computing the loss, peak in its backward).

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
    per_token = vocab_size / tensor_parallel * tokens
    upcast = 4 if activation_bytes < 4 else 0
    cap = activation_bytes if softcap else 0
    return (
        (4 + cap) * per_token,
        (activation_bytes + upcast + 4 + cap) * per_token,
        (12 + cap) * per_token,
    )
