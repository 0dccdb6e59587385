"""The rollout engine of a GRPO or PPO step: its memory on each of its GPUs and the time it
generates (PPO's own generation scores and scoring forwards: `ppo_rollout_bytes`).

Memory (vLLM, as TRL 1.16.0 starts it, trl/generation/vllm_generation.py): the engine takes
`memory_fraction` of its GPU's memory (vLLM's `gpu_memory_utilization`, a budget of the total
the driver reports) and fills it with its weights, the activations of its profiling forward
(`max_num_batched_tokens` tokens, and the sampler's fp32 logits over `max_num_seqs` sequences)
and, in what is left, the paged KV cache in blocks of `kv_block_tokens`. The budget is exact
arithmetic; the split between activations and KV cache is an estimate. vllm-serve's completions
of one prompt (one request of n = generations) share the prompt's full KV blocks. The CUDA graphs' pool and
the engine's NCCL buffers are not modelled (vLLM keeps them outside the budget's accounting).

transformers' generate (`hf`) runs on the policy itself: a dynamic KV cache of every sequence of
the process's generation batch, grown to `seq_len`, the last position's fp32 logits and scores,
and the prefill's one-layer working set; ZeRO-3 and FSDP gather the full weights for it
(GRPOTrainer's unwrap_model_for_generation).

Time: prefill at the compute rate and the step's efficiency; each decode step at the larger of
its memory time (the engine's weights and the batch's KV cache read at `decode_bandwidth_
efficiency` of the GPU's bandwidth) and its compute time (Kwon et al. 2023, vLLM; Pope et al.
2022, "Efficiently Scaling Transformer Inference": decode is bound by memory bandwidth at small
batches), plus, for an engine split over tensor-parallel GPUs, the two all-reduces of each layer
(Megatron's row- and column-parallel pairs), each a fixed latency and a ring over the link;
transformers' eager generate adds a host time per layer per step. Sequences beyond what
the KV cache (or `max_num_seqs`) holds at once run in later waves. Every completion is taken to
run to `completion_len`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainplan.specs.model import ModelSpec
from trainplan.specs.rollout import Rollout, rollout_data

#: transformers' generate keeps the last position's logits in fp32 and the processed scores beside them.
_HF_LOGIT_COPIES = 2
#: vLLM's sampler profiles fp32 logits and their softmax over max_num_seqs sequences.
_SAMPLER_COPIES = 2
#: vLLM's profiling forward: per token, the gated MLP's gate/up output (2 x intermediate), its
#: activation (intermediate) and about four hidden-sized tensors (residual, normed input,
#: attention output, MLP output) at the weights' dtype.
_PROFILE_INTERMEDIATE_COPIES = 3
_PROFILE_HIDDEN_COPIES = 4


def kv_bytes_per_token(model: ModelSpec, value_bytes: int) -> float:
    """KV-cache bytes one token takes across the layers: keys and values of each attention
    layer's KV heads (multi-head, grouped and multi-query), the compressed latent and its rope key
    for MLA (vLLM caches those), nothing for a KV-shared layer or a layer without attention
    (an SSM layer keeps a state per sequence, not per token)."""
    total = 0.0
    for block in model.blocks:
        attention = block.attention
        if attention is None or attention.kv_shared:
            continue
        if attention.kind == "mla":
            width = attention.kv_lora_rank + attention.rope_head_dim
        else:
            width = attention.num_kv_heads * (attention.head_dim + attention.v_head_dim)
        total += block.count * width * value_bytes
    return total


def _widest_intermediate(model: ModelSpec) -> int:
    """The widest per-token MLP intermediate: a dense MLP's, or the routed experts' top-k plus
    the shared experts'."""
    widest = 0
    for block in model.blocks:
        mlp = block.mlp
        if mlp is None:
            continue
        width = mlp.intermediate_size * max(1, mlp.experts_per_token)
        widest = max(widest, width + mlp.shared_intermediate_size * mlp.num_shared_experts)
    return widest


@dataclass(frozen=True)
class EngineMemory:
    """One engine GPU's memory, and what it lets the engine run at once.

    `sequences`: completions one engine generates per optimizer step; `concurrent`: how many it
    runs at once (the KV cache's and max_num_seqs' limit); `waves`: rounds of that many."""

    engine: str
    budget_bytes: float  # vLLM: memory_fraction x the GPU's memory (exact); hf: 0
    weights_bytes: float
    activation_bytes: float
    kv_cache_bytes: float
    kv_bytes_per_token: float  # on one engine GPU
    kv_tokens: float
    sequence_tokens: int  # one sequence's KV tokens, rounded up to whole blocks
    max_sequences: int  # sequences the KV cache holds at once (vLLM)
    max_num_seqs: int
    sequences: int
    concurrent: int
    waves: int
    prefill_sequences: int  # prompts the engine prefills (n > 1 prefills a prompt once)

    @property
    def total_bytes(self) -> float:
        """The engine's bytes on its GPU while it generates."""
        if self.engine == "vllm":
            return self.budget_bytes
        return self.kv_cache_bytes + self.activation_bytes

    @property
    def least_bytes(self) -> float:
        """The smallest budget vLLM starts in: its weights, its activations and the KV cache of
        one whole sequence (it refuses a cache that cannot hold one)."""
        return self.weights_bytes + self.activation_bytes + self.sequence_tokens * self.kv_bytes_per_token

    @property
    def problem(self) -> str | None:
        """Why the engine cannot start, or None: vLLM refuses a budget its weights and
        activations leave no KV-cache block in, or a cache that cannot hold one whole sequence."""
        if self.engine != "vllm":
            return None
        if self.kv_cache_bytes <= 0:
            return (
                "the engine's weights and activations fill its memory budget; raise "
                "rollout_memory_fraction or rollout_tensor_parallel"
            )
        if self.budget_bytes < self.least_bytes:
            return (
                "the engine's KV cache cannot hold one sequence of seq_len tokens; raise "
                "rollout_memory_fraction or rollout_tensor_parallel"
            )
        return None


