"""Memory savers of the fine-tuning frameworks: what each one keeps, derived from its source.

Each function returns bytes per token (or per replica, where named) for one technique; the
composition into per-GPU memory and step time is in per_replica.py and per_gpu.py.

- Chunked cross-entropy: torchtune `CEWithChunkedOutputLoss`
  (torchtune/modules/loss/ce_chunked_output_loss.py at 10ff7cd2, v0.6, read 2026-12-01; later
  versions deprecate it for LinearCrossEntropyLoss): the output projection
  returns `num_output_chunks` (default 8) bf16 logit chunks, all alive until the loss is
  computed, and each chunk is upcast to fp32 and put through `F.cross_entropy` on its own.
- LoRA dropout: peft `tuners/lora/layer.py` `Linear.forward` (traced with peft 0.21): the adapter path is
  `lora_B(lora_A(dropout(x)))` after `x` is cast to the adapter dtype; with p > 0 `nn.Dropout`
  keeps its bool mask and `lora_A` keeps the dropped copy, per adapted module.
- Layer-level selective AC (`full:N`): torchtitan `torchtitan/distributed/activation_checkpoint.py`
  at cfb93265 (2025, read 2026-12-01) `_apply_layer_sac`: a running block count; a block is
  checkpointed when the count is a multiple of N.
- Op-level selective AC (`op`): the same file's `_apply_op_sac` policy with the models' op save
  list (`aten.mm`, the SDPA kernels, `aten.max`, reduce-scatter): those outputs are saved,
  except every second mm of a block (the mm count is per block and per pass); everything else
  in the block is recomputed from the block input in backward. (Later torchtitan versions
  choose the saved tensors by name from per-model lists; not modelled separately.)
- Activation offloading: torchtune `training/_activation_offloading.py` `OffloadActivations`
  and `get_act_offloading_ctx_manager` (v0.6): every saved tensor above `min_offload_size`
  (1 KiB) moves to pinned CPU memory on a side stream in forward (at most `max_fwd_stash_size`
  = 5 copies in flight) and is brought back ahead of use in backward; "all but the last output
  Linear" is offloaded (the head runs under `NoOpManager`). Unsloth's offloaded gradient
  checkpointing moves the checkpointed layer inputs the same way.
- kbit upcast: peft `utils/other.py` `prepare_model_for_kbit_training` (v0.13-0.17): every
  parameter that is not 8/4-bit quantised is cast to fp32 (embeddings, norms, LM head, biases).
"""

from __future__ import annotations

from trainplan.specs.model import Block, ModelSpec
from trainplan.specs.weights import block_linears

# Layers whose saved tensors stay on the GPU under activation offloading: the layer in use and
# the one being prefetched (torchtune prefetches one layer ahead in backward).
OFFLOAD_RESIDENT_LAYERS = 2
# Share of the offload copies hidden under compute: torchtune's streams overlap them almost
# fully (its README's flag table: tokens/s 7,309 -> 7,301 when offloading is added, -0.1%).
OFFLOAD_OVERLAP = 0.95


def chunked_loss_bytes(
    vocab_size: int, activation_bytes: int, chunks: int, softcap: bool = False, compiled: bool = False
) -> tuple[float, float, float]:
    """(held from the loss to backward, peak while computing the loss, peak in its backward) per
    token for torchtune's chunked cross-entropy, in bytes.

    Forward: all chunks of logits at the activation dtype exist (a bytes per element); each
    chunk's fp32 log-softmax is saved for backward (4 in all by the last chunk), and one
    chunk's fp32 upcast exists at a time (4 / chunks): a + 4 + 4/chunks. After the loss the
    recipe deletes the logits, so 4 bytes of log-softmax are held. Backward runs chunk by
    chunk: the remaining log-softmax (<= 4) plus one chunk's fp32 gradients of the
    log-probabilities and of the logits (8 / chunks). One chunk reproduces the standard loss
    (terms/memory.logits_bytes: a + 4 + 4 / 4 / 12). Soft-capping keeps its tanh output at the
    activation dtype, as in the standard loss.

    Compiled (torchtune compiles `compute_cross_entropy` per chunk when `compile: True`): the
    upcast, log-softmax and NLL fuse into reduction kernels, and AOTAutograd's min-cut partition
    saves the cheapest inputs, the 16-bit chunk itself (alive anyway) and one logsumexp per
    row, instead of the fp32 log-softmax. Held: the logits (a); while the loss runs: the
    logits (a); backward: the logits plus one chunk's fp32 gradient and its cast ((4 + a) /
    chunks).
    """
    upcast = 4 if activation_bytes < 4 else 0
    cap = activation_bytes if softcap else 0
    per_element = vocab_size
    if compiled:
        a = activation_bytes
        return (a + cap) * per_element, (a + cap) * per_element, (a + (4 + a) / chunks + cap) * per_element
    return (
        (4 + cap) * per_element,
        (activation_bytes + 4 + upcast / chunks + cap) * per_element,
        (4 + 8 / chunks + cap) * per_element,
    )


