"""Time model against published measured throughput (calibration/published.yaml).

Each case is a real training run: its settings become a scenario, trainplan's own efficiency
model (no MFU given) predicts tokens/s per GPU, and the error must stay within the claim for
language-model throughput in calibration/claims.py, median included; the torch.compile and
float8 speed-ups are held to the speed-up claim, known misses apart.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import ALL, claim_for, verdict
from time_reference import CASES, TimeCase, evaluate

CLAIM = claim_for("llm-throughput", ALL)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_the_claim(case: TimeCase) -> None:
    row = evaluate(case)
    assert verdict(CLAIM.figure, case.id, ALL, row.error) is None, case.conversion


def test_median_claim() -> None:
    errors = [abs(evaluate(case).error) for case in CASES]
    assert len(errors) >= 15
    assert CLAIM.median is not None
    assert statistics.median(errors) <= CLAIM.median


def test_compile_speedups() -> None:
    # torch.compile's speed-up on the same run, measured vs predicted (time_reference.COMPILE_PAIRS),
    # against the speed-up claim: the torchtitan pairs come out within 1% (+15.7%/+16.2% measured,
    # +15.6% predicted); the torchtune pair's +27% is predicted as +12.5%, its loss (compiled by
    # torchtune, timed as eager here) and eager launch overheads not being modelled.
    from time_reference import compile_speedups

    rows = compile_speedups()
    assert len(rows) == 3
    for case_id, measured, predicted in rows:
        assert measured > 1 and predicted > 1, case_id
        assert verdict("speed-up", case_id, ALL, predicted / measured - 1) is None


def test_float8_speedups() -> None:
    # torchao float8's speed-up over compiled bf16 on the same run, measured vs predicted
    # (time_reference.FLOAT8_PAIRS), with Hopper's published fp8 matmul ratio (terms/timing.py,
    # not fitted), against the speed-up claim. All three are known misses (claims.KNOWN_MISSES):
    # the 8-GPU pairs come out high (torchtitan, 1.28x measured, 1.52x predicted; torchao's
    # README, 1.25x and 1.50x): those H100s ran at a 500 W power limit, the matmul benchmark's at
    # 700 W; the 128-GPU pair comes out low (1.29x and 1.08x): modelled as SXM parts, the fp8 step
    # is too short to hide FSDP's network traffic.
    from time_reference import float8_speedups

    rows = float8_speedups()
    assert len(rows) == 3
    for case_id, measured, predicted in rows:
        assert measured > 1 and predicted > 1, case_id
        assert verdict("speed-up", case_id, ALL, predicted / measured - 1) is None
