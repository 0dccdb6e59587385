"""Framework recipes: presets fill unset fields only, the result names what they set, data is strict."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.specs.errors import InputError
from trainplan.specs.presets import recipe_defaults, recipes
from trainplan.specs.scenario import METHODS, RECIPES, Scenario, scenario_from_mapping, scenario_to_mapping


@pytest.mark.parametrize("name", RECIPES)
@pytest.mark.parametrize("method", METHODS)
def test_every_preset_builds_for_every_method(name: str, method: str) -> None:
    scenario = scenario_from_mapping({"recipe": name, "method": method})
    assert scenario.recipe == name
    # with nothing set by the user, every default the preset lists is applied, unless the
    # default layout itself rules it out (torchtitan's sequence parallelism needs tensor
    # parallelism): that one is refused on its own too
    for key, value in recipes()[name].fields(method).items():
        current = getattr(scenario.lora, key[5:]) if key.startswith("lora.") else getattr(scenario, key)
        if current != value:
            assert not key.startswith("lora."), (name, method, key)
            with pytest.raises(InputError):
                scenario_from_mapping({"method": method, key: value})


def test_torchtitans_tensor_parallelism_is_sequence_parallel() -> None:
    """torchtitan's apply_tp always shards the norms over the sequence (parallelize.py,
    SequenceParallel on every norm): its recipe sets sequence_parallel wherever tensor_parallel
    is above 1, and leaves it off on a single tensor-parallel rank."""
    split = scenario_from_mapping({"recipe": "torchtitan", "method": "full", "gpus": 2, "tensor_parallel": 2})
    assert split.sequence_parallel and recipe_defaults(split)["sequence_parallel"] is True
    single = scenario_from_mapping({"recipe": "torchtitan", "method": "full"})
    assert not single.sequence_parallel and "sequence_parallel" not in recipe_defaults(single)
    unsplit = scenario_from_mapping(
        {
            "recipe": "torchtitan",
            "method": "full",
            "gpus": 2,
            "tensor_parallel": 2,
            "sequence_parallel": False,
        }
    )
    assert estimate(split).total_bytes < estimate(unsplit).total_bytes  # the norms' inputs split


def test_torchtune_full_defaults() -> None:
    # torchtune's 8B_full_single_device.yaml: PagedAdamW8bit stepped in backward, no accumulation,
    # chunked loss, bf16, activation checkpointing
    scenario = scenario_from_mapping({"recipe": "torchtune", "method": "full"})
    assert (scenario.optimizer, scenario.optimizer_in_backward, scenario.grad_accum) == (
        "paged-adamw-8bit",
        True,
        1,
    )
    assert (scenario.loss, scenario.precision, scenario.activation_checkpointing) == (
        "chunked",
        "bf16",
        "full",
    )


def test_user_fields_win() -> None:
    scenario = scenario_from_mapping({"recipe": "torchtune", "method": "full", "loss": "standard"})
    assert scenario.loss == "standard" and scenario.optimizer == "paged-adamw-8bit"
    # a user's grad_accum rules out the preset's optimizer-in-backward: it is left out, no error
    accumulated = scenario_from_mapping({"recipe": "torchtune", "method": "full", "grad_accum": 8})
    assert accumulated.grad_accum == 8 and not accumulated.optimizer_in_backward
    lora = scenario_from_mapping({"recipe": "axolotl", "method": "lora", "lora": {"dropout": 0.1, "rank": 4}})
    assert lora.lora.dropout == 0.1 and lora.lora.rank == 4
    assert scenario_from_mapping({"recipe": "axolotl", "method": "lora"}).lora.dropout == 0.05


def test_result_says_which_defaults_came_from_the_recipe() -> None:
    scenario = scenario_from_mapping({"recipe": "trl", "method": "qlora", "model": "Qwen2.5-0.5B"})
    used = recipe_defaults(scenario)
    assert used == {"loss": "fused", "attention": "sdpa", "kbit_upcast": True}
    summary: dict[str, Any] = estimate(scenario).assumptions["recipe"]
    assert summary["name"] == "trl" and summary["defaults"] == used and summary["as_of"]
    assert estimate(Scenario(model="Qwen2.5-0.5B")).assumptions["recipe"] is None


def test_recipe_round_trips_and_errors() -> None:
    scenario = scenario_from_mapping({"recipe": "unsloth", "method": "qlora"})
    assert scenario_from_mapping(scenario_to_mapping(scenario)) == scenario
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"recipe": "colab"})
    assert error.value.field == "recipe" and "torchtune" in error.value.message
    assert scenario_from_mapping({"recipe": None}).recipe is None


def test_recipe_rows_are_sourced() -> None:
    for recipe in recipes().values():
        assert recipe.source and recipe.version and recipe.as_of
        assert recipe.verified in ("read", "documented")


def test_a_recipe_with_a_lora_that_is_not_a_mapping_is_an_input_error() -> None:
    """The recipe's adapter defaults are not merged into a `lora` that is not a mapping: the
    validator names the field (found by the web fuzz test: a TypeError before)."""
    with pytest.raises(InputError) as raised:
        scenario_from_mapping({"recipe": "hf-trainer", "lora": [None]})
    assert raised.value.field == "lora"


def _adapters(**fields: Any) -> tuple[Any, float, float]:
    """(the result, its optimizer bytes, its trainable adapter parameters) of a LoRA run."""
    result = estimate({"method": "lora", "gpu": "H100 SXM", "micro_batch": 1, **fields})
    return result, result.peak.term("optimizer").value, float(result.params.trainable)


def test_a_diffusion_or_video_model_without_a_recipe_keeps_adapters_at_the_compute_dtype() -> None:
    """AdamW keeps two moments per adapter weight at the adapters' dtype: 2 x 2 B = 4 B each in
    bf16 (the diffusers scripts' adapters, the default for FLUX.1-dev and Wan 2.1 given neither a
    recipe nor lora.dtype), 2 x 4 B = 8 B in fp32 (peft's, a language model's default, and any
    value the user gives); the result and its recipe line say where the default came from."""
    from trainplan.interfaces.text.phrasing import recipe_line

    for model in ("FLUX.1-dev", "Wan2.1-T2V-1.3B"):
        result, optimizer, adapters = _adapters(model=model)
        assert optimizer == 4 * adapters
        lent = result.assumptions["adapter_dtype"]
        assert lent["value"] == "compute" and lent["recipe"] == "diffusers"
        assert "diffusers" in lent["source"] and recipe_line(result) == (
            f"lora.dtype=compute: {lent['source']}; set lora.dtype to change it"
        )
        given, optimizer, adapters = _adapters(model=model, lora={"dtype": "fp32"})
        assert optimizer == 8 * adapters
        assert given.assumptions["adapter_dtype"] == {
            "value": "fp32",
            "source": "set in the scenario",
            "recipe": None,
        }
        assert recipe_line(given) is None
    llm, optimizer, adapters = _adapters(model="Qwen2.5-0.5B")
    assert optimizer == 8 * adapters and llm.assumptions["adapter_dtype"]["recipe"] is None


def test_the_diffusion_default_upcasts_under_fp16_and_yields_to_a_recipe() -> None:
    """Under fp16 the diffusers scripts upcast the adapters (cast_training_params): fp32. A recipe
    that leaves lora.dtype unset (hf-trainer: peft's get_peft_model) gives peft's fp32; one that
    sets it (diffusers) is reported as the recipe's. A full fine-tune has no adapters."""
    fp16, optimizer, adapters = _adapters(model="FLUX.1-dev", precision="fp16-mixed")
    assert optimizer == 8 * adapters and "cast_training_params" in fp16.assumptions["adapter_dtype"]["source"]
    peft, optimizer, adapters = _adapters(model="FLUX.1-dev", recipe="hf-trainer")
    assert optimizer == 8 * adapters and peft.assumptions["adapter_dtype"]["source"].startswith("peft")
    diffusers = _adapters(model="FLUX.1-dev", recipe="diffusers")[0]
    assert diffusers.assumptions["adapter_dtype"]["source"] == "recipe diffusers"
    full = estimate({"model": "Qwen2.5-0.5B", "method": "full"})
    assert full.assumptions["adapter_dtype"] is None


def test_torchtunes_8b_full_fine_tune_fits_the_4090_it_was_published_on() -> None:
    """torchtune's README runs Llama-3.1-8B's full fine-tune on one RTX 4090 (paged 8-bit AdamW
    in backward; calibration/published.yaml torchtune-llama31-8b-full-4090). The paged states,
    8,030,261,248 x 2 x (1 + 4/256) bytes = 15.19 GiB, are in unified memory, outside the peak:
    the run fits, where counting them resident made it 35 GiB, "does not fit"."""
    result = estimate(
        scenario_from_mapping(
            {"model": "Llama-3.1-8B", "method": "full", "recipe": "torchtune", "gpu": "RTX 4090"}
        )
    )
    assert result.scenario.optimizer == "paged-adamw-8bit"
    assert result.paged_bytes == 8_030_261_248 * 2 * (1 + 4 / 256)
    assert f"{result.paged_bytes / 2**30:.2f}" == "15.19"
    assert result.fits and result.total_bytes + result.paged_bytes > result.chosen_fit.memory_bytes
