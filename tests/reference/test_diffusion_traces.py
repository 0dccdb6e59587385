"""The real-size diffusion, video and JEPA traces (calibration/diffusion_trace.json) against the
parameter counts: the state terms a trace measures are arithmetic from the config, so the
committed data must agree with the catalog. No tracing here (scripts/trace_diffusion.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainplan.engine.terms.params import lora_params
from trainplan.inputs.resolve import resolve_model
from trainplan.specs.scenario import scenario_from_mapping
from trainplan.specs.weights import total_params

CALIBRATION = Path(__file__).resolve().parents[2] / "calibration"
RECORDS: list[dict[str, Any]] = json.loads((CALIBRATION / "diffusion_trace.json").read_text())
# Every storage is rounded up to 512 B (the CUDA caching allocator's block): a term over T tensors
# is within 512 x T bytes of its elements x bytes per element.
ROUNDING_PER_TENSOR = 512
BYTES = {"bf16": 2, "fp32": 4}
# The encoder a JEPA's target copies. V-JEPA 2 ViT-L (width 1,024, 24 blocks, MLP 4,096, tubelets
# of 2 x 16 x 16 RGB pixels): patch embedding 1,024 x 3 x 2 x 16 x 16 + 1,024 = 1,573,888; per
# block 2 LayerNorms (4,096), qkv 3 x (1,024^2 + 1,024), proj 1,024^2 + 1,024, fc1 1,024 x 4,096 +
# 4,096, fc2 4,096 x 1,024 + 1,024 = 12,596,224, x 24 = 302,309,376; the final LayerNorm 2,048
# V-JEPA ViT-L/16 has the same encoder (its sin-cos table is a buffer). I-JEPA ViT-H/14 (width
# 1,280, 32 blocks, MLP 5,120, 14 x 14 patches): patch embedding 1,280 x 3 x 14 x 14 + 1,280 =
# 753,920, the 256 x 1,280 position table 327,680 (a parameter, as in transformers' IJepaModel),
# per block 19,677,440, the final LayerNorm 2,560
ENCODER_PARAMS = {
    "V-JEPA-2-ViT-L": 1_573_888 + 24 * 12_596_224 + 2_048,
    "V-JEPA-ViT-L-16": 1_573_888 + 24 * 12_596_224 + 2_048,
    "I-JEPA-ViT-H-14": 753_920 + 327_680 + 32 * 19_677_440 + 2_560,
}


def test_every_case_was_traced() -> None:
    cases = yaml.safe_load((CALIBRATION / "diffusion_cases.yaml").read_text())
    assert [record["case"]["id"] for record in RECORDS] == [case["id"] for case in cases]
    assert all("measured" in record for record in RECORDS), [r["case"]["id"] for r in RECORDS if "error" in r]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["case"]["id"])
def test_state_terms_are_the_parameter_counts(record: dict[str, Any]) -> None:
    scenario = scenario_from_mapping(record["case"]["scenario"])
    spec = resolve_model(scenario.model)
    m = record["measured"]
    states = m["phase_breakdowns_bytes"]["step2.optimizer"]  # every state resident
    total = total_params(spec)
    tensors = 4 * 2_000  # a bound on the tensors behind one term (SDXL's UNet has 1,680 parameters)
    slack = ROUNDING_PER_TENSOR * tensors
    if scenario.method == "full":
        weight = 2 if scenario.precision == "bf16" else 4  # amp-bf16 trains fp32 weights
        trainable = total
        assert states["params"] == pytest.approx(weight * total, abs=slack)
    else:
        trainable = lora_params(spec, scenario.lora)
        adapter = 4 if scenario.lora.dtype == "fp32" else BYTES[str(scenario.base_weights)]
        weight = adapter
        base = BYTES[str(scenario.base_weights)]
        assert states["params"] == pytest.approx(base * total + adapter * trainable, abs=slack)
    assert m["trainable_params"] == trainable
    assert m["total_params"] == total + (0 if scenario.method == "full" else trainable)
    assert states["grads"] == pytest.approx(weight * trainable, abs=slack)
    assert states["optimizer"] == pytest.approx(2 * weight * trainable, abs=slack)  # AdamW's two moments
    if spec.kind == "jepa":  # the target encoder: the encoder's weights, in fp32 unless ema says bf16
        assert ENCODER_PARAMS[spec.name] in (303_885_312, 630_762_240)
        encoder = ENCODER_PARAMS[spec.name]
        assert states["ema"] == pytest.approx(BYTES[scenario.ema or "fp32"] * encoder, abs=slack)
    elif scenario.ema in ("fp32", "bf16"):
        assert states["ema"] == pytest.approx(BYTES[scenario.ema] * total, abs=slack)
    else:
        assert states["ema"] == 0
    assert m["peak_bytes"] == sum(m[f"{name}_bytes"] for name in states)
