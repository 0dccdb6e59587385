"""Which layouts can run: one table of rules, checked on one scenario or on a million candidates.

`layout_problems()` evaluates every rule on numbers or on numpy arrays (one element per
planner candidate). `estimate()` and the scenario parser raise the first problem as an
`InputError` naming the field (`check_layout`); the planner (plan.py) rejects the candidates a
rule marks, counting them under the rule's `reason`. Both ask this one table, so a layout the
planner keeps is one `estimate()` accepts, and one it drops as invalid is one `estimate()`
refuses (tests/test_validity.py checks it over every method and offload mode).

A setting that merely has no effect is not a problem here: ZeRO with a single data-parallel
replica shards over one rank, which is the unsharded layout (STYLE rule 9: a warning on the
result, `estimate._warnings`). The planner keeps such a layout and ranks it; its ties go to the
lower ZeRO stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from trainplan.specs.errors import InputError
from trainplan.specs.offload import PARAM_OFFLOADS
from trainplan.specs.pipeline import MULTI_CHUNK_SCHEDULES, V_CLASSES, V_SCHEDULES
from trainplan.specs.rollout import trainer_gpus

# The base-weight precisions that are quantised (bitsandbytes int8, QLoRA's NF4): what QLoRA
# needs, what kbit_upcast applies to, and what dequantises before each matmul.
QUANTISED_BASES = frozenset({"int8", "nf4"})

if TYPE_CHECKING:
    from trainplan.specs.model import ModelSpec


class LayoutChoice(Protocol):
    """The fields the rules read. A Scenario is one; the planner passes arrays for the first
    five (one element per candidate) and one value for the rest."""

    @property
    def gpus(self) -> Any: ...
    @property
    def tensor_parallel(self) -> Any: ...
    @property
    def pipeline_parallel(self) -> Any: ...
    @property
    def zero_stage(self) -> Any: ...
    @property
    def grad_accum(self) -> Any: ...
    @property
    def sequence_parallel(self) -> Any: ...
    @property
    def virtual_stages(self) -> Any: ...
    @property
    def context_parallel(self) -> Any: ...
    @property
    def data_parallel_replicate(self) -> Any: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def attention(self) -> str: ...
    @property
    def scale_up_domain(self) -> Any: ...
    @property
    def pipeline_schedule(self) -> str | None: ...
    @property
    def expert_parallel(self) -> Any: ...
    @property
    def gpus_per_node(self) -> Any: ...
    @property
    def offload(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def base_weights(self) -> str | None: ...
    @property
    def precision(self) -> str: ...
    @property
    def kbit_upcast(self) -> bool: ...
    @property
    def compile(self) -> bool: ...
    @property
    def activation_checkpointing(self) -> str: ...
    @property
    def optimizer_in_backward(self) -> bool: ...


@dataclass(frozen=True)
class LayoutArrays:
    """Candidate layouts for the rules: the axes the planner searches as arrays (one element per
    candidate), every other setting from the scenario they vary."""

    scenario: LayoutChoice
    gpus: Any
    tensor_parallel: Any
    pipeline_parallel: Any
    zero_stage: Any
    grad_accum: Any
    sequence_parallel: Any
    virtual_stages: Any
    context_parallel: Any = 1
    data_parallel_replicate: Any = 1
    scale_up_domain: Any = None  # per candidate: its GPU type's domain

    @property
    def gpus_per_node(self) -> Any:
        return self.scenario.gpus_per_node

    @property
    def seq_len(self) -> int:
        return self.scenario.seq_len

    @property
    def pipeline_schedule(self) -> str | None:
        return self.scenario.pipeline_schedule

    @property
    def expert_parallel(self) -> Any:
        return self.scenario.expert_parallel

    @property
    def attention(self) -> str:
        return self.scenario.attention

    @property
    def offload(self) -> str:
        return self.scenario.offload

    @property
    def method(self) -> str:
        return self.scenario.method

    @property
    def base_weights(self) -> str | None:
        return self.scenario.base_weights

    @property
    def precision(self) -> str:
        return self.scenario.precision

    @property
    def kbit_upcast(self) -> bool:
        return self.scenario.kbit_upcast

    @property
    def compile(self) -> bool:
        return self.scenario.compile

    @property
    def activation_checkpointing(self) -> str:
        return self.scenario.activation_checkpointing

    @property
    def optimizer_in_backward(self) -> bool:
        return self.scenario.optimizer_in_backward


@dataclass(frozen=True)
class Rule:
    """One validity rule: where it applies (`broken`, array-friendly), what the error names
    (`field`, `message` on one layout) and what the planner counts (`reason`)."""

    field: str
    reason: str
    broken: Callable[[LayoutChoice, ModelSpec | None], Any]
    message: Callable[[LayoutChoice, ModelSpec | None], str]
    needs_model: bool = False


def _model_parallel(c: LayoutChoice) -> Any:
    return c.tensor_parallel * c.pipeline_parallel * c.context_parallel


def _model_parallel_names(c: LayoutChoice) -> str:
    """The degrees `_model_parallel` multiplies, as the error names them (context_parallel only
    where it is set)."""
    names = "tensor_parallel x pipeline_parallel"
    return names if _scalar(c.context_parallel) == 1 else f"{names} x context_parallel"


def _scalar(value: Any) -> Any:
    """A scenario's value, or the first candidate's where the planner passes arrays (for the
    wording of a message only)."""
    return value.flat[0] if hasattr(value, "flat") else value


def _data_parallel(c: LayoutChoice) -> Any:
    """The data-parallel replicas of the layout (zero where the GPUs do not divide)."""
    return _trainer_gpus(c) // _model_parallel(c)


def shard_group(data_parallel: Any, context_parallel: Any, data_parallel_replicate: Any) -> Any:
    """The ranks ZeRO / FSDP shard the states over: the data-parallel replicas and the context-
    parallel ranks (which hold the same weights: torchtitan's FSDP mesh is dp_shard x cp,
    DeepSpeed's ZeRO group spans its sequence-parallel ranks), divided into
    `data_parallel_replicate` hybrid-sharding groups."""
    return data_parallel * context_parallel // data_parallel_replicate


def _shard_ranks(c: LayoutChoice) -> Any:
    """The ranks the states shard over (`shard_group`), from the layout."""
    return shard_group(_data_parallel(c), c.context_parallel, c.data_parallel_replicate)


def _heads(model: ModelSpec | None) -> tuple[int, int]:
    assert model is not None, "a model rule needs the model"
    return model.attention_heads


def _layers(model: ModelSpec | None) -> int:
    assert model is not None, "a model rule needs the model"
    return model.num_layers


def _name(model: ModelSpec | None) -> str:
    assert model is not None, "a model rule needs the model"
    return model.name


def routed(model: ModelSpec | None) -> tuple[int, ...]:
    """The routed experts of each MoE block of `model` (empty for a dense model)."""
    assert model is not None, "a model rule needs the model"
    return tuple(
        block.mlp.num_experts for block in model.blocks if block.mlp is not None and block.mlp.is_moe
    )


def _experts_left_over(expert_parallel: Any, model: ModelSpec | None) -> Any:
    """Whether some MoE block's experts do not split evenly over `expert_parallel` (arrays too)."""
    broken: Any = False
    for experts in set(routed(model)):
        broken = broken | (experts % expert_parallel != 0)
    return broken


def _kind(model: ModelSpec | None) -> str:
    assert model is not None, "a model rule needs the model"
    return model.kind


def _data_parallel_only(degree: Any, model: ModelSpec | None) -> str:
    assert model is not None, "a model rule needs the model"
    return (
        f"{degree}: {model.name} is a {model.kind} model, trained data-parallel (with ZeRO / FSDP) as "
        "the diffusers and JEPA scripts do; tensor, pipeline and context parallelism must be 1"
    )


def _fast_link_gpus(c: LayoutChoice) -> Any:
    """The most GPUs tensor parallelism may span: a node's, or the GPU's scale-up domain where it
    reaches further (an NVL72 rack's 72 GPUs over trays of 4). The domain is the resolved one
    (estimate() and the planner pass the GPU record's, or the scenario's scale_up_domain)."""
    domain, node = c.scale_up_domain, c.gpus_per_node
    return node if domain is None else node + (domain - node) * (domain > node)  # numbers or arrays


def _uses_offload(c: LayoutChoice) -> bool:
    return c.offload != "none"


def accumulation_forbidden(optimizer_in_backward: Any, grad_accum: Any) -> Any:
    """Optimizer-in-backward frees each gradient as soon as its step has run, so gradients
    cannot accumulate over micro-batches (torchtune's recipes raise on
    gradient_accumulation_steps > 1 with optimizer_in_bwd). Works on numpy arrays too."""
    return optimizer_in_backward & (grad_accum > 1)


def resolved_base_weights(c: LayoutChoice) -> str | None:
    """The frozen base's storage format: given, else nf4 for QLoRA, else the weight dtype."""
    if c.method == "full":
        return None
    if c.base_weights is not None:
        return c.base_weights
    if c.method == "qlora":
        return "nf4"
    return {"fp32": "fp32", "fp16-mixed": "fp16", "amp-fp16": "fp16"}.get(c.precision, "bf16")


def quantised_base(c: LayoutChoice) -> bool:
    """Whether the frozen base is stored quantised (int8 or nf4; QLoRA defaults to nf4)."""
    return resolved_base_weights(c) in QUANTISED_BASES


TP_HEADS = "invalid: tensor parallel does not divide the attention heads"
OPTIMIZER_IN_BACKWARD = "invalid: optimizer_in_backward needs grad_accum 1 and no offload"


def _trainer_gpus(c: Any) -> Any:
    """The GPUs the trainer is laid out on: all of them, less a separate rollout engine's."""
    return c.gpus if isinstance(c, LayoutArrays) else trainer_gpus(c)


def _trainer_word(c: Any) -> str:
    """'trainer ' where a separate rollout engine takes some of the GPUs, else ''."""
    return "" if isinstance(c, LayoutArrays) or trainer_gpus(c) == c.gpus else "trainer "


# In the order the errors are raised; the planner counts a candidate under its first problem.
RULES: tuple[Rule, ...] = (
    Rule(
        "gpus",
        "invalid: gpus not a multiple of tensor x pipeline parallel",
        lambda c, m: _trainer_gpus(c) % _model_parallel(c) != 0,
        lambda c, m: (
            f"{_trainer_gpus(c)} {_trainer_word(c)}GPUs is not a multiple of "
            f"{_model_parallel_names(c)} = {_model_parallel(c)}"
        ),
    ),
    Rule(
        "context_parallel",
        "invalid: sequence not split evenly by context parallel",
        lambda c, m: (c.context_parallel > 1) & (c.seq_len % (2 * c.context_parallel) != 0),
        # torch distributed/tensor/experimental/_context_parallel/_load_balancer.py
        # _HeadTailLoadBalancer (torch 2.13): two equal chunks per rank, the head and the tail
        lambda c, m: (
            f"{c.context_parallel}: seq_len {c.seq_len} is not a multiple of 2 x context_parallel = "
            f"{2 * c.context_parallel} (the head-tail load balancer gives each GPU two equal chunks)"
        ),
    ),
    Rule(
        "context_parallel",
        "invalid: context parallel over eager attention",
        lambda c, m: (c.context_parallel > 1) & (c.attention == "eager"),
        lambda c, m: (
            "needs attention flash or sdpa: torch's context parallelism runs SDPA's flash, "
            "efficient and cuDNN kernels only"
        ),
    ),
    Rule(
        "data_parallel_replicate",
        "invalid: HSDP replicas do not divide the data-parallel replicas",
        lambda c, m: _data_parallel(c) % c.data_parallel_replicate != 0,
        lambda c, m: (
            f"{c.data_parallel_replicate} does not divide the {_data_parallel(c)} data-parallel replicas"
        ),
    ),
    Rule(
        "expert_parallel",
        "invalid: expert parallel beyond the ranks it is carved from",
        lambda c, m: (
            (c.expert_parallel > 1) & ((c.tensor_parallel * _shard_ranks(c)) % c.expert_parallel != 0)
        ),
        lambda c, m: (
            f"{c.expert_parallel} does not divide tensor_parallel x the ranks the states shard over = "
            f"{c.tensor_parallel * _shard_ranks(c)}: the expert ranks are carved from them (torchtitan: "
            "efsdp = dp_shard x cp x tp / ep)"
        ),
    ),
    Rule(
        "expert_parallel",
        "invalid: expert parallel not a multiple of tensor parallel",
        lambda c, m: (
            (c.expert_parallel > 1) & (c.tensor_parallel > 1) & (c.expert_parallel % c.tensor_parallel != 0)
        ),
        lambda c, m: (
            f"{c.expert_parallel} is not a multiple of tensor_parallel {c.tensor_parallel}: the expert "
            "ranks take the tensor-parallel ones (torchtitan's expert_tensor_parallel_degree 1)"
        ),
    ),
    Rule(
        "data_parallel_replicate",
        "invalid: HSDP replicas without ZeRO",
        lambda c, m: (c.data_parallel_replicate > 1) & (c.zero_stage == 0),
        lambda c, m: (
            "needs zero_stage >= 1: hybrid sharding replicates sharded states, and without ZeRO "
            "every replica holds them all already"
        ),
    ),
    Rule(
        "base_weights",
        "invalid: QLoRA over an unquantised base",
        lambda c, m: c.method == "qlora" and c.base_weights not in (None, *QUANTISED_BASES),
        lambda c, m: f"qlora quantises the base: use nf4 or int8, not {c.base_weights}",
    ),
    Rule(
        "base_weights",
        "invalid: base weights on a full fine-tune",
        lambda c, m: c.method == "full" and c.base_weights is not None,
        lambda c, m: "only applies to lora/qlora (a full fine-tune trains every weight)",
    ),
    Rule(
        "virtual_stages",
        "invalid: interleaved stages without pipeline parallel",
        lambda c, m: (c.virtual_stages > 1) & (c.pipeline_parallel == 1),
        lambda c, m: "needs pipeline_parallel > 1",
    ),
    Rule(
        "pipeline_schedule",
        "invalid: interleaved schedule without virtual stages",
        lambda c, m: (c.pipeline_schedule == "interleaved-1f1b") & (c.virtual_stages == 1),
        lambda c, m: "interleaved-1f1b needs virtual_stages > 1 (model chunks per GPU)",
    ),
    Rule(
        "pipeline_schedule",
        "invalid: virtual stages on a one-chunk schedule",
        lambda c, m: (c.pipeline_schedule not in (None, *MULTI_CHUNK_SCHEDULES)) & (c.virtual_stages > 1),
        lambda c, m: (
            f"{c.pipeline_schedule} runs one model chunk per GPU: set virtual_stages 1, or "
            "pipeline_schedule interleaved-1f1b"
        ),
    ),
    Rule(
        "pipeline_schedule",
        "invalid: a V schedule without two chunks a GPU",
        lambda c, m: (c.pipeline_schedule in V_SCHEDULES) & (c.virtual_stages != 2),
        lambda c, m: (
            f"{c.pipeline_schedule} runs exactly 2 model chunks per GPU in a V (torch "
            f"{V_CLASSES[str(c.pipeline_schedule)]}): set virtual_stages 2"
        ),
    ),
    Rule(
        "grad_accum",
        "invalid: dualpipev with fewer micro-batches than stages",
        lambda c, m: (c.pipeline_schedule == "dualpipev") & (c.grad_accum < 2 * c.pipeline_parallel),
        lambda c, m: (
            f"dualpipev needs at least as many micro-batches as stages (torch ScheduleDualPipeV): "
            f"grad_accum >= 2 x pipeline_parallel = {2 * c.pipeline_parallel}"
        ),
    ),
    Rule(
        "compile",
        "invalid: a V schedule over compiled stages",
        lambda c, m: c.pipeline_schedule in V_SCHEDULES and c.compile,
        lambda c, m: (
            f"torch's {c.pipeline_schedule} splits each backward into input and weight gradients, "
            "which it does not run on compiled stages (schedules.py "
            "_check_torch_compile_compatibility): set compile false"
        ),
    ),
    Rule(
        "activation_checkpointing",
        "invalid: dualpipev with expert parallelism and checkpointing",
        lambda c, m: (
            c.pipeline_schedule == "dualpipev"
            and c.activation_checkpointing != "none"
            and int(c.expert_parallel) > 1
        ),
        lambda c, m: (
            "torchtitan does not overlap expert parallelism with dualpipev under activation "
            "checkpointing (distributed/dual_pipe_v.py get_dual_pipe_v_flag): set none"
        ),
    ),
    Rule(
        "sequence_parallel",
        "invalid: sequence parallel without tensor parallel",
        lambda c, m: c.sequence_parallel & (c.tensor_parallel == 1),
        lambda c, m: "needs tensor_parallel > 1",
    ),
    Rule(
        "offload",
        "invalid: CPU offload without ZeRO on several GPUs",
        lambda c, m: _uses_offload(c) & (c.zero_stage == 0) & (c.gpus > 1),
        lambda c, m: "CPU offload needs zero_stage >= 1 with several GPUs",
    ),
    Rule(
        "tensor_parallel",
        "invalid: tensor parallel beyond one node",
        lambda c, m: c.tensor_parallel > _fast_link_gpus(c),
        lambda c, m: (
            f"{c.tensor_parallel} exceeds gpus_per_node={c.gpus_per_node}: "
            "tensor parallelism needs the fast intra-node link"
            if _fast_link_gpus(c) == c.gpus_per_node
            else f"{c.tensor_parallel} exceeds the {_fast_link_gpus(c)} GPUs of the scale-up domain: "
            "tensor parallelism needs the fast link"
        ),
        needs_model=True,
    ),
    Rule(
        "offload",
        "invalid: parameter offload needs ZeRO-3",
        lambda c, m: (c.offload in PARAM_OFFLOADS) & (c.zero_stage != 3) & (c.zero_stage != 0),
        lambda c, m: "parameter offload needs zero_stage 3",
    ),
    Rule(
        "optimizer_in_backward",
        OPTIMIZER_IN_BACKWARD,
        lambda c, m: accumulation_forbidden(c.optimizer_in_backward, c.grad_accum),
        lambda c, m: (
            f"cannot run with grad_accum = {c.grad_accum}: each gradient is freed right "
            "after its step, so nothing accumulates. Set grad_accum 1 or optimizer_in_backward false"
        ),
    ),
    Rule(
        "optimizer_in_backward",
        OPTIMIZER_IN_BACKWARD,
        lambda c, m: c.optimizer_in_backward and _uses_offload(c),
        lambda c, m: (
            f"cannot run with offload = {c.offload}: the offloaded optimizer steps on the CPU "
            "after backward. Set offload none or optimizer_in_backward false"
        ),
    ),
    Rule(
        "kbit_upcast",
        "invalid: kbit_upcast without a quantised base",
        lambda c, m: c.kbit_upcast and not quantised_base(c),
        lambda c, m: (
            "needs a quantised base (method qlora, or base_weights int8 or nf4): it casts what "
            "the quantisation leaves unquantised to fp32"
        ),
    ),
    Rule(
        "tensor_parallel",
        "invalid: tensor parallel on a diffusion, video or JEPA model",
        lambda c, m: (_kind(m) != "llm") & (c.tensor_parallel > 1),
        lambda c, m: _data_parallel_only(c.tensor_parallel, m),
        needs_model=True,
    ),
    Rule(
        "pipeline_parallel",
        "invalid: pipeline parallel on a diffusion, video or JEPA model",
        lambda c, m: (_kind(m) != "llm") & (c.pipeline_parallel > 1),
        lambda c, m: _data_parallel_only(c.pipeline_parallel, m),
        needs_model=True,
    ),
    Rule(
        "context_parallel",
        "invalid: context parallel on a diffusion, video or JEPA model",
        lambda c, m: (_kind(m) != "llm") & (c.context_parallel > 1),
        lambda c, m: _data_parallel_only(c.context_parallel, m),
        needs_model=True,
    ),
    Rule(
        "expert_parallel",
        "invalid: expert parallel without routed experts",
        lambda c, m: (c.expert_parallel > 1) & (not routed(m)),
        lambda c, m: f"{c.expert_parallel}: {_name(m)} has no routed experts to split",
        needs_model=True,
    ),
    Rule(
        "expert_parallel",
        "invalid: expert parallel not dividing the experts",
        lambda c, m: (c.expert_parallel > 1) & _experts_left_over(c.expert_parallel, m),
        lambda c, m: (
            f"{c.expert_parallel} does not divide the "
            f"{', '.join(map(str, sorted(set(routed(m)))))} routed experts"
        ),
        needs_model=True,
    ),
    Rule(
        "tensor_parallel",
        TP_HEADS,
        lambda c, m: _heads(m)[0] % c.tensor_parallel != 0,
        lambda c, m: f"{c.tensor_parallel} does not divide the {_heads(m)[0]} attention heads",
        needs_model=True,
    ),
    Rule(
        "tensor_parallel",
        TP_HEADS,
        lambda c, m: (_heads(m)[1] % c.tensor_parallel != 0) & (c.tensor_parallel % _heads(m)[1] != 0),
        lambda c, m: f"{c.tensor_parallel} and the {_heads(m)[1]} key/value heads do not nest",
        needs_model=True,
    ),
    Rule(
        "pipeline_parallel",
        "invalid: more pipeline stages than layers",
        lambda c, m: c.pipeline_parallel > _layers(m),
        lambda c, m: f"must be <= the {_layers(m)} layers",
        needs_model=True,
    ),
)

# Every label the planner may count a layout problem under, in rule order (no repeats).
LAYOUT_REASONS: tuple[str, ...] = tuple(dict.fromkeys(rule.reason for rule in RULES))


@dataclass(frozen=True)
class WithDomain:
    """A scenario with its GPU's scale-up domain resolved (the record's, or the scenario's own
    scale_up_domain), for the rule that needs it; every other setting is the scenario's."""

    scenario: Any
    scale_up_domain: int

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scenario, name)


def layout_problems(choice: LayoutChoice, model: ModelSpec | None = None) -> list[tuple[Rule, Any]]:
    """Every rule with where it is broken: a bool for one layout, a boolean array for arrays of
    candidates. Without a model, the rules that need one (heads, layers) are left out."""
    return [(rule, rule.broken(choice, model)) for rule in RULES if model is not None or not rule.needs_model]


#: The rules that read no model, in order (what a scenario is checked against before its model is read).
_MODEL_FREE_RULES = tuple(rule for rule in RULES if not rule.needs_model)


def check_layout(choice: LayoutChoice, model: ModelSpec | None = None) -> None:
    """Raise the first problem of one layout as an InputError naming its field: the rules of
    `layout_problems`, in its order, stopping at the first one broken."""
    for rule in RULES if model is not None else _MODEL_FREE_RULES:
        if rule.broken(choice, model):
            raise InputError(rule.field, rule.message(choice, model))
