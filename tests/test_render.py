"""Edge formatting: counts with decimal suffixes, GiB, the global batch line."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.engine.result import Batch
from trainplan.interfaces.text.phrasing import (
    APPROXIMATE,
    NOTE,
    batch_line,
    fit_group_lines,
    fit_verdict,
    format_duration,
    format_kwh,
    format_usd,
    free_text,
    note_lines,
    trainable_detail,
    weights_detail,
    with_article,
)
from trainplan.specs.units import format_count, format_gb, format_gib, format_percent


def test_global_batch_line_matches_the_spec() -> None:
    # 1 x 16 x 1 x 4,096 = 65,536 tokens; the seed page printed "0M tok" here
    line = batch_line(Batch(micro_batch=1, grad_accum=16, replicas=1, seq_len=4096))
    assert line == "Global batch 65.5K tok = 1 micro x 16 accum x 1 replicas x 4,096 seq"
    big = batch_line(Batch(micro_batch=2, grad_accum=8, replicas=256, seq_len=8192))
    assert big.startswith("Global batch 33.6M tok = 2 micro x 8 accum x 256 replicas")


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (6_815_744, "6.82M"),
        (8_030_261_248, "8.03B"),
        (405_853_388_800, "406B"),
        (999, "999"),
        (1_000, "1.00K"),
    ],
)
def test_counts_are_decimal(count: int, text: str) -> None:
    assert format_count(count) == text


def test_memory_units_are_named() -> None:
    assert format_gib(2**30) == "1.00 GiB"
    assert format_gb(10**9) == "1.00 GB"
    assert format_gib(85_520_809_984) == "79.65 GiB"  # H100 as nvidia-smi shows it
    assert format_percent(0.0008) == "0.08%"


def test_durations() -> None:
    assert format_duration(45) == "45 s"
    assert format_duration(600) == "10 min"
    assert format_duration(5 * 3600) == "5.0 h"
    assert format_duration(10 * 86400) == "10.0 d"


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("RTX A6000", "an RTX A6000"),
        ("H100 SXM 80GB", "an H100 SXM 80GB"),
        ("L40S", "an L40S"),
        ("A100 80GB SXM4", "an A100 80GB SXM4"),
        ("Instinct MI300X", "an Instinct MI300X"),
        ("T4", "a T4"),
        ("B200", "a B200"),
        ("GeForce RTX 4090", "a GeForce RTX 4090"),
        ("TPU v5e", "a TPU v5e"),
        ("Tesla V100 SXM2 32GB", "a Tesla V100 SXM2 32GB"),
        ("Gaudi 3 (OAM HL-325L)", "a Gaudi 3 (OAM HL-325L)"),
    ],
)
def test_gpu_names_take_the_right_article(name: str, phrase: str) -> None:
    assert with_article(name) == phrase


def test_money_and_energy_figures() -> None:
    assert format_usd(1234.4) == "$1,234"
    assert format_usd(99.994) == "$99.99"
    assert format_usd(2.5) == "$2.50"
    assert format_kwh(12.34) == "12.3"
    assert format_kwh(1234.4) == "1,234"


def test_free_or_short() -> None:
    assert free_text(2**30) == "1.00 GiB free"
    assert free_text(0.0) == "0.00 GiB free"
    assert free_text(-1.5 * 2**30) == "short 1.50 GiB"


def test_the_chosen_gpu_verdict_and_the_class_counts() -> None:
    """Llama-3.1-8B full fine-tune on one H100 (79.65 GiB) does not fit; QLoRA does. The class
    lines count the fit table's own rows, and the verdict is the chosen GPU's row."""
    full = estimate({"model": "Llama-3.1-8B", "method": "full"})
    row = full.chosen_fit
    assert row.gpu == "H100 SXM 80GB" and not full.fits
    assert (
        fit_verdict(full)
        == f"does not fit H100 SXM 80GB (short {format_gib(full.total_bytes - 85_520_809_984)})"
    )
    qlora = estimate({"model": "Llama-3.1-8B", "method": "qlora"})
    assert qlora.fits
    assert fit_verdict(qlora) == f"fits H100 SXM 80GB ({format_gib(85_520_809_984 - qlora.total_bytes)} free)"
    lines = fit_group_lines(qlora)
    for gpu_class, line in lines.items():
        rows = [r for r in qlora.fit if r.gpu_class == gpu_class]
        assert line == f"{gpu_class.capitalize()}: {sum(r.fits for r in rows)} of {len(rows)} fit"
    assert sum(int(line.split(": ")[1].split(" of ")[1].split()[0]) for line in lines.values()) == len(
        qlora.fit
    )


def test_notes_and_details() -> None:
    result = estimate({"model": "Llama-3.1-8B", "method": "qlora", "zero_stage": 2})
    labels = note_lines(result)
    assert (NOTE, "zero_stage has no effect with a single data-parallel replica") in labels
    assert all(label in (NOTE, APPROXIMATE) for label, _ in labels)
    assert trainable_detail(result).endswith(" params (QLoRA adapters)")
    assert weights_detail(result) == "frozen base in nf4, plus adapters"
    sharded = estimate({"model": "Llama-3.1-8B", "method": "full", "gpus": 8, "zero_stage": 3})
    assert weights_detail(sharded) == "trainable weights, bf16-mixed; this GPU's share"
