"""Edge formatting: counts with decimal suffixes, GiB, the global batch line."""

from __future__ import annotations

import pytest

from trainplan.render import batch_line, format_duration, with_article
from trainplan.result import Batch
from trainplan.units import format_count, format_gb, format_gib, format_percent


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
