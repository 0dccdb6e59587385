"""Fuzz the API: any JSON body gets a 200 or a 4xx naming a field, never a 500."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainplan.interfaces.web.app import create_app
from trainplan.specs.scenario import Scenario, field_infos

CLIENT = TestClient(create_app(), raise_server_exceptions=True, base_url="http://localhost")
INFOS = field_infos()
FIELDS = [name for name in INFOS if name != "lora"]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=8,
)


def plausible(name: str) -> st.SearchStrategy[Any]:
    """Values near the field's range and choices, as well as junk."""
    info = INFOS[name]
    options: list[st.SearchStrategy[Any]] = [json_scalars]
    if info.choices:
        options.append(st.sampled_from(info.choices))
    if info.minimum is not None:
        low = info.minimum
        high = info.maximum if info.maximum is not None else low + 100
        options.append(st.floats(min_value=low - 1, max_value=high + 1))
        # integers up to a million past the minimum (a field in bytes/s starts far above that)
        options.append(st.integers(min_value=int(low) - 1, max_value=int(min(high, low + 10**6)) + 1))
    return st.one_of(*options)


scenario_bodies = st.fixed_dictionaries(
    {},
    optional={
        **{name: plausible(name) for name in FIELDS},
        "model": st.one_of(
            st.sampled_from(["Llama-3.1-8B", "GPT-2", "Qwen3-30B-A3B", "T5-Base", "../x", "a/b/c", "/etc"]),
            st.text(max_size=20),
        ),
        "lora": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "rank": st.one_of(st.integers(-2, 70000), json_scalars),
                    "alpha": json_scalars,
                    "targets": st.one_of(
                        st.sampled_from(["qv", "attention", "all-linear", "q_proj,v_proj"]), json_values
                    ),
                    "dora": json_scalars,
                },
            ),
        ),
        "colour": json_scalars,
    },
)

config_values = st.one_of(st.integers(-3, 5000), st.booleans(), st.none(), st.text(max_size=10), st.floats())
model_configs = st.fixed_dictionaries(
    {},
    optional={
        key: config_values
        for key in (
            "model_type",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_hidden_layers",
            "num_key_value_heads",
            "vocab_size",
            "head_dim",
            "num_local_experts",
            "num_experts_per_tok",
            "tie_word_embeddings",
        )
    },
).map(lambda cfg: {"model_type": "llama", **cfg} if "model_type" not in cfg else cfg)


def check(body: Any, query: str = "?hints=false") -> None:
    response = CLIENT.post(
        f"/api/estimate{query}", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200 or 400 <= response.status_code < 500, (body, response.text)
    if response.status_code != 200:
        data = response.json()
        assert isinstance(data["field"], str), data  # the key at fault (an unknown key may be "")
        assert isinstance(data["message"], str) and data["message"]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_bodies)
def test_fuzz_scenarios(body: dict[str, Any]) -> None:
    check(body)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_configs, st.sampled_from(["full", "lora", "qlora"]))
def test_fuzz_uploaded_configs(config: dict[str, Any], method: str) -> None:
    check({"model": "fuzzed", "method": method, "model_config": config})


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_fuzz_any_json(body: Any) -> None:
    check(body)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "model": st.sampled_from(["Llama-3.1-8B", "Llama-3.1-70B", "Mixtral-8x7B-v0.1", "GPT-2"]),
            "method": st.sampled_from(["full", "lora", "qlora"]),
            "micro_batch": st.integers(1, 64),
            "gpus": st.sampled_from([1, 2, 8, 64]),
            "zero_stage": st.integers(0, 3),
            "activation_checkpointing": st.sampled_from(["none", "selective", "full"]),
            "optimizer": st.sampled_from(["adamw", "adamw-8bit", "sgd", "adafactor"]),
            "offload": st.sampled_from(["none", "optimizer", "optimizer+params"]),
            "pricing": st.sampled_from(["on-demand", "spot", "committed"]),
        },
    )
)
def test_fuzz_with_hints(body: dict[str, Any]) -> None:
    check(body, query="")


def in_range(name: str) -> st.SearchStrategy[Any]:
    """Only values each field accepts on its own, so that estimate() itself is exercised."""
    info = INFOS[name]
    if info.choices:
        return st.sampled_from(info.choices)
    if info.minimum is not None and info.maximum is not None:
        if (info.value_type or type(getattr(Scenario(), name)).__name__) == "int":
            return st.integers(int(info.minimum), int(min(info.maximum, 2**20)))
        return st.floats(info.minimum, info.maximum)
    return st.nothing()


RANGED = [name for name in FIELDS if INFOS[name].choices or INFOS[name].maximum is not None]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {"model": st.sampled_from(["Llama-3.1-8B", "GPT-2", "Qwen3-30B-A3B", "T5-Base", "DeepSeek-V3"])},
        optional={name: in_range(name) for name in RANGED},
    )
)
def test_fuzz_in_range_values(body: dict[str, Any]) -> None:
    check(body)