def lora_dropout_input_bytes(
    activation_bytes: int, casts_inputs: bool, width: int, adapter_bytes: int = 4
) -> float:
    """Bytes one adapted module keeps of its input when peft's lora_dropout is above 0.

    The input is cast to the adapter dtype (fp32), dropout writes a new fp32 tensor and keeps a
    bool mask (1 byte per element, `native_dropout`), and `lora_A` keeps the dropped copy: 4
    bytes, or under autocast the half-precision copy autocast makes for `lora_A` (a bytes);
    adapters kept at the compute dtype (torchtune) drop a copy at that dtype. Every adapted
    module has its own copy and mask, even where modules share their input.
    """
    kept = activation_bytes if casts_inputs else max(activation_bytes, adapter_bytes)
    return (kept + 1) * width


def checkpoint_every(mode: str) -> int | None:
    """N of a `full:N` mode (1 for `full`), None for modes that checkpoint no whole block."""
    if mode == "full":
        return 1
    if mode.startswith("full:"):
        return int(mode.split(":", 1)[1])
    return None


def checkpointed_layers(model: ModelSpec, every: int) -> list[int]:
    """Per block of `model.blocks`, how many of its layers are checkpointed when every
    `every`-th layer is (torchtitan counts layers from 1 in forward order and checkpoints a
    layer whose count is a multiple of N). A block under no_grad keeps nothing to checkpoint."""
    counts: list[int] = []
    start = 0  # layers before this block
    for block in model.blocks:
        end = start + block.count
        counts.append(0 if block.no_grad else end // every - start // every)
        start = end
    return counts


def op_sac_saved(block: Block, model: ModelSpec, activation_bytes: int) -> tuple[float, float]:
    """(saved bytes per token, recomputed matmul parameters per token) of one block under
    torchtitan's op-level selective AC.

    Saved: the outputs of the 1st, 3rd, 5th ... matmul of the block in forward order (a Llama
    block: q, v, gate and down projections; k, o and up are recomputed), the SDPA kernel output
    and its fp32 logsumexp. Routed experts run as grouped matmuls, which are not on the save
    list: they are recomputed and do not advance the mm count. The block input, which every
    checkpoint keeps, is counted by the caller.
    """
    saved = 0.0
    recomputed = 0.0
    position = 0
    for linear in block_linears(block, model.hidden_size):
        if linear.expert and block.mlp is not None:
            recomputed += linear.in_features * linear.out_features * block.mlp.experts_per_token
            continue
        position += 1
        if position % 2 == 1:
            saved += activation_bytes * linear.out_features * linear.copies
        else:
            recomputed += linear.in_features * linear.out_features * linear.copies
    attention = block.attention  # blocks without attention (SSM layers) save no SDPA output
    if attention is not None:
        saved += activation_bytes * attention.num_heads * (attention.v_head_dim or attention.head_dim)
        saved += 4 * attention.num_heads
    return saved, recomputed


def offload_resident_fraction(num_layers: int) -> float:
    """Share of the layers' saved activations that stays on the GPU under activation offload."""
    return min(OFFLOAD_RESIDENT_LAYERS, num_layers) / num_layers


def kbit_upcast_extra_bytes(unquantised_params: int, compute_bytes: int) -> float:
    """Extra bytes when prepare_model_for_kbit_training casts the unquantised parameters
    (embeddings, norms, LM head, biases) from the compute dtype to fp32: (4 - compute) each."""
    return max(0, 4 - compute_bytes) * unquantised_params
