"""Published training throughput, turned into trainplan scenarios, and our error on each.

Every case cites its row in calibration/published.yaml (source, table, settings). Measured
throughput is compared as tokens per second per GPU; where a source reports TFLOP/s or MFU
instead, the conversion is stated on the case. Used by tests/reference/test_time_reference.py
(against calibration/claims.py) and scripts/accuracy.py (the table in docs/accuracy.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from published_memory import TT_70B_CPU_OFFLOAD

from trainplan.engine.estimate import estimate
from trainplan.engine.terms import timing
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import Scenario


def gpt(hidden: int, layers: int, heads: int, vocab: int, seq: int) -> dict[str, Any]:
    """A GPT-2-style config (LayerNorm, learned positions, 4h GELU MLP, biases)."""
    return {
        "model_type": "gpt2",
        "n_embd": hidden,
        "n_layer": layers,
        "n_head": heads,
        "n_positions": seq,
        "vocab_size": vocab,
        "attn_pdrop": 0.0,
    }


def megatron_flops_per_token(hidden: int, layers: int, vocab: int, seq: int) -> float:
    """Narayanan et al. 2021, sec. 5.1: 96 B s l h^2 (1 + s/6h + V/16lh) per iteration
    (full recompute included), divided by the B s tokens of the iteration."""
    return 96 * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


_TT_3B: dict[str, Any] = {
    "recipe": "torchtune",
    "gpu": "A100 80GB SXM4",
    "gpus": 1,
    "micro_batch": 2,
    "grad_accum": 1,
    "seq_len": 4096,
    "compile": True,
}
_TT_3B_LORA = {"rank": 64, "alpha": 128, "targets": "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"}


@dataclass(frozen=True)
class TimeCase:
    """One published measurement as a scenario and a measured tokens/s per GPU."""

    id: str
    model: str | dict[str, Any]
    scenario: dict[str, Any]
    measured_tokens_per_s_per_gpu: float
    conversion: str
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> ModelSpec:
        """The model of the case."""
        if isinstance(self.model, str):
            return resolve_model(self.model)
        return spec_from_config(self.model, self.id)


def _megatron(
    id_: str,
    h: int,
    layers: int,
    a: int,
    gpus: int,
    tp: int,
    pp: int,
    batch: int,
    tflops: float,
) -> TimeCase:
    dp = gpus // (tp * pp)
    return TimeCase(
        id=id_,
        model=gpt(h, layers, a, 51200, 2048),
        scenario={
            "method": "full",
            "precision": "fp16-mixed",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": gpus,
            "tensor_parallel": tp,
            "pipeline_parallel": pp,
            "zero_stage": 1,
            "micro_batch": 1,
            "grad_accum": batch // dp,
            "seq_len": 2048,
            "activation_checkpointing": "full",
        },
        measured_tokens_per_s_per_gpu=tflops * 1e12 / megatron_flops_per_token(h, layers, 51200, 2048),
        conversion=f"{tflops} TFLOP/s per GPU / Megatron's FLOPs per token (recompute included)",
        note="micro-batch not published; 1 assumed; interleaved schedule not modelled",
    )


def _korthikanti(
    id_: str,
    h: int,
    layers: int,
    a: int,
    gpus: int,
    pp: int,
    micro: int,
    batch: int,
    seconds: float,
    virtual: int = 1,
) -> TimeCase:
    return TimeCase(
        id=id_,
        model=gpt(h, layers, a, 51200, 2048),
        scenario={
            "method": "full",
            "precision": "bf16-mixed",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": gpus,
            "tensor_parallel": 8,
            "pipeline_parallel": pp,
            "sequence_parallel": True,
            "micro_batch": micro,
            "grad_accum": batch // micro,
            "seq_len": 2048,
            "activation_checkpointing": "selective",
            "virtual_stages": virtual,
        },
        measured_tokens_per_s_per_gpu=batch * 2048 / seconds / gpus,
        conversion=f"{batch} x 2048 tokens / {seconds} s iteration / {gpus} GPUs",
    )


CASES: tuple[TimeCase, ...] = (
    _megatron("megatron-2021-table1-1.7b", 2304, 24, 24, 32, 1, 1, 512, 137),
    _megatron("megatron-2021-table1-145.6b", 12288, 80, 96, 1536, 8, 8, 2304, 148),
    _megatron("megatron-2021-table1-1t", 25600, 128, 160, 3072, 8, 64, 3072, 163),
    _korthikanti("korthikanti-2022-table5-22b", 6144, 48, 64, 8, 1, 4, 4, 1.1),
    _korthikanti("korthikanti-2022-table5-175b", 12288, 96, 96, 64, 8, 1, 64, 13.75, 3),
    _korthikanti("korthikanti-2022-table5-530b", 20480, 105, 128, 280, 35, 1, 280, 37.83, 3),
    TimeCase(
        id="llama3-2024-table4-405b-8k-8192gpu",
        model="Llama-3.1-405B",
        scenario={
            "method": "full",
            "precision": "bf16-mixed",
            "optimizer": "adamw-fused",
            "gpu": "H100 SXM 80GB",
            "gpus": 8192,
            "tensor_parallel": 8,
            "pipeline_parallel": 16,
            "zero_stage": 2,
            "micro_batch": 1,
            "grad_accum": 32,
            "seq_len": 8192,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=430e12 / 2_625_424_588_800,
        conversion="430 TFLOP/s per GPU / PaLM-convention model FLOPs per token at 8K (2.625 TFLOP)",
        note="FSDP-style sharding of grads and optimizer modelled as ZeRO-2",
    ),
    TimeCase(
        id="mosaic-mpt7b-h100-2k-8gpu",
        model=gpt(4096, 32, 32, 50368, 2048),
        scenario={
            "method": "full",
            "precision": "amp-bf16",
            "optimizer": "adamw-fused",
            "gpu": "H100 SXM 80GB",
            "gpus": 8,
            "zero_stage": 3,
            "micro_batch": 6,
            "grad_accum": 1,
            "seq_len": 2048,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=10643,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        id="mosaic-mpt70b-h100-2k-64gpu",
        model=gpt(8192, 80, 64, 50368, 2048),
        scenario={
            "method": "full",
            "precision": "amp-bf16",
            "optimizer": "adamw-fused",
            "gpu": "H100 SXM 80GB",
            "gpus": 64,
            "zero_stage": 3,
            "micro_batch": 8,
            "grad_accum": 4,
            "seq_len": 2048,
            "activation_checkpointing": "full",
        },
        measured_tokens_per_s_per_gpu=1039,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        id="mosaic-mpt7b-a100-2k-8gpu",
        model=gpt(4096, 32, 32, 50368, 2048),
        scenario={
            "method": "full",
            "precision": "amp-bf16",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": 8,
            "zero_stage": 3,
            "micro_batch": 6,
            "grad_accum": 2,
            "seq_len": 2048,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=4641,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        id="torchtitan-llama3-8b-a100-64gpu",
        model="Llama-3.1-8B",
        scenario={
            "method": "full",
            "precision": "bf16-mixed",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": 64,
            "zero_stage": 3,
            "micro_batch": 1,
            "grad_accum": 1,
            "seq_len": 8192,
            "activation_checkpointing": "selective",
        },
        measured_tokens_per_s_per_gpu=2973,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        id="fms-fsdp-llama2-7b-a100-128gpu",
        model="Llama-2-7B",
        scenario={
            "method": "full",
            "precision": "bf16-mixed",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": 128,
            "zero_stage": 3,
            "data_parallel_replicate": 16,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 4096,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=3760,
        conversion="reported tokens/s per GPU",
        note=(
            "HSDP: fms-fsdp's `hsdp` is FSDP1's HYBRID_SHARD (fms_fsdp/utils/train_utils.py "
            "get_policies), which shards within each 8-GPU node and replicates over the 16 nodes"
        ),
    ),
    TimeCase(
        id="nemo-2407-llama2-7b-sft-fp8",
        model="Llama-2-7B",
        scenario={
            "method": "full",
            "precision": "fp8-mixed",
            "optimizer": "adamw-fused",
            "gpu": "H100 SXM 80GB",
            "gpus": 8,
            "zero_stage": 1,
            "micro_batch": 1,
            "grad_accum": 4,
            "seq_len": 4096,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=16891,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        id="nemo-2407-llama2-7b-lora-fp8",
        model="Llama-2-7B",
        scenario={
            "method": "lora",
            "precision": "fp8-mixed",
            "optimizer": "adamw-fused",
            "gpu": "H100 SXM 80GB",
            "gpus": 8,
            "micro_batch": 1,
            "grad_accum": 4,
            "seq_len": 4096,
            "activation_checkpointing": "none",
            "lora": {"rank": 16, "targets": "attention"},
        },
        measured_tokens_per_s_per_gpu=24824,
        conversion="reported tokens/s per GPU",
    ),
    TimeCase(
        # torchtune README row 6 (calibration/published.yaml torchtune-llama31-70b-full-8xa100-
        # cpuoffload): FSDP2 with fsdp_cpu_offload, the fused AdamW stepping on the CPU; 1568 tokens/s
        # over 8 GPUs
        id="torchtune-llama31-70b-full-8xa100-cpuoffload",
        model="Llama-3.1-70B",
        scenario=TT_70B_CPU_OFFLOAD,
        measured_tokens_per_s_per_gpu=196,
        conversion="reported tokens/s / 8 GPUs",
        note="the host's optimizer step from a DGX A100's memory bandwidth (load_sources.yaml host_memory)",
    ),
    TimeCase(
        id="torchtune-llama31-8b-full-4090",
        model="Llama-3.1-8B",
        scenario={
            "method": "full",
            "precision": "bf16",
            "optimizer": "adamw-8bit",
            "gpu": "RTX 4090",
            "gpus": 1,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 2048,
            "activation_checkpointing": "full",
        },
        measured_tokens_per_s_per_gpu=1650,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama31-8b-lora-4090",
        model="Llama-3.1-8B",
        scenario={
            "method": "lora",
            "precision": "bf16",
            "optimizer": "adamw",
            "gpu": "RTX 4090",
            "gpus": 1,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 2048,
            "activation_checkpointing": "full",
            "lora": {"rank": 8, "targets": "qv"},
        },
        measured_tokens_per_s_per_gpu=3083,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama31-8b-qlora-4090",
        model="Llama-3.1-8B",
        scenario={
            "method": "qlora",
            "precision": "bf16",
            "optimizer": "adamw",
            "gpu": "RTX 4090",
            "gpus": 1,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 2048,
            "activation_checkpointing": "full",
            "lora": {"rank": 8, "targets": "all-linear"},
        },
        measured_tokens_per_s_per_gpu=2413,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama32-3b-full-a100-noac",
        model="Llama-3.2-3B",
        scenario={
            "method": "full",
            "precision": "bf16",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": 1,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 4096,
            "activation_checkpointing": "none",
        },
        measured_tokens_per_s_per_gpu=9174,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama32-3b-full-a100-ac",
        model="Llama-3.2-3B",
        scenario={
            "method": "full",
            "precision": "bf16",
            "optimizer": "adamw-fused",
            "gpu": "A100 80GB SXM4",
            "gpus": 1,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 4096,
            "activation_checkpointing": "full",
        },
        measured_tokens_per_s_per_gpu=7210,
        conversion="reported tokens/s",
    ),
    # torchtune README 'Optimization flags' table, the rows before the memory savers
    # (calibration/published.yaml torchtune-llama32-3b-full-a100-ac, notes): packed 2 x 4096,
    # no activation checkpointing, the standard loss, without and with compile
    TimeCase(
        id="torchtune-llama32-3b-full-a100-packed",
        model="Llama-3.2-3B",
        scenario={
            **_TT_3B,
            "method": "full",
            "compile": False,
            "loss": "standard",
            "activation_checkpointing": "none",
            "optimizer": "adamw-fused",
        },
        measured_tokens_per_s_per_gpu=7075,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama32-3b-full-a100-packed-compiled",
        model="Llama-3.2-3B",
        scenario={
            **_TT_3B,
            "method": "full",
            "loss": "standard",
            "activation_checkpointing": "none",
            "optimizer": "adamw-fused",
        },
        measured_tokens_per_s_per_gpu=8998,
        conversion="reported tokens/s",
        note="the row above with compile: 7075 -> 8998 tokens/s (+27%)",
    ),
    # torchtune README 'Optimization flags' table (calibration/published.yaml,
    # torchtune-llama32-3b-*): the memory savers added one at a time; the recipe preset supplies
    # the chunked loss and bf16, the row the rest
    TimeCase(
        id="torchtune-llama32-3b-full-a100-oib-offload",
        model="Llama-3.2-3B",
        scenario={
            **_TT_3B,
            "method": "full",
            "optimizer": "adamw-fused",
            "optimizer_in_backward": True,
            "activation_offload": True,
        },
        measured_tokens_per_s_per_gpu=7301,
        conversion="reported tokens/s",
        note="optimizer step in backward and activation offloading on",
    ),
    TimeCase(
        id="torchtune-llama32-3b-full-a100-8bit",
        model="Llama-3.2-3B",
        scenario={
            **_TT_3B,
            "method": "full",
            "optimizer": "adamw-8bit",
            "optimizer_in_backward": True,
            "activation_offload": True,
        },
        measured_tokens_per_s_per_gpu=6960,
        conversion="reported tokens/s",
        note="as the row above, with 8-bit AdamW",
    ),
    TimeCase(
        id="torchtune-llama32-3b-lora-a100-optimised",
        model="Llama-3.2-3B",
        scenario={**_TT_3B, "method": "lora", "activation_offload": True, "lora": _TT_3B_LORA},
        measured_tokens_per_s_per_gpu=8210,
        conversion="reported tokens/s",
    ),
    TimeCase(
        id="torchtune-llama32-3b-qlora-a100-optimised",
        model="Llama-3.2-3B",
        scenario={**_TT_3B, "method": "qlora", "activation_offload": True, "lora": _TT_3B_LORA},
        measured_tokens_per_s_per_gpu=8035,
        conversion="reported tokens/s",
    ),
)


@dataclass(frozen=True)
class TimeRow:
    """Our prediction for one case and its error."""

    case: TimeCase
    predicted_tokens_per_s_per_gpu: float
    predicted_mfu: float
    dominant_overhead: str

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted_tokens_per_s_per_gpu / self.case.measured_tokens_per_s_per_gpu - 1


def evaluate(case: TimeCase) -> TimeRow:
    """Run the case through estimate() with trainplan's own efficiency model."""
    scenario = Scenario(model=case.id)
    from trainplan.specs.scenario import scenario_from_mapping

    result = estimate(scenario_from_mapping(case.scenario, base=scenario), model=case.spec())
    assert result.time is not None
    per_gpu = result.time.tokens_per_s / result.scenario.gpus
    return TimeRow(case, per_gpu, result.time.mfu, result.time.step.dominant_overhead())


