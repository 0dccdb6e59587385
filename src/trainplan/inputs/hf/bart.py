"""The decoder of a BART/fairseq-style model run as a causal LM (`BartForCausalLM` and its kin).

Module tree (transformers 5.24 models/bart/modeling_bart.py, `BartDecoder`): token embedding,
a learned position table of `max_position_embeddings + offset` rows (BART's offset is 2) or a
frozen sinusoidal table (Pegasus, Marian: an `nn.Embedding` built with `_freeze=True`), optional
LayerNorms after the embedding and after the last layer (`final_norms` counts both); per layer
biased q/k/v/out self-attention (BigBird-Pegasus' decoder has no attention biases, Whisper's
k_proj none) and its LayerNorm, the same for the cross-attention over the
encoder output (absent in BioGPT, which has no encoder), biased fc1/fc2 and a final LayerNorm;
the LM head is tied to the embedding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.architecture_families import ArchitectureFamily
from trainplan.inputs.hf.values import flag, get_int
from trainplan.specs.model import Attention, Block, ExtraComponent, Mlp, ModelSpec


def bart_spec(cfg: Mapping[str, Any], name: str, source: str, family: ArchitectureFamily) -> ModelSpec:
    """A BART-style decoder: biased attention and fc1/fc2 MLP, LayerNorms, learned (offset) or
    frozen sinusoidal positions, cross-attention where the row says so, a tied head."""
    hidden = get_int(cfg, *family.key("hidden_size"))
    heads = get_int(cfg, *family.key("num_heads"))
    attention = Attention(
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=hidden // heads,
        v_head_dim=hidden // heads,
        qkv_bias=flag(family, "qkv_bias", cfg, True),
        out_bias=flag(family, "out_bias", cfg, True),
        k_bias=flag(family, "k_bias", cfg, True),
        names=("q_proj", "k_proj", "v_proj", "out_proj"),
    )
    mlp = Mlp(
        intermediate_size=get_int(cfg, *family.key("intermediate_size")),
        gated=False,
        bias=True,
        names=("fc1", "fc1", "fc2"),
        activation=str(cfg.get("activation_function", cfg.get("hidden_act", "gelu"))),
    )
    cross = attention if flag(family, "cross_attention", cfg, True) else None
    block = Block(
        get_int(cfg, *family.key("num_layers")), attention, mlp, 3 if cross else 2, cross_attention=cross
    )
    learned_key = family.setting("positions", cfg, None)
    learned = (
        get_int(cfg, str(learned_key)) + int(family.setting("position_offset", cfg, 0)) if learned_key else 0
    )
    extras: list[ExtraComponent] = []
    sinusoidal_key = family.setting("sinusoidal_positions", cfg, None)
    if sinusoidal_key:
        rows = get_int(cfg, str(sinusoidal_key))
        extras.append(
            ExtraComponent(
                "embed_positions", rows * hidden, note=f"frozen sinusoidal table, {rows} x {hidden}"
            )
        )
    return ModelSpec(
        name=name,
        hidden_size=hidden,
        vocab_size=get_int(cfg, *family.key("vocab_size")),
        blocks=(block,),
        tied_embeddings=flag(family, "tied", cfg, bool(cfg.get("tie_word_embeddings", True))),
        norm="layernorm",
        final_norms=int(family.setting("final_norms", cfg, 1)),
        learned_positions=learned,
        extras=tuple(extras),
        dropout=float(cfg.get("dropout", 0.1) or 0.0),
        source=source,
    )
