"""Expert parallelism: the routed experts split over `expert_parallel` GPUs.

Read from torchtitan at pytorch/torchtitan@238fa995 (config/job_config.py
`expert_parallel_degree`, `expert_tensor_parallel_degree` default 1; distributed/
parallel_dims.py: the sparse mesh pp x dp_replicate x efsdp x ep x etp, efsdp = dp_shard x cp x tp
/ (etp x ep)): each EP rank holds num_experts / ep of every MoE layer's routed experts, whole
(etp 1: the expert ranks take the tensor-parallel ones too), and FSDP shards them over efsdp. So
where ZeRO shards a state, a GPU's share of the experts' is the dense share (1 / (tp x shard
ranks)); where it does not, a GPU holds 1 / ep of the experts' state instead of 1 / tp.

Time: each MoE layer dispatches its tokens' top-k copies to the experts' ranks and combines
them back, an all-to-all each way in forward, again in backward, and again where the layer is
recomputed, (ep - 1) / ep of the copies leaving the GPU each time (torchtitan's ExpertParallel
runs them in the layer's own forward and backward, not overlapped with other compute, except
under DualPipeV: engine/per_gpu.py step_seconds).

Imbalance: `expert_imbalance` (a stated factor, 1 by default) is the busiest EP rank's routed
tokens over the mean. The step waits for that rank, so its expert matmuls (the routed experts'
share of the matmul FLOPs one token runs, `active_fraction`) and the all-to-alls it receives
take that factor longer; its memory is not scaled (the tokens' activations are counted at the
mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.terms.flops import block_matmul_active
from trainplan.specs.model import ModelSpec
from trainplan.specs.weights import block_linears, weight_linears


@dataclass(frozen=True)
class ExpertShare:
    """The routed experts' share of a replica's parameters (of all, and of the trained ones),
    and the elements per token one dispatch moves over every MoE layer (top-k copies of the
    hidden state)."""

    params: int = 0
    weight_fraction: float = 0.0
    trainable_fraction: float = 0.0
    dispatch_elements: float = 0.0
    # the routed experts' share of the matmul parameters one token touches (top-k of them)
    active_fraction: float = 0.0


def expert_share(model: ModelSpec, total_params: int, trainable_params: int, full: bool) -> ExpertShare:
    """The routed experts' parameters and dispatch of `model`; a LoRA run trains (almost) none
    of them (its adapters on experts are left out of the trained share)."""
    params = sum(count * linear.params for count, linear in weight_linears(model) if linear.expert)
    if not params:
        return ExpertShare()
    dispatch = sum(
        block.count * block.mlp.experts_per_token * model.hidden_size
        for block in model.blocks
        if block.mlp is not None and block.mlp.is_moe
    )
    trained = params / trainable_params if full and trainable_params else 0.0
    routed = sum(
        block.count * block.mlp.experts_per_token * linear.in_features * linear.out_features
        for block in model.blocks
        if block.mlp is not None and block.mlp.is_moe
        for linear in block_linears(block, model.hidden_size)
        if linear.expert
    )
    active = sum(block.count * block_matmul_active(block, model) for block in model.blocks)
    return ExpertShare(
        params, params / total_params, trained, float(dispatch), routed / active if active else 0.0
    )


def all_to_all_bytes(
    x: ExpertShare, expert_parallel: Any, activation_bytes: int, recompute_share: float
) -> Any:
    """Bytes each GPU sends per token it routes over one step of one micro-batch: dispatch and
    combine, forward, backward and the recomputed forward."""
    passes = 4 + 2 * recompute_share
    return passes * x.dispatch_elements * activation_bytes * (expert_parallel - 1) / expert_parallel
