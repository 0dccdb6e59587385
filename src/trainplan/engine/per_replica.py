"""Everything about a scenario that does not depend on the parallel layout or the GPU.

Memory and time are sums of these per-replica, per-token coefficients divided by the layout
(tensor/pipeline/data parallelism, ZeRO stage, micro-batch). `estimate()` builds them once per
scenario; the planner builds them once per checkpointing mode and evaluates every candidate
layout from the same numbers with the same formulas (per_gpu.py). A record is kept for the
scenarios that differ from it only in fields the builder does not read (`NOT_READ`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from operator import attrgetter
from typing import Any

from trainplan.engine.samples import sample_shape
from trainplan.engine.terms.activations import (
    ActivationMode,
    grad_carrying_blocks,
    layer_activations,
    layer_working_bytes,
    outside_layers,
)
from trainplan.engine.terms.context import ContextExchange, context_exchange
from trainplan.engine.terms.experts import ExpertShare, expert_share
from trainplan.engine.terms.flops import FlopsPerToken, flops_per_token
from trainplan.engine.terms.fsdp import FsdpWorkingSet, fsdp_coefficients
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.engine.terms.kernels import fused_layer_kernels
from trainplan.engine.terms.memory import (
    LogprobHead,
    fused_loss_bytes,
    grpo_selective_logits_bytes,
    layer_weight_bytes,
    logits_bytes,
    logprob_head_bytes,
    logsoftmax_logits_bytes,
    optimizer_state_bytes,
    optimizer_transient_bytes,
    padded_sdpa_bytes_per_token,
    ppo_cache_bytes_per_token,
    ppo_logits_bytes,
    selective_logits_bytes,
)
from trainplan.engine.terms.params import ParamCounts, count_params, lora_run_params, resolved_lora, targeted
from trainplan.engine.terms.precisions import (
    ADAPTER_RECIPE,
    BASE_WEIGHT_BYTES,
    OPTIMIZERS,
    PRECISIONS,
    QLORA_RECOMPUTE_FACTOR,
    PrecisionBytes,
    compute_dtype_adapters,
)
from trainplan.engine.terms.savers import (
    checkpoint_every,
    checkpointed_layers,
    chunked_loss_bytes,
    kbit_upcast_extra_bytes,
    offload_resident_fraction,
    op_sac_saved,
)
from trainplan.engine.terms.timing import FLOAT8_DYNAMIC_CAST_RECIPES, compile_fusion_bytes, float8_cast_bytes
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.model import Linear, ModelSpec, derived
from trainplan.specs.presets import resolved_adapter_dtype
from trainplan.specs.rollout import ROLLOUT_FIELDS, ROLLOUT_STAGES, resolved_rollout
from trainplan.specs.scenario import SCENARIO_FIELDS, Scenario, is_pattern, resolved_base_weights
from trainplan.specs.stages import (
    CRITIC_STAGES,
    resolved_loss,
    resolved_reference,
    sequences_per_sample,
    stage_model,
    value_model,
)
from trainplan.specs.validity import QUANTISED_BASES
from trainplan.specs.weights import block_linears, block_params, weight_linears


@dataclass(frozen=True)
class FrozenEncoders:
    """A diffusion pipeline's frozen VAE and text encoders, run each step (frozen_encoders gpu /
    offload; terms/encoders.py): their resident weights (unsharded, like the EMA), the working
    set of running them (`peak`: at micro-batch 0 and per sample), the weight bytes brought over
    PCIe per micro-batch when offloaded, and their forward FLOPs per main-stream token (per
    sample / tokens), timed apart from the denoiser's at the compute dtype's rate."""

    resident_bytes: float = 0.0
    peak: tuple[float, float] = (0.0, 0.0)
    offload_bytes: float = 0.0
    flops_per_token: float = 0.0


@dataclass(frozen=True)
class ReferenceModel:
    """The reference of a preference stage (specs/stages.py): the frozen copy's weights per
    replica (`reference model`; sharded as the policy's are), its 16-bit weights gathered once
    per micro-batch under ZeRO-3, the forward FLOPs each trained token brings in the step (the
    reference's no-grad forwards, and KTO's no-grad KL forward of the policy) and before training
    (`precomputed`: one pass over the data). TRL runs the reference after the policy's forward,
    while the policy's activations are held (DPOTrainer._compute_loss), as its own forward: its
    working set is one layer's and one tile of its fused head, the forward's own size."""

    kind: str = "none"
    resident_bytes: float = 0.0
    gathered_bytes: float = 0.0
    flops_per_token: float = 0.0
    precompute_flops_per_token: float = 0.0


@dataclass(frozen=True)
class LossTerms:
    """The loss side of one replica (terms/memory.py, terms/savers.py): the LM head's gradient,
    what of it is alive while the loss runs backward, the embedding's gradient at the end of
    backward (summed with a tied head's, or accumulated), and the logits and loss buffers per
    token: held into backward, alive while the loss is formed, alive while its gradient is."""

    head_grad_bytes: float
    # of it, what is alive while the loss's backward runs over the vocabulary: the head's
    # gradient comes from the head's own backward, after the loss's, unless the loss applies the
    # head itself (chunked: per chunk, each chunk's gradient accumulating while later chunks run
    # backward; fused: the head's gradient formed inside the loss)
    loss_head_grad_bytes: float
    embedding_grad_end_bytes: float
    embedding_grad_accum_bytes: float
    logits_held: float
    logits_loss: float
    logits_backward: float
    # TRL's fused log-prob head: per-call tile buffers, in forward and again in backward, for at
    # most `tile_tokens` tokens, plus the fixed head-weight tile (terms/memory.py LogprobHead)
    tile_tokens: int = 0
    tile_per_token: float = 0.0
    tile_fixed: float = 0.0
    # per token, what the loss's inputs keep alive after backward, through the optimizer step
    # (PPO's policy outputs, referenced until its mini-batch ends; terms/memory.py)
    logits_retained: float = 0.0


@dataclass(frozen=True)
class WeightCopies:
    """Weight copies one replica makes while it runs (terms/precisions.py): autocast's 16-bit
    copies of fp32 weights (cached through forward, and those the matmuls save for backward),
    a quantised base's dequantised largest matrix, and a frozen fp32 base's 16-bit casts
    (stored, or made again while a checkpointed layer is recomputed)."""

    autocast_cache_bytes: float
    # of those copies, what the matmuls save for backward once the forward's cache is gone: the
    # head's, and the layers' where they are not checkpointed (freed as each backward runs)
    autocast_saved_bytes: float
    autocast_head_bytes: float
    dequant_bytes: float
    frozen_cast_stored_bytes: float
    frozen_cast_recompute_bytes: float


@dataclass(frozen=True)
class Activations:
    """What one replica's layers keep for backward, per token at tensor parallel 1 (terms/
    activations.py, terms/denoisers.py): the layer sums split into the part tensor parallelism
    shards and the part only sequence parallelism shards, each recomputed layer, one layer's
    forward and backward working set, what is kept outside the layers, the share left on the GPU
    under activation offload, the share of layers re-run, and what a joint block keeps only at a
    micro-batch above 1."""

    # activations per token (tensor parallel 1): layer sums split into the part TP shards and
    # the part only sequence parallelism shards; the largest single layer for recompute
    layers_sharded: float
    layers_replicated: float
    recompute_layers: tuple[tuple[float, float], ...]
    # one layer's working set per token (terms/activations.py layer_working_bytes): the largest
    # forward transient, and the largest while a layer runs in backward (recomputed or not)
    layer_working_forward: float
    layer_working_backward: float
    outside_per_token: float
    offload_resident: float = 1.0  # share of the layers' saved activations left on the GPU
    recompute_layer_share: float = 0.0  # share of layers whose forward (and TP traffic) re-runs
    # per token, kept only at a micro-batch above 1 (a joint block's split output, terms/denoisers.py
    # `_split_copies`): by the stored layers, and by the largest recomputed one
    batch_split_per_token: float = 0.0
    batch_split_recompute: float = 0.0


@dataclass(frozen=True)
class ModelStates:
    """One replica's model states (ZeRO, Rajbhandari et al. 2020; terms/precisions.py): its
    trainable and frozen weights, gradients, optimizer state and the optimizer step's
    temporaries, the largest layer's weights and gradients, the paged share of the optimizer
    state, the largest single gradient, an EMA copy and the registered buffers."""

    # model states of one replica
    trainable_weight_bytes: float
    frozen_weight_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    optimizer_transient_bytes: float
    largest_layer_weight_bytes: float
    largest_layer_grad_bytes: float
    # of optimizer_bytes, the states a paged optimizer keeps in unified memory (not the master)
    paged_optimizer_bytes: float = 0.0
    largest_grad_bytes: float = 0.0
    ema_bytes: float = 0.0
    buffer_bytes: float = 0.0  # the model's registered buffers (ModelSpec.buffer_elements)


@dataclass(frozen=True)
class StepWork:
    """What one replica's step computes and moves, per token unless named otherwise (terms/
    flops.py, terms/timing.py): FLOPs by kind and the attention's, a quantised base's weights
    dequantised per pass and how often, the 16-bit weight bytes, torchao's float8 casts, and the
    eager traffic torch.compile's fusion removes."""

    # time
    flops: FlopsPerToken
    attention_flops: float
    quantised_weights: float
    dequant_recompute_factor: float
    weights_16bit_bytes: float
    # torchao float8 casts per micro-batch (terms/timing.py): bytes per token, bytes of weights
    float8_cast_bytes_per_token: float = 0.0
    float8_cast_weight_bytes: float = 0.0
    # eager memory traffic per token that torch.compile's fusion removes (terms/timing.py)
    compile_fusion_bytes_per_token: float = 0.0
    # the keys and values context parallelism exchanges (terms/context.py)
    context: ContextExchange = ContextExchange()


