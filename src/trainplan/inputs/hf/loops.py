"""Models whose layers run in a loop: one stack of weights, several passes of compute.

HRM (transformers 5.24 models/hrm_text/modeling_hrm_text.py, HrmTextModel): two stacks of
`num_layers_per_stack` identical layers, L_module and H_module, each ending in a weightless
RMSNorm (HrmTextStack.final_norm). Each of `H_cycles` high-level cycles runs the L stack
`L_cycles` times on (low state + high state), then the H stack once on (high state + low state):
H_cycles x (L_cycles + 1) stack passes in all. Of a cycle's L passes only the last
L_bp_cycles_padded[cycle] run with grad, the earlier ones under torch.no_grad
(L_bp_cycles_padded is L_bp_cycles left-padded with 1s to H_cycles entries; cycles past its end
take 1). The low state starts from z_L_init, a hidden-wide parameter without grad.

Each pass is a block in forward order: the first L and the first H pass hold the weights, later
passes are `rerun` blocks (compute and activations, no weights), and the no_grad passes are
`no_grad` blocks (forward FLOPs only, nothing kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.modules import attention_module, dense_mlp
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import Block, ExtraComponent, ModelSpec


def hrm_passes(cfg: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """(stack, with grad) of every stack pass in forward order, as HrmTextModel.forward runs them."""
    high = get_int(cfg, "H_cycles", default=2)
    low = get_int(cfg, "L_cycles", default=3)
    raw = cfg.get("L_bp_cycles")
    raw = [2] if raw is None else raw  # HrmTextConfig's default
    if not isinstance(raw, list) or not all(isinstance(n, int) and n >= 0 for n in raw):
        raise ConfigError(
            "L_bp_cycles", "must list, per high-level cycle, how many low-level cycles get grad"
        )
    padded = [1] * max(0, high - len(raw)) + list(raw)
    passes: list[tuple[str, bool]] = []
    for cycle in range(high):
        with_grad = padded[cycle] if cycle < len(padded) else 1
        passes += [("L", index >= low - with_grad) for index in range(low)]
        passes.append(("H", True))
    return passes


def hrm_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """The ModelSpec of an HRM config: its stack passes as blocks (module docstring)."""
    hidden = get_int(cfg, "hidden_size")
    per_stack = get_int(cfg, "num_layers_per_stack", default=0, minimum=0) or get_int(
        cfg, "num_hidden_layers"
    )
    approximations: list[str] = []
    attention = attention_module(cfg, family, hidden)
    mlp = dense_mlp(cfg, family, hidden, approximations)
    # a stack: layers of two norms, the last one also running the stack's final norm
    stack: tuple[Block, ...] = (Block(per_stack - 1, attention, mlp), Block(1, attention, mlp, norms=3))
    if per_stack == 1:
        stack = stack[1:]
    blocks: list[Block] = []
    seen: set[str] = set()
    passes = hrm_passes(cfg)
    for kind, with_grad in passes:
        blocks += [replace(block, rerun=kind in seen, no_grad=not with_grad) for block in stack]
        seen.add(kind)
    no_grad = sum(not with_grad for _, with_grad in passes)
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=tuple(blocks),
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", False))),
        norm=str(family.setting("norm", cfg, "rmsnorm-no-weight")),
        final_norms=0,  # each stack ends in its own (weightless) norm
        extras=(
            ExtraComponent(
                "z_L_init", hidden, note="the low-level state's initial value (no grad)", in_layers=True
            ),
        ),
        approximations=tuple(approximations),
        notes=(
            f"HRM: {len(passes)} stack passes over two stacks of {per_stack} layers (weights counted once); "
            f"{no_grad} low-level passes run under no_grad (forward FLOPs only, no activations)",
        ),
        source=source,
    )
