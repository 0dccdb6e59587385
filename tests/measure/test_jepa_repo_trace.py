"""I-JEPA and V-JEPA 1 steps traced on the original repos' module layout (measure/jepa_repo.py):
the states are the parameter counts, the target encoder is the EMA copy, and the published masks
run as the estimate takes them."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.measure.sample import measure_sample_step
from trainplan.engine.terms.geometry import token_shape
from trainplan.engine.terms.jepa_masks import jepa_masks
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.weights import block_params, total_params

pytest.importorskip("torch")

TINY_IJEPA: dict[str, Any] = {
    "model_type": "ijepa", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 128, "image_size": 56, "patch_size": 14, "pred_hidden_size": 16,
    "pred_num_hidden_layers": 1,
}  # fmt: skip
TINY_VJEPA: dict[str, Any] = {
    "model_type": "vjepa", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "patch_size": 16, "tubelet_size": 2, "crop_size": 64, "frames_per_clip": 4, "pred_hidden_size": 16,
    "pred_num_hidden_layers": 1, "pred_num_mask_tokens": 2,
}  # fmt: skip


@pytest.mark.parametrize(("config", "frames"), [(TINY_IJEPA, 1), (TINY_VJEPA, 4)], ids=["ijepa", "vjepa"])
def test_repo_jepa_step_states_are_the_counts(config: dict[str, Any], frames: int) -> None:
    spec = spec_from_config(config, "tiny")
    shape = token_shape(spec, int(config.get("image_size") or config["crop_size"]), frames, None)
    masks = [(m.context, m.target, m.passes) for m in jepa_masks(spec, None)]
    m = measure_sample_step(dict(config), shape, precision="amp-bf16", jepa_masks=masks)
    states = m.phase_breakdowns_bytes["step2.optimizer"]
    total = total_params(spec)
    # every parameter trains in fp32 under autocast (AdamW: two moments); the target encoder is
    # an fp32 copy of the encoder: embedding, blocks and final norm, without the predictor
    encoder = sum(
        block.count * block_params(block, spec)
        for block in spec.blocks
        if block.role in ("embed", "encoder", "encoder_norm")
    )
    assert m.trainable_params == total
    slack = 512 * 64  # every storage is rounded up to 512 B; fewer than 64 tensors per term
    assert states["params"] == pytest.approx(4 * total, abs=slack)
    assert states["optimizer"] == pytest.approx(8 * total, abs=2 * slack)
    assert states["ema"] == pytest.approx(4 * encoder, abs=slack)
    assert m.attention == ("eager" if config["model_type"] == "ijepa" else "sdpa")
    assert m.phase_breakdowns_bytes["step2.forward_end"]["activations"] > 0


def test_repo_jepa_step_needs_context_and_targets() -> None:
    from trainplan.specs.errors import InputError

    spec = spec_from_config(TINY_IJEPA, "tiny")
    shape = token_shape(spec, 56, 1, None)
    with pytest.raises(InputError) as error:
        measure_sample_step(dict(TINY_IJEPA), shape, jepa_masks=[(0.01, 0.5, 1)])
    assert error.value.field == "mask_ratio"