@dataclass(frozen=True)
class Coefficients:
    """Per-replica bytes and per-token bytes/FLOPs of one scenario, before any parallelism: the
    spec, its counts and precision, and one record per group of terms (model `states`, weight
    `copies`, the `loss` side, `activations`, the step's `work`, the `fsdp` working set, frozen
    `encoders`). A model role of a post-training run (a frozen reference, a reward model, a
    critic) is one such record of its own spec: a frozen role's states hold weights only."""

    model: ModelSpec
    counts: ParamCounts
    precision: PrecisionBytes
    base: str | None
    full: bool
    checkpointing: str
    seq_len: int
    states: ModelStates
    copies: WeightCopies
    loss: LossTerms
    activations: Activations
    work: StepWork
    stage_fractions: dict[int, float] = field(default_factory=dict, compare=False)
    rank_shares: dict[tuple[int, int, bool], tuple[float, ...]] = field(default_factory=dict, compare=False)
    # memory savers (terms/savers.py)
    optimizer_in_backward: bool = False
    # ZeRO-3 / FSDP2 working set (terms/fsdp.py); used only when weights are sharded
    fsdp: FsdpWorkingSet = FsdpWorkingSet()
    # an EMA copy of the trainable weights (diffusers EMAModel) or a JEPA's EMA target encoder:
    # on every GPU whatever the sharding (each rank updates its own copy)
    sample: TokenShape | None = None  # one image / clip of a diffusion, video or JEPA model
    # a diffusion pipeline's frozen VAE and text encoders (FrozenEncoders)
    encoders: FrozenEncoders = FrozenEncoders()
    # a preference stage's reference (ReferenceModel); `seq_len` counts both sequences of a pair
    reference: ReferenceModel = ReferenceModel()
    # the routed experts' share, for expert parallelism (terms/experts.py)
    experts: ExpertShare = ExpertShare()
    # PPO's value model, trained beside the policy (its own record, `critic_coefficients`), and
    # its frozen reward model's weights
    critic: Coefficients | None = None
    reward: ModelSpec | None = None
    reward_weight_bytes: float = 0.0

    @cached_property
    def layer_params(self) -> list[int]:
        """Parameters of each layer in forward order."""
        model = self.model
        return [block_params(block, model) for block in model.blocks for _ in range(block.count)]

    def stage_fraction(self, pipeline_parallel: int) -> float:
        """Fraction of parameters on the heaviest pipeline stage, which the step time is read
        from: layers split evenly (rounded up), the embedding and any vision tower on the first
        stage, the head and final norm on the last."""
        if pipeline_parallel == 1:
            return 1.0
        if pipeline_parallel not in self.stage_fractions:
            per_layer = self.layer_params
            size = math.ceil(len(per_layer) / pipeline_parallel)
            stages = [sum(per_layer[i : i + size]) for i in range(0, len(per_layer), size)]
            stages[0] += self.counts.embedding + self.counts.extras
            stages[-1] += self.counts.head + self.model.final_norms * self.model.norm_params
            self.stage_fractions[pipeline_parallel] = max(stages) / self.counts.total
        return self.stage_fractions[pipeline_parallel]

    def rank_fractions(
        self, pipeline_parallel: int, virtual_stages: int = 1, v_shape: bool = False
    ) -> tuple[float, ...]:
        """Fraction of the parameters on each pipeline rank: the layers split evenly (rounded up,
        as torchtitan's and Megatron's even splits do) into pipeline_parallel x virtual_stages
        chunks, rank r holding chunks r, r + p, ... (the interleaved placement; one chunk a rank
        otherwise), or chunks r and 2p - 1 - r in a V (DualPipeV and ZB-V, two chunks a rank:
        torch's generate_rank_to_stage_mapping style "v"), the embedding and any vision tower on the
        first chunk, the head and final norm on the last (rank p - 1's, or in a V rank 0's)."""
        key = (pipeline_parallel, virtual_stages, v_shape)
        if key not in self.rank_shares:
            self.rank_shares[key] = self._rank_fractions(pipeline_parallel, virtual_stages, v_shape)
        return self.rank_shares[key]

    def _rank_fractions(
        self, pipeline_parallel: int, virtual_stages: int, v_shape: bool
    ) -> tuple[float, ...]:
        """`rank_fractions`, worked out (once a layout)."""
        chunks = pipeline_parallel * virtual_stages
        if chunks == 1:
            return (1.0,)
        per_layer = self.layer_params
        size = math.ceil(len(per_layer) / chunks)
        parts = [sum(per_layer[i * size : (i + 1) * size]) for i in range(chunks)]
        parts[0] += self.counts.embedding + self.counts.extras
        parts[-1] += self.counts.head + self.model.final_norms * self.model.norm_params
        total = self.counts.total
        if v_shape:
            return tuple(
                (parts[rank] + parts[chunks - 1 - rank]) / total for rank in range(pipeline_parallel)
            )
        return tuple(sum(parts[rank::pipeline_parallel]) / total for rank in range(pipeline_parallel))


