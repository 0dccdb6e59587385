"""The field table says which model kinds and methods each field applies to (`FieldInfo.model_kinds`,
`FieldInfo.methods`); the page shows and sends a field only there (it reads them from /api/fields).
Outside its scope a field must not matter: the engine refuses a value naming the field, or the
value changes no figure. Each declared field is tried on a catalog model of every kind (or with
the method) it does not apply to."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan import InputError, estimate
from trainplan.specs.model import MODEL_KINDS
from trainplan.specs.rollout import ROLLOUT_FIELDS
from trainplan.specs.scenario import METHODS, field_infos
from trainplan.specs.stages import STAGES

# One catalog model of each kind.
MODELS = {
    "llm": "Llama-3.2-1B",
    "diffusion": "SDXL-base-1.0",
    "video": "Wan2.1-T2V-1.3B",
    "jepa": "V-JEPA-2-ViT-L",
}
# A valid value other than the default, for every field with a declared scope.
VALUES: dict[str, Any] = {
    "resolution": 512,
    "frames": 17,
    "text_tokens": 154,
    "frozen_encoders": "gpu",
    "ema": "bf16",
    "mask_ratio": 0.5,
    "train_samples": 5000,
    "dataset_size": 5000,
    "seq_len": 4096,
    "loss": "fused",
    "loss_chunks": 4,
    "ssm_kernel": "naive",
    "kernels": "liger",
    "train_tokens": 1e9,
    "dataset_tokens": 1e9,
    "sequence_parallel": True,
    "tensor_parallel": 2,
    "pipeline_parallel": 2,
    "context_parallel": 2,
    "expert_parallel": 2,
    "expert_imbalance": 1.5,
    "lora": {"rank": 64, "dora": True},
    "base_weights": "int8",
    "kbit_upcast": True,
    "vae": "FLUX.1-schnell",
    "stage": "orpo",
    "reference": "model",
    "reference_weights": "nf4",
    "completion_len": 256,
    "generations": 4,
    "rollout_engine": "vllm",
    "rollout_placement": "separate",
    "rollout_gpus": 2,
    "rollout_tensor_parallel": 2,
    "rollout_memory_fraction": 0.5,
    "rollout_sleep": True,
    "steps_per_generation": 2,
    "num_iterations": 2,
    "rollout_forward_batch": 8,
    "critic_model": "Qwen2.5-0.5B",
    "reward_model": "Qwen2.5-0.5B",
}
FIGURES = ("params", "memory", "time", "cost", "energy")
_GRPO: dict[str, Any] = {"stage": "grpo", "micro_batch": 8, "grad_accum": 1, "seq_len": 1024}
_VLLM: dict[str, Any] = {"rollout_engine": "vllm"}
# a PPO step of 32 prompts per GPU, generated 32 at a time unless rollout_forward_batch says less
_PPO: dict[str, Any] = {"stage": "ppo", "micro_batch": 8, "grad_accum": 4, "seq_len": 1024}
# Where a field only acts beside another setting: the chunk count of the chunked loss, the scan
# kernel of a model with state-space layers.
INSIDE: dict[str, dict[str, Any]] = {
    "loss_chunks": {"loss": "chunked"},
    # a mixture-of-experts model on 2 GPUs without ZeRO: each holds half the routed experts
    "expert_parallel": {"model": "Qwen3-30B-A3B", "method": "full", "gpus": 2},
    # ... and with them split over the 2, the busier one's tokens
    "expert_imbalance": {"model": "Qwen3-30B-A3B", "method": "full", "gpus": 2, "expert_parallel": 2},
    "ssm_kernel": {"model": "Mamba-2.8B", "method": "full"},
    "reference": {"stage": "dpo"},
    "reference_weights": {"stage": "dpo", "reference": "model"},
    # the rollout fields: a GRPO step of 8 completions per GPU, with the engine each one needs
    "completion_len": _GRPO,
    "generations": {**_GRPO, **_VLLM, "rollout_placement": "separate", "gpus": 3},
    "rollout_engine": _GRPO,
    "rollout_placement": {**_GRPO, **_VLLM, "gpus": 3},
    "rollout_gpus": {**_GRPO, **_VLLM, "rollout_placement": "separate", "gpus": 4},
    "rollout_tensor_parallel": {**_GRPO, **_VLLM, "gpus": 2},
    "rollout_memory_fraction": {**_GRPO, **_VLLM},
    "rollout_sleep": {**_GRPO, **_VLLM},
    "steps_per_generation": _GRPO,
    "num_iterations": _GRPO,
    "rollout_forward_batch": _PPO,
    "critic_model": _PPO,
    "reward_model": _PPO,
}


def scoped() -> dict[str, tuple[tuple[str, ...] | None, tuple[str, ...] | None]]:
    return {
        name: (info.model_kinds, info.methods)
        for name, info in field_infos().items()
        if info.model_kinds is not None or info.methods is not None
    }


def test_outside_its_stages_a_field_is_refused() -> None:
    """A field scoped to stages (the reference fields: dpo, kto, grpo and ppo; the rollout fields:
    grpo and ppo, or one of them) is refused, naming it, on every other stage."""
    staged = {name: info.stages for name, info in field_infos().items() if info.stages is not None}
    assert set(staged) == {"reference", "reference_weights", *ROLLOUT_FIELDS}
    for name, stages in staged.items():
        assert set(stages) <= set(STAGES)
        for stage in sorted(set(STAGES) - set(stages)):
            with pytest.raises(InputError) as error:
                estimate({"model": MODELS["llm"], "stage": stage, name: VALUES[name]})
            assert error.value.field == name, (name, stage)


def test_every_scope_names_known_kinds_and_methods_and_has_a_case() -> None:
    assert set(scoped()) == set(VALUES)
    for families, methods in scoped().values():
        assert set(families or ()) <= set(MODEL_KINDS)
        assert set(methods or ()) <= set(METHODS)


def _refused_or_inert(base: dict[str, Any], name: str) -> None:
    """`name` set on `base` is refused, naming it, or leaves every figure as it was."""
    parallel = ("tensor_parallel", "pipeline_parallel", "context_parallel", "sequence_parallel")
    gpus = {"gpus": 4} if name in parallel else {}
    changed = {**base, **gpus, name: VALUES[name]}
    if name == "sequence_parallel":
        changed["tensor_parallel"] = 2
    try:
        result = estimate(changed).to_dict()
    except InputError as error:
        assert error.field in (name, f"{name}.rank", "tensor_parallel"), (base, name, error)
        return
    before = estimate({**base, **gpus}).to_dict()
    for key in FIGURES:
        assert result[key] == before[key], (base, name, key)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_outside_its_scope_a_field_is_refused_or_changes_nothing(name: str) -> None:
    families, methods = scoped()[name]
    for kind in MODEL_KINDS:
        if families is not None and kind not in families:
            method = "full" if kind != "llm" else "lora"
            _refused_or_inert({"model": MODELS[kind], "method": method}, name)
    for method in METHODS:
        if methods is not None and method not in methods:
            _refused_or_inert({"model": MODELS["llm"], "method": method}, name)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_inside_its_scope_the_field_is_taken(name: str) -> None:
    """The same values are accepted where the field applies, and change a figure there (so the
    cases above test the scope, not a bad value, and a field the engine ignored would fail)."""
    families, methods = scoped()[name]
    kind = (families or ("llm",))[0]
    method = (methods or ("lora",))[-1] if kind == "llm" else "full"
    extra: dict[str, Any] = {}
    if name in ("tensor_parallel", "pipeline_parallel", "context_parallel", "sequence_parallel"):
        extra = {"gpus": 4, "tensor_parallel": 2} if name == "sequence_parallel" else {"gpus": 4}
    if name == "frames":
        kind = "video"  # 17 frames: a clip (1 + 4 x 4), not an image model's single frame
    if name == "kbit_upcast":
        method = "qlora"
    base = {"model": MODELS[kind], "method": method, **extra, **INSIDE.get(name, {})}
    taken = estimate({**base, name: VALUES[name]}).to_dict()
    before = estimate(base).to_dict()
    # taken, not ignored: the value moves at least one figure where the field applies
    assert any(taken[key] != before[key] for key in FIGURES), name
