"""Context parallelism: what splitting each sequence over `context_parallel` GPUs adds.

Each GPU keeps its 1 / cp of every sequence's tokens (two chunks, head and tail, for the causal
load balance), so every per-token activation divides by cp; what it adds is the keys and values
it exchanges in every attention layer. Read from torch 2.13
distributed/tensor/experimental/_context_parallel/_attention.py, the implementation torchtitan's
context_parallel_degree runs (rotate method "allgather", the default `_cp_options`):

- forward (`_templated_ring_attention`): the local keys and values concatenated (one copy) and
  all-gathered once per layer (cp copies), read chunk by chunk while the outputs merge into fp32
  accumulators (`_SDPAMerger`, convert_to_f32 True: the output and its log-sum-exp);
- backward (`_templated_ring_attention_backward`): the same all-gather again, fp32 accumulators
  of the query, key and value gradients, and the key/value gradients rotated rank to rank with
  an all-to-all (`dkv_rotater`, ALL_TO_ALL): cp - 1 sends of the local fp32 key/value gradients,
  one send and one receive buffer in flight.

Saved activations per token are those of the kernel without context parallelism (the local
queries, keys, values, output and log-sum-exp). Keys and values are exchanged at the KV heads'
width (torchtitan passes enable_gqa, so grouped heads are not repeated); an MLA layer's are its
per-head keys and values, which it forms before attention in training. Every figure here is an
estimate of the buffers the source allocates; none was traced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.scalar_or_array import where
from trainplan.specs.model import Attention, ModelSpec

FP32_BYTES = 4


@dataclass(frozen=True)
class ContextExchange:
    """Per token at tensor parallel 1: the keys and values of all attention layers (what every
    layer all-gathers, summed), and one layer's widest buffers (its keys and values, its queries,
    its outputs), in elements."""

    kv_elements: float = 0.0
    layer_kv_elements: float = 0.0
    layer_q_elements: float = 0.0
    layer_out_elements: float = 0.0


def _widths(attention: Attention) -> tuple[int, int, int]:
    """(keys + values, queries, outputs) elements per token of one attention layer."""
    if attention.kind == "mla":
        kv = attention.num_heads * (attention.head_dim + attention.v_head_dim)
    else:
        kv = attention.num_kv_heads * (attention.head_dim + attention.v_head_dim)
    return kv, attention.num_heads * attention.head_dim, attention.num_heads * attention.v_head_dim


def context_exchange(model: ModelSpec) -> ContextExchange:
    """The model's key/value exchange under context parallelism (self-attention layers only:
    a KV-shared layer still attends over the gathered keys of the layer it shares)."""
    total = 0.0
    widest = (0, 0, 0)
    for block in model.blocks:
        if block.attention is None:
            continue
        widths = _widths(block.attention)
        if not block.attention.kv_shared:
            total += block.count * widths[0]
        widest = (max(widest[0], widths[0]), max(widest[1], widths[1]), max(widest[2], widths[2]))
    return ContextExchange(float(total), *map(float, widest))


def exchange_forward_bytes(x: ContextExchange, context_parallel: Any, activation_bytes: int) -> Any:
    """One layer's forward buffers per local token beyond the kernel's own: the concatenated
    local keys and values and their all-gather (cp + 1 copies at the activation dtype), the fp32
    output accumulator. Zero at context_parallel 1."""
    per_token = (context_parallel + 1) * x.layer_kv_elements * activation_bytes + (
        FP32_BYTES * x.layer_out_elements
    )
    return where(context_parallel > 1, per_token, 0.0)


def exchange_backward_bytes(x: ContextExchange, context_parallel: Any, activation_bytes: int) -> Any:
    """One layer's backward buffers per local token: the all-gather again (cp + 1 copies), fp32
    accumulators of the query, key and value gradients, and the key/value gradients' send and
    receive buffers (fp32). Zero at context_parallel 1."""
    per_token = (context_parallel + 1) * x.layer_kv_elements * activation_bytes + FP32_BYTES * (
        x.layer_q_elements + 3 * x.layer_kv_elements
    )
    return where(context_parallel > 1, per_token, 0.0)


def exchange_bytes(
    x: ContextExchange, context_parallel: Any, activation_bytes: int, recompute_share: float
) -> Any:
    """Bytes each GPU receives per local token over one forward and backward of every layer:
    the keys and values of the other cp - 1 ranks, gathered in forward (again for each
    recomputed layer) and in backward, and cp - 1 rotations of the fp32 key/value gradients."""
    gathered = (context_parallel - 1) * x.kv_elements * activation_bytes
    rotated = (context_parallel - 1) * x.kv_elements * FP32_BYTES
    return (2 + recompute_share) * gathered + rotated