#: The scenario fields `build_coefficients` never reads: the model reference (the spec is passed
#: in), the parallel layout, the GPU, and what only time, cost, energy and loading read. Every
#: other field, a new one included, keys the cache; a test runs the builder on a scenario that
#: records what it reads and holds that none of these is read.
NOT_READ = frozenset(
    {
        "model",
        "force",
        "vae",
        "micro_batch",
        "grad_accum",
        "gpu",
        "gpus",
        "zero_stage",
        "tensor_parallel",
        "pipeline_parallel",
        "virtual_stages",
        "pipeline_schedule",
        "context_parallel",
        "data_parallel_replicate",
        "expert_parallel",
        "expert_imbalance",
        "sequence_parallel",
        "offload",
        "overhead_gib",
        "epochs",
        "steps",
        "mfu",
        "gpus_per_node",
        "scale_up_domain",
        "scale_out_bytes_per_s",
        "pricing",
        "usd_per_gpu_hour",
        "committed_discount",
        "spot_discount",
        "region",
        "pue",
        "host_overhead",
        "idle_fraction",
        "comm_overlap",
        "load_source",
        "load_parallel",
    }
)
KEY_FIELDS: tuple[str, ...] = tuple(name for name in SCENARIO_FIELDS if name not in NOT_READ)
_key_values = attrgetter(*KEY_FIELDS)  # one call, in C: the tuple of their values
CACHE_SIZE = 256  # records kept; a full cache starts over (one step, safe across threads)
_cache: dict[tuple[int, tuple[object, ...]], Coefficients] = {}


def coefficients(model: ModelSpec, scenario: Scenario) -> Coefficients:
    """The coefficients of `scenario` on `model`, built once per spec object and the values of
    `KEY_FIELDS`: scenarios that differ only in layout, GPU, price or region share one record
    (the planner's candidates, a web page's GPU and layout changes). A record holds its spec, so
    the spec's id in the key cannot be reused while the record is kept."""
    model = stage_model(model, scenario.stage)  # a reward model's score head
    key = (id(model), _key_values(scenario))
    found = _cache.get(key)
    if found is not None and found.model is model:
        return found
    built = build_coefficients(model, scenario)
    if len(_cache) >= CACHE_SIZE:
        _cache.clear()
    _cache[key] = built
    return built


