"""Published real-GPU peak memory of framework recipes, as trainplan scenarios, and our error.

Each case cites its entry in calibration/published.yaml (source, table, row, settings). The
frameworks report what the CUDA caching allocator saw (torchtune: "peak memory active", GiB), so
the estimate runs with no overhead term, and the state of a paged optimizer, which lives in CUDA
unified memory outside that allocator, is left out of the compared figure.

`split` says how each case was used: `development` cases were looked at while the memory-saver
derivations were written (the torchtune flag table that adds one technique at a time);
`held-out` cases were evaluated only once the derivations were done (the adapter dtype setting,
`lora.dtype`, came later, from torchtune's configs, which keep the whole model in bf16; it moved
the held-out LoRA rows by 1-7 points). No case is fitted: the
savers' bytes come from the frameworks' source (terms/savers.py). Used by
tests/reference/test_published_memory.py (against calibration/claims.py) and scripts/accuracy.py
(docs/accuracy.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.engine.estimate import estimate
from trainplan.engine.result import Estimate
from trainplan.specs.scenario import scenario_from_mapping

GIB = 2**30
ALL_BUT_EMBEDDINGS = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
TT_3B = {
    "recipe": "torchtune",
    "model": "Llama-3.2-3B",
    "gpu": "A100 80GB SXM4",
    "micro_batch": 2,
    "seq_len": 4096,
    "grad_accum": 1,
}
TT_3B_FULL = {**TT_3B, "method": "full", "optimizer": "adamw-fused", "optimizer_in_backward": False}
TITAN_8B = {
    "recipe": "torchtitan",
    "model": "Llama-3.1-8B",
    "method": "full",
    "gpu": "H100-SXM",
    "zero_stage": 3,
    "micro_batch": 2,
    "seq_len": 8192,
    "grad_accum": 1,
    # torchtitan/parallelisms/parallelize_llama.py apply_fsdp at 004b3148 (2024): blocks, then
    # the root (embeddings, norm, head); MixedPrecisionPolicy(reduce_dtype=float32)
    "fsdp_wrap": "root",
    "fsdp_reduce_dtype": "fp32",
}
TITAN_UNSTATED = (
    "sequence length not in the file (torchtitan's Llama 3 default 8192 assumed); 'selective' read "
    "as the config's op-level SAC; FSDP2 wrapped as torchtitan's 2024 apply_fsdp does (root keeps "
    "embeddings and head); the figure is torchtitan's logged max reserved memory, so FSDP2's "
    "side-stream pools and the allocator's cache (cache_fraction) are compared"
)
TT_31 = {"recipe": "torchtune", "micro_batch": 2, "seq_len": 2048, "grad_accum": 1, "compile": True}
# torchtune's README row 6: Llama 3.1 70B full fine-tune on 8 A100s with fsdp_cpu_offload (FSDP2's
# CPUOffloadPolicy), bf16, the fused AdamW stepping on the CPU; its memory and its tokens/s
# (calibration/time_reference.py) are both compared
TT_70B_CPU_OFFLOAD = {
    **TT_31,
    "model": "Llama-3.1-70B",
    "method": "full",
    "precision": "bf16",
    "optimizer": "adamw-fused",
    "gpu": "A100 80GB SXM4",
    "gpus": 8,
    "zero_stage": 3,
    "offload": "optimizer+params+grads",
}


@dataclass(frozen=True)
class PublishedMemoryCase:
    """One published peak and the scenario that reproduces its settings."""

    id: str
    scenario: dict[str, Any]
    measured_gib: float
    split: str  # development | held-out
    unstated: str  # settings the source leaves out, and what is assumed
    statistic: str = "active"  # what the source logs: active/allocated, reserved, or the card (max context)


CASES: tuple[PublishedMemoryCase, ...] = (
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +packing (no compile)",
        {**TT_3B_FULL, "loss": "standard", "activation_checkpointing": "none"},
        60.0,
        "development",
        "AdamW fused (torchtune's configs set fused: True); the unchunked loss of the table's baseline",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +compile",
        {**TT_3B_FULL, "loss": "standard", "compile": True, "activation_checkpointing": "none"},
        51.0,
        "held-out",
        "as '+packing', compiled; evaluated once the compiled-layer rule (terms/activations.py) was "
        "derived from the partitioner and checked against its trace; the standard loss is modelled "
        "as eager (torchtune compiles it too)",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +chunked CE",
        {**TT_3B_FULL, "compile": True, "activation_checkpointing": "none"},
        42.9,
        "development",
        "compiled (the row follows '+compile')",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +activation checkpointing",
        {**TT_3B_FULL, "compile": True},
        24.9,
        "development",
        "as above",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +optimizer in backward",
        {**TT_3B_FULL, "compile": True, "optimizer_in_backward": True},
        23.1,
        "development",
        "as above",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +activation offloading",
        {**TT_3B_FULL, "compile": True, "optimizer_in_backward": True, "activation_offload": True},
        21.8,
        "development",
        "as above",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-full-a100 +8-bit AdamW",
        {
            **TT_3B_FULL,
            "compile": True,
            "optimizer_in_backward": True,
            "activation_offload": True,
            "optimizer": "adamw-8bit",
        },
        17.6,
        "development",
        "bitsandbytes AdamW8bit, not paged (the row says 8-bit AdamW)",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-lora-a100-optimised",
        {
            **TT_3B,
            "method": "lora",
            "compile": True,
            "activation_offload": True,
            "lora": {"rank": 64, "alpha": 128, "targets": "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"},
        },
        8.5,
        "development",
        "LoRA on q, v, output projections and the MLP (the config's lora_attn_modules); adapters "
        "in bf16 like the rest of torchtune's model (the recipe's lora.dtype: compute)",
    ),
    PublishedMemoryCase(
        "torchtune-llama32-3b-qlora-a100-optimised",
        {
            **TT_3B,
            "method": "qlora",
            "compile": True,
            "activation_offload": True,
            "lora": {"rank": 64, "alpha": 128, "targets": "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"},
        },
        4.6,
        "development",
        "NF4 through torchao (modelled as bitsandbytes NF4 with double quantisation); bf16 adapters "
        "as in the LoRA row",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-8b-full-4090",
        {**TT_31, "model": "Llama-3.1-8B", "method": "full", "gpu": "RTX 4090"},
        18.9,
        "held-out",
        "which peak statistic the README shows (active, allocated or reserved) is not stated: active assumed",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-8b-lora-4090",
        {
            **TT_31,
            "model": "Llama-3.1-8B",
            "method": "lora",
            "gpu": "RTX 4090",
            "lora": {"rank": 8, "alpha": 16, "targets": "q_proj,v_proj"},
        },
        16.2,
        "held-out",
        "as above",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-8b-qlora-4090",
        {
            **TT_31,
            "model": "Llama-3.1-8B",
            "method": "qlora",
            "gpu": "RTX 4090",
            "lora": {"rank": 8, "alpha": 16, "targets": ALL_BUT_EMBEDDINGS},
        },
        7.4,
        "held-out",
        "as above; NF4 through torchao",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-70b-lora-8xa100",
        {
            **TT_31,
            "model": "Llama-3.1-70B",
            "method": "lora",
            "gpu": "A100 80GB SXM4",
            "gpus": 8,
            "zero_stage": 3,
            "lora": {"rank": 16, "alpha": 32, "targets": "q_proj,k_proj,v_proj"},
        },
        27.6,
        "held-out",
        "A100 80GB assumed (the README says A100); FSDP full sharding modelled as ZeRO-3",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-70b-full-8xa100-cpuoffload",
        TT_70B_CPU_OFFLOAD,
        13.9,
        "held-out",
        "A100 80GB assumed; fsdp_cpu_offload read as FSDP2's CPUOffloadPolicy (parameters, gradients "
        "and the optimizer step on the CPU), evaluated once that mode was derived from FSDP2's source "
        "(before it, with the gradients kept on the GPU, +53%)",
    ),
    PublishedMemoryCase(
        "torchtune-llama31-405b-qlora-8xa100",
        {
            **TT_31,
            "model": "Llama-3.1-405B",
            "method": "qlora",
            "gpu": "A100 80GB SXM4",
            "gpus": 8,
            "zero_stage": 3,
            "lora": {"rank": 16, "alpha": 32, "targets": ALL_BUT_EMBEDDINGS},
        },
        41.7,
        "held-out",
        "the README gives 44.8 'GB' where every other row says GiB: 41.7 GiB assumed; FSDP as ZeRO-3",
    ),
    # torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 1 (published.yaml
    # torchtitan-llama31-8b-h100-8gpu-fsdp): FSDP2, bf16, "selective" AC, local batch 2
    PublishedMemoryCase(
        "torchtitan-llama31-8b-h100-8gpu-fsdp",
        {**TITAN_8B, "gpus": 8},
        82.4,
        "held-out",
        TITAN_UNSTATED,
        "reserved",
    ),
    PublishedMemoryCase(
        "torchtitan-llama31-8b-h100-128gpu-fsdp",
        {**TITAN_8B, "gpus": 128},
        67.0,
        "held-out",
        TITAN_UNSTATED,
        "reserved",
    ),
    # the same file's Table 2 (published.yaml torchtitan-llama31-8b-h100-8gpu-fsdp-cp): FSDP2 over
    # dp_shard x cp, torch.compile, Float8, local batch 1, full checkpointing; every GPU holds
    # 32,768 tokens. Evaluated once, after the context-parallel terms were written from torch's
    # source (terms/context.py); nothing in them was fitted.
    *(
        PublishedMemoryCase(
            f"torchtitan-llama31-8b-h100-8gpu-fsdp-cp{cp}",
            {
                **TITAN_8B,
                "gpus": 8,
                "micro_batch": 1,
                "seq_len": 32768 * cp,
                "context_parallel": cp,
                "activation_checkpointing": "full",
                "compile": True,
                "precision": "fp8-torchao",
            },
            measured,
            "held-out",
            "FSDP2 wrapped as Table 1's rows; the figure is torchtitan's logged max reserved memory",
            "reserved",
        )
        for cp, measured in ((1, 83.9), (2, 84.2), (4, 84.0), (8, 84.5))
    ),
)


@dataclass(frozen=True)
class PublishedMemoryRow:
    """A case, its estimate, and the figure compared (the peak, which holds no paged optimizer
    state: that lives in unified memory, memory.paged_bytes)."""

    case: PublishedMemoryCase
    estimate: Estimate

    @property
    def compared_gib(self) -> float:
        """The figure the source reports: for allocated or active bytes the allocated peak
        (live tensors: without the blocks FSDP2's side streams keep reserved and the allocator's
        cache), for reserved bytes the reserved peak (those included), for a card a published
        length filled the device total (the memory outside the allocator too); paged optimizer
        state is outside all three."""
        figures = {
            "reserved": self.estimate.reserved_peak_bytes,
            "card": self.estimate.total_bytes,
        }
        return figures.get(self.case.statistic, self.estimate.allocated_peak_bytes) / GIB

    @property
    def error(self) -> float:
        """estimated / measured - 1."""
        return self.compared_gib / self.case.measured_gib - 1


def evaluate(case: PublishedMemoryCase) -> PublishedMemoryRow:
    """Estimate one case as its scenario states it (the compared figure is chosen by
    `compared_gib`: the memory outside the allocator only reaches the card's figure)."""
    return PublishedMemoryRow(case, estimate(scenario_from_mapping(case.scenario)))


# Unsloth's Llama 3.1 (8B) max-context table (published.yaml
# unsloth-readme-unsloth-llama31-8b-qlora-maxctx; the December 2024 version with Apple's Cut
# Cross-Entropy, unsloth.ai/blog/llama3-3): 4-bit QLoRA on all seven projections, rank 32,
# batch 1, sequences padded to the length, Unsloth's offloaded checkpointing. A length is the
# largest that fit, so the card's whole memory is what the peak reached there: the estimate is
# compared with the card: the device figure, the allocator's cache and the memory outside it
# (CUDA context, cuBLAS workspace) included.
UNSLOTH_8B = {
    "recipe": "unsloth",
    "model": "Llama-3.1-8B",
    "method": "qlora",
    "micro_batch": 1,
    "lora": {"rank": 32, "alpha": 32, "targets": ALL_BUT_EMBEDDINGS},
}
UNSLOTH_UNSTATED = (
    "the card behind each memory size is not named (a card of that many GiB assumed; the peak "
    "does not depend on which, so the scenario names one GPU for all); the "
    "adapter alpha is not stated (it does not change memory); Unsloth's version of December 2024 "
    "(Cut Cross-Entropy, fused LoRA MLP/QKV/O, offloaded checkpointing)"
)
UNSLOTH_LENGTHS = {8: 2972, 12: 21848, 16: 40724, 24: 78475, 40: 153977, 48: 191728, 80: 342733}

MAX_CONTEXT_CASES: tuple[PublishedMemoryCase, ...] = tuple(
    PublishedMemoryCase(
        f"unsloth-llama31-8b-qlora {vram} GB: {length:,} tokens",
        {**UNSLOTH_8B, "gpu": "A100 80GB SXM4", "seq_len": length},
        float(vram),
        "held-out",
        UNSLOTH_UNSTATED,
        "card",
    )
    for vram, length in UNSLOTH_LENGTHS.items()
)
