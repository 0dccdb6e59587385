"""Time model against published measured throughput (calibration/published.yaml).

Each case is a real training run: its settings become a scenario, trainplan's own efficiency
model (no MFU given) predicts tokens/s per GPU, and the error must stay within the tolerance
stated on the case. The whole set must keep a median absolute error under 12%.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from time_reference import CASES, TimeCase, evaluate


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_tolerance(case: TimeCase) -> None:
    row = evaluate(case)
    assert abs(row.error) <= case.tolerance, f"{row.error:+.1%} ({case.conversion})"


def test_median_error() -> None:
    errors = [abs(evaluate(case).error) for case in CASES]
    assert len(errors) >= 15
    assert statistics.median(errors) < 0.12


def test_compile_speedups() -> None:
    # torch.compile's speed-up on the same run, measured vs predicted (time_reference.COMPILE_PAIRS).
    # Tolerance 15%: the torchtitan pairs come out within 1% (+15.7%/+16.2% measured, +15.6%
    # predicted); the torchtune pair's +27% is predicted as +12.5%, its loss (compiled by
    # torchtune, timed as eager here) and eager launch overheads not being modelled.
    from time_reference import compile_speedups

    for case_id, measured, predicted in compile_speedups():
        assert predicted > 1, case_id
        assert predicted / measured - 1 == pytest.approx(0, abs=0.15), case_id


def test_float8_speedups() -> None:
    # torchao float8's speed-up over compiled bf16 on the same run, measured vs predicted
    # (time_reference.FLOAT8_PAIRS), with Hopper's published fp8 matmul ratio (terms/timing.py,
    # not fitted). Tolerance 25%: the 8-GPU pairs come out +18% (torchtitan, 1.28x measured,
    # 1.52x predicted) and +20% (torchao's README, 1.25x and 1.50x): those H100s ran at a 500 W
    # power limit, the matmul benchmark's at 700 W; the 128-GPU pair comes out -16% (1.29x and
    # 1.08x): modelled as SXM parts, the fp8 step is too short to hide FSDP's network traffic.
    from time_reference import float8_speedups

    rows = float8_speedups()
    assert len(rows) == 3
    for case_id, measured, predicted in rows:
        assert measured > 1 and predicted > 1, case_id
        assert predicted / measured - 1 == pytest.approx(0, abs=0.25), case_id