def build_coefficients(model: ModelSpec, scenario: Scenario) -> Coefficients:
    """The coefficients of `scenario` on `model` (the `NOT_READ` fields are not read). A
    regular-expression LoRA target is first read as the module names it selects on `model`."""
    if scenario.method != "full" and is_pattern(scenario.lora.targets):
        scenario = dataclasses.replace(scenario, lora=derived(model, resolved_lora, scenario.lora))
    shape = sample_shape(model, scenario)  # checks the sample fields; None for a language model
    precision = PRECISIONS[scenario.precision]
    optimizer = OPTIMIZERS[scenario.optimizer]
    counts = derived(model, count_params, scenario.method, scenario.lora)
    base = resolved_base_weights(scenario)
    full = scenario.method == "full"
    largest_matrix = derived(model, _largest_matrix)
    weights = weight_linears(model)  # shared blocks once per copy (Zamba2); `_layer_linears` per layer run
    compute_bytes = precision.activation_bytes
    # peft keeps adapters (and so their gradients and optimizer state) in fp32 whatever the
    # base precision (`autocast_adapter_dtype`, on by default); torchtune and the diffusers
    # scripts at the compute dtype (presets.resolved_adapter_dtype: by the model when unset)
    adapter_dtype = resolved_adapter_dtype(model.kind, scenario, precision.compute)[0]
    adapter_bytes = 4 if adapter_dtype == "fp32" else compute_bytes
    if full:
        states = precision
    else:
        states = ADAPTER_RECIPE if adapter_bytes == 4 else compute_dtype_adapters(compute_bytes)
    head_matrix = model.head_rows * model.head_width
    # bitsandbytes quantises nn.Linear modules only: weight tensors applied by einsum (XLNet) stay
    # at the compute dtype under an int8 / nf4 base
    quantisable = [(n, lin) for n, lin in weights if lin.role != "einsum"]
    quantisable_weights = sum(n * lin.copies * lin.in_features * lin.out_features for n, lin in quantisable)
    kbit_bytes = 0.0  # what prepare_model_for_kbit_training's fp32 casts add
    if full:
        trainable_weights: float = counts.trainable * precision.weight_bytes
        frozen_weights: float = (counts.total - counts.trainable) * compute_bytes
        rows_cols = derived(model, _weight_rows_and_columns) + counts.total - counts.linear_weights
        largest = max(largest_matrix, counts.embedding)
        layer_bytes = layer_weight_bytes(model, precision.weight_bytes)
        layer_grads = layer_weight_bytes(model, precision.grad_bytes)
        gathered_bytes: float = precision.weight_bytes
        edge_bytes: float = precision.weight_bytes
    else:
        base_bytes = BASE_WEIGHT_BYTES[base or "bf16"]
        other_bytes: float = compute_bytes if base in QUANTISED_BASES else base_bytes
        matrices = quantisable_weights if base in QUANTISED_BASES else counts.linear_weights
        frozen_weights = frozen_base_bytes(model, counts, base or "bf16", compute_bytes)
        if scenario.kbit_upcast:
            # the unquantised rest (embeddings, norms, head) in fp32; the embedding output, and
            # with it the residual stream, is then fp32 too (bitsandbytes returns each matmul
            # in its input's dtype)
            kbit_bytes = kbit_upcast_extra_bytes(counts.total - matrices, compute_bytes)
            frozen_weights += kbit_bytes
        trainable_weights = counts.lora * states.weight_bytes
        rank = scenario.lora.rank
        adapted = derived(model, _adapted_linears, scenario.lora.targets)
        rows_cols = sum(
            n * lin.copies * (2 * rank + lin.in_features + lin.out_features) for n, lin in adapted
        )
        largest = max(rank * max(lin.in_features, lin.out_features) for _, lin in adapted)
        layer_bytes = layer_weight_bytes(model, base_bytes)
        layer_grads = 0.0
        gathered_bytes = base_bytes
        edge_bytes = other_bytes + (4 - compute_bytes if kbit_bytes else 0)
    fp32_stream = base == "fp32" or kbit_bytes > 0
    residual = precision.residual_bytes if full else (4 if fp32_stream else compute_bytes)
    mode = ActivationMode(
        activation_bytes=compute_bytes,
        residual_bytes=residual,
        weights_trainable=full,
        lora_targets=frozenset() if full else frozenset(lin.name for _, lin in adapted),
        attention=scenario.attention,
        ssm_kernel=scenario.ssm_kernel,
        kernels=scenario.kernels,
        checkpointing=scenario.activation_checkpointing,
        dropout=model.dropout > 0,
        lora_dropout=not full and scenario.lora.dropout > 0,
        adapter_bytes=adapter_bytes,
        # the min-cut partition of compiled blocks (terms/activations.py); language models only
        compiled=scenario.compile and model.kind == "llm",
    )
    ckpt = scenario.activation_checkpointing
    every = checkpoint_every(ckpt)
    checkpointed = checkpointed_layers(model, every) if every else [0] * len(model.blocks)
    recompute: list[tuple[float, float]] = []
    ema_bytes = 0.0
    encoders = FrozenEncoders()
    batch_split = batch_split_recompute = 0.0
    working_forward = working_backward = 0.0  # diffusion / JEPA blocks: not modelled
    last_backward = recomputed_working = 0.0
    # TRL's fused log-prob head (for the stages it scores) replaces the head's autocast copies
    loss_kind = resolved_loss(scenario) if model.kind == "llm" else "standard"
    retained = 0.0  # per token, kept after backward (PPO's policy outputs)
    # autocast over fp32 weights: accelerate copies the 16-bit outputs to fp32
    upcast = precision.name.startswith("amp-")
    head: LogprobHead | None = None
    autocast_head = 0 if loss_kind == "logprob" else head_matrix
    # a reference model (or the adapter-disabled policy) scores each batch after the policy
    # (GRPO's scores the generation batch before training, in a moment of its own)
    reference_scored = (
        resolved_reference(scenario) in ("model", "adapter") and scenario.stage not in ROLLOUT_STAGES
    )
    if model.kind != "llm":
        from trainplan.engine.terms.denoisers import checkpointed_blocks  # not loaded for language models

        checkpointed = checkpointed_blocks(model, every)
        assert shape is not None  # sample_shape gives every non-LLM scenario a sample
        sample = _sample_terms(model, scenario, shape, precision, counts, mode, checkpointed)
        seq = sample.tokens
        sharded, replicated, recompute = sample.layers, 0.0, list(sample.recompute)
        held, loss, backward = sample.held, sample.loss, sample.backward
        outside = sample.outside
        flops = sample.flops
        ema_bytes = sample.ema_bytes
        encoders = sample.encoders
        batch_split, batch_split_recompute = sample.batch_split, sample.batch_split_recompute
    else:
        seq = scenario.seq_len
        sharded = replicated = 0.0
        carrying = grad_carrying_blocks(model, mode)  # a suffix of model.blocks
        skipped = len(model.blocks) - len(carrying)
        for block, kept_inputs in zip(carrying, checkpointed[skipped:], strict=True):
            working = layer_working_bytes(model, block, mode)
            if block.no_grad:  # a pass under no_grad keeps nothing and has no backward
                working_forward = working[0]
                continue
            layer = layer_activations(model, block, mode)
            reruns = (every is not None and kept_inputs > 0) or ckpt == "op"
            # forward ends, and backward starts, with the last layer (the others' transients come
            # with fewer tensors saved); a recomputed layer runs its forward again inside
            # backward, so both its transients count wherever it sits
            working_forward, last_backward = working
            if reruns:
                recomputed_working = max(recomputed_working, *working)
            full_layer = (layer.attention + layer.mlp + layer.scores_per_key * seq, layer.norms)
            if every is not None:
                # checkpointed layers keep their input; the others (full:N) everything
                replicated += kept_inputs * residual * model.stream_width
                sharded += (block.count - kept_inputs) * full_layer[0]
                replicated += (block.count - kept_inputs) * layer.norms
                if kept_inputs:
                    recompute.append(full_layer)
            elif ckpt == "op":
                saved, _ = op_sac_saved(block, model, compute_bytes)
                replicated += block.count * residual * model.stream_width
                sharded += block.count * saved
                recompute.append(full_layer)
            elif ckpt == "selective":
                sharded += block.count * (full_layer[0] - layer.scores_per_key * seq)
                replicated += block.count * layer.norms
            else:
                sharded += block.count * full_layer[0]
                replicated += block.count * layer.norms
        working_backward = max(recomputed_working, last_backward)
        if loss_kind == "logprob":
            head = logprob_head_bytes(
                model.hidden_size, model.vocab_size, compute_bytes, residual, edge_bytes
            )
            held, loss, backward = head.held, head.loss, head.backward
        elif loss_kind == "selective" and scenario.stage in CRITIC_STAGES:
            rollout = resolved_rollout(scenario)
            assert rollout is not None
            held, loss, backward, retained = ppo_logits_bytes(
                model.head_rows,
                model.hidden_size,
                model.num_layers,
                compute_bytes,
                upcast=upcast,
                completion_share=rollout.completion_len / seq,
                kv_bytes_per_token=ppo_cache_bytes_per_token(model, compute_bytes, upcast),
            )
        elif loss_kind == "selective" and (rollout := resolved_rollout(scenario)) is not None:
            held, loss, backward = grpo_selective_logits_bytes(
                model.head_rows, model.hidden_size, compute_bytes, upcast=upcast
            )
            # the logits of the completion's positions only (logits_to_keep = completion_len + 1),
            # spread over every token of the sequence as the per-token terms are
            share = min(1.0, (rollout.completion_len + 1) / seq)
            loss, backward = loss * share, backward * share
        elif loss_kind == "selective":
            held, loss, backward = selective_logits_bytes(
                model.head_rows,
                model.hidden_size,
                compute_bytes,
                upcast=upcast,
                reference_after=reference_scored,
                metric_copies=scenario.stage == "kto",
            )
        elif loss_kind == "logsoftmax":
            held, loss, backward = logsoftmax_logits_bytes(
                model.head_rows, model.hidden_size, compute_bytes, reference_after=reference_scored
            )
        elif loss_kind == "fused":
            held, loss, backward = fused_loss_bytes(model.hidden_size, compute_bytes)
        elif loss_kind == "chunked":
            held, loss, backward = chunked_loss_bytes(
                model.vocab_size,
                compute_bytes,
                scenario.loss_chunks,
                model.final_logit_softcap,
                scenario.compile,
            )
        else:
            _, loss, backward = logits_bytes(model.head_rows, compute_bytes, model.final_logit_softcap)
            # beside the last layer's backward the standard loss has freed its fp32 log-softmax
            # (traced FSDP2 and 8,192-token steps): only the hidden states' gradient the head's
            # backward hands on is left, as the fused loss's saved one is (the chunked loss keeps
            # its figure: torchtune's published runs, where it sets the peak, sit 2-7% lower
            # without it, and no traced step decides it)
            held = float(model.hidden_size * compute_bytes)
        flops = derived(
            model,
            flops_per_token,
            seq,
            frozen_base=not full,
            lora_params=counts.lora,
            checkpointing=scenario.activation_checkpointing,
            lora_runs=None if full else lora_run_params(model, scenario.lora),
        )
        outside = outside_layers(model, mode, full and loss_kind != "logprob")
        if scenario.stage in CRITIC_STAGES:
            outside += _ppo_forward_extras(model, scenario, compute_bytes, upcast)
        if head is not None:  # the fused log-prob head saves its own copy of its input
            outside += head.saved
    frozen_casts = not full and base == "fp32" and compute_bytes == 2
    # share of the forward matmuls re-run in backward (a quantised base is dequantised again)
    recompute_share = sum(checkpointed) / model.num_layers
    if ckpt == "op":
        recomputed = sum(block.count * op_sac_saved(block, model, 2)[1] for block in model.blocks)
        recompute_share = 2 * recomputed / flops.matmul_forward
    casts = (
        _float8_casts(model, recompute_share, scenario.compile)
        if precision.name in FLOAT8_DYNAMIC_CAST_RECIPES
        else (0.0, 0.0)
    )
    fusion = 0.0
    kernels = fused_layer_kernels(mode)  # Liger's or Unsloth's (refused for other model kinds)
    if mode.compiled or kernels:
        # op-level SAC recomputes every block's pointwise ops; full (full:N) the checkpointed layers
        rerun = [block.count for block in model.blocks] if ckpt == "op" else checkpointed
        fusion = compile_fusion_bytes(model, compute_bytes, rerun, residual_add=not kernels)
    fsdp = fsdp_coefficients(
        model,
        counts,
        scenario,
        weight_bytes=gathered_bytes,
        edge_bytes=edge_bytes,
        grad_bytes=states.grad_bytes,
        master_bytes=states.master_bytes,
    )
    optimizer_bytes = optimizer_state_bytes(counts.trainable, rows_cols, states, optimizer)
    reference = _reference(model, scenario, counts, precision, flops)
    ppo, scorers = _critic(model, scenario, precision)
    if scorers:
        # PPO's value and reward models score each generation batch once under no_grad
        reference = dataclasses.replace(reference, flops_per_token=reference.flops_per_token + scorers)
    return Coefficients(
        model=model,
        counts=counts,
        precision=precision,
        base=base,
        full=full,
        checkpointing=scenario.activation_checkpointing,
        # tokens per micro-batch element: a chosen/rejected pair runs both sequences
        seq_len=seq * sequences_per_sample(scenario.stage),
        states=ModelStates(
            trainable_weight_bytes=trainable_weights,
            frozen_weight_bytes=frozen_weights,
            gradient_bytes=counts.trainable * states.grad_bytes,
            optimizer_bytes=optimizer_bytes,
            # optimizer-in-backward steps one parameter at a time: temporaries of the largest only
            optimizer_transient_bytes=optimizer_transient_bytes(
                largest if scenario.optimizer_in_backward else counts.trainable, largest, states, optimizer
            ),
            largest_layer_weight_bytes=layer_bytes,
            largest_layer_grad_bytes=layer_grads,
            paged_optimizer_bytes=optimizer_bytes - states.master_bytes * counts.trainable
            if optimizer.paged
            else 0.0,
            largest_grad_bytes=largest * states.grad_bytes,
            ema_bytes=ema_bytes,
            buffer_bytes=model.buffer_elements * (precision.weight_bytes if full else compute_bytes),
        ),
        copies=WeightCopies(
            autocast_cache_bytes=(
                precision.autocast_copy_bytes * (counts.linear_weights + autocast_head) if full else 0.0
            ),
            autocast_saved_bytes=(
                precision.autocast_copy_bytes
                * (
                    autocast_head
                    + (
                        counts.linear_weights
                        if scenario.activation_checkpointing in ("none", "selective")
                        else 0
                    )
                )
                if full
                else 0.0
            ),
            autocast_head_bytes=precision.autocast_copy_bytes * autocast_head if full else 0.0,
            dequant_bytes=max(
                (2 * largest_matrix if base in QUANTISED_BASES else 0.0),
                # autocast casts the frozen fp32 head for each use, without caching it
                2.0 * autocast_head if kbit_bytes else 0.0,
            ),
            frozen_cast_stored_bytes=(
                2 * counts.linear_weights
                if frozen_casts and scenario.activation_checkpointing != "full"
                else 0.0
            ),
            frozen_cast_recompute_bytes=(
                2 * layer_weight_bytes(model, 1)
                if frozen_casts and scenario.activation_checkpointing == "full"
                else 0.0
            ),
        ),
        loss=LossTerms(
            head_grad_bytes=head_matrix * precision.grad_bytes if full else 0.0,
            loss_head_grad_bytes=(
                head_matrix * _loss_head_grad_bytes(loss_kind, precision.grad_bytes) if full else 0.0
            ),
            embedding_grad_end_bytes=(
                2 * head_matrix * precision.grad_bytes if full and model.tied_embeddings else 0.0
            ),
            embedding_grad_accum_bytes=head_matrix * precision.grad_bytes
            if full and not model.tied_embeddings
            else 0.0,
            logits_held=held,
            logits_loss=loss,
            logits_backward=backward,
            logits_retained=retained,
            tile_tokens=head.tile_tokens if head else 0,
            tile_per_token=head.tile_per_token if head else 0.0,
            tile_fixed=head.tile_fixed if head else 0.0,
        ),
        activations=Activations(
            layers_sharded=sharded,
            layers_replicated=replicated,
            recompute_layers=tuple(recompute),
            layer_working_forward=working_forward,
            layer_working_backward=working_backward,
            outside_per_token=outside,
            offload_resident=offload_resident_fraction(model.num_layers)
            if scenario.activation_offload
            else 1.0,
            recompute_layer_share=sum(checkpointed) / model.num_layers,
            batch_split_per_token=batch_split,
            batch_split_recompute=batch_split_recompute,
        ),
        sample=shape,
        encoders=encoders,
        work=StepWork(
            flops=flops,
            attention_flops=flops.attention_training
            + ((flops.attention_grad_forward or flops.attention_forward) if flops.recompute else 0.0),
            quantised_weights=_dequantised_weights(model, quantisable_weights)
            if base in QUANTISED_BASES
            else 0.0,
            dequant_recompute_factor=1 + (QLORA_RECOMPUTE_FACTOR - 1) * recompute_share,
            weights_16bit_bytes=counts.total * compute_bytes,
            float8_cast_bytes_per_token=casts[0],
            float8_cast_weight_bytes=casts[1],
            compile_fusion_bytes_per_token=fusion,
            context=context_exchange(model),
        ),
        optimizer_in_backward=scenario.optimizer_in_backward,
        fsdp=fsdp,
        reference=reference,
        experts=expert_share(model, counts.total, counts.trainable, full),
        **ppo,
    )


