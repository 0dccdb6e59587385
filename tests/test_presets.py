"""Framework recipes: presets fill unset fields only, the result names what they set, data is strict."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.errors import InputError
from trainplan.estimate import estimate
from trainplan.presets import recipe_defaults, recipes
from trainplan.scenario import METHODS, RECIPES, Scenario, scenario_from_mapping, scenario_to_mapping


@pytest.mark.parametrize("name", RECIPES)
@pytest.mark.parametrize("method", METHODS)
def test_every_preset_builds_for_every_method(name: str, method: str) -> None:
    scenario = scenario_from_mapping({"recipe": name, "method": method})
    assert scenario.recipe == name
    # with nothing set by the user, every default the preset lists is applied
    for key, value in recipes()[name].fields(method).items():
        current = getattr(scenario.lora, key[5:]) if key.startswith("lora.") else getattr(scenario, key)
        assert current == value, (name, method, key)


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
    assert used == {"loss": "chunked", "attention": "sdpa", "kbit_upcast": True}
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
