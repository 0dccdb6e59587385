"""Scenario validation: every bad value names its field and the allowed range."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.specs.errors import InputError
from trainplan.specs.scenario import LoraSettings, Scenario, scenario_from_mapping, scenario_to_mapping


@pytest.mark.parametrize(
    ("data", "field", "text"),
    [
        ({"micro_batch": 0}, "micro_batch", "between 1 and 65,536 (got 0)"),
        ({"micro_batch": "two"}, "micro_batch", "not an integer"),
        ({"seq_len": 1.5}, "seq_len", "not an integer"),
        ({"grad_accum": -3}, "grad_accum", "between 1 and 65,536"),
        ({"zero_stage": 4}, "zero_stage", "between 0 and 3"),
        ({"method": "ia3"}, "method", "full, lora, qlora"),
        ({"precision": "int4"}, "precision", "bf16-mixed"),
        ({"optimizer": "adam"}, "optimizer", "adamw"),
        ({"overhead_gib": "nan"}, "overhead_gib", "finite"),
        ({"overhead_gib": -1}, "overhead_gib", "between 0 and 1,024"),
        ({"microbatch": 2}, "microbatch", "unknown scenario field"),
        ({"lora": {"rank": 0}}, "lora.rank", "between 1 and 65,536"),
        ({"lora": {"targets": []}}, "lora.targets", "qv, attention, all-linear"),
        ({"lora": {"ranks": 4}}, "lora.ranks", "unknown field"),
        ({"gpus": 6, "tensor_parallel": 4}, "gpus", "multiple of"),
        ({"method": "full", "base_weights": "nf4"}, "base_weights", "only applies"),
        ({"method": "qlora", "base_weights": "bf16"}, "base_weights", "nf4 or int8"),
        ({"sequence_parallel": True}, "sequence_parallel", "tensor_parallel > 1"),
        ({"sequence_parallel": "maybe"}, "sequence_parallel", "boolean"),
    ],
)
def test_bad_values_name_the_field(data: dict[str, Any], field: str, text: str) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping(data)
    assert error.value.field == field
    assert text in str(error.value)


def test_strings_from_flags_are_converted() -> None:
    scenario = scenario_from_mapping(
        {
            "micro_batch": "4",
            "seq_len": "4,096",
            "sequence_parallel": "false",
            "method": "LoRA",
            "lora": {"rank": "8", "targets": "q_proj,v_proj", "dora": "true"},
        }
    )
    assert scenario.micro_batch == 4 and scenario.seq_len == 4096 and scenario.method == "lora"
    assert scenario.lora == LoraSettings(rank=8, alpha=32.0, targets=("q_proj", "v_proj"), dora=True)


def test_round_trip() -> None:
    scenario = Scenario(lora=LoraSettings(targets=("q_proj",)), gpus=8, zero_stage=3)
    assert scenario_from_mapping(scenario_to_mapping(scenario)) == scenario


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"micro_batch": -3}, "micro_batch"),  # was estimated at 17 GiB
        ({"method": "bogus"}, "method"),  # was estimated at 20.5 GiB
        ({"seq_len": 0}, "seq_len"),  # was a ZeroDivisionError
        ({"gpus": 8, "tensor_parallel": 3}, "gpus"),  # a cross-field rule that needs no model
        ({"steps": 10, "train_tokens": 5}, "train_tokens"),
        ({"offload": "optimizer+params", "gpus": 2}, "offload"),
    ],
)
def test_a_scenario_refuses_bad_values_as_a_mapping_does(fields: dict[str, Any], field: str) -> None:
    """Scenario is public API: built directly, it raises the InputError a mapping of the same
    values gets (field and allowed range), before any estimate."""
    with pytest.raises(InputError) as direct:
        Scenario(**fields)
    with pytest.raises(InputError) as mapped:
        scenario_from_mapping(fields)
    assert direct.value.field == mapped.value.field == field
    assert direct.value.message == mapped.value.message


def test_a_constructed_value_must_be_in_the_form_a_mapping_gives() -> None:
    """A mapping's "BF16" or "4" is converted; a record holds the converted value, so a
    constructed one must already be it (and a LoRA part is checked as the scenario's)."""
    with pytest.raises(InputError, match=r"precision: 'BF16': give 'bf16'"):
        Scenario(precision="BF16")
    with pytest.raises(InputError, match=r"micro_batch: 2.0 is not an integer"):
        Scenario(micro_batch=2.0)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"lora.rank: must be between 1 and 65,536 \(got 0\)"):
        LoraSettings(rank=0)
    with pytest.raises(InputError, match="activation_checkpointing"):
        Scenario(activation_checkpointing="most")
    assert Scenario(precision="bf16", micro_batch=4).micro_batch == 4
    assert scenario_from_mapping({"precision": "BF16", "micro_batch": "4"}) == Scenario(
        precision="bf16", micro_batch=4
    )