def _ppo_forward_extras(model: ModelSpec, scenario: Scenario, compute_bytes: int, upcast: bool) -> float:
    """Per token, what PPOTrainer's training forward holds beyond a supervised step's, for the
    policy (traced, calibration/ppo_trace.json; the value model's own are in its record,
    `_critic`): under SDPA with its padding mask, each attention layer's saved additive mask and
    repeated keys and values (a checkpointed policy saves none); the
    policy's KV cache (use_cache on; dropped under checkpointing) and its hidden states
    (output_hidden_states: the final norm's output, fp32 under autocast, and in a 16-bit run the
    embedding's and every layer's, which nothing else keeps)."""
    hidden = model.hidden_size * (4 if upcast else compute_bytes)
    if scenario.activation_checkpointing != "none":
        return hidden
    if not upcast:
        hidden *= model.num_layers + 1
    sdpa = scenario.attention == "sdpa"
    padded = padded_sdpa_bytes_per_token(model, scenario.seq_len, compute_bytes) if sdpa else 0.0
    return padded + ppo_cache_bytes_per_token(model, compute_bytes, upcast) + hidden


def critic_scenario(scenario: Scenario) -> Scenario:
    """The scenario PPO's value model trains under: the policy's, as a full fine-tune of one
    sequence per example with no stage of its own (TRL's PPOTrainer trains the whole value
    model, peft or not: get_peft_model wraps the policy alone, huggingface/trl@f2cd5771
    trl/experimental/ppo/ppo_trainer.py PPOTrainer.__init__), its one-score head's loss a
    standard one over a single label, never checkpointed (PolicyAndValueWrapper's
    gradient_checkpointing_enable reaches the policy alone). Beside a LoRA policy it trains in
    the dtype the base is loaded in (PPO's script loads every model with one dtype): a 16-bit
    base makes it a pure 16-bit model, weights, gradients and AdamW's moments alike."""
    base = resolved_base_weights(scenario)
    precision = "bf16" if base in ("bf16", "fp16") else scenario.precision
    unset: dict[str, Any] = dict.fromkeys(ROLLOUT_FIELDS)  # no stage of its own generates
    return dataclasses.replace(
        scenario,
        stage="sft",
        method="full",
        precision=precision,
        activation_checkpointing="none",
        reference=None,
        reference_weights=None,
        base_weights=None,
        loss=None,
        **unset,
    )


