"""The yardstick `make bench` holds `estimate()` against: a closed-form estimate of the same
Llama-style full fine-tune, written in plain Python the way a calculator without trainplan's
detail would write it, from the same inputs (a config's shapes, a scenario's batch, precision
and layout, the GPU catalog's memories and peak rates).

It counts parameters from the config's shapes, model states as 16 bytes per parameter under
ZeRO (Rajbhandari et al. 2020, sec. 3.1; stage 3 shards all of them), activations per layer as
Korthikanti et al. 2022 eq. 2 (s b h (34 + 5 a s / h), flash attention drops the score term),
fp32 logits, the fit on every catalog GPU, and the step time from 6 N tokens FLOPs (Kaplan et
al. 2020) at a fixed MFU. It is not a figure anyone should use (it knows no GQA, no gated MLP
detail beyond its three matrices, no allocator or savers): it is the amount of arithmetic a
plain estimate of this scenario takes, so the ratio says what trainplan's detail and structure
cost on top.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

GIB = 1024**3


def closed_form_estimate(
    config: Mapping[str, Any],
    *,
    seq_len: int,
    micro_batch: int,
    gpus: int,
    zero_stage: int,
    gpu_memories: Sequence[tuple[str, float]],
    peak_flops: float,
    mfu: float = 0.4,
    overhead_bytes: float = 2 * GIB,
) -> dict[str, Any]:
    """Memory terms per GPU, the fit on each GPU and the step time of a full bf16-mixed AdamW
    fine-tune, in plain Python."""
    h = config["hidden_size"]
    layers = config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    inner = config["intermediate_size"]
    vocab = config["vocab_size"]
    head_dim = h // heads
    attention = h * heads * head_dim + 2 * h * kv_heads * head_dim + heads * head_dim * h
    mlp = 3 * h * inner
    per_layer = attention + mlp + 2 * h
    embedding = vocab * h
    head = 0 if config.get("tie_word_embeddings", False) else vocab * h
    params = embedding + head + layers * per_layer + h
    shard = gpus if zero_stage >= 3 else 1
    weights = 2 * params / shard
    grads = 2 * params / (gpus if zero_stage >= 2 else 1)
    optimizer = 12 * params / (gpus if zero_stage >= 1 else 1)
    s, b = seq_len, micro_batch
    activations = layers * s * b * h * 34  # flash attention: no a s / h score term
    logits = 4 * s * b * vocab
    total = weights + grads + optimizer + activations + logits + overhead_bytes
    fits = {name: total <= memory for name, memory in gpu_memories}
    tokens = s * b * gpus
    step_s = 6 * params * tokens / (gpus * peak_flops * mfu)
    return {
        "params": params,
        "memory": {
            "weights": weights,
            "gradients": grads,
            "optimizer": optimizer,
            "activations": activations,
            "logits": logits,
            "overhead": overhead_bytes,
            "total": total,
        },
        "fits": fits,
        "step_s": step_s,
        "tokens_per_s_per_gpu": tokens / gpus / step_s,
    }