# torchtitan benchmarks/llama3_h100_202412_torchtitan.md Tables 1 and 3 (published.yaml
# torchtitan-llama31-8b-h100-8gpu-fsdp): FSDP2 on 8 and 128 H100s, op-level SAC, local batch
# 2, without and with torch.compile, and compiled with Float8 (torchao's tensorwise recipe, the
# only one of that torchao). The GPUs are 96 GB HBM2e parts at a 500 W power limit, timed here
# as the SXM H100 (the source computes its MFU against that peak too): trainplan's SXM estimate
# is 43-47% above their tokens/s, so they are compared only as speed-ups
def _titan(gpus: int, compiled: bool, float8: bool, measured: float) -> TimeCase:
    suffix = ("-compiled" if compiled else "") + ("-float8" if float8 else "")
    return TimeCase(
        id=f"torchtitan-llama31-8b-h100-{gpus}gpu{suffix}",
        model="Llama-3.1-8B",
        scenario={
            "recipe": "torchtitan",
            "method": "full",
            "gpu": "H100 SXM 80GB",
            "gpus": gpus,
            "zero_stage": 3,
            "micro_batch": 2,
            "grad_accum": 1,
            "seq_len": 8192,
            "activation_checkpointing": "op",
            "compile": compiled,
            **({"precision": "fp8-torchao"} if float8 else {}),
        },
        measured_tokens_per_s_per_gpu=measured,
        conversion="reported tokens/s per GPU",
        note="sequence length not in the file: torchtitan's Llama 3 default 8192 assumed",
    )