def ppo_model(model: ModelSpec, name: str | None, field: str) -> ModelSpec:
    """PPO's value or reward model (`field` critic_model or reward_model): `name`'s architecture,
    else the policy's, with a one-score head (stages.value_model); a name that does not resolve,
    or is not a language model, is an InputError naming the field."""
    if name is None:
        return value_model(model)
    from trainplan.inputs.resolve import resolve_model  # names resolve only where a run has one

    try:
        spec = resolve_model(name)
    except InputError as error:
        raise InputError(field, error.message) from error
    if spec.kind != "llm":
        raise InputError(
            field, f"{name!r} is a {spec.kind} model; the value and reward models are language models"
        )
    return value_model(spec)


def _critic(model: ModelSpec, scenario: Scenario, precision: PrecisionBytes) -> tuple[dict[str, Any], float]:
    """A PPO scenario's value model (`critic`, its own per-replica record, with what SDPA's padded
    attention saves in its never-checkpointed forward), the reward model (`reward`) and its
    frozen weights, loaded as the reference copy is (huggingface/trl@f2cd5771
    examples/scripts/ppo/ppo.py gives the value, reward, policy and reference models one
    model_kwargs), as Coefficients fields, and the two models' scoring forward FLOPs per trained
    token (added to the reference's); nothing for the other stages."""
    if scenario.stage not in CRITIC_STAGES:
        return {}, 0.0
    critic_spec = ppo_model(model, scenario.critic_model, "critic_model")
    reward_spec = ppo_model(model, scenario.reward_model, "reward_model")
    critic = coefficients(critic_spec, critic_scenario(scenario))
    if scenario.attention == "sdpa":
        padded = padded_sdpa_bytes_per_token(critic_spec, scenario.seq_len, critic.precision.activation_bytes)
        extra = dataclasses.replace(
            critic.activations, outside_per_token=critic.activations.outside_per_token + padded
        )
        critic = dataclasses.replace(critic, activations=extra)
    reward_counts = derived(reward_spec, count_params, "full", scenario.lora)
    reward_flops = derived(
        reward_spec, flops_per_token, scenario.seq_len, frozen_base=False, lora_params=0, checkpointing="none"
    )
    rollout = resolved_rollout(scenario)
    assert rollout is not None
    value = critic.work.flops
    scoring = (
        value.matmul_forward
        + value.attention_forward
        + reward_flops.matmul_forward
        + reward_flops.attention_forward
    )
    fields = {
        "critic": critic,
        "reward": reward_spec,
        "reward_weight_bytes": reference_copy_bytes(reward_spec, scenario, reward_counts, precision),
    }
    return fields, scoring / rollout.num_iterations


