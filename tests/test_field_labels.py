"""The field table carries every label: a field without one is refused when the table is first
read, every budget field names its mode, and the interfaces a field shows in decide its flags."""

from __future__ import annotations

import dataclasses

import pytest

from trainplan.interfaces import options
from trainplan.specs import scenario
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import (
    BUDGET_MODES,
    INTERFACES,
    LORA_FIELDS,
    FieldInfo,
    check_field_table,
    field_infos,
    scenario_from_mapping,
)


def test_every_field_and_lora_part_has_a_label() -> None:
    for name, info in [*field_infos().items(), *LORA_FIELDS.items()]:
        assert info.label.strip(), name
        assert set(info.interfaces) <= set(INTERFACES) and info.interfaces, name
        assert {choice for choice, _ in info.choice_labels} <= set(info.choices or ()), name


def test_a_field_without_a_label_is_a_start_up_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="'steps' has no label"):
        check_field_table({"steps": FieldInfo("optimizer steps", None, 1, 1e12, "int")})
    # the table's first reader (the CLI's flags, the server's /api/fields) runs the check: a LoRA
    # part without a label stops field_infos() itself
    unlabelled = {**LORA_FIELDS, "rank": dataclasses.replace(LORA_FIELDS["rank"], label="")}
    monkeypatch.setattr(scenario, "LORA_FIELDS", unlabelled)
    field_infos.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"'lora\.rank' has no label"):
            field_infos()
    finally:
        monkeypatch.undo()
        field_infos.cache_clear()
    assert field_infos()["micro_batch"].label == "Micro-batch"


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (FieldInfo("h", ("a", "b"), label="L", choice_labels=(("c", "C"),)), "choice labels for no choice"),
        (FieldInfo("h", label="L", budget="tokens-ish"), "budget 'tokens-ish' is not one of"),
        (FieldInfo("h", label="L", interfaces=("cli", "fax")), "interfaces \\['fax'\\]"),
        (FieldInfo("h", label="L", interfaces=()), "interfaces"),
    ],
)
def test_the_table_check_refuses_what_no_interface_can_draw(info: FieldInfo, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_field_table({"x": info})


def test_budget_modes_hold_exactly_the_budgets() -> None:
    """The page's budget modes, as it offered them before they moved into the table: tokens
    (train_tokens, or train_samples for image/video/JEPA models), dataset (dataset_tokens or
    dataset_size, times epochs) and steps."""
    modes = {mode: [n for n, i in field_infos().items() if i.budget == mode] for mode in BUDGET_MODES}
    assert modes == {
        "tokens": ["train_tokens", "train_samples"],
        "dataset": ["dataset_tokens", "epochs", "dataset_size"],
        "steps": ["steps"],
    }
    # the budgets proper are the moded fields unset by default (epochs has a default of its own):
    # the parser refuses any two of them together, the rule the page's mode switch follows
    budgets = [n for n, i in field_infos().items() if i.budget and getattr(scenario.Scenario(), n) is None]
    assert budgets == ["train_tokens", "dataset_tokens", "dataset_size", "train_samples", "steps"]
    for first in budgets:
        for second in budgets:
            if first < second:
                with pytest.raises(InputError, match="give one training budget"):
                    scenario_from_mapping({first: 1000, second: 1000})


def test_short_labels_name_the_plan_settings_and_the_searchable_fields() -> None:
    short = {n: i.short_label for n, i in field_infos().items() if i.short_label}
    assert short["micro_batch"] == "micro-batch" and short["seq_len"] == "sequence length"
    assert short["gpus"] == "GPU count" and short["zero_stage"] == "ZeRO stage"
    assert set(short) == {
        "method",
        "gpu",
        "gpus",
        "tensor_parallel",
        "pipeline_parallel",
        "context_parallel",
        "zero_stage",
        "micro_batch",
        "grad_accum",
        "activation_checkpointing",
        "offload",
        "seq_len",
    }


def test_a_field_outside_the_cli_gets_no_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    infos = dict(field_infos())
    infos["mfu"] = dataclasses.replace(infos["mfu"], interfaces=("web", "api"))
    monkeypatch.setattr(options, "field_infos", lambda: infos)
    flags = [flag for _, flag, _ in options.estimate_options()]
    assert "--mfu" not in flags and "--micro-batch" in flags
    monkeypatch.undo()
    assert "--mfu" in [flag for _, flag, _ in options.estimate_options()]