TITAN_COMPILE_CASES = tuple(
    _titan(gpus, compiled, False, measured)
    for gpus, compiled, measured in (
        (8, False, 5762),
        (8, True, 6667),
        (128, False, 5605),
        (128, True, 6514),
    )
)

# torchao's float8 README, 'e2e training benchmarks' (published.yaml
# torchao-float8-llama3-8b-h100-8gpu): torchtitan on 8 H100s (variant not stated), batch 1,
# sequence 8192, torch.compile, FSDP2, per-op SAC; bf16 against tensorwise float8 (with float8
# all-gather, which on one NVLink node is hidden either way). Llama 3 8B has Llama 3.1 8B's
# layers (only the RoPE scaling differs), so the catalog's Llama-3.1-8B stands in for it.
_TORCHAO_README: dict[str, Any] = {
    "recipe": "torchtitan",
    "method": "full",
    "gpu": "H100 SXM 80GB",
    "gpus": 8,
    "zero_stage": 3,
    "micro_batch": 1,
    "grad_accum": 1,
    "seq_len": 8192,
    "activation_checkpointing": "op",
    "compile": True,
}
TITAN_FLOAT8_CASES = (
    _titan(8, True, True, 8532),
    _titan(128, True, True, 8380),
    TimeCase(
        id="torchao-readme-llama3-8b-h100-8gpu",
        model="Llama-3.1-8B",
        scenario=_TORCHAO_README,
        measured_tokens_per_s_per_gpu=6150,
        conversion="median tokens/s",
    ),
    TimeCase(
        id="torchao-readme-llama3-8b-h100-8gpu-float8",
        model="Llama-3.1-8B",
        scenario={**_TORCHAO_README, "precision": "fp8-torchao"},
        measured_tokens_per_s_per_gpu=7689.5,
        conversion="median tokens/s",
        note="tensorwise scaling with float8 all-gather",
    ),
)

