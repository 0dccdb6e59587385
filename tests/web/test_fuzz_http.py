"""A seeded fuzz of every endpoint: thousands of hostile requests, not one 5xx.

The requests are raw text, so they can carry what a JSON encoder would never write: integers of
thousands of digits, numbers beyond float range, NaN literals, deep nesting, wrong media types,
truncated bodies, unknown keys and query strings. `make bench` runs it longer
(FUZZ_REQUESTS=10000).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from typing import Any

import pytest
from fastapi.testclient import TestClient

from trainplan.interfaces.web.app import create_app
from trainplan.specs.scenario import field_infos

REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "2400"))
SEED = int(os.environ.get("FUZZ_SEED", "20261201"))
INFOS = field_infos()
FIELDS = list(INFOS)
CONFIG_KEYS = [
    "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "vocab_size", "head_dim", "num_local_experts", "num_experts_per_tok",
    "n_routed_experts", "first_k_dense_replace", "kv_lora_rank", "tie_word_embeddings", "n_layer",
    "n_embd", "n_head", "text_config", "vision_config", "d_model", "d_ff", "num_layers",
]  # fmt: skip
PLAN_KEYS = [
    "max_gpus", "gpu_types", "methods", "objective", "target_global_tokens", "budget_usd",
    "deadline_hours", "top_k", "target_global_sequences",
]  # fmt: skip
GET_PATHS = [
    "/", "/healthz", "/docs", "/openapi.json", "/api/fields", "/api/models", "/api/gpus",
    "/api/regions", "/static/app.js", "/static/../../etc/passwd", "/static/%2e%2e/x", "/api/nothing",
    "/api/estimate", "/%00", "/static/vendor/chart.umd.min.js",
]  # fmt: skip
POISON_NUMBERS = [
    "1" + "0" * 5000, "-1" + "0" * 4400, "1" + "0" * 309, "1e400", "-1e400", "NaN", "Infinity",
    "-Infinity", "1e-400", "0", "-0", "-1", "1.5", "65537", "4294967297", "9" * 30, "1e16",
]  # fmt: skip


def number(rng: random.Random) -> str:
    if rng.random() < 0.4:
        return rng.choice(POISON_NUMBERS)
    return rng.choice([str(rng.randint(-5, 70000)), repr(rng.uniform(-10, 1e6)), str(rng.randint(0, 3))])


def value(rng: random.Random, depth: int = 0) -> str:
    """Any JSON value as text (poison numbers included)."""
    roll = rng.random()
    if depth > 2 or roll < 0.45:
        return number(rng)
    if roll < 0.6:
        return json.dumps(rng.choice(["", "qv", "all-linear", "nf4", "full", "x" * 300, "é\u202e", "../etc"]))
    if roll < 0.7:
        return rng.choice(["true", "false", "null"])
    if roll < 0.85:
        return "[" + ",".join(value(rng, depth + 1) for _ in range(rng.randint(0, 3))) + "]"
    return "{" + ",".join(f'"k{i}":{value(rng, depth + 1)}' for i in range(rng.randint(0, 3))) + "}"


def field_value(rng: random.Random, name: str) -> str:
    info = INFOS[name]
    if name == "lora":
        parts = rng.sample(["rank", "alpha", "targets", "dora", "bogus"], rng.randint(0, 4))
        return "{" + ",".join(f'"{part}":{value(rng)}' for part in parts) + "}"
    if info.choices and rng.random() < 0.6:
        return json.dumps(rng.choice(info.choices))
    if name == "model" and rng.random() < 0.7:
        return json.dumps(rng.choice(["GPT-2", "Qwen2.5-0.5B", "Llama-3.1-8B", "Mixtral-8x7B-v0.1", "nope"]))
    return value(rng)


def model_config(rng: random.Random) -> str:
    keys = rng.sample(CONFIG_KEYS, rng.randint(1, 8))
    base = {
        "model_type": '"llama"',
        "hidden_size": "64",
        "num_hidden_layers": "2",
        "num_attention_heads": "4",
    }
    items = dict(base)
    for key in keys:
        items[key] = number(rng) if rng.random() < 0.8 else value(rng)
    return "{" + ",".join(f'"{key}":{text}' for key, text in items.items()) + "}"


def scenario_body(rng: random.Random, extra: dict[str, str] | None = None) -> str:
    chosen = rng.sample(FIELDS, rng.randint(0, 6))
    items = {name: field_value(rng, name) for name in chosen}
    if rng.random() < 0.15:
        items["model_config"] = model_config(rng)
    if rng.random() < 0.05:
        items["unknown_field"] = value(rng)
    items.update(extra or {})
    return "{" + ",".join(f"{json.dumps(key)}:{text}" for key, text in items.items()) + "}"


def hostile_text(rng: random.Random, body: str) -> str:
    """Sometimes break the body itself: truncated, deeply nested, not an object, not JSON."""
    roll = rng.random()
    if roll < 0.04:
        return body[: rng.randint(0, len(body))]
    if roll < 0.06:
        depth = rng.randint(100, 30000)
        return "[" * depth + "]" * depth
    if roll < 0.08:
        return rng.choice(["[]", "1", '"text"', "null", "\xff\xfe", "{'single': 1}"])
    return body


def request(rng: random.Random) -> tuple[str, str, str | None, dict[str, str]]:
    """(method, path, body text, headers) of one fuzzed request."""
    json_type = {"content-type": "application/json"}
    roll = rng.random()
    if roll < 0.15:
        method = rng.choice(["GET", "HEAD", "GET", "DELETE", "PUT"])
        query = rng.choice(["", "?x=1", "?model=GPT-2&micro_batch=" + number(rng)])
        return method, rng.choice(GET_PATHS) + query, None, {}
    if roll < 0.55:
        query = rng.choice(
            ["?hints=false", "?hints=false", "", "?hints=maybe", "?hints=false&x=" + number(rng)]
        )
        return "POST", "/api/estimate" + query, hostile_text(rng, scenario_body(rng)), json_type
    if roll < 0.7:
        field = rng.choice(["micro_batch", "seq_len", "gpus", "bogus", ""])
        body = scenario_body(rng, {"model": '"GPT-2"'} if rng.random() < 0.5 else None)
        return "POST", f"/api/estimate?hints=false&max={field}", hostile_text(rng, body), json_type
    if roll < 0.92:
        keys = rng.sample(PLAN_KEYS, rng.randint(0, 4))
        plan = {key: value(rng) if rng.random() < 0.7 else number(rng) for key in keys}
        if rng.random() < 0.5:  # keep most valid searches tiny
            plan.update({"max_gpus": "1", "gpu_types": '"RTX-4090"'})
        plan_text = "{" + ",".join(f'"{key}":{text}' for key, text in plan.items()) + "}"
        extra = {"plan": plan_text if rng.random() < 0.9 else value(rng), "model": '"Qwen2.5-0.5B"'}
        return "POST", "/api/plan", hostile_text(rng, scenario_body(rng, extra)), json_type
    media = rng.choice(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""])
    path = rng.choice(["/api/estimate", "/api/plan"])
    return "POST", path, scenario_body(rng), {"content-type": media} if media else {}


@pytest.mark.slow
def test_no_request_gets_a_5xx() -> None:
    rng = random.Random(SEED)
    statuses: Counter[int] = Counter()
    with TestClient(create_app(), raise_server_exceptions=False, base_url="http://localhost") as client:
        for _ in range(REQUESTS):
            method, path, body, headers = request(rng)
            response = client.request(method, path, content=body, headers=headers)
            statuses[response.status_code] += 1
            assert response.status_code < 500, (method, path, (body or "")[:300], response.text[:300])
            assert response.headers.get("x-content-type-options") == "nosniff", path
            if path.startswith("/api/") and 400 <= response.status_code < 500 and method == "POST":
                data: dict[str, Any] = response.json()
                assert isinstance(data["message"], str) and data["message"], data
    assert sum(statuses.values()) == REQUESTS
    # the fuzz reaches both sides: answers and refusals (each scoped or combined field the
    # table grows makes a random body likelier to be refused, so the answers' floor is 5%)
    assert (
        statuses[200] > REQUESTS // 20
        and sum(n for s, n in statuses.items() if 400 <= s < 500) > REQUESTS // 4
    )
