"""Diffusion and video time model against published measured throughput (calibration/published.yaml,
'Diffusion, video and JEPA training throughput').

Each case is a real training run: its settings become a scenario, trainplan's own efficiency
(the GPU architecture's figure times the model kind's factor, no MFU given) predicts images or
clips per second per GPU, and the error must stay within the claim of calibration/claims.py for
the case's role, known misses apart. The fit cases fixed the factors, so they must be reproduced
closely; the held-out ones check them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import claim_for, verdict
from diffusion_time_reference import CASES, DiffusionTimeCase, evaluate

from trainplan.engine.estimate import estimate
from trainplan.engine.terms.timing import EFFICIENCY_FACTOR_BY_MODEL_KIND
from trainplan.specs.scenario import Scenario, scenario_from_mapping


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_case_within_the_claim(case: DiffusionTimeCase) -> None:
    row = evaluate(case)
    assert verdict("diffusion-time", case.id, case.role, row.error) is None, case.conversion


def test_every_fitted_kind_has_a_fit_case_and_the_fit_cases_are_tight() -> None:
    """A factor in the table is backed by a fit case of that kind; fit cases are claimed within 5%,
    tighter than the held-out ones."""
    rows = [evaluate(case) for case in CASES]
    fitted = {row.kind for row in rows if row.case.role == "fit"}
    assert fitted == set(EFFICIENCY_FACTOR_BY_MODEL_KIND)
    assert {case.role for case in CASES} == {"fit", "held-out"}
    fit, held_out = claim_for("diffusion-time", "fit"), claim_for("diffusion-time", "held-out")
    assert fit.worst <= 0.05 < held_out.worst


def test_unet_factor_removes_the_bias_on_held_out_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the UNet factor (the language models' 0.47 Hopper efficiency) the held-out MLPerf
    run on 64 H100s is over-predicted by more than 20%; with it the error is under 10%."""
    case = next(c for c in CASES if c.id == "mlperf-v40-sd2-h100-64gpu")
    calibrated = evaluate(case).error
    monkeypatch.delitem(EFFICIENCY_FACTOR_BY_MODEL_KIND, "unet")
    uncalibrated = evaluate(case).error
    assert uncalibrated > 0.2
    assert abs(calibrated) < 0.1


def test_flux_training_flops_match_the_mlperf_submission() -> None:
    """NVIDIA's MLPerf Training v5.1 flux1 config (config_common.sh, MODEL_TFLOP_PER_SAMPLE=20.3)
    counts 20.3 TFLOPs per 256-px sample of FLUX.1-schnell's full training step (forward and
    backward, no recompute, 256 image and 256 text tokens); trainplan's count of the same step is
    within 1% of it."""
    case = next(c for c in CASES if c.id == "mlperf-v51-flux1-gb200-16gpu")
    result = estimate(scenario_from_mapping(case.scenario, base=Scenario(model=case.id)), model=case.spec())
    assert result.time is not None
    per_sample = result.time.flops.total * result.batch.seq_len
    assert result.time.flops.recompute == 0
    assert per_sample == pytest.approx(20.3e12, rel=0.01)
