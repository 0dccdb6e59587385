"""Per-GPU memory and step time of a layout, from a scenario's coefficients.

Every function here takes plain numbers or numpy arrays for the layout and hardware fields and
branches only through `scalar_or_array.where/maximum/minimum`, so `estimate()` (one layout, Python
numbers) and the planner (a million layouts, arrays) run the same formulas. Sources of each
formula are in the term modules they compose: ZeRO sharding (terms/memory.py), activations
(terms/activations.py), logits, the step timeline, the roofline and its overheads
(terms/timing.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainplan.engine.per_replica import Coefficients
from trainplan.engine.scalar_or_array import maximum, minimum, where
from trainplan.engine.terms.context import exchange_backward_bytes, exchange_bytes, exchange_forward_bytes
from trainplan.engine.terms.experts import all_to_all_bytes
from trainplan.engine.terms.pipeline import (
    SCHEDULE_CODES,
    head_rank,
    pipeline_bubble_seconds,
    pipeline_in_flight,
)
from trainplan.engine.terms.precisions import QLORA_DEQUANT_BYTES_PER_WEIGHT
from trainplan.engine.terms.savers import OFFLOAD_OVERLAP
from trainplan.engine.terms.timing import (
    INTER_NODE_EFFICIENCY,
    INTRA_NODE_EFFICIENCY,
    exposed_seconds,
    gather_or_scatter_seconds,
    ring_allreduce_seconds,
)
from trainplan.specs.frozen import direct_init, once
from trainplan.specs.validity import shard_group

OFFLOAD_CODES = {"none": 0, "optimizer": 1, "optimizer+params": 2, "optimizer+params+grads": 3}


def _terms(
    weights: Any,
    gradients: Any,
    optimizer: Any,
    activations: Any,
    logits: Any,
    temporaries: Any,
    overhead: Any,
    rollout: Any = 0.0,
    cache: Any = 0.0,
) -> dict[str, Any]:
    """One moment's memory terms by name (a dict display: built in one step)."""
    return {
        "weights": weights,
        "gradients": gradients,
        "optimizer": optimizer,
        "activations": activations,
        "logits": logits,
        "temporaries": temporaries,
        "rollout": rollout,
        "cache": cache,
        "overhead": overhead,
    }


#: The memory terms of every moment, in order: the keys `_terms` writes.
TERMS: tuple[str, ...] = tuple(_terms(*[0] * 7))
#: The terms that are no live tensors of the trainer's allocator: the rollout engine's memory
#: (its own budget, or the generate call's caches, reported apart), the allocator's cache and the
#: memory outside it.
_NOT_ALLOCATED = ("rollout", "cache", "overhead")


def _allocated(terms: dict[str, Any], pool: Any) -> Any:
    """A moment's live tensors: its terms without the cache, the overhead and the side streams'
    pools (reserved blocks inside `temporaries`)."""
    return sum(value for name, value in terms.items() if name not in _NOT_ALLOCATED) - pool


def _cached(terms: dict[str, Any], pool: Any, fraction: Any) -> dict[str, Any]:
    """`terms` with the allocator's cache: `fraction` of the moment's live tensors (the fraction
    fitted on traced steps replayed through the allocator's rules, terms/device.py)."""
    terms["cache"] = fraction * _allocated(terms, pool)
    return terms


PHASES = ("forward", "backward", "optimizer")


@direct_init
@dataclass(frozen=True)
class Layout:
    """How one replica is laid out on GPUs. Any field may be a numpy array of candidates."""

    tensor_parallel: Any
    pipeline_parallel: Any
    data_parallel: Any
    zero_stage: Any
    micro_batch: Any
    grad_accum: Any
    stage_fraction: Any  # Coefficients.stage_fraction(pipeline_parallel)
    offload: Any = 0  # OFFLOAD_CODES
    sequence_parallel: Any = False
    # each sequence split over this many GPUs (terms/context.py); the states shard over the
    # data-parallel and context-parallel ranks, within `data_parallel_replicate` HSDP groups
    context_parallel: Any = 1
    data_parallel_replicate: Any = 1
    # the pipeline schedule (terms/pipeline.py SCHEDULE_CODES) and its model chunks per GPU
    pipeline_schedule: Any = 0
    virtual_stages: Any = 1
    # the routed experts split over this many GPUs, and the busiest one's routed tokens over the
    # mean (terms/experts.py)
    expert_parallel: Any = 1
    expert_imbalance: Any = 1.0
    # the parameters' fraction on the first and on the last pipeline rank
    # (Coefficients.rank_fractions; None: stage_fraction), which `memory` compares
    first_fraction: Any = None
    last_fraction: Any = None
    # memory outside the caching allocator (terms/device.py): the CUDA context, the cuBLAS
    # workspace, NCCL's buffers, or a scenario's flat figure
    overhead_bytes: Any = 0.0
    # the allocator's cache beyond the live tensors, as a fraction of the allocated bytes
    cache_fraction: Any = 0.0
    # a rollout stage (terms/rollout.py): its generation and scoring moments are added; the
    # engine's bytes on this GPU while the policy is scored and trained (a colocated vLLM
    # engine that does not sleep) and while it generates; the generate call's own temporaries
    # on the trainer's allocator (transformers' prefill, weights gathered under ZeRO-3)
    rollout: bool = False
    rollout_bytes: Any = 0.0
    generation_bytes: Any = 0.0
    generation_temporaries: Any = 0.0
    # PPO's scoring forwards' working set (0: GRPO's, one micro-batch's forward); the generated
    # logits it keeps after generating, and while generating (rollout_step.py)
    scoring_bytes: Any = 0.0
    held_logits: Any = 0.0
    generation_logits: Any = 0.0

    @property
    def gpus(self) -> Any:
        """Total GPUs."""
        return self.tensor_parallel * self.pipeline_parallel * self.data_parallel * self.context_parallel

    @property
    def shard(self) -> Any:
        """The ranks ZeRO / FSDP shard the states over (specs/validity.py shard_group)."""
        return shard_group(self.data_parallel, self.context_parallel, self.data_parallel_replicate)