# torch.compile's speed-up, eager -> compiled, on the same run: the ratio of the tokens/s, which
# leaves out what the two share (the GPU, the efficiency). (eager case, compiled case) by id.
COMPILE_PAIRS: tuple[tuple[str, str], ...] = (
    ("torchtune-llama32-3b-full-a100-packed", "torchtune-llama32-3b-full-a100-packed-compiled"),
    ("torchtitan-llama31-8b-h100-8gpu", "torchtitan-llama31-8b-h100-8gpu-compiled"),
    ("torchtitan-llama31-8b-h100-128gpu", "torchtitan-llama31-8b-h100-128gpu-compiled"),
)

# torchao float8's speed-up, bf16 -> tensorwise float8, both compiled, on the same run
# (bf16 case, float8 case) by id
FLOAT8_PAIRS: tuple[tuple[str, str], ...] = (
    ("torchtitan-llama31-8b-h100-8gpu-compiled", "torchtitan-llama31-8b-h100-8gpu-compiled-float8"),
    ("torchtitan-llama31-8b-h100-128gpu-compiled", "torchtitan-llama31-8b-h100-128gpu-compiled-float8"),
    ("torchao-readme-llama3-8b-h100-8gpu", "torchao-readme-llama3-8b-h100-8gpu-float8"),
)