#: Forward passes each trained token brings beside the policy's step, by stage and reference:
#: DPO's reference scores the same concatenated batch; KTO's scores the completion batch and the
#: KL batch, and the policy scores the KL batch under no_grad whatever the reference (TRL 1.16.0
#: KTOTrainer._compute_kl_logps). Precomputed: the reference's passes move before training.
_STEP_FORWARDS = {"dpo": 1, "kto": 2, "grpo": 1, "ppo": 1}
_POLICY_FORWARDS = {"kto": 1}


def _policy_forwards(scenario: Scenario) -> float:
    """The policy's own no-grad forwards per trained token: KTO's KL batch; GRPO's old
    log-probs, which GRPOTrainer._generate_and_score_completions computes whenever vLLM
    generates (vllm_importance_sampling_correction, true by default), and with transformers'
    generate only when generation and optimizer steps are misaligned (not under TRL's default
    steps_per_generation = grad_accum, num_iterations 1). Each generation batch is scored once
    and trained num_iterations times: per trained token, 1 / num_iterations forwards."""
    if scenario.stage == "grpo":
        rollout = resolved_rollout(scenario)
        assert rollout is not None
        scored = rollout.engine == "vllm" or rollout.misaligned
        return 1 / rollout.num_iterations if scored else 0
    return _POLICY_FORWARDS.get(scenario.stage, 0)


def _loss_head_grad_bytes(loss_kind: str, grad_bytes: float) -> float:
    """Bytes per head weight of the head's gradient alive while the loss runs backward: none for
    the losses over full logits (the head's own backward comes after them); the gradient
    for the chunked and fused losses (formed inside the loss); TRL's fused log-prob head
    accumulates it in fp32 and returns it cast to the weight's dtype, both alive at its end
    (ChunkedLogProbFunction.backward)."""
    if loss_kind in ("standard", "selective", "logsoftmax"):  # full logits, then the head's backward
        return 0
    if loss_kind == "logprob":
        return 4 + (grad_bytes if grad_bytes != 4 else 0)
    return grad_bytes


def _reference(
    model: ModelSpec, scenario: Scenario, counts: ParamCounts, precision: PrecisionBytes, flops: FlopsPerToken
) -> ReferenceModel:
    """The stage's reference record (ReferenceModel); an empty one for the stages without."""
    kind = resolved_reference(scenario)
    forward = flops.matmul_forward + flops.attention_forward + flops.head_forward
    policy = _policy_forwards(scenario) * forward
    if kind == "none":
        return ReferenceModel(flops_per_token=policy)
    passes = _STEP_FORWARDS[scenario.stage] * forward
    rollout = resolved_rollout(scenario)
    if rollout is not None:  # a generation batch is scored once, trained num_iterations times
        passes /= rollout.num_iterations
    if kind == "precomputed":
        return ReferenceModel(kind, flops_per_token=policy, precompute_flops_per_token=passes)
    if kind == "adapter":
        return ReferenceModel(kind, flops_per_token=policy + passes)
    return ReferenceModel(
        kind,
        resident_bytes=reference_copy_bytes(model, scenario, counts, precision),
        gathered_bytes=counts.total * precision.activation_bytes,
        flops_per_token=policy + passes,
    )


def reference_copy_bytes(
    model: ModelSpec, scenario: Scenario, counts: ParamCounts, precision: PrecisionBytes
) -> float:
    """Bytes of a frozen reference copy: in `reference_weights`, else as the policy's weights
    are loaded (TRL 1.16.0 DPOTrainer.__init__ loads `ref_model` with the policy's
    model_init_kwargs, its quantization_config included): the base's format for LoRA and QLoRA,
    the trained weights' dtype for a full fine-tune (16-bit under *-mixed and bf16, fp32 under
    amp-* and fp32). A quantised copy keeps its unquantised rest at the compute dtype."""
    base = reference_copy_format(scenario)
    if base is None:
        return counts.total * precision.weight_bytes
    return frozen_base_bytes(model, counts, base, precision.activation_bytes)


def reference_copy_format(scenario: Scenario) -> str | None:
    """The format a frozen reference copy is loaded in (`reference_copy_bytes`): the given
    `reference_weights`, else the base's for LoRA and QLoRA; None for a full fine-tune's copy,
    which takes the trained weights' dtype."""
    if scenario.reference_weights is not None:
        return scenario.reference_weights
    if scenario.method == "full":
        return None
    return resolved_base_weights(scenario) or "bf16"


def frozen_base_bytes(model: ModelSpec, counts: ParamCounts, base: str, compute_bytes: int) -> float:
    """Bytes of frozen base weights in `base`: bitsandbytes quantises nn.Linear weights only
    (int8 adds an fp32 scale per output row; NF4's blocks are in BASE_WEIGHT_BYTES), the rest at
    the compute dtype; an unquantised base holds every weight in its dtype."""
    base_bytes = BASE_WEIGHT_BYTES[base]
    if base not in QUANTISED_BASES:
        return counts.total * base_bytes
    quantisable = [(n, lin) for n, lin in weight_linears(model) if lin.role != "einsum"]
    matrices = sum(n * lin.copies * lin.in_features * lin.out_features for n, lin in quantisable)
    scales = 4 * sum(n * lin.copies * lin.out_features for n, lin in quantisable) if base == "int8" else 0
    return matrices * base_bytes + scales + (counts.total - matrices) * compute_bytes


def _layer_linears(model: ModelSpec) -> tuple[tuple[int, Linear], ...]:
    """(layers, matrix) for every matrix of every layer group, in forward order."""
    return tuple((b.count, lin) for b in model.blocks for lin in block_linears(b, model.hidden_size))


def _largest_matrix(model: ModelSpec) -> int:
    """Elements of the largest single weight matrix of a layer."""
    return max(lin.in_features * lin.out_features for _, lin in derived(model, _layer_linears))


def _weight_rows_and_columns(model: ModelSpec) -> int:
    """Sum of rows + columns over every weight matrix (factored optimizers keep one of each)."""
    return sum(n * lin.copies * (lin.in_features + lin.out_features) for n, lin in weight_linears(model))


def _adapted_linears(model: ModelSpec, targets: str | tuple[str, ...]) -> tuple[tuple[int, Linear], ...]:
    """The (layers, matrix) pairs LoRA `targets` selects."""
    return tuple((n, lin) for n, lin in derived(model, _layer_linears) if targeted(lin, targets))


