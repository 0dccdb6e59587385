"""Parameter counts: total, active per token (MoE), trainable per method, LoRA adapters.

Exact arithmetic from the architecture: every weight matrix is in x out (+ out bias), norms are
hidden (RMSNorm) or 2 x hidden (LayerNorm), embeddings vocab x hidden, an untied LM head adds
vocab x hidden again. LoRA adds rank x (in + out) per targeted matrix (Hu et al. 2021, eq. 3:
W + BA with B in R^{out x r}, A in R^{r x in}); DoRA adds a magnitude vector of `out` per
targeted matrix (Liu et al. 2024, eq. 5).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.model import (
    ATTENTION_ROLES,
    DENOISER_ROLES,
    EXTRA_ROLES,
    INDEXER_ROLES,
    MLP_ROLES,
    QUERY_VALUE_ROLES,
    SSM_ROLES,
    Block,
    Linear,
    ModelSpec,
)
from trainplan.specs.scenario import LoraSettings, is_pattern
from trainplan.specs.weights import (
    block_active_params,
    block_linears,
    block_params,
    embedding_params,
    head_params,
    total_params,
    weight_linears,
)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a model under a training method."""

    total: int
    embedding: int
    head: int
    layers: int
    linear_weights: int
    extras: int
    active: int
    trainable: int
    lora: int

    @property
    def trainable_fraction(self) -> float:
        """trainable / total."""
        return self.trainable / self.total


def targeted(linear: Linear, targets: str | tuple[str, ...]) -> bool:
    """Whether a LoRA target spec selects `linear`.

    Presets: `qv` = query and value projections (fused qkv modules count, as peft targets the
    module); `attention` = every attention projection; `all-linear` = every linear layer but the
    LM head and the router (peft's "all-linear"), SSM and DSA-indexer projections included; for a diffusion or
    JEPA model (no LM head) every nn.Linear, convolutions left out. Explicit names
    match the module name or its last dotted part, as peft's `target_modules` does; weight
    tensors applied by einsum (XLNet's q/k/v/o/r) are no module and match nothing, and routed
    experts only where peft adapts them (`PEFT_EXPERT_ADAPTER_TYPES`).
    """
    if linear.role == "einsum" or not linear.adaptable:  # a weight tensor peft does not wrap
        return False
    if is_pattern(targets):
        raise RuntimeError("a regular-expression target must be resolved first (resolved_lora)")
    if targets == "qv":
        return linear.role in QUERY_VALUE_ROLES
    if targets == "attention":
        return linear.role in ATTENTION_ROLES
    if targets == "all-linear":
        return linear.in_all_linear or (
            linear.role
            in ATTENTION_ROLES | MLP_ROLES | SSM_ROLES | EXTRA_ROLES | INDEXER_ROLES | DENOISER_ROLES
        )
    name = linear.name
    return any(name == target or name.endswith("." + target) for target in targets)


def module_path(block: Block, linear: Linear, index: int) -> str | None:
    """The full module name the framework gives `linear` in layer `index` of its stack, which
    peft matches a regular-expression target against (`re.fullmatch`): the block's `path`, a
    decoder's attention or MLP module (transformers' self_attn and mlp), then the linear's name.
    None where the tree is not modelled, and for a decoder's routed experts and router, which
    transformers 5 holds as fused 3-D parameters and a router weight (no nn.Linear a regex
    reaches)."""
    if not block.path:
        return linear.name if block.count == 1 and block.role != "decoder" else None
    prefix = block.path.format(index)
    if block.role != "decoder":
        return f"{prefix}.{linear.name}"
    if linear.expert or linear.role == "router":
        return None
    if linear.role in ATTENTION_ROLES:
        return f"{prefix}.self_attn.{linear.name}"
    if linear.role in MLP_ROLES:
        return f"{prefix}.mlp.{linear.name}"
    return None


def regex_targets(model: ModelSpec, pattern: str) -> tuple[str, ...]:
    """The module names a regular-expression LoRA target selects, as peft selects them: the
    pattern fullmatched against every layer's full module names (`module_path`). The estimate
    counts adapters by module name, so a pattern must select a name in every layer and block
    that has it or in none; one that picks some layers (`layers.(0|1).q_proj`) is refused, as is
    one for a model whose module tree is not modelled here."""
    import re

    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise InputError(
            "lora.targets", f"{shown_value(pattern)} is not a regular expression ({error})"
        ) from None
    outcomes: dict[str, set[bool]] = {}
    unknown = False
    for block, start in _stacked(model):
        for linear in block_linears(block, model.hidden_size):
            if linear.role == "einsum":
                continue
            for index in range(start, start + block.count):
                path = module_path(block, linear, index)
                if path is None:
                    unknown = unknown or not (linear.expert or linear.role == "router")
                    continue
                outcomes.setdefault(linear.name, set()).add(compiled.fullmatch(path) is not None)
    chosen = tuple(name for name, seen in outcomes.items() if True in seen)
    split = [name for name in chosen if False in outcomes[name]]
    if unknown and not chosen:
        raise InputError(
            "lora.targets",
            f"{shown_value(pattern)} is a regular expression, and {model.name}'s module names are not "
            "modelled here; list the modules instead: " + ", ".join(module_names(model)),
        )
    if split:
        raise InputError(
            "lora.targets",
            f"{shown_value(pattern)} selects {split[0]} in some layers or blocks but not in others; "
            "adapters on part of a module's layers are not modelled: list module names instead",
        )
    if not chosen:
        example = next(
            (
                module_path(b, lin, s)
                for b, s in sorted(_stacked(model), key=lambda item: not item[0].path)
                for lin in block_linears(b, model.hidden_size)
            ),
            None,
        )
        raise InputError(
            "lora.targets",
            f"{shown_value(pattern)} matches no module of {model.name} (its names look like {example})",
        )
    return chosen


