"""Write docs/accuracy.md: estimates against traced peaks and published throughput."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "calibration"))
sys.path.insert(0, str(ROOT / "scripts"))

from calibrate_gpu import compare as compare_gpu_run  # noqa: E402
from claims import ALL, AT_SCALE_GPUS, CLAIMS, FIGURES, KNOWN_MISSES, at_scale, claim_for, known_miss  # noqa: E402
from claims import measured as claim_cases  # noqa: E402
from claims import median as claim_median  # noqa: E402
from claims import outside as outside_claim  # noqa: E402
from diffusion_memory_reference import evaluate as evaluate_diffusion_memory  # noqa: E402
from diffusion_memory_reference import load_records as load_diffusion_records  # noqa: E402
from diffusion_time_reference import CASES as DIFFUSION_TIME  # noqa: E402
from diffusion_time_reference import evaluate as evaluate_diffusion_time  # noqa: E402
from memory_reference import evaluate as evaluate_memory  # noqa: E402
from memory_reference import load_records  # noqa: E402
from published_memory import CASES as PUBLISHED_MEMORY  # noqa: E402
from published_memory import MAX_CONTEXT_CASES, PublishedMemoryRow  # noqa: E402
from published_memory import evaluate as evaluate_published  # noqa: E402
from reserved_fraction import errors as reserved_errors  # noqa: E402
from reserved_fraction import rows as reserved_rows  # noqa: E402
from time_reference import CASES, compile_speedups, fitted_fp8_ratio, float8_speedups  # noqa: E402
from time_reference import evaluate as evaluate_time  # noqa: E402

from trainplan.engine.terms.timing import (  # noqa: E402
    EFFICIENCY_BY_ARCHITECTURE,
    EFFICIENCY_FACTOR_BY_MODEL_KIND,
    FP8_MATMUL_EFFICIENCY_RATIO_BY_ARCHITECTURE,
)
from trainplan.inputs.catalogs.device_memory import device_memory  # noqa: E402

GIB = 2**30
HEADER = """# Accuracy

How close trainplan's estimates are to measurements, and what is claimed for each class of
figure. Regenerate with `python scripts/accuracy.py` (and the traces with `make calibrate`); the
same cases run as tests in `tests/reference/` against the claims of calibration/claims.py, printed
below with the reason for each, so this page cannot drift from the code.