@direct_init
@dataclass(frozen=True)
class Memory:
    """Per-GPU bytes of every term at each phase's peak moment, and the states held."""

    phases: dict[str, dict[str, Any]]
    states: dict[str, Any]
    offloaded: Any
    # a paged optimizer's states in unified memory, outside every phase (they page to the host
    # under pressure; max_memory_allocated does not count them)
    paged: Any = 0.0
    # reserved by FSDP2's side streams at each phase's peak, inside `temporaries` (terms/fsdp.py)
    stream_pool: dict[str, Any] = field(default_factory=dict)
    # each moment's terms and the pool bytes inside its temporaries (scalars: estimate() only)
    moments: dict[str, tuple[dict[str, Any], Any]] = field(default_factory=dict)

    def allocated(self) -> tuple[str, dict[str, Any]]:
        """The moment with the largest total without the side streams' pools, and its terms with
        the pools taken out of `temporaries`, no cache and no overhead (the allocator's cache,
        the CUDA context, workspaces and NCCL's buffers are no tensors): what
        max_memory_allocated() would see of the trainer's tensors (a rollout engine's memory is
        its own term, left out here)."""
        name, (terms, pool) = max(self.moments.items(), key=lambda item: float(_allocated(*item[1])))
        return name, {
            **terms,
            "temporaries": terms["temporaries"] - pool,
            "rollout": 0.0,
            "cache": 0.0,
            "overhead": 0.0,
        }

    def totals(self) -> dict[str, Any]:
        """Phase -> total bytes."""
        return {name: sum(terms.values()) for name, terms in self.phases.items()}

    def peak(self) -> Any:
        """The largest phase total."""
        totals = list(self.totals().values())
        largest = totals[0]
        for total in totals[1:]:
            largest = maximum(largest, total)
        return largest


#: Memory's fields, which `memory` picks from the worse pipeline rank.
_MEMORY_FIELDS = ("phases", "states", "offloaded", "paged", "stream_pool", "moments")


def memory(c: Coefficients, v: Layout) -> Memory:
    """Per-GPU memory of the busiest GPU at the moments of a steady-state step: under pipeline
    parallelism the worse of the first rank (the most micro-batches in flight, the embedding) and
    the last (the head, the logits and the loss), which bound every rank between them (each
    holds fewer micro-batches than the first and no more layers; `stage_memory`)."""
    pp = v.pipeline_parallel
    if not (pp > 1 if pp.__class__ is int else bool((pp > 1).any())):
        return stage_memory(c, v, 0, v.stage_fraction)
    first = stage_memory(c, v, 0, v.stage_fraction if v.first_fraction is None else v.first_fraction)
    last = stage_memory(c, v, pp - 1, v.stage_fraction if v.last_fraction is None else v.last_fraction)
    return worse_stage(first, last)


def worse_stage(first: Memory, last: Memory) -> Memory:
    """Of the first and the last pipeline rank's memory, the one with the larger peak (element
    by element for arrays; a tie keeps the first)."""
    later = last.peak() > first.peak()
    if later.__class__ is bool:
        return last if later else first
    return Memory(
        **{name: _pick(later, getattr(last, name), getattr(first, name)) for name in _MEMORY_FIELDS}
    )


def _pick(later: Any, second: Any, first: Any) -> Any:
    """`second` where `later` holds, else `first`, through dicts and tuples (arrays)."""
    if isinstance(first, dict):
        return {name: _pick(later, second[name], value) for name, value in first.items()}
    if isinstance(first, tuple):
        return tuple(_pick(later, b, a) for a, b in zip(first, second, strict=True))
    return where(later, second, first)


