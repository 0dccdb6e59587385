"""RWKV (v4, transformers' RwkvForCausalLM): time-mixing and channel-mixing blocks with token shift."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.model import Block, Linear, LinearMixer, Mlp, ModelSpec

#: Token-shift mix vectors per block, each hidden-wide: key, value and receptance in time mixing,
#: key and receptance in channel mixing (RwkvSelfAttention.time_mix_*, RwkvFeedForward.time_mix_*).
TOKEN_SHIFT_VECTORS = 5


def rwkv_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """RWKV-4 (Peng et al. 2023): each block is LayerNorm -> time mixing (the WKV recurrence,
    a `LinearMixer` of kind rwkv over `attention_hidden_size` channels) and LayerNorm -> channel
    mixing (key h -> I, squared ReLU, value I -> h, gated by a sigmoid receptance h -> h); the
    first block adds a LayerNorm on the embeddings. Widths default as RwkvConfig's do
    (attention_hidden_size = hidden, intermediate_size = 4 x hidden)."""
    hidden = get_int(cfg, "hidden_size")
    layers = get_int(cfg, "num_hidden_layers")
    mixer = LinearMixer("rwkv", num_heads=1, head_dim=get_int(cfg, "attention_hidden_size", default=hidden))
    mlp = Mlp(
        get_int(cfg, "intermediate_size", default=4 * hidden),
        gated=False,
        names=("key", "key", "value"),
        activation="relu2",
    )
    receptance = (Linear("receptance", "gate", hidden, hidden),)  # the channel mixing's gate
    vectors = TOKEN_SHIFT_VECTORS * hidden

    def block(count: int, norms: int) -> Block:
        return Block(count, None, mlp, norms, mixer=mixer, linears=receptance, extra_params=vectors)

    blocks = (block(1, 3),) + ((block(layers - 1, 2),) if layers > 1 else ())
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, "vocab_size"),
        blocks=blocks,
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", False))),
        norm="layernorm",
        source=source,
    )