"""

SPLIT_NAMES = {ALL: "every case", "development": "development", "held-out": "held-out", "fit": "fit"}


def claim_cell(figure: str, case: str, split: str) -> str:
    """A table row's claim: the class's bound, or that the case is a known miss outside it."""
    bound = f"±{claim_for(figure, split).worst:.0%}"
    return f"{bound}, known miss" if known_miss(figure, case) else bound


def claim_line(figure: str) -> str:
    """The claims of one class of figure, as each section states them under its headline."""
    claims = [c for c in CLAIMS if c.figure == figure]
    text = "; ".join(
        c.text()
        + (
            ""
            if c.splits == (ALL,)
            else f" ({' and '.join(c.splits)}{', each' if len(c.splits) > 1 else ''})"
        )
        for c in claims
    )
    misses = [m for m in KNOWN_MISSES if m.figure == figure]
    count = f"{len(misses)} known {'miss' if len(misses) == 1 else 'misses'}"
    tail = f" {count} outside it (see Claims)." if misses else ""
    return f"Claim (calibration/claims.py): {text}.{tail}"


def claims_section() -> str:
    """Each class of figure: the claim, its reason, what is measured, and the known misses."""
    lines = [
        "## Claims",
        "",
        "What trainplan claims for each class of figure (calibration/claims.py), and what is "
        "measured. A claim is a stated goal or a documented bound, never the last run's error; the "
        "tests in `tests/reference/` assert every case against it, and medians are over every case "
        "of a split, known misses included.",
        "",
        "| figure | split | cases | claim | measured: median, worst | outside the claim |",
        "|---|---|---:|---|---:|---:|",
    ]
    for claim in CLAIMS:
        rows = claim_cases(claim.figure)
        for split in claim.splits:
            errors = [abs(r.error) for r in rows if r.split == split]
            misses = [m for m in outside_claim(claim.figure) if m.split == split]
            lines.append(
                f"| {FIGURES[claim.figure]} | {SPLIT_NAMES[split]} | {len(errors)} | {claim.text()} | "
                f"{claim_median(claim, split):.1%}, {max(errors):.1%} | {len(misses)} |"
            )
    lines += ["", "Why each claim is what it is:", ""]
    lines += [
        f"- {FIGURES[c.figure]} ({', '.join(SPLIT_NAMES[s] for s in c.splits)}): {c.reason}" for c in CLAIMS
    ]
    lines += [
        "",
        "### Known misses",
        "",
        "The cases outside their claim. The claim is not widened for them: each is listed in "
        "calibration/claims.py with the reason and what would fix it, and a test fails if any other "
        "case falls outside a claim or one of these comes within it (it is then taken off the list).",
        "",
        "| figure | case | error | claim | why it misses | what would fix it |",
        "|---|---|---:|---:|---|---|",
    ]
    errors = {(f, m.case): m for f in FIGURES for m in claim_cases(f)}
    for miss in KNOWN_MISSES:
        row = errors[miss.figure, miss.case]
        lines.append(
            f"| {FIGURES[miss.figure]} | {miss.case} | {row.error:+.1%} | "
            f"±{claim_for(miss.figure, row.split).worst:.0%} | {miss.reason} | {miss.fix} |"
        )
    return "\n".join([*lines, ""])


def memory_section() -> str:
    rows = [evaluate_memory(record) for record in load_records()]
    errors = [abs(row.error) for row in rows]
    traced = claim_for("traced-memory", ALL)
    assert traced.share is not None
    share_bound = traced.share[1]
    within = sum(error <= share_bound for error in errors)
    lines = [
        "## Peak memory: estimate vs traced training steps",
        "",
        "Each case ran real Hugging Face training steps (transformers 5.24, peft 0.21, PyTorch 2.13) on "
        "fake tensors: forward with the causal-LM loss, backward, optimizer step, zero_grad, twice so "
        "the optimizer state is resident, with PyTorch's memory tracker following every storage "
        "(rounded to 512 bytes like the CUDA caching allocator) and CUDA's autocast and "
        "attention-kernel choices emulated. The estimate's allocated figure is compared, since a trace "
        "has no allocator cache, CUDA context, workspaces or NCCL buffers (see methodology.md). No "
        "coefficient is fitted to these cases, and none is held out: the formulas were written "
        "with these traces in view (methodology.md says which rule moved which cases).",
        "",
        f"**{len(rows)} cases: median error {statistics.median(errors):.1%}, worst "
        f"{max(errors):.1%}, {within} of {len(rows)} within {share_bound:.0%}.** "
        + claim_line("traced-memory"),
        "",
        "![estimated vs measured peak](accuracy.png)",
        "",
        "Per term, measured / estimated GiB at each side's peak moment (the trace files logits and",
        "loss buffers under activations and temporaries; the estimate names them):",
        "",
        "| case | peak (meas / est) | phase (meas / est) | weights | gradients | optimizer | "
        "activations, logits, temporaries | error |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        m = row.measured
        moment = row.estimate.allocated_peak or row.estimate.peak
        est = {term.name: term.value for term in moment.terms}
        rest = est["activations"] + est["logits"] + est["temporaries"]
        pairs = [
            (m["params_bytes"] + m["buffers_bytes"], est["weights"]),
            (m["grads_bytes"], est["gradients"]),
            (m["optimizer_bytes"], est["optimizer"]),
            (m["activations_bytes"] + m["temporaries_bytes"], rest),
        ]
        cells = " | ".join(f"{a / GIB:.2f} / {b / GIB:.2f}" for a, b in pairs)
        lines.append(
            f"| {row.id} | {m['peak_bytes'] / GIB:.2f} / {moment.total / GIB:.2f} | "
            f"{m['peak_phase']} / {moment.name} | {cells} | {row.error:+.1%} |"
        )
    lines += [
        "",
        "Case names: model / method (lora-qv, lora-all = all-linear, dora) / precision (amp = "
        "autocast over fp32 weights) / optimizer (adamw = PyTorch's default foreach, fused) / "
        "micro-batch and sequence / gc = gradient checkpointing, eager = materialised attention / "
        "fsdpN = rank 0 of FSDP2 over a fake process group of N ranks (bf16-mixed: fp32 shards "
        "gathered in bf16; the weights column then holds the fp32 shards, the optimizer column "
        "the Adam states; root = torchtitan's 2024 root wrapping, fp32 = fp32 reduce-scatter, "
        "noreshard = no resharding after forward). For FSDP2 the estimate's side is its allocated "
        "peak: the blocks FSDP2's side streams keep reserved are not allocations a trace makes.",
        "",
    ]
    return "\n".join(lines)


def reserved_section() -> str:
    """The reserved figure (allocated x (1 + cache fraction)) against traced steps replayed
    through the allocator's rules, development and held-out models apart."""
    data = device_memory()
    replayed = reserved_rows()
    lines = [
        "## Reserved memory: estimate vs traced steps replayed through the allocator",
        "",
        "Three figures per GPU: the live tensors (`memory.allocated_peak_bytes`, "
        "`torch.cuda.max_memory_allocated()`, the figure every traced comparison above uses), the "
        "caching allocator's pool (`memory.reserved_peak_bytes`, `max_memory_reserved()`, what "
        "torchtitan logs) and the device's used memory (`memory.per_gpu.total_bytes`, what nvidia-smi "
        "shows, on which the fit is decided). The reserved figure adds to the live tensors FSDP2's "
        "side-stream pools and a cache of `cache_fraction` x the live tensors. Each traced step's "
        "allocations and frees were replayed through the caching allocator's rules (terms/allocator.py, "
        "from PyTorch's CUDACachingAllocator.cpp; modelled, since fake tensors never reach the real "
        "allocator); the fraction is the median over the development models "
        f"({data.cache_fraction:.3f}; {data.cache_fraction_expandable:.3f} with expandable segments), "
        "every second model name held out (calibration/reserved_fraction.py). "
        + claim_line("reserved-memory"),
        "",
        "| allocator | split | steps | median error | worst | without the cache: median, worst |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for expandable, fraction in ((False, data.cache_fraction), (True, data.cache_fraction_expandable)):
        for split in ("development", "held-out"):
            errors = [abs(e) for e in reserved_errors(fraction, split, expandable)]
            bare = [abs(e) for e in reserved_errors(0.0, split, expandable)]
            lines.append(
                f"| {'expandable segments' if expandable else 'default'} | {split} | {len(errors)} | "
                f"{statistics.median(errors):.1%} | {max(errors):.1%} | "
                f"{statistics.median(bare):.1%}, {max(bare):.1%} |"
            )
    models = len({r.model for r in replayed})
    lines += [
        "",
        f"{len(replayed)} steps of {models} models. The device figure adds the memory outside the "
        "allocator: the CUDA context, the cuBLAS workspace and NCCL's buffers per communicator, each "
        "from a public measurement (data/device_memory.yaml); none of it is checked against a "
        "GPU measurement of trainplan's own yet, and Unsloth's max-context rows below are the "
        "only published figures compared with it.",
        "",
        *gpu_run_lines(),
    ]
    return "\n".join(lines)


def gpu_run_lines(path: Path = ROOT / "calibration" / "gpu_runs.json") -> list[str]:
    """Real-GPU steps of calibration/gpu_runs.json (`make calibrate-gpu`), each figure against
    the real one; a line saying there are none until a GPU has run them."""
    records = json.loads(path.read_text()) if path.exists() else []
    lines = ["### Real-GPU steps (`make calibrate-gpu`)", ""]
    if not records:
        return [
            *lines,
            "None recorded yet: `make calibrate-gpu` on a machine with a CUDA GPU runs "
            "calibration/gpu_cases.yaml and writes calibration/gpu_runs.json, which this section then "
            "shows (real max_memory_allocated, max_memory_reserved and device used memory against the "
            "three figures).",
            "",
        ]
    lines += [
        "| step | GPU | figure | measured GiB | estimated GiB | error |",
        "|---|---|---|---:|---:|---:|",
    ]
    for record in records:
        for case_id, label, measured, estimated, error in compare_gpu_run(record):
            lines.append(
                f"| {case_id} | {record['gpu']} | {label} | {measured / GIB:.2f} | {estimated / GIB:.2f} | "
                f"{error:+.1%} |"
            )
    return [*lines, ""]


def diffusion_memory_section() -> str:
    rows = [evaluate_diffusion_memory(record) for record in load_diffusion_records()]
    errors = [abs(row.error) for row in rows]
    lines = [
        "## Diffusion, video and JEPA peak memory: estimate vs traced steps",
        "",
        "Each case ran a diffusers denoiser (or a JEPA's modules) for two training steps "
        "on fake tensors as the diffusers scripts (and the V-JEPA 2 code) train it, with CUDA's "
        "autocast, SDPA and fused RMSNorm emulated (calibration/diffusion_trace.json, "
        "`scripts/trace_diffusion.py`). No coefficient was fitted to these cases: the block formulas "
        "come from the module sources (terms/denoisers.py). Three were corrected after the first "
        "traces, each from the module's own behaviour checked on a single block, not fitted: "
        "torch.nn.RMSNorm's fused kernel keeps its input, not an fp32 copy; SDPA's output is "
        "already laid out for the output projection, so there is no copy; V-JEPA 2's RoPE tables "
        "are fp32 under autocast. The CogVideoX and HunyuanVideo cases (first traced at -5.0% and "
        "-14.9%) were corrected the same way, from the saved tensors of one- and two-block traces "
        "read against the diffusers modules: CogVideoX's per-head q/k LayerNorms leave the "
        "attention output laid out per head, so the reshape before to_out is a copy that to_out "
        "keeps; HunyuanVideo's blocks run diffusers' RMSNorm (an fp32 copy kept), not "
        "torch.nn.RMSNorm as FLUX's, and its token refiner keeps the prompt mask per head. "
        "I-JEPA and V-JEPA 1 run on modules laid out as their repos build "
        "them (measure/jepa_repo.py); the V-JEPA ViT-L/16 case's first trace (-3.3%) showed three "
        "JEPA terms the estimate lacked, then derived from the repos' code and added for every "
        "JEPA (the fp32 clip, the patch embedding the context gather keeps per generator, the "
        "convolution's 16-bit cast of the clip), so that case is not held out. No overhead term "
        "on either side.",
        "",
        f"**{len(rows)} cases: median error {statistics.median(errors):.1%}, worst {max(errors):.1%}.**",
        "",
        "| case | traced peak GiB (phase) | estimate GiB (phase) | error |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        m = row.measured
        moment = row.estimate.allocated_peak or row.estimate.peak
        lines.append(
            f"| {row.id} | {m['peak_bytes'] / GIB:.2f} ({m['peak_phase']}) | "
            f"{moment.total / GIB:.2f} ({moment.name}) | {row.error:+.1%} |"
        )
    lines += [
        "",
        "",
    ]
    return "\n".join(lines)


def published_memory_section() -> str:
    rows = [evaluate_published(case) for case in PUBLISHED_MEMORY]

    def summary(split: str | None) -> str:
        errors = [abs(r.error) for r in rows if split is None or r.case.split == split]
        return f"median {statistics.median(errors):.1%}, worst {max(errors):.1%} ({len(errors)} runs)"

    lines = [
        "## Peak memory: estimate vs published runs",
        "",
        "Real-GPU peaks that the frameworks published for their own recipes (sources with table and "
        "row in calibration/published.yaml), with the recipe preset and the stated settings as the "
        "scenario, compared with the figure each source reports (the caching allocator's: the "
        "allocated or the reserved figure, never the memory outside the allocator). A paged "
        "optimizer's state lives outside that allocator, in unified memory, and outside trainplan's "
        "peak too (memory.paged_bytes). "
        "torchtune logs active (allocated) bytes and torchtitan its max reserved memory: for "
        "torchtune the blocks FSDP2's side streams keep reserved are left out (its allocated "
        "peak), for torchtitan they are compared with the reserved figure, which adds them and the "
        "allocator's cache (a fraction of the live tensors fitted on traced steps replayed through "
        "the allocator's rules, never on these runs; see the reserved section above). The FSDP2 "
        "working set (fp32 shards, reduce dtype, prefetch, root group, "
        "stream pools) was derived from PyTorch's and torchtitan's source and checked against "
        "fake-process-group traces, after the torchtitan rows had been seen once at -15%; nothing "
        "in it is sized from them. "
        "Nothing is fitted to these runs; the development runs were looked at while the memory "
        "savers were derived, the held-out runs only afterwards (the adapter dtype setting came "
        "after that, from torchtune's configs, and moved the held-out LoRA rows by 1-7 points).",
        "",
        f"**All: {summary(None)}. Held-out: {summary('held-out')}. Development: {summary('development')}.** "
        + claim_line("published-memory"),
        "",
        "| run | split | measured GiB | estimated GiB | error | claim | settings the source leaves "
        "unstated, and what is assumed |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        case = row.case
        lines.append(
            f"| {case.id} | {case.split} | {case.measured_gib:.1f} | {row.compared_gib:.2f} | "
            f"{row.error:+.1%} | {claim_cell('published-memory', case.id, case.split)} | {case.unstated} |"
        )
    lines += [
        "",
        "Known gaps: under torch.compile the blocks' saved tensors follow the min-cut partition "
        "(terms/activations.py), but the final norm and a standard loss are taken as eager; "
        "torchao's NF4 and "
        "torchtune's LoRA layers are modelled with bitsandbytes' and peft's saved tensors; the 405B "
        "row's unit is ambiguous in the source; the allocator's cache in torchtitan's reserved "
        "figure is one fraction of the live tensors, not the blocks of these steps (before it was "
        "added, 2026-12-02, both torchtitan rows were 8.7% under).",
        "",
    ]
    return "\n".join(lines + max_context_lines())


def slope(rows: list[PublishedMemoryRow], estimated: bool) -> float:
    """Bytes per token (decimal KB) between the first and last max-context rows."""
    first, last = rows[0], rows[-1]
    gib = (
        (last.compared_gib - first.compared_gib)
        if estimated
        else (last.case.measured_gib - first.case.measured_gib)
    )
    tokens = last.case.scenario["seq_len"] - first.case.scenario["seq_len"]
    return gib * GIB / tokens / 1000


def max_context_lines() -> list[str]:
    """Unsloth's max-context table: each published length against the card it filled."""
    rows = [evaluate_published(case) for case in MAX_CONTEXT_CASES]
    errors = [abs(row.error) for row in rows]
    lines = [
        "### Published max-context table (Unsloth, Llama 3.1 8B QLoRA)",
        "",
        "Unsloth's table of the longest sequence that fits each memory size (December 2024: Cut "
        "Cross-Entropy, fused LoRA MLP/QKV/O and RMSNorm kernels, offloaded checkpointing; "
        "`recipe: unsloth`, which sets `kernels: unsloth` and `loss: fused`). At a published length "
        "the peak filled the card, so the estimate's device figure (the allocator's cache and the "
        "memory outside it, CUDA context and cuBLAS workspace, included) is compared with the "
        "card's memory. All rows are held out.",
        "",
        f"**{len(rows)} rows: median error {statistics.median(errors):.1%}, worst {max(errors):.1%}.** "
        + claim_line("published-max-context"),
        "",
        "| row | card GiB | estimated GiB | error | claim |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.case.id} | {row.case.measured_gib:.0f} | {row.compared_gib:.2f} | "
            f"{row.error:+.1%} | {claim_cell('published-max-context', row.case.id, row.case.split)} |"
        )
    lines += [
        "",
        f"The estimate falls short as the sequence grows: {slope(rows, estimated=True):.0f} KB per token "
        f"against the table's {slope(rows, estimated=False):.0f} KB (decimal KB, between the first and "
        "last rows). Each layer's working set is counted (the MLP's backward gradients, a LoRA "
        "projection's forward transient: terms/activations.py layer_working_bytes, checked on traced "
        "long sequences). Not modelled, and the likely rest: flash attention's fp32 query-gradient "
        "accumulator (4 x hidden per token, inside the kernel, where a trace cannot see it) and the "
        "caching allocator's cache when each tensor is several GB (one fraction of the live tensors "
        "here). With the eager modules and "
        "the chunked loss (the preset before it followed Unsloth's kernels) every row from 12 GB up "
        "was overestimated by more.",
        "",
    ]
    return lines


def time_section() -> str:
    rows = [evaluate_time(case) for case in CASES]
    errors = [abs(row.error) for row in rows]
    scaled = [abs(row.error) for row in rows if at_scale(row.case.scenario)]
    lines = [
        "## Throughput: estimate vs published training runs",
        "",
        "Published, measured runs (sources with table and row in calibration/published.yaml), run "
        "through trainplan's own efficiency model (no MFU given). Tokens per second per GPU.",
        "",
        f"**{len(rows)} runs: median error {statistics.median(errors):.1%}, worst {max(errors):.1%}.** "
        + claim_line("llm-throughput"),
        "",
        f"**{len(scaled)} of them on {AT_SCALE_GPUS} GPUs or more: median error "
        f"{statistics.median(scaled):.1%}, worst {max(scaled):.1%}.** "
        + claim_line("llm-throughput-at-scale"),
        "",
        "| run | measured tok/s/GPU | estimated | error | claim | largest overhead | how measured |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        case = row.case
        note = case.conversion + (f"; {case.note}" if case.note else "")
        lines.append(
            f"| {case.id} | {case.measured_tokens_per_s_per_gpu:,.0f} | "
            f"{row.predicted_tokens_per_s_per_gpu:,.0f} | {row.error:+.1%} | "
            f"{claim_cell('llm-throughput', case.id, ALL)} | "
            f"{row.dominant_overhead} | {note} |"
        )
    lines += [
        "",
        "Known gaps: Megatron-LM 2021 runs used interleaved schedules whose virtual-stage counts are "
        "not published (modelled without interleaving); Llama 3's 405B run used a tuned pipeline "
        "schedule; small models (hidden 2,304) run their kernels below the architecture's typical "
        "efficiency. The fp8 runs' linears are timed at the architecture's efficiency times its "
        "fp8-over-16-bit matmul efficiency ratio (terms/timing.py, from a published matmul "
        "benchmark, not fitted), their attention and output head at the 16-bit rate.",
        "",
        "### torch.compile's speed-up",
        "",
        "The same published run without and with compile (calibration/time_reference.py "
        "`COMPILE_PAIRS`): the tokens/s ratio, which the GPU and the efficiency cancel out of. The "
        "speed-up comes from the eager memory traffic Inductor's fusion removes (terms/timing.py, "
        "derived per op, not fitted).",
        "",
        claim_line("speed-up"),
        "",
        "| compiled run | measured speed-up | estimated | error | claim |",
        "|---|---:|---:|---:|---:|",
    ]
    for case_id, ratio, predicted in compile_speedups():
        lines.append(
            f"| {case_id} | {ratio:.3f}x | {predicted:.3f}x | {predicted / ratio - 1:+.1%} | "
            f"{claim_cell('speed-up', case_id, ALL)} |"
        )
    lines += [
        "",
        "torchtune also compiles its loss, which is timed as eager here, and eager's kernel-launch "
        "gaps are not modelled: its speed-up comes out at under half of the measured one.",
        "",
        "### float8's speed-up",
        "",
        "The same published run, compiled, in bf16 and with torchao's tensorwise float8 "
        "(calibration/time_reference.py `FLOAT8_PAIRS`): the tokens/s ratio, which the GPU and the "
        "efficiency cancel out of. The fp8 linears run at the fp8 peak times Hopper's fp8 matmul "
        f"efficiency relative to bf16 ({FP8_MATMUL_EFFICIENCY_RATIO_BY_ARCHITECTURE['Hopper']}: "
        "70.9% against 80.3% of peak in a published H100 SXM matmul benchmark, terms/timing.py); "
        "the attention core and the output head (torchtitan leaves `output` in bf16) at the bf16 "
        "rate; the casts' memory traffic is added "
        "(`float8_cast_bytes`). Nothing here is fitted.",
        "",
        "| float8 run | measured speed-up | estimated | error | claim |",
        "|---|---:|---:|---:|---:|",
    ]
    float8 = float8_speedups()
    for case_id, ratio, predicted in float8:
        lines.append(
            f"| {case_id} | {ratio:.3f}x | {predicted:.3f}x | {predicted / ratio - 1:+.1%} | "
            f"{claim_cell('speed-up', case_id, ALL)} |"
        )
    one_node = [predicted / ratio - 1 for case_id, ratio, predicted in float8 if "-8gpu" in case_id]
    fp8_rows = [row for row in rows if row.case.scenario.get("precision", "").startswith("fp8")]
    ratio, held_out = fitted_fp8_ratio()
    lines += [
        "",
        "The same figure, not fitted to them, puts the Transformer Engine runs of the table above "
        "(NeMo on 700 W DGX H100s) at "
        + " and ".join(f"{row.error:+.1%}" for row in fp8_rows)
        + f". The torchao runs on one node stay {min(one_node):.0%} to {max(one_node):.0%} high. "
        "Their H100s are 96 GB HBM2e parts held to a 500 W "
        "power limit (the torchtitan file says so; torchao's roofline figures are for 'Meta's H100 "
        "variant' at 2.4 TB/s), while the benchmark's H100 SXM names no limit but the part's "
        "default, 700 W: an fp8 matmul does twice the "
        "work per clock and draws more power, so a lower power limit costs it more clock than it "
        "costs bf16. The 128-GPU pair is low for another reason: timed as SXM parts, the fp8 step is "
        "too short to hide FSDP's all-gathers and reduce-scatters on the network, which the slower "
        "real parts hid (measured, its tokens/s are 1.8% below the 8-GPU run's). Not modelled: "
        "float8 all-gather (weights gathered at 1 byte) and rowwise scaling (torchao's README: "
        "1.10x against tensorwise's 1.25x on the same run).",
        "",
        f"A ratio fitted to the first pair instead would be {ratio:.3f}. Held out, it gives:",
        "",
        f"| with the ratio at {ratio:.3f} | error |",
        "|---|---:|",
    ]
    lines += [f"| {case_id} | {error:+.1%} |" for case_id, error in held_out]
    lines += [
        "",
        "It fits the power-limited parts, not the catalog's 700 W H100 SXM, and is not used.",
        "",
    ]
    return "\n".join(lines)


def diffusion_time_section() -> str:
    rows = [evaluate_diffusion_time(case) for case in DIFFUSION_TIME]

    def summary(role: str) -> str:
        errors = [abs(r.error) for r in rows if r.case.role == role]
        return f"median {statistics.median(errors):.1%}, worst {max(errors):.1%} ({len(errors)} runs)"

    lines = [
        "## Diffusion and JEPA training time",
        "",
        "Published, measured diffusion, video and JEPA training runs (sources, raw figures and the date read "
        "in calibration/published.yaml, section 'Diffusion, video and JEPA training throughput'), run "
        "through trainplan's own efficiency (no MFU given): the GPU architecture's figure times one "
        "factor per model kind (terms/timing.py `EFFICIENCY_FACTOR_BY_MODEL_KIND`). Each factor was "
        "fitted on one `fit` run (measured / predicted throughput with the factor at 1); the "
        "`held-out` runs were evaluated only afterwards. Images (or clips) per second per GPU.",
        "",
        f"**Fit: {summary('fit')}. Held-out: {summary('held-out')}.** " + claim_line("diffusion-time"),
        "",
        "| run | kind | role | measured /s/GPU | estimated | error | claim | efficiency | "
        "largest overhead | how measured |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        case = row.case
        note = case.conversion + (f"; {case.note}" if case.note else "")
        lines.append(
            f"| {case.id} | {row.kind} | {case.role} | {case.measured_samples_per_s_per_gpu:.4g} | "
            f"{row.predicted_samples_per_s_per_gpu:.4g} | {row.error:+.1%} | "
            f"{claim_cell('diffusion-time', case.id, case.role)} | "
            f"{row.efficiency:.3f} | {row.dominant_overhead} | {note} |"
        )
    factors = EFFICIENCY_FACTOR_BY_MODEL_KIND
    unet, video, jepa = factors["unet"], factors["video"], factors["jepa"]
    hopper, ampere = EFFICIENCY_BY_ARCHITECTURE["Hopper"], EFFICIENCY_BY_ARCHITECTURE["Ampere"]
    held_out = next(case for case in DIFFUSION_TIME if case.id == "mlperf-v40-sd2-h100-64gpu")
    del factors["unet"]
    try:
        uncalibrated = evaluate_diffusion_time(held_out).error
    finally:
        factors["unet"] = unet
    lines += [
        "",
        f"Fitted: UNet {unet:.2f} (so {hopper * unet:.2f} of the dense peak on Hopper, against "
        f"{hopper:.2f} for language models) from the MLPerf Training v4.0 Stable Diffusion run on one "
        f"8 x H200 node; video {video:.2f} ({ampere * video:.2f} on Ampere) from a Wan 2.1 1.3B LoRA "
        f"run on an A100; JEPA {jepa:.2f} ({ampere * jepa:.2f} on Ampere) from I-JEPA ViT-H/14's "
        "300 ImageNet epochs on 16 A100s in 'under 72 hours' (a bound, so the factor is a lower "
        "bound, and it has no held-out run). Without the UNet factor the held-out 64 x H100 run is "
        f"over-predicted by {uncalibrated:.0%}. A diffusion transformer keeps the language models' "
        "figure, and no factor is fitted: of the two usable runs, FLUX.1-dev QLoRA on an RTX 4090 "
        "is a whole-run wall time whose error is dominated by the QLoRA dequantisation term, and "
        "MLPerf Training v5.1's FLUX.1 run on 16 GB200s (FLOPs per sample within 1% of the "
        "submission's own 20.3 TFLOPs) runs MXFP8 at 0.46 of the bf16 peak: trainplan applies "
        "Blackwell's uncalibrated 0.45 to the fp8 peak, so it over-predicts by about 90% (within 3% "
        "at the bf16 rate). A factor fitted there would correct fp8 on Blackwell, not the model "
        "kind, and would take the RTX 4090 run to about -54%. The same benchmark on 2 x 8 B200s is "
        "under-predicted by about 48%: its flat ring all-reduce over the network outweighs the "
        "over-predicted compute.",
        "",
        "Read and left out (reasons in calibration/published.yaml): the FLUX.1-dev fp8 LoRA run on an "
        "H100 from the same post (whole-run time; with its VAE and text encoders now timed, 14 ms a "
        "step, trainplan's step is 0.21 s against the ~1.7 s the 20 minutes imply, so the gap is "
        "not the encoders); SimpleTuner's and ai-toolkit's FLUX LoRA step times (optimum-quanto "
        "fp8 bases, not a trainplan base format; ai-toolkit's mixes three resolutions); a Wan 2.1 "
        "I2V 14B LoRA profile on an H200 (size given "
        "only as '~480p', and at 832x480 it would need ~76% of peak); Stability AI's SD3 2B MMDiT "
        "benchmark on 16 H100s (595 images/s, resolution not stated, and not the catalog's "
        "SD3.5-Medium); V-JEPA and V-JEPA 2 pretraining (their configs give 128 or more GPUs and the "
        "iterations, but no primary wall time or GPU-hours was found); I-JEPA's arXiv v1 figure "
        "(ViT-H/16 on 32 A100s in under 38 hours: no config of that run in the repo). PixArt-alpha "
        "and PixArt-Sigma report GPU-days for the whole schedule (675 A100-days for PixArt-alpha), "
        "but the steps, batch and resolution of each stage were not read from a primary source, "
        "so no stage can be made a scenario without guessing; Sana is not in the catalog.",
        "",
        "Left to do: a second fit and held-out run for each kind (SDXL and SD 1.5 fine-tunes, FLUX "
        "bf16 LoRA step times, Wan 14B and HunyuanVideo with stated sizes; a V-JEPA run with its "
        "wall time); a diffusion-transformer fit on a bf16 run with stated settings (the warning "
        "stays for diffusion transformers); a Blackwell efficiency and an fp8 efficiency that does "
        "not scale the non-matmul share of the step with the fp8 peak; the 512-GPU MLPerf run's "
        "error is mostly the gradient all-reduce model (NCCL "
        "with in-network reduction is faster than the ring formula).",
        "",
    ]
    return "\n".join(lines)


def write_plot(path: Path) -> None:
    """Estimated vs measured: traced peaks (left) and published throughput (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    memory = [evaluate_memory(record) for record in load_records()]
    times = [evaluate_time(case) for case in CASES]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 5))
    measured = [row.measured["peak_bytes"] / GIB for row in memory]
    estimated = [row.estimate.allocated_peak_bytes / GIB for row in memory]
    left.loglog(measured, estimated, "o", color="#2f6db5")
    bounds = [min(measured) * 0.8, max(measured) * 1.25]
    left.plot(bounds, bounds, "-", color="#888888", linewidth=1)
    memory_claim = claim_for("traced-memory", ALL).worst
    left.plot(bounds, [b * (1 + memory_claim) for b in bounds], ":", color="#bbbbbb")
    left.plot(bounds, [b * (1 - memory_claim) for b in bounds], ":", color="#bbbbbb")
    left.set(
        xlabel="traced peak (GiB)",
        ylabel="estimated peak (GiB)",
        title=f"Peak memory (dotted: the claim, ±{memory_claim:.0%})",
    )
    measured_t = [row.case.measured_tokens_per_s_per_gpu for row in times]
    estimated_t = [row.predicted_tokens_per_s_per_gpu for row in times]
    right.loglog(measured_t, estimated_t, "s", color="#c0392b")
    bounds = [min(measured_t) * 0.7, max(measured_t) * 1.4]
    right.plot(bounds, bounds, "-", color="#888888", linewidth=1)
    time_claim = claim_for("llm-throughput", ALL).worst
    right.plot(bounds, [b * (1 + time_claim) for b in bounds], ":", color="#bbbbbb")
    right.plot(bounds, [b * (1 - time_claim) for b in bounds], ":", color="#bbbbbb")
    right.set(
        xlabel="published tokens/s per GPU",
        ylabel="estimated tokens/s per GPU",
        title=f"Training throughput (dotted: the claim, ±{time_claim:.0%})",
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110, metadata={"Software": None})


def _summary(errors: list[float]) -> tuple[int, str, str]:
    """(cases, median, worst) of absolute errors, as both pages print them."""
    return len(errors), f"{statistics.median(errors):.1%}", f"{max(errors):.1%}"


README_START = "<!-- accuracy figures: written by scripts/accuracy.py from docs/accuracy.md's data -->\n"
README_END = "<!-- end of accuracy figures -->\n"


def readme_block() -> str:
    """The README's accuracy figures: the headline of each docs/accuracy.md section, computed
    from the same cases by the same evaluations, so the two cannot disagree."""
    traced, traced_median, traced_worst = _summary(
        [abs(r.error) for r in map(evaluate_memory, load_records())]
    )
    sampled, sampled_median, sampled_worst = _summary(
        [abs(r.error) for r in map(evaluate_diffusion_memory, load_diffusion_records())]
    )
    published = [evaluate_published(case) for case in PUBLISHED_MEMORY]
    runs, runs_median, _ = _summary([abs(r.error) for r in published])
    held = [abs(r.error) for r in published if r.case.split == "held-out"]
    held_count, held_median, _ = _summary(held)
    rows, rows_median, rows_worst = _summary(
        [abs(r.error) for r in map(evaluate_published, MAX_CONTEXT_CASES)]
    )
    timed, timed_median, timed_worst = _summary([abs(r.error) for r in map(evaluate_time, CASES)])
    return (
        README_START
        + f"- Peak memory: median error {traced_median}, worst {traced_worst}, on {traced} real Hugging Face "
        "training steps traced on fake tensors (dense and MoE, full/LoRA/DoRA, amp/bf16/fp32, four "
        "optimizers, with and without checkpointing, op-level SAC, LoRA dropout, chunked loss, optimizer "
        "in backward, 8,192-token steps where each layer's working set decides the peak, and rank 0 of "
        "FSDP2 on a fake process group), against the allocated figure (a trace sees neither the "
        "allocator's cache nor the CUDA context and NCCL buffers, which the reserved and device "
        f"figures add). Diffusion, video and JEPA: median {sampled_median}, worst "
        f"{sampled_worst}, on {sampled} traced steps.\n"
        "- Peak memory of published framework runs (torchtune's tables, including the one that adds the "
        f"memory savers one at a time, and torchtitan's FSDP2 runs): median error {runs_median} on {runs} "
        f"real-GPU runs, {held_median} on the {held_count} held out while the savers were derived. "
        f"Unsloth's max-context table ({rows} rows, held out): median {rows_median}, worst {rows_worst}.\n"
        f"- Throughput: median error {timed_median}, worst {timed_worst}, against {timed} published "
        "training runs (Megatron-LM, Korthikanti et al., Llama 3, MosaicML, torchtitan, IBM FMS, NeMo, "
        "torchtune).\n" + readme_claims() + README_END
    )


def readme_claims() -> str:
    """The README's line on the claims: each class's claim and how many cases miss it."""
    claims = "; ".join(
        f"{FIGURES[c.figure]}"
        + (
            ""
            if c.splits == (ALL,)
            else f" ({' and '.join(c.splits)}{', each' if len(c.splits) > 1 else ''})"
        )
        + f", {c.text()}"
        for c in CLAIMS
    )
    return (
        "- What is claimed (calibration/claims.py, each claim with its reason; docs/accuracy.md, "
        f"'Claims'): {claims}. {len(KNOWN_MISSES)} cases are known misses outside their claim, each "
        "listed there with the reason and what would fix it; the tests fail on any other.\n"
    )


def readme(text: str) -> str:
    """`text` (the README) with its accuracy figures rewritten."""
    head, rest = text.split(README_START, 1)
    return head + readme_block() + rest.split(README_END, 1)[1]


def page() -> str:
    """The whole of docs/accuracy.md."""
    sections = (
        memory_section(),
        reserved_section(),
        published_memory_section(),
        diffusion_memory_section(),
        time_section(),
        diffusion_time_section(),
    )
    return HEADER + claims_section() + "\n" + "\n".join(sections)


def main() -> None:
    (ROOT / "docs" / "accuracy.md").write_text(page())
    (ROOT / "README.md").write_text(readme((ROOT / "README.md").read_text()))
    write_plot(ROOT / "docs" / "accuracy.png")


if __name__ == "__main__":
    main()