def stage_memory(c: Coefficients, v: Layout, rank: Any, fraction: Any) -> Memory:
    """Per-GPU memory of pipeline rank `rank` (0 without pipelining), which holds `fraction` of
    the parameters, at the moments of a steady-state step.

    States: ZeRO stage 1 divides optimizer state by the data-parallel degree, 2 also gradients,
    3 also weights, plus FSDP2's working set (terms/fsdp.py: gathered layers, one layer's
    gradients or reduce-scatter buffer, the root group, the all-gather stream's pool); tensor
    parallelism divides all. Activations: the micro-batches the rank's schedule holds in flight
    (terms/pipeline.py); the logits, the loss and the head's gradient on the last rank only, the
    embedding's gradient on the first only.
    """
    fsdp = c.fsdp  # the sharded working set (terms/fsdp.py)
    tp, zero = v.tensor_parallel, v.zero_stage
    dp = v.shard  # the ranks the states shard over: data- and context-parallel, per HSDP group
    sharded_dp = dp > 1
    per_gpu = fraction / tp
    head = rank == head_rank(v.pipeline_schedule, v.pipeline_parallel)  # the head and the loss
    embed = rank == 0
    # 1 on the rank that runs the head (the embedding), else 0: a factor on those terms
    on_head = 1.0 if head is True else where(head, 1.0, 0.0)
    on_embed = 1.0 if embed is True else where(embed, 1.0, 0.0)
    zero1 = where(sharded_dp & (zero >= 1), dp, 1)
    zero2 = where(sharded_dp & (zero >= 2), dp, 1)
    zero3 = where(sharded_dp & (zero >= 3), dp, 1)
    sharded_weights = zero3 > 1
    unsharded = (
        c.states.ema_bytes + c.encoders.resident_bytes + c.states.buffer_bytes
    )  # on every GPU whatever the sharding
    # a preference stage's frozen reference copy, sharded as the policy is (TRL 1.16.0
    # prepare_deepspeed keeps ZeRO-3 for it and gives it stage 0 otherwise; prepare_fsdp shards it)
    reference = c.reference.resident_bytes * per_gpu / zero3
    weights = (
        (c.states.trainable_weight_bytes + c.states.frozen_weight_bytes) * per_gpu / zero3
        + unsharded
        + reference
    )
    gradients = c.states.gradient_bytes * per_gpu / zero2
    # FSDP's mixed precision: the fp32 shard is the weight and the master at once, and the
    # reduce-scatter writes fp32 gradient shards (torch fsdp/_fully_shard foreach_reduce casts
    # to the sharded parameter's dtype)
    shard_master = sharded_weights & (fsdp.shard_master_bytes > 0)
    weights = where(
        shard_master,
        (fsdp.shard_master_bytes + c.states.frozen_weight_bytes) * per_gpu / zero3 + unsharded + reference,
        weights,
    )
    gradients = where(shard_master, fsdp.shard_master_bytes * per_gpu / zero2, gradients)
    if c.optimizer_in_backward:
        # each gradient is stepped and freed as soon as it is complete (torchtune
        # optimizer_in_bwd): the largest one is the most ever present
        gradients = c.states.largest_grad_bytes / tp / zero2
    optimizer = c.states.optimizer_bytes * per_gpu / zero1
    optimizer = where(
        shard_master, (c.states.optimizer_bytes - fsdp.shard_master_bytes) * per_gpu / zero1, optimizer
    )
    transient = c.states.optimizer_transient_bytes * per_gpu / zero1
    critic = c.critic
    if critic is not None:
        # PPO: the value model trains beside the policy under one optimizer (TRL's
        # PolicyAndValueWrapper, prepared as one model), its states sharded as the policy's; the
        # frozen reward model is sharded under ZeRO-3 as the reference copy is (prepare_deepspeed)
        value = critic.states
        reward = c.reward_weight_bytes * per_gpu / zero3
        critic_parts = (
            value.trainable_weight_bytes * per_gpu / zero3,
            value.gradient_bytes * per_gpu / zero2,
            value.optimizer_bytes * per_gpu / zero1,
        )
        weights = weights + critic_parts[0] + reward
        gradients = gradients + critic_parts[1]
        optimizer = optimizer + critic_parts[2]
        transient = transient + value.optimizer_transient_bytes * per_gpu / zero1
    # expert parallelism (terms/experts.py): where a state is not sharded, a GPU holds 1 / ep of
    # the routed experts' share of it (whole experts) in place of 1 / tp; sharded, the dense share
    experts, ep = c.experts, v.expert_parallel
    apart = (ep > 1) & (experts.params > 0)
    change = fraction * (1 / ep - 1 / tp)
    weights = weights + where(
        apart & (zero3 == 1),
        experts.weight_fraction * (c.states.trainable_weight_bytes + c.states.frozen_weight_bytes) * change,
        0.0,
    )
    gradients = gradients + where(
        apart & (zero2 == 1), experts.trainable_fraction * c.states.gradient_bytes * change, 0.0
    )
    optimizer = optimizer + where(
        apart & (zero1 == 1), experts.trainable_fraction * c.states.optimizer_bytes * change, 0.0
    )
    # a layer's backward: its gathered weights, the prefetched ones, its gradients or their
    # reduce-scatter buffer; at the end of forward and while the loss gradient is formed only the
    # gathered weights (all of them without resharding after forward)
    working = where(sharded_weights, (fsdp.gathered_backward_bytes + fsdp.layer_reduce_bytes) / tp, 0.0)
    gathered = where(sharded_weights, fsdp.gathered_forward_bytes / tp, 0.0)
    working_forward = where(
        sharded_weights, (fsdp.gathered_forward_bytes + fsdp.layer_reduce_bytes) / tp, 0.0
    )
    root = where(sharded_weights, fsdp.root_gathered_bytes / tp, 0.0)
    pool = where(sharded_weights, fsdp.all_gather_pool_bytes / tp, 0.0)
    offload = v.offload
    # FSDP's CPU offload (code 3) copies each sharded gradient to the host as its reduce-scatter
    # completes and frees the GPU's (torch fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce,
    # offload_to_cpu): no gradient stays, and accumulation adds on the CPU
    params_off, grads_off = offload >= 2, offload == 3
    offloaded = (
        where(offload >= 1, optimizer, 0.0)
        + where(params_off, weights, 0.0)
        + where(grads_off, gradients, 0.0)
    )
    gradients = where(grads_off, 0.0, gradients)
    optimizer = where(offload >= 1, 0.0, optimizer)
    # bitsandbytes' paged optimizers allocate their states with cudaMallocManaged (unified
    # memory): the driver moves those pages to the host when the GPU runs short, so they are not
    # resident memory, and the caching allocator never sees them
    paged = where(offload >= 1, 0.0, c.states.paged_optimizer_bytes * per_gpu / zero1)
    optimizer = optimizer - paged
    transient = where(offload >= 1, 0.0, transient)
    weights = where(params_off, 0.0, weights)
    working = where(params_off, maximum(working, 2 * c.states.largest_layer_weight_bytes / tp), working)
    working_forward = where(params_off, maximum(working_forward, working), working_forward)
    gathered = where(params_off, maximum(gathered, 2 * c.states.largest_layer_weight_bytes / tp), gathered)

    # activations of the in-flight micro-batches on the first pipeline stage (1F1B)
    tokens = local_tokens(c, v)
    replicated_divisor = where(v.sequence_parallel, tp, 1)
    layers_on_host = offloaded_activation_bytes(c, v, rank)
    offloaded = offloaded + layers_on_host
    stored = _stored_layer_bytes(c, v, rank) - layers_on_host
    stored = (
        stored + c.activations.outside_per_token / tp * tokens + c.copies.frozen_cast_stored_bytes * per_gpu
    )
    if critic is not None:
        # the value model's forward runs first and is held, with the policy's, until the one backward
        stored = (
            stored + _stored_layer_bytes(critic, v, rank) + critic.activations.outside_per_token / tp * tokens
        )
    recompute: Any = 0.0
    for sharded, replicated in c.activations.recompute_layers:
        recompute = maximum(recompute, (sharded / tp + replicated / replicated_divisor) * tokens)
    recompute = recompute + c.copies.frozen_cast_recompute_bytes / tp
    if (
        c.activations.batch_split_per_token or c.activations.batch_split_recompute
    ):  # only diffusion joint blocks have one
        split = where(v.micro_batch > 1, tokens / tp, 0.0)
        stored = stored + c.activations.batch_split_per_token * split
        recompute = recompute + c.activations.batch_split_recompute * split
    # one layer's working set (terms/activations.py layer_working_bytes): in forward, and while
    # the last layer runs (is recomputed) in backward
    # with context parallelism, the layer's key/value exchange buffers besides (terms/context.py)
    exchange, cp = c.work.context, v.context_parallel
    activation_bytes = c.precision.activation_bytes
    layer_forward = (
        (c.activations.layer_working_forward + exchange_forward_bytes(exchange, cp, activation_bytes))
        / tp
        * tokens
    )
    layer_backward = (
        (c.activations.layer_working_backward + exchange_backward_bytes(exchange, cp, activation_bytes))
        / tp
        * tokens
    )
    held = c.loss.logits_held * tokens / tp * on_head
    # TRL's fused log-prob head allocates its tile buffers in forward and again in backward
    tile = minimum(tokens, c.loss.tile_tokens) * c.loss.tile_per_token + c.loss.tile_fixed
    loss = (c.loss.logits_loss * tokens / tp + tile) * on_head
    loss_backward = (c.loss.logits_backward * tokens / tp + tile) * on_head
    # PPO: the generated logits, kept from generation to the next one (rollout_step.py), and the
    # policy's outputs its loss keeps after backward (terms/memory.py ppo_logits_bytes)
    kept = v.held_logits
    retained = c.loss.logits_retained * tokens / tp * on_head + kept
    held = held + kept
    loss = loss + kept
    loss_backward = loss_backward + kept

    autocast = c.copies.autocast_cache_bytes * per_gpu / zero3
    # the copies the matmuls saved for backward: all of them while the loss runs backward, all but
    # the head's once the head's backward is done
    saved_copies = c.copies.autocast_saved_bytes * per_gpu / zero3
    if critic is not None:
        autocast = autocast + critic.copies.autocast_cache_bytes * per_gpu / zero3
        saved_copies = saved_copies + critic.copies.autocast_saved_bytes * per_gpu / zero3
    head_copy = c.copies.autocast_head_bytes * per_gpu / zero3
    # the sharded gradients live in blocks the reduce-scatter stream allocated; once freed by
    # zero_grad those stay reserved on that stream, so before gradients exist they are reserved
    # memory that forward and the start of backward cannot use
    # (with gradient accumulation they are resident, counted as gradients)
    scatter_pool = where(sharded_weights & (v.grad_accum == 1), gradients, 0.0)
    temporaries = working + c.copies.dequant_bytes / tp + root + pool
    # the side streams' reserved blocks until the gradients exist (forward, start of backward)
    early_pools = pool + scatter_pool
    side = c.copies.dequant_bytes / tp + root + pool + scatter_pool
    # torch's pipeline schedules run every micro-batch's backward without gradient sync and the
    # reduce-scatter once after the last (torch 2.13 distributed/pipelining/stage.py
    # backward_maybe_with_nosync, perform_reduce_grad): under FSDP the stage's unsharded gradients
    # accumulate at the reduce dtype (fsdp/_fully_shard/_fsdp_param.py
    # to_accumulated_grad_if_needed) from the first backward to the end of the last
    pipelined = (v.pipeline_parallel > 1) & sharded_dp & (zero >= 2)
    unsharded_grads = c.states.gradient_bytes * fsdp.reduce_grad_factor * per_gpu
    resident = where(pipelined, unsharded_grads, where(v.grad_accum > 1, gradients, 0.0))
    head_grad = c.loss.head_grad_bytes / tp / zero2 * on_head
    loss_head_grad = c.loss.loss_head_grad_bytes / tp / zero2 * on_head
    # under FSDP2's root group the head's gradient stays unsharded from the head's backward
    # until backward ends
    head_unsharded = where(
        sharded_weights & fsdp.root_grads_unsharded, c.loss.head_grad_bytes / tp * on_head, 0.0
    )
    overhead = v.overhead_bytes

    # the frozen encoders run before the denoiser's forward, without grad: their working set is a
    # moment of its own, counted as the temporaries it needs beyond the forward's activations
    encode = c.encoders.peak[0] + c.encoders.peak[1] * v.micro_batch
    encoding = maximum(encode - (stored + loss + autocast + gathered + side), 0.0)
    engine = v.rollout_bytes
    forward = _terms(
        weights,
        resident,
        optimizer,
        stored,
        loss,
        autocast + gathered + side + maximum(encoding, layer_forward),
        overhead,
        engine,
    )
    fraction = v.cache_fraction
    forward = _cached(forward, early_pools, fraction)
    # optimizer-in-backward: each step's temporaries come with its gradient; the largest gradient
    # (the embedding's) completes at the end of backward
    stepping = transient if c.optimizer_in_backward else 0.0
    # start of backward: the loss gradient over the vocabulary, then the last layer recomputed
    # (after the head's backward, with that layer's gradients)
    # two moments: the loss's backward over the vocabulary, and right after it the last layer's
    # backward (recomputed first where checkpointed) with the head's gradient; the larger one
    loss_moment = _terms(
        weights,
        maximum(resident, loss_head_grad),
        optimizer,
        stored,
        loss_backward,
        gathered + side + saved_copies,
        overhead,
        engine,
    )
    layer_moment = _terms(
        weights,
        maximum(resident, maximum(head_grad, head_unsharded)),
        optimizer,
        stored + recompute,
        held,
        working_forward + layer_backward + side + saved_copies - head_copy,
        overhead,
        engine,
    )
    loss_moment = _cached(loss_moment, early_pools, fraction)
    layer_moment = _cached(layer_moment, early_pools, fraction)
    start, _ = _larger(loss_moment, layer_moment)
    # end of backward: every gradient present; the embedding's new gradient and its sum with
    # the tied head's (or the accumulated) gradient are alive for a moment
    embedding = (
        (c.loss.embedding_grad_end_bytes + where(v.grad_accum > 1, c.loss.embedding_grad_accum_bytes, 0.0))
        / tp
        * on_embed
    )
    # FSDP2: the last group's unsharded gradients and the reduce-scatter buffer they are copied
    # into, once its parameters are resharded (post_backward reshards before it reduces), or a
    # layer's working set, whichever is larger
    last_group = sharded_weights & (fsdp.last_group_grad_bytes > 0)
    end_working = where(
        last_group,
        maximum(working + head_unsharded, fsdp.last_group_grad_bytes / tp)
        + c.copies.dequant_bytes / tp
        + pool,
        temporaries,
    )
    end = _cached(
        # optimizer-in-backward steps the summed gradient once its inputs are freed: the step's
        # temporaries come after the sum's moment, not beside it
        _terms(
            weights,
            # pipelined: the accumulated unsharded gradients and the shards they reduce into
            where(pipelined, unsharded_grads + gradients, gradients),
            optimizer,
            0.0,
            retained,
            maximum(embedding, stepping) + end_working,
            overhead,
            engine,
        ),
        pool,
        fraction,
    )
    backward, end_later = _larger(start, end)
    # the all-gather stream's pool stays reserved through the optimizer step
    step = _cached(
        _terms(weights, gradients, optimizer, 0.0, retained, transient + pool, overhead, engine),
        pool,
        fraction,
    )
    phases = {"forward": forward, "backward": backward, "optimizer": step}
    moments = {
        "forward": (forward, early_pools),
        "backward": (start, early_pools),
        "backward end": (end, pool),
        "optimizer": (step, pool),
    }
    if v.rollout:
        # between optimizer steps (zero_grad has freed the gradients, unless accumulated): the
        # engine generates beside the policy's weights and optimizer state; then the policy (and
        # the reference) score the completions under no_grad, one micro-batch at a time: one
        # layer's working set and the log-prob head's buffers
        generation = _cached(
            _terms(
                weights,
                0.0,
                optimizer,
                0.0,
                v.generation_logits,
                v.generation_temporaries + pool,
                overhead,
                v.generation_bytes,
            ),
            pool,
            fraction,
        )
        # PPO scores with the reference, value and reward models' forwards of its own size
        # (`scoring_bytes`, rollout_step.py), GRPO one micro-batch at a time
        scoring_loss, scoring_working = (kept, v.scoring_bytes) if v.scoring_bytes else (loss, layer_forward)
        scoring = _cached(
            _terms(
                weights,
                0.0,
                optimizer,
                0.0,
                scoring_loss,
                scoring_working + gathered + side,
                overhead,
                engine,
            ),
            early_pools,
            fraction,
        )
        phases = {"generation": generation, "scoring": scoring} | phases
        moments = {"generation": (generation, pool), "scoring": (scoring, early_pools)} | moments
    return Memory(
        phases=phases,
        # the reference copy's share of `weights`, where a preference stage keeps one
        states={"weights": weights, "gradients": gradients, "optimizer": optimizer}
        | ({"reference": reference} if c.reference.resident_bytes else {})
        # PPO's value model (its weights, gradients and optimizer state on the GPU) and the
        # reward model's share of `weights`
        | (
            {
                "critic": where(params_off, 0.0, critic_parts[0])
                + where(grads_off, 0.0, critic_parts[1])
                + where(offload >= 1, 0.0, critic_parts[2]),
                "critic_gradients": where(grads_off, 0.0, critic_parts[1]),
                "reward_model": where(params_off, 0.0, reward),
            }
            if critic is not None
            else {}
        ),
        offloaded=offloaded,
        paged=paged,
        stream_pool={
            "generation": pool,
            "scoring": early_pools,
            "forward": early_pools,
            "backward": where(end_later, pool, early_pools),
            "optimizer": pool,
        },
        # what max_memory_allocated() would see: each moment without the side streams' pools
        moments=moments,
    )