def _dequantised_weights(model: ModelSpec, quantisable: float) -> float:
    """Quantised weights a step dequantises, in units of one forward + backward each: every
    quantisable linear weight (`quantisable`) once, plus half a unit per later forward pass over
    the same weights (`Block.rerun`) and a whole one per later pass with grad; a pass under
    no_grad has no backward, so its weights count half (HRM's stack passes; other models: the
    linear weights)."""
    extra = 0.0
    for block in model.blocks:
        if not (block.rerun or block.no_grad):
            continue
        weights = block.count * sum(
            lin.copies * lin.in_features * lin.out_features for lin in block_linears(block, model.hidden_size)
        )
        runs = 0.5 if block.no_grad else 1.0  # forward, and with grad backward too (2 halves)
        extra += weights * runs - (0.0 if block.rerun else weights)
    return quantisable + extra


def _float8_casts(model: ModelSpec, recompute_share: float, compiled: bool) -> tuple[float, float]:
    """(bytes per token, bytes per micro-batch) of torchao's float8 casts over every layer's
    linears as the layers run them (a token meets top-k of the routed experts; each expert's
    weight is cast whole)."""
    inputs = outputs = weights = 0.0
    for block in model.blocks:
        active_experts = block.mlp.experts_per_token if block.mlp is not None else 0
        for lin in block_linears(block, model.hidden_size):
            active = active_experts if lin.expert else lin.copies
            inputs += block.count * active * lin.in_features
            outputs += block.count * active * lin.out_features
            weights += block.count * lin.copies * lin.in_features * lin.out_features
    return (
        float8_cast_bytes(inputs, outputs, 0.0, recompute_share, compiled),
        float8_cast_bytes(0.0, 0.0, weights, recompute_share, compiled),
    )


@dataclass(frozen=True)
class SampleTerms:
    """The per-token coefficients of a diffusion, video or JEPA scenario (terms/denoisers.py),
    with `tokens` the sample's main-stream tokens: per-sample bytes / tokens, so that the layout
    formulas' micro_batch x seq_len gives per-sample figures back."""

    tokens: int
    layers: float
    recompute: tuple[tuple[float, float], ...]
    outside: float
    held: float
    loss: float
    backward: float
    flops: FlopsPerToken
    ema_bytes: float
    encoders: FrozenEncoders = FrozenEncoders()
    # kept only at a micro-batch above 1 (terms/denoisers.py `_split_copies`): by the stored
    # layers, and by the largest recomputed one
    batch_split: float = 0.0
    batch_split_recompute: float = 0.0


#: What the diffusers training scripts checkpoint: whole blocks (`enable_gradient_checkpointing`).
SAMPLE_CHECKPOINTING = ("none", "full")


def _sample_terms(
    model: ModelSpec,
    scenario: Scenario,
    shape: TokenShape,
    precision: PrecisionBytes,
    counts: ParamCounts,
    mode: ActivationMode,
    checkpointed: list[int],
) -> SampleTerms:
    """Activations, loss buffers, FLOPs and the EMA copy of one image / clip, per token."""
    from trainplan.engine.samples import resolved_ema
    from trainplan.engine.terms.denoisers import denoiser_activations, denoiser_flops, sample_tokens
    from trainplan.engine.terms.encoders import flops_per_sample as encoder_flops
    from trainplan.engine.terms.encoders import offload_bytes as encoder_offload_bytes
    from trainplan.engine.terms.encoders import peak_bytes as encoder_peak_bytes
    from trainplan.engine.terms.encoders import resident_bytes as encoder_resident_bytes

    ckpt = scenario.activation_checkpointing
    if ckpt not in SAMPLE_CHECKPOINTING and not ckpt.startswith("full:"):
        raise InputError(
            "activation_checkpointing",
            f"{shown_value(ckpt)}: {model.name} checkpoints whole blocks as diffusers does; "
            "use none, full or full:N",
        )
    autocast = precision.autocast_copy_bytes > 0
    mode = replace(mode, residual_bytes=4 if autocast else mode.activation_bytes)
    masks = jepa_masks(model, scenario.mask_ratio) if model.kind == "jepa" else ()
    acts = denoiser_activations(
        model, shape, mode, fp32_weights=mode.weights_trainable and precision.weight_bytes == 4, masks=masks
    )
    tokens = sample_tokens(shape)
    frozen = scenario.frozen_encoders
    compute = mode.activation_bytes
    # the frozen VAE and text encoders (terms/encoders.py): resident weights, the working set of
    # running them on a micro-batch (affine in the micro-batch: two points give it), their forward
    # FLOPs, and under offload the weights brought over PCIe for each micro-batch
    one, two = (encoder_peak_bytes(model, shape, n, frozen, compute, compute) for n in (1, 2))
    layers = split = split_recompute = 0.0
    recompute: list[tuple[float, float]] = []
    for (block, per_layer), kept, inputs, copies in zip(
        acts.layers, checkpointed, acts.block_inputs, acts.batch_splits, strict=True
    ):
        layers += (block.count - kept) * per_layer + kept * inputs
        split += (block.count - kept) * copies
        if kept:
            recompute.append((per_layer / tokens, 0.0))
            split_recompute = max(split_recompute, copies)
    adapted = frozenset() if mode.weights_trainable else mode.lora_targets
    flops = denoiser_flops(
        model,
        shape,
        frozen_base=not mode.weights_trainable,
        adapted=adapted,
        rank=scenario.lora.rank,
        checkpointed=checkpointed,
        masks=masks,
    )
    ema = resolved_ema(model, scenario)
    ema_params = _encoder_params(model) if model.kind == "jepa" else counts.trainable
    return SampleTerms(
        tokens=tokens,
        layers=layers / tokens,
        recompute=tuple(recompute),
        outside=acts.outside / tokens,
        held=acts.loss_held / tokens,
        loss=acts.loss_peak / tokens,
        backward=acts.loss_backward / tokens,
        flops=FlopsPerToken(
            matmul_forward=flops.matmul_forward / tokens,
            attention_forward=flops.attention_forward / tokens,
            head_forward=0.0,
            total=flops.total / tokens,
            recompute=flops.recompute / tokens,
            palm_model_flops=(flops.total - flops.recompute) / tokens,
        ),
        ema_bytes=ema_params * EMA_BYTES[ema],
        encoders=FrozenEncoders(
            resident_bytes=float(encoder_resident_bytes(model, frozen, compute)),
            peak=(float(2 * one - two), float(two - one)),
            offload_bytes=float(encoder_offload_bytes(model, frozen, compute)),
            flops_per_token=encoder_flops(model, shape, frozen) / tokens,
        ),
        batch_split=split / tokens,
        batch_split_recompute=split_recompute / tokens,
    )


#: Bytes per parameter of the EMA copy.
EMA_BYTES = {"none": 0, "fp32": 4, "bf16": 2}


def _encoder_params(model: ModelSpec) -> int:
    """Parameters of a JEPA's context encoder (what its EMA target encoder copies)."""
    return sum(
        block.count * block_params(block, model)
        for block in model.blocks
        if block.role in ("embed", "encoder", "encoder_norm")
    )