def engine_memory(
    model: ModelSpec,
    rollout: Rollout,
    *,
    gpu_memory_bytes: float,
    weights_bytes: float,
    value_bytes: int,
    completions: int,
    local_completions: int,
) -> EngineMemory:
    """The engine's memory on one of its GPUs (see the module's docstring).

    `weights_bytes`: the engine's full weights (16-bit, or NF4 for a QLoRA policy, which TRL
    loads into vLLM with bitsandbytes quantisation); `completions`: the step's completions;
    `local_completions`: one training process's share (its generation batch)."""
    defaults, _ = rollout_data()
    seq_len = rollout.prompt_len + rollout.completion_len
    tp = rollout.tensor_parallel
    per_token = kv_bytes_per_token(model, value_bytes) / (tp if rollout.engine == "vllm" else 1)
    block = int(defaults["kv_block_tokens"])
    if rollout.engine == "hf":
        # the policy generates its own generation batch, every cache grown to seq_len: all at
        # once for GRPO, forward_batch prompts at a time for PPO (huggingface/trl@f2cd5771
        # ppo_trainer.py batch_generation)
        chunk = min(rollout.forward_batch, local_completions) if rollout.forward_batch else local_completions
        return EngineMemory(
            "hf",
            0.0,
            0.0,
            float(chunk * model.vocab_size * 4 * _HF_LOGIT_COPIES),
            float(chunk * seq_len * per_token),
            per_token,
            float(chunk * seq_len),
            seq_len,
            chunk,
            chunk,
            local_completions,
            chunk,
            math.ceil(local_completions / chunk),
            local_completions,
        )
    if rollout.colocated:
        # each tensor-parallel group generates its processes' prompts, repeated per generation
        sequences = local_completions * tp
        max_num_seqs = sequences  # TRL: per_device_train_batch_size x tp x steps_per_generation
        batched = int(defaults["colocate_batched_tokens"])
        prefill = sequences
    else:
        sequences = math.ceil(completions / rollout.engines)
        large = gpu_memory_bytes >= 70 * 2**30
        size = "large" if large else "small"
        max_num_seqs = int(defaults[f"separate_max_sequences_{size}"])
        batched = int(defaults[f"separate_batched_tokens_{size}"])
        # vllm-serve samples n = generations completions per prompt, the prompt prefilled once
        prefill = math.ceil(sequences / rollout.generations)
    budget = rollout.memory_fraction * gpu_memory_bytes
    weights = weights_bytes / tp
    activation = (
        batched
        * (
            _PROFILE_INTERMEDIATE_COPIES * _widest_intermediate(model)
            + _PROFILE_HIDDEN_COPIES * model.hidden_size
        )
        * value_bytes
        / tp
        + max_num_seqs * model.vocab_size * 4 * _SAMPLER_COPIES
    )
    kv = budget - weights - activation
    tokens = max(kv, 0.0) / per_token if per_token else math.inf
    sequence_tokens = math.ceil(seq_len / block) * block
    held = int(min(tokens // sequence_tokens, 1e9)) if per_token else max_num_seqs
    if per_token and not rollout.colocated:
        # vllm-serve samples a prompt's completions as one request (n = generations): they share
        # the prompt's full blocks, so a group of n takes the prompt's blocks once
        shared = (rollout.prompt_len // block) * block
        group = rollout.generations * (sequence_tokens - shared) + shared
        groups = int(min(tokens // group, 1e9))
        held = groups * rollout.generations if groups >= 1 else held
    concurrent = max(1, min(sequences, max_num_seqs, held))
    return EngineMemory(
        "vllm",
        budget,
        weights,
        activation,
        kv,
        per_token,
        tokens if per_token else 0.0,
        sequence_tokens,
        held,
        max_num_seqs,
        sequences,
        concurrent,
        math.ceil(sequences / concurrent),
        prefill,
    )


@dataclass(frozen=True)
class GenerationSeconds:
    """Seconds one optimizer step spends generating, by part."""

    prefill: float
    decode: float

    @property
    def total(self) -> float:
        """Prefill and decode together."""
        return self.prefill + self.decode


def generation_seconds(
    model: ModelSpec,
    rollout: Rollout,
    memory: EngineMemory,
    *,
    forward_flops_per_token: float,
    read_weight_bytes: float,
    peak_flops_per_s: float,
    efficiency: float,
    bandwidth_bytes_per_s: float,
    gpus: int,
    tp_link_bytes_per_s: float = 0.0,
) -> GenerationSeconds:
    """Seconds to generate one engine's completions of a step (engines run at once).

    `read_weight_bytes`: the weights one GPU reads per decode step; `gpus`: the GPUs one engine
    computes on (its tensor-parallel size, or the trainer's for transformers' generate), linked
    at `tp_link_bytes_per_s` each way (for the all-reduces when more than one)."""
    _, rates = rollout_data()
    compute = peak_flops_per_s * efficiency * gpus
    prefill = memory.prefill_sequences * rollout.prompt_len * forward_flops_per_token / compute
    # every step reads the weights and the batch's caches at their mean length
    mean_context = rollout.prompt_len + rollout.completion_len / 2
    kv_read = memory.concurrent * mean_context * memory.kv_bytes_per_token
    memory_s = (read_weight_bytes + kv_read) / (bandwidth_bytes_per_s * rates["decode_bandwidth_efficiency"])
    compute_s = memory.concurrent * forward_flops_per_token / compute
    step = max(memory_s, compute_s)
    if gpus > 1 and tp_link_bytes_per_s > 0:
        # two all-reduces per layer of the batch's hidden states, 16-bit: a ring moves
        # 2 (g - 1) / g of them over each GPU's link
        volume = memory.concurrent * model.hidden_size * 2
        ring = 2 * (gpus - 1) / gpus * volume / tp_link_bytes_per_s
        step += 2 * model.num_layers * (rates["tp_allreduce_latency_s"] + ring)
    if memory.engine == "hf":
        step += model.num_layers * rates["hf_decode_step_s"]
    return GenerationSeconds(prefill, memory.waves * rollout.completion_len * step)


@dataclass(frozen=True)
class PpoRolloutBytes:
    """What PPO's rollout keeps on each trainer GPU beyond the engine's cache (terms in bytes).

    `scores`: transformers' generate returns each step's processed fp32 logits (`output_scores`,
    the next-token logits cast to fp32), which PPOTrainer stacks per chunk and pads into one
    [generation batch, completion_len, vocab] tensor (`logitss`, huggingface/trl@f2cd5771
    ppo_trainer.py batch_generation); the name stays bound through scoring and training until
    the next generation returns, so the previous step's tensor is alive while the next one is
    built (exact, in steady state). The largest moment of generating is the last chunk's scores
    stacked beside its KV cache (and generate's last-position logits, `generation_cache`), the
    previous chunks' and the previous step's (2 x scores + a chunk's: `generation_logits`), or
    the padding copy beside the chunks and the previous step's (3 x scores, the cache freed).
    `scoring`: one scoring forward of `forward_batch` sequences under no_grad
    with output_hidden_states (PPOTrainer's `forward` and `get_reward`): every layer's output
    and the embedding's (num_layers + 1 hidden states) and the reference's logits over every
    position, at the scoring models' dtype, or the last layer's working set beside the other
    hidden states, whichever is larger (an estimate: the working set is)."""

    scores: float
    generation_logits: float
    generation_cache: float
    scoring: float


def ppo_rollout_bytes(
    model: ModelSpec,
    rollout: Rollout,
    engine: EngineMemory,
    *,
    local_completions: int,
    scoring_value_bytes: float,
    layer_working_per_token: float,
    scorers: tuple[ModelSpec, ...] = (),
) -> PpoRolloutBytes:
    """PPO's generation scores, its generating moment and its scoring forward (PpoRolloutBytes).

    `scoring_value_bytes`: bytes of one value of the frozen scoring forwards (their weights'
    dtype: none of them runs under the trainer's autocast); `layer_working_per_token`: one
    layer's forward working set per token (terms/activations.py); `scorers`: the value and reward
    models (their forwards keep their hidden states only: a one-score head has no logits to speak
    of)."""
    per_sequence = rollout.completion_len * model.vocab_size * 4
    scores = float(local_completions * per_sequence)
    chunk = engine.concurrent
    cache = engine.kv_cache_bytes + engine.activation_bytes
    stacked = 2 * scores + chunk * per_sequence
    generating, cache = (stacked, cache) if stacked + cache > 3 * scores else (3 * scores, 0.0)
    tokens = chunk * (rollout.prompt_len + rollout.completion_len)
    hidden = tokens * model.hidden_size * scoring_value_bytes
    logits = tokens * model.vocab_size * scoring_value_bytes
    scoring = max(
        (model.num_layers + 1) * hidden + logits, model.num_layers * hidden + layer_working_per_token * tokens
    )
    for scorer in scorers:  # the value and reward models' forwards keep their hidden states only
        scoring = max(scoring, (scorer.num_layers + 1) * tokens * scorer.hidden_size * scoring_value_bytes)
    return PpoRolloutBytes(scores, generating, cache, float(scoring))