def _larger(first: dict[str, Any], second: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Of two moments, the one with the larger total (term by term, scalars or arrays), and
    whether that is `second` (a tie keeps `first`)."""
    later = sum(second.values()) > sum(first.values())
    if later.__class__ is bool:
        # Python-number totals, so Python-number terms: `where` would take each from that moment
        return (second if later else first), later
    return {name: where(later, second[name], first[name]) for name in TERMS}, later


def local_tokens(c: Coefficients, v: Layout) -> Any:
    """Tokens of one micro-batch on each GPU: its sequences' tokens, split over the context-
    parallel group (terms/context.py)."""
    return v.micro_batch * c.seq_len / v.context_parallel


def _layer_bytes_per_token(c: Coefficients, v: Layout) -> Any:
    """Saved bytes per token of all layers on one GPU of the tensor-parallel group."""
    replicated_divisor = where(v.sequence_parallel, v.tensor_parallel, 1)
    return (
        c.activations.layers_sharded / v.tensor_parallel
        + c.activations.layers_replicated / replicated_divisor
    )


def _stored_layer_bytes(c: Coefficients, v: Layout, rank: Any = 0) -> Any:
    """Saved activations of the layers on a pipeline rank (0: the first): its share of the
    layers for the micro-batches its schedule holds in flight (terms/pipeline.py;
    min(pp - rank, grad_accum) for 1F1B)."""
    in_flight = pipeline_in_flight(
        v.pipeline_schedule, v.pipeline_parallel, v.grad_accum, v.virtual_stages, rank
    )
    return _layer_bytes_per_token(c, v) / v.pipeline_parallel * in_flight * local_tokens(c, v)


def offloaded_activation_bytes(c: Coefficients, v: Layout, rank: Any = 0) -> Any:
    """Saved layer activations moved to CPU memory by activation offloading: all but the
    layers in flight (terms/savers.py); zero without offloading."""
    if c.activations.offload_resident >= 1:
        return 0.0 * v.micro_batch
    resident = _layer_bytes_per_token(c, v) * c.activations.offload_resident * local_tokens(c, v)
    stored = _stored_layer_bytes(c, v, rank)
    return stored - minimum(stored, resident)


@direct_init
@dataclass(frozen=True)
class Hardware:
    """What the step time needs to know about a GPU type. Fields may be arrays."""

    peak_flops_per_s: Any
    attention_peak_flops_per_s: Any  # the 16-bit rate under an fp8 recipe, else the peak above
    efficiency: Any
    # the linears' efficiency relative to `efficiency`: below 1 for fp8 matmuls (terms/timing.py
    # fp8_matmul_efficiency_ratio), 1 otherwise
    linear_efficiency_ratio: Any
    nvlink_bytes_per_s: Any  # one direction; 0 without a scale-up link
    scale_up_domain_gpus: Any
    network_bytes_per_s: Any
    pcie_bytes_per_s: Any
    memory_bandwidth_bytes_per_s: Any


def link_bytes_per_s(hw: Hardware, extent: Any, spans_nodes: Any) -> Any:
    """Usable per-GPU bandwidth of a collective whose ranks spread over `extent` consecutive
    GPUs (its ranks times the stride of the dimensions inside it): NVLink (Infinity Fabric, ICI)
    while those GPUs fit one scale-up domain, even across nodes (an NVL72 rack's 18 trays, a TPU
    slice's hosts), else the network across nodes and PCIe within one; each at a stated bus
    efficiency."""
    nvlink = hw.nvlink_bytes_per_s * INTRA_NODE_EFFICIENCY
    pcie = hw.pcie_bytes_per_s * INTRA_NODE_EFFICIENCY
    on_nvlink = (hw.nvlink_bytes_per_s > 0) & (extent <= hw.scale_up_domain_gpus)
    off_domain = where(spans_nodes, hw.network_bytes_per_s * INTER_NODE_EFFICIENCY, pcie)
    return where(on_nvlink, nvlink, off_domain)


def layer_exchange_seconds(
    hw: Hardware, bytes_per_token: Any, tokens: Any, extent: Any, gpus_per_node: Any
) -> Any:
    """Seconds a GPU spends moving `bytes_per_token` for each of the `tokens` it handles in a
    step over the ranks of a dimension spread over `extent` consecutive GPUs (the context-parallel
    key/value exchange, the expert-parallel all-to-alls): zero where the dimension is 1 GPU, as
    its bytes are."""
    return bytes_per_token * tokens / link_bytes_per_s(hw, extent, extent > gpus_per_node)


@direct_init
@dataclass(frozen=True)
class StepSeconds:
    """Seconds per optimizer step by cause."""

    compute: Any
    pipeline_bubble: Any
    data_parallel_comm: Any
    tensor_parallel_comm: Any
    offload: Any
    dequantisation: Any
    float8_casts: Any
    # torch.compile's fused pointwise kernels: eager memory traffic removed (zero or negative)
    compile_fusion: Any = 0.0
    # a diffusion pipeline's frozen VAE encoder and text encoders, run forward each micro-batch
    # (frozen_encoders gpu / offload; terms/encoders.py)
    frozen_encoders: Any = 0.0
    # the optimizer step on the CPU under offload, bound by the host's memory bandwidth
    host_optimizer: Any = 0.0
    # a preference stage's no-grad forwards: the reference's, and KTO's KL batch through the policy;
    # a GRPO step's scoring of its completions (the reference's and the policy's old log-probs)
    reference_forward: Any = 0.0
    # a GRPO step's rollout (terms/rollout.py): generating the completions, and loading the
    # policy's updated weights into a vLLM engine
    generation: Any = 0.0
    weight_sync: Any = 0.0
    # context parallelism's key/value exchange not hidden under the attention (terms/context.py)
    context_parallel_comm: Any = 0.0
    # expert parallelism's token all-to-alls (terms/experts.py), exposed but under DualPipeV
    expert_parallel_comm: Any = 0.0
    # the busiest expert rank's expert matmuls beyond the mean's (expert_imbalance)
    expert_imbalance: Any = 0.0

    def overheads(self) -> dict[str, Any]:
        """Everything on top of the trained model's compute, by name."""
        return {
            "pipeline_bubble": self.pipeline_bubble,
            "data_parallel_comm": self.data_parallel_comm,
            "tensor_parallel_comm": self.tensor_parallel_comm,
            "context_parallel_comm": self.context_parallel_comm,
            "expert_parallel_comm": self.expert_parallel_comm,
            "expert_imbalance": self.expert_imbalance,
            "offload": self.offload,
            "dequantisation": self.dequantisation,
            "float8_casts": self.float8_casts,
            "frozen_encoders": self.frozen_encoders,
            "host_optimizer": self.host_optimizer,
            "reference_forward": self.reference_forward,
            "generation": self.generation,
            "weight_sync": self.weight_sync,
        }

    @property
    def busy(self) -> Any:
        """Seconds the GPU computes: the trained model's step, the frozen models' forwards and
        a rollout's generation."""
        return self.compute + self.frozen_encoders + self.reference_forward + self.generation

    def dominant_overhead(self) -> str:
        """The largest term other than compute ('none' when all are zero)."""
        name, value = max(self.overheads().items(), key=lambda item: float(item[1]))
        return name if value > 0 else "none"

    @once
    def total(self) -> Any:
        """Seconds per step (worked out once: the time, cost and energy figures all read it)."""
        return (
            self.compute
            + self.pipeline_bubble
            + self.data_parallel_comm
            + self.tensor_parallel_comm
            + self.context_parallel_comm
            + self.expert_parallel_comm
            + self.expert_imbalance
            + self.offload
            + self.dequantisation
            + self.float8_casts
            + self.compile_fusion
            + self.frozen_encoders
            + self.host_optimizer
            + self.reference_forward
            + self.generation
            + self.weight_sync
        )


def step_seconds(
    c: Coefficients,
    hw: Hardware,
    v: Layout,
    *,
    gpus_per_node: Any,
    comm_overlap: float,
    host_bytes_per_s: float = float("inf"),
    all_in: bool = False,
) -> StepSeconds:
    """Step time: roofline compute plus (unless `all_in`, a user-given MFU) the pipeline
    bubble, exposed data-parallel and tensor-parallel communication, offload traffic and torchao's
    float8 casts, less the eager traffic torch.compile's fusion removes; QLoRA dequantisation and
    a diffusion pipeline's frozen encoders' forward are added either way (see terms/timing.py for
    each formula's source)."""
    fsdp = c.fsdp  # the sharded working set (terms/fsdp.py)
    tp, pp, dp = v.tensor_parallel, v.pipeline_parallel, v.data_parallel
    gpus = v.gpus
    global_tokens = v.micro_batch * c.seq_len * v.grad_accum * dp
    flops = c.work.flops.total
    # the attention core and the output head run at the 16-bit rate under the fp8 recipes
    sixteen_bit = c.work.attention_flops + c.work.flops.head_training
    critic = c.critic
    if critic is not None:  # PPO's value model trains in the same step (PolicyAndValueWrapper)
        flops = flops + critic.work.flops.total
        sixteen_bit = sixteen_bit + critic.work.attention_flops + critic.work.flops.head_training
    linear_per_token = (flops - sixteen_bit) / (hw.peak_flops_per_s * hw.linear_efficiency_ratio)
    compute = (
        global_tokens
        * (linear_per_token + sixteen_bit / hw.attention_peak_flops_per_s)
        / (gpus * hw.efficiency)
    )
    weights = c.work.quantised_weights * v.stage_fraction / tp
    dequant = (
        QLORA_DEQUANT_BYTES_PER_WEIGHT
        * weights
        * c.work.dequant_recompute_factor
        / hw.memory_bandwidth_bytes_per_s
        * v.grad_accum
    )
    # the frozen encoders' forward (no grad) on each micro-batch: at the compute dtype's rate (the
    # 16-bit one under an fp8 recipe, which converts only the trained model's linears) and the
    # step's efficiency; under `offload` they still run on the GPU, after their weights come over
    encoders = (
        global_tokens * c.encoders.flops_per_token / (gpus * hw.attention_peak_flops_per_s * hw.efficiency)
    )
    # a preference stage's no-grad forwards, at the linears' rate and the step's efficiency
    reference = forward_seconds(global_tokens * c.reference.flops_per_token, gpus, hw)
    if all_in:
        zero: Any = 0.0 * compute
        return StepSeconds(compute, zero, zero, zero, zero, dequant, zero, zero, encoders, zero, reference)
    # float8 casts: each GPU casts its tensor-parallel shard of its stage's linears
    tokens = local_tokens(c, v)
    casts_per_micro = tokens * c.work.float8_cast_bytes_per_token + c.work.float8_cast_weight_bytes
    casts = casts_per_micro * v.stage_fraction / tp * v.grad_accum / hw.memory_bandwidth_bytes_per_s
    # compile's fusion: each GPU runs its stage's layers on its micro-batches (tensor parallelism
    # taken to shard the fused tensors too, though without sequence parallelism norms are not)
    fused = tokens * c.work.compile_fusion_bytes_per_token * v.grad_accum
    fused_s = fused * v.stage_fraction / tp / hw.memory_bandwidth_bytes_per_s
    # the traffic removed comes out of the time the efficiency leaves beyond the matmuls at peak
    # ((1 - efficiency) x compute); small models, memory-bound in eager, reach that bound
    fusion = 0.0 - minimum(fused_s, (1 - hw.efficiency) * compute)  # 0.0, not -0.0, when none
    bubble = pipeline_bubble_seconds(
        compute + dequant + casts + fusion, pp, v.grad_accum, v.virtual_stages, v.pipeline_schedule
    )

    # the states shard over `shard` ranks (data- and context-parallel, within one HSDP group),
    # taken to cross nodes when one HSDP group's GPUs (all its stages) exceed a node; the HSDP
    # replicas all-reduce their shards across the whole job
    shard, replicas = v.shard, v.data_parallel_replicate
    spans = gpus / replicas > gpus_per_node
    # the shard group's ranks sit tensor_parallel apart (torchtitan's and Megatron's meshes put
    # tensor parallelism innermost)
    bandwidth = link_bytes_per_s(hw, tp * shard, spans)
    replica_bandwidth = link_bytes_per_s(hw, gpus, gpus > gpus_per_node)
    share = v.stage_fraction / tp
    grads = (c.states.gradient_bytes + (critic.states.gradient_bytes if critic else 0.0)) * share
    # gradients are reduced once per step, under the last micro-batch's backward (2/3 of it);
    # ZeRO-3 gathers weights twice and reduce-scatters gradients every micro-batch, under all
    # of the compute; under HSDP each shard is then all-reduced over the replicas
    ring = ring_allreduce_seconds(grads, shard, bandwidth) + ring_allreduce_seconds(
        grads / shard, replicas, replica_bandwidth
    )
    gathered = (c.work.weights_16bit_bytes + (critic.work.weights_16bit_bytes if critic else 0.0)) * share
    # ZeRO-3 gathers a reference copy once per micro-batch, for its forward
    reference_gathered = c.reference.gathered_bytes * share
    # FSDP2 gathers twice (once without resharding after forward) and reduce-scatters at the
    # reduce dtype (terms/fsdp.py)
    gathers = 1 + fsdp.reshard_after_forward
    reduced = grads * fsdp.reduce_grad_factor
    per_micro = gather_or_scatter_seconds(
        gathers * gathered + reference_gathered + reduced, shard, bandwidth
    ) + ring_allreduce_seconds(reduced / shard, replicas, replica_bandwidth)
    zero3 = (v.zero_stage == 3) & (shard > 1)
    comm = where(zero3, per_micro * v.grad_accum, ring)
    window = where(zero3, compute, 2 / 3 * compute / v.grad_accum)
    data_parallel = exposed_seconds(comm, window, comm_overlap)

    per_layer = 4 + 2 * c.activations.recompute_layer_share
    volume = tokens * c.model.hidden_size * c.precision.activation_bytes
    tp_bandwidth = link_bytes_per_s(hw, tp, False)
    tensor_parallel = (
        per_layer * c.model.num_layers / pp * v.grad_accum * ring_allreduce_seconds(volume, tp, tp_bandwidth)
    )
    # context parallelism: each layer's key/value all-gathers and gradient rotations (the CP
    # ranks sit next to the tensor-parallel ones, as torchtitan's and Megatron's meshes order
    # them), hidden under the attention's own compute at comm_overlap (terms/context.py)
    cp = v.context_parallel
    cp_comm = layer_exchange_seconds(
        hw,
        exchange_bytes(c.work.context, cp, c.precision.activation_bytes, c.activations.recompute_layer_share),
        tokens / tp / pp * v.grad_accum,
        tp * cp,
        gpus_per_node,
    )
    attention = (
        global_tokens * c.work.attention_flops / (gpus * hw.attention_peak_flops_per_s * hw.efficiency)
    )
    context_parallel = exposed_seconds(cp_comm, attention, comm_overlap)
    # expert parallelism: each GPU routes its share of the tokens (its tensor-parallel rank's,
    # sequence parallel) to the experts' ranks and back; the EP ranks sit next to one another
    ep = v.expert_parallel
    # the busiest expert rank receives expert_imbalance x the mean's tokens, and the step waits
    # for it: its all-to-alls and its expert matmuls take that much longer (terms/experts.py)
    skew = 1.0 if ep.__class__ is int and ep == 1 else where(ep > 1, v.expert_imbalance, 1.0)
    expert_parallel = skew * layer_exchange_seconds(
        hw,
        all_to_all_bytes(c.experts, ep, c.precision.activation_bytes, c.activations.recompute_layer_share),
        tokens / tp / pp * v.grad_accum,
        ep,
        gpus_per_node,
    )
    linears = global_tokens * linear_per_token / (gpus * hw.efficiency)  # compute's linear part
    imbalance = (skew - 1) * c.experts.active_fraction * linears
    # DualPipeV runs one chunk's forward beside another's backward so that each one's dispatch
    # and combine run under the other's compute (DeepSeek-V3, arXiv 2412.19437, sec. 3.2.1;
    # torchtitan's pipeline_parallel_expert_parallel_overlap, on by default): hidden at
    # comm_overlap under the step's compute, exposed otherwise
    dual = SCHEDULE_CODES["dualpipev"]
    if not (v.pipeline_schedule.__class__ is int and v.pipeline_schedule != dual):
        expert_parallel = where(
            v.pipeline_schedule == dual,
            exposed_seconds(expert_parallel, compute, comm_overlap),
            expert_parallel,
        )
    zero_dp = where(v.zero_stage >= 1, shard, 1)
    # gradients down and updated weights up (ZeRO-Offload); with the parameters on the host each
    # gather copies the shards up, in forward and in backward, and under FSDP's offload the
    # updated shards stay on the host (no separate upload)
    trainable = c.counts.trainable * share / zero_dp
    moved = trainable * (c.precision.grad_bytes + where(v.offload == 3, 0.0, c.precision.weight_bytes))
    moved = moved + where(
        v.offload >= 2, 2 * v.grad_accum * c.counts.total * c.precision.weight_bytes * share / zero_dp, 0.0
    )
    # the CPU optimizer step: it reads the weights, gradients and optimizer state and writes the
    # weights and state back (2 x state + weight + gradient bytes per parameter), every process of
    # the node at once over the host's memory bandwidth; nothing runs beside it
    host_bytes = 2 * c.states.optimizer_bytes * share / zero_dp + trainable * (
        c.precision.weight_bytes + c.precision.grad_bytes
    )
    if critic is not None:  # PPO's value model is offloaded and stepped with the policy
        value = critic.counts.trainable * share / zero_dp
        bytes_per = critic.precision.grad_bytes + where(v.offload == 3, 0.0, critic.precision.weight_bytes)
        moved = (
            moved
            + value * bytes_per
            + where(
                v.offload >= 2,
                2 * v.grad_accum * critic.counts.total * critic.precision.weight_bytes * share / zero_dp,
                0.0,
            )
        )
        host_bytes = (
            host_bytes
            + 2 * critic.states.optimizer_bytes * share / zero_dp
            + value * (critic.precision.weight_bytes + critic.precision.grad_bytes)
        )
    offload = where(v.offload >= 1, moved / hw.pcie_bytes_per_s, 0.0)
    on_node = minimum(gpus, gpus_per_node)
    host_optimizer = where(v.offload >= 1, host_bytes * on_node / host_bytes_per_s, 0.0)
    # frozen encoders kept on the CPU: their weights come over PCIe for every micro-batch
    offload = offload + c.encoders.offload_bytes * v.grad_accum / hw.pcie_bytes_per_s
    # activation offloading: every offloaded byte goes down in forward and up in backward, on
    # side streams under the compute
    copies = 2 * offloaded_activation_bytes(c, v) * v.grad_accum / hw.pcie_bytes_per_s
    offload = offload + exposed_seconds(copies, compute, OFFLOAD_OVERLAP)
    return StepSeconds(
        compute,
        bubble,
        data_parallel,
        tensor_parallel,
        offload,
        dequant,
        casts,
        fusion,
        encoders,
        host_optimizer,
        reference,
        context_parallel_comm=context_parallel,
        expert_parallel_comm=expert_parallel,
        expert_imbalance=imbalance,
    )


def forward_seconds(flops: Any, gpus: Any, hw: Hardware) -> Any:
    """Seconds of no-grad forward FLOPs spread over `gpus`, at the linears' rate and the
    step's efficiency (a frozen model's forward, with no backward to overlap)."""
    return flops / (gpus * hw.peak_flops_per_s * hw.linear_efficiency_ratio * hw.efficiency)
