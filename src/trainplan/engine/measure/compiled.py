"""What one compiled decoder layer saves for backward: AOTAutograd's min-cut partition, traced.

Runs a real Hugging Face decoder layer (small real CPU tensors) once eagerly and once through
AOTAutograd with the min-cut partitioner and Inductor's decomposition table, which is how
`torch.compile` partitions each block (torch/_functorch/partitioners.py,
`min_cut_rematerialization_partition`; torch/_inductor/decomposition.py,
`select_decomp_table`); only the partition is traced, no kernel is generated. Both runs record
the tensors autograd saves through `torch.autograd.graph.saved_tensors_hooks` (eager: each op's
saved inputs and outputs; compiled: the forward graph's extra outputs, which the compiled
function saves), counting each storage once and leaving out parameters and the shared RoPE
cos/sin. The difference between two sequence lengths gives bytes per token, so what does not
grow with tokens (the autocast weight copies) drops out. Used to check the compiled rule of
terms/activations.py layer by layer (tests/measure/test_compiled_trace.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainplan.specs.errors import InputError

LAYER_METHODS = ("full", "lora")


@dataclass(frozen=True)
class LayerSaved:
    """Bytes per token one decoder layer saves for backward, eager and compiled."""

    eager: float
    compiled: float


def _layer(
    hf_config: dict[str, Any], method: str, targets: Sequence[str], adapter_fp32: bool, amp: bool
) -> Any:
    """One decoder layer of `hf_config` in bf16 (fp32 under `amp`), with peft LoRA adapters for
    `method` lora."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**hf_config)
    auto: Any = AutoModelForCausalLM
    dtype = torch.float32 if amp else torch.bfloat16
    model = auto.from_config(config, dtype=dtype, attn_implementation="sdpa")
    layer = model.model.layers[0]
    if method == "lora":
        import peft

        for param in layer.parameters():
            param.requires_grad_(False)
        holder = torch.nn.ModuleDict({"layer": layer})
        peft.inject_adapter_in_model(peft.LoraConfig(r=8, target_modules=list(targets)), holder)
        layer = holder["layer"]
        for name, param in layer.named_parameters():
            if "lora_" in name:
                param.data = param.data.float() if adapter_fp32 else param.data.bfloat16()
    return model, layer


def _saved_bytes(layer: Any, rope: Any, hidden: int, seq_len: int, compiled: bool, amp: bool) -> int:
    """Bytes of the distinct storages one forward of `layer` saves for backward (under `amp`,
    fp32 activations and bf16 autocast with CUDA's fp32 op list, `emulation.cuda_autocast_policy`)."""
    import torch
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    from trainplan.engine.measure.tracker import saved_for_backward

    torch.manual_seed(0)
    x = torch.randn(1, seq_len, hidden, dtype=torch.float32 if amp else torch.bfloat16, requires_grad=True)
    cos, sin = rope(x, torch.arange(seq_len)[None])

    def run(inputs: Any) -> Any:
        return layer(inputs, position_embeddings=(cos, sin), attention_mask=None)

    call = run
    if compiled:
        torch._dynamo.reset()
        backend = aot_autograd(
            decompositions=select_decomp_table(),
            fw_compiler=lambda gm, _: gm,
            bw_compiler=lambda gm, _: gm,
            partition_fn=min_cut_rematerialization_partition,
        )
        call = torch.compile(run, backend=backend, fullgraph=True)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if amp else contextlib.nullcontext()
    with saved_for_backward([*layer.parameters(), cos, sin]) as seen, autocast:
        out = call(x)
    del out
    return sum(seen.values())


def trace_compiled_layer(
    hf_config: dict[str, Any],
    *,
    method: str = "full",
    lora_targets: Sequence[str] = ("q_proj", "v_proj"),
    adapter_fp32: bool = True,
    amp: bool = False,
    seq_lens: tuple[int, int] = (48, 96),
) -> LayerSaved:
    """Saved bytes per token of the first decoder layer of `hf_config` (bf16 weights, or fp32
    weights under bf16 autocast with `amp`; LoRA adapters in fp32 as peft keeps them, or in
    bf16), eager and through the min-cut partition."""
    from trainplan.engine.measure.emulation import cuda_autocast_policy

    if method not in LAYER_METHODS:
        raise InputError("method", f"{method!r} is not supported; use one of {', '.join(LAYER_METHODS)}.")
    short, long = seq_lens
    if not 0 < short < long:
        raise InputError("seq_lens", f"needs two increasing positive lengths, got {seq_lens!r}.")
    model, layer = _layer(hf_config, method, lora_targets, adapter_fp32, amp)
    rope = model.model.rotary_emb
    hidden = model.config.hidden_size
    per_token = []
    with cuda_autocast_policy() if amp else contextlib.nullcontext():
        for compiled in (False, True):
            low, high = (_saved_bytes(layer, rope, hidden, n, compiled, amp) for n in seq_lens)
            per_token.append((high - low) / (long - short))
    return LayerSaved(eager=per_token[0], compiled=per_token[1])