def _stacked(model: ModelSpec) -> list[tuple[Block, int]]:
    """Each block with the index of its first layer in its stack (the blocks of one path)."""
    starts: dict[str, int] = {}
    found = []
    for block in model.blocks:
        if block.rerun:
            continue
        start = starts.get(block.path, 0)
        found.append((block, start))
        starts[block.path] = start + block.count
    return found


def resolved_lora(model: ModelSpec, lora: LoraSettings) -> LoraSettings:
    """`lora` with a regular-expression target turned into the module names it selects."""
    from dataclasses import replace

    if not is_pattern(lora.targets):
        return lora
    assert isinstance(lora.targets, str)
    return replace(lora, targets=regex_targets(model, lora.targets))


def adapter_matrix_params(linear: Linear, lora: LoraSettings) -> int:
    """Adapter parameters of one targeted matrix (one copy): rank x (in + out), + out for DoRA.
    peft's MoE conversion adapts a routed expert's gate and up projections as one fused gate_up
    parameter at twice the rank (its rank_pattern), so their adapters hold rank x (in + 2 out)
    each, a fused gate_up 2 x rank x (in + out) (peft 0.21 transformers_weight_conversion.py)."""
    factor = 2 if linear.peft_converted and linear.role in ("gate", "up") else 1
    if linear.peft_converted and linear.role == "gate_up":
        per_matrix = 2 * lora.rank * (linear.in_features + linear.out_features)
    else:
        per_matrix = lora.rank * (linear.in_features + factor * linear.out_features)
    return per_matrix + (linear.out_features if lora.dora else 0)


def lora_params(model: ModelSpec, lora: LoraSettings) -> int:
    """Adapter parameters: sum over targeted matrices of rank x (in + out) (+ out for DoRA)."""
    total = 0
    for block in model.blocks:
        if block.rerun:  # an adapter per module, however many passes run it
            continue
        for linear in block_linears(block, model.hidden_size):
            if targeted(linear, lora.targets):
                total += block.count * linear.copies * adapter_matrix_params(linear, lora)
    if total == 0:
        raise InputError(
            "lora.targets",
            f"selects no linear layer of {model.name}; module names here: " + ", ".join(module_names(model)),
        )
    return total


def lora_run_params(model: ModelSpec, lora: LoraSettings) -> tuple[int, int]:
    """Adapter parameters summed over every layer a step runs, and over the layers it runs with
    grad: what adapter FLOPs scale with (forward on every run, backward on the runs with grad).
    Equal to `lora_params` twice when each layer runs once with grad."""
    runs = grad = 0
    for block in model.blocks:
        for linear in block_linears(block, model.hidden_size):
            if targeted(linear, lora.targets):
                per_matrix = adapter_matrix_params(linear, lora)
                runs += block.count * linear.copies * per_matrix
                grad += 0 if block.no_grad else block.count * linear.copies * per_matrix
    return runs, grad


def module_names(model: ModelSpec) -> list[str]:
    """Distinct linear module names of the model, in forward order (for LoRA targets)."""
    names: list[str] = []
    for block in model.blocks:
        for linear in block_linears(block, model.hidden_size):
            short = linear.name.rsplit(".", 1)[-1]
            if short not in names and linear.role != "einsum":
                names.append(short)
    return names


def count_params(model: ModelSpec, method: str, lora: LoraSettings) -> ParamCounts:
    """All parameter counts for `method` (full | lora | qlora)."""
    total = total_params(model)
    linear_weights = sum(
        count * linear.in_features * linear.out_features * linear.copies
        for count, linear in weight_linears(model)
    )
    layers = sum(block.count * block_params(block, model) for block in model.blocks)
    active = total - layers
    active += sum(block.count * block_active_params(block, model) for block in model.blocks)
    frozen_extras = sum(extra.params for extra in model.extras if not extra.trainable)
    adapters = 0 if method == "full" else lora_params(model, lora)
    trainable = total - frozen_extras if method == "full" else adapters
    return ParamCounts(
        total=total,
        embedding=embedding_params(model),
        head=head_params(model),
        layers=layers,
        linear_weights=linear_weights,
        extras=sum(extra.params for extra in model.extras),
        active=active,
        trainable=trainable,
        lora=adapters,
    )