def speedups(pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, float, float]]:
    """(faster case id, measured speed-up, predicted speed-up) of each (baseline, faster) pair."""
    by_id = {case.id: case for case in (*CASES, *TITAN_COMPILE_CASES, *TITAN_FLOAT8_CASES)}
    rows = []
    for base_id, fast_id in pairs:
        base, fast = evaluate(by_id[base_id]), evaluate(by_id[fast_id])
        measured = fast.case.measured_tokens_per_s_per_gpu / base.case.measured_tokens_per_s_per_gpu
        predicted = fast.predicted_tokens_per_s_per_gpu / base.predicted_tokens_per_s_per_gpu
        rows.append((fast_id, measured, predicted))
    return rows


def compile_speedups() -> list[tuple[str, float, float]]:
    """torch.compile's speed-up of each of `COMPILE_PAIRS`."""
    return speedups(COMPILE_PAIRS)


def float8_speedups() -> list[tuple[str, float, float]]:
    """torchao float8's speed-up of each of `FLOAT8_PAIRS`."""
    return speedups(FLOAT8_PAIRS)


@contextmanager
def _hopper_fp8_ratio(ratio: float) -> Iterator[None]:
    """Hopper's fp8 matmul ratio (terms/timing.py) set to `ratio` for a what-if, then restored."""
    table = timing.FP8_MATMUL_EFFICIENCY_RATIO_BY_ARCHITECTURE
    published = table["Hopper"]
    table["Hopper"] = ratio
    try:
        yield
    finally:
        table["Hopper"] = published


def fitted_fp8_ratio() -> tuple[float, list[tuple[str, float]]]:
    """The Hopper fp8 matmul ratio that would reproduce the first of `FLOAT8_PAIRS` (the torchtitan
    8-GPU speed-up; bisection to 0.001), and the error it would give each held-out fp8 figure: the
    other pairs' speed-ups, the fp8 cases' tokens/s. A what-if for docs/accuracy.md: the model
    keeps the published ratio."""
    low, high = 0.3, 1.0
    while high - low > 5e-4:
        middle = (low + high) / 2
        with _hopper_fp8_ratio(middle):
            _, measured, predicted = speedups(FLOAT8_PAIRS[:1])[0]
        low, high = (low, middle) if predicted > measured else (middle, high)
    ratio = round((low + high) / 2, 3)
    with _hopper_fp8_ratio(ratio):
        held_out = [
            (case_id, predicted / measured - 1) for case_id, measured, predicted in speedups(FLOAT8_PAIRS[1:])
        ]
        held_out += [
            (case.id, evaluate(case).error)
            for case in CASES
            if case.scenario.get("precision", "").startswith("fp8")
        ]
    return ratio, held_out
