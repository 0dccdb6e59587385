"""A hostile client cannot make the server answer 5xx, hang, or starve other requests."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import pytest
from conftest import run_async, serving
from fastapi.testclient import TestClient

from trainplan.inputs import resolve
from trainplan.interfaces.web import inputs
from trainplan.interfaces.web.app import create_app
from trainplan.interfaces.web.hub import HubLookups
from trainplan.interfaces.web.inputs import BodyError
from trainplan.specs.errors import InputError
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import field_infos

ENDPOINTS = ("/api/estimate", "/api/estimate?max=micro_batch", "/api/plan")
NUMBER_FIELDS = [
    name for name, info in field_infos().items() if info.minimum is not None or info.maximum is not None
]
# Number literals that Python's JSON reader or float coercion cannot take as they are.
POISON = {
    "5000-digit integer": "1" + "0" * 5000,
    "integer beyond float range": "1" + "0" * 309,
    "negative beyond float range": "-1" + "0" * 309,
    "float beyond range": "1e400",
}
SECURITY_HEADERS = {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}


def raw_post(client: TestClient, path: str, text: str) -> Any:
    return client.post(path, content=text, headers={"content-type": "application/json"})


def assert_clear_4xx(response: Any, field: str | None) -> None:
    assert 400 <= response.status_code < 500, response.text
    data = response.json()
    assert data["message"]
    if field is not None:
        assert data["field"] == field, data
    for header, value in SECURITY_HEADERS.items():
        assert response.headers[header] == value


@pytest.mark.parametrize("literal", POISON.values(), ids=POISON.keys())
@pytest.mark.parametrize("name", NUMBER_FIELDS)
def test_unreadable_numbers_in_any_field_are_4xx_naming_it(
    client: TestClient, name: str, literal: str
) -> None:
    response = raw_post(client, "/api/estimate", f'{{"{name}": {literal}}}')
    assert_clear_4xx(response, name)


@pytest.mark.parametrize("literal", POISON.values(), ids=POISON.keys())
@pytest.mark.parametrize("key", ["rank", "alpha"])
@pytest.mark.parametrize("path", ENDPOINTS)
def test_unreadable_lora_numbers_on_every_endpoint(
    client: TestClient, path: str, key: str, literal: str
) -> None:
    response = raw_post(client, path, f'{{"lora": {{"{key}": {literal}}}}}')
    assert_clear_4xx(response, f"lora.{key}")


def small_config(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 1000,
    }
    config.update(changes)
    return config


@pytest.mark.parametrize(
    ("changes", "key", "text"),
    [
        ({"hidden_size": 1e154}, "hidden_size", "between 1 and 1,048,576"),
        ({"hidden_size": 10**200}, "hidden_size", "about 201 digits"),
        ({"hidden_size": float("nan")}, "hidden_size", "must be an integer"),
        ({"num_hidden_layers": 30_000_000}, "num_hidden_layers", "between 1 and 4,096 (layer count)"),
        ({"vocab_size": 10**9}, "vocab_size", "16,777,216"),
        ({"num_attention_heads": 10**6}, "num_attention_heads", "65,536"),
        ({"num_local_experts": 10**12, "num_experts_per_tok": 2}, "num_local_experts", "expert count"),
        ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok", "exceeds the 8 experts"),
    ],
)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_absurd_model_configs_are_refused_before_any_work(
    client: TestClient, path: str, changes: dict[str, Any], key: str, text: str
) -> None:
    body = {"model": "pasted", "model_config": small_config(**changes)}
    started = time.perf_counter()
    response = raw_post(client, path, json.dumps(body))  # NaN goes out as the JSON literal NaN
    assert time.perf_counter() - started < 5  # a 3e7-layer MoE config took minutes before the bound
    assert_clear_4xx(response, f"model_config.{key}")
    assert text in response.json()["message"]


def test_a_body_nested_100k_deep_is_a_400(client: TestClient) -> None:
    body = '{"lora": ' * 50_000 + "1" + "}" * 50_000
    response = raw_post(client, "/api/estimate", body[: inputs.MAX_BODY_BYTES])
    assert response.status_code in (400, 413)
    deep = "[" * 20_000 + "]" * 20_000
    assert_clear_4xx(raw_post(client, "/api/estimate", deep), "body")


@pytest.mark.parametrize(
    "media_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_only_json_bodies_are_accepted(client: TestClient, path: str, media_type: str) -> None:
    """The media types a cross-site HTML form can send get a 415: no form can post here."""
    response = client.post(path, content='{"model": "GPT-2"}', headers={"content-type": media_type})
    assert response.status_code == 415
    assert "application/json" in response.json()["message"]


def test_head_requests_work(client: TestClient) -> None:
    for path in ("/", "/healthz"):
        response = client.head(path)
        assert response.status_code == 200 and response.content == b""


def test_an_unexpected_error_is_a_json_500_with_the_security_headers() -> None:
    app = create_app()

    @app.get("/api/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as client:
        response = client.get("/api/boom")
    assert response.status_code == 500
    assert response.json()["message"] == "internal error"  # nothing about the bug leaks
    for header, value in SECURITY_HEADERS.items():
        assert response.headers[header] == value


@pytest.fixture(scope="module")
def fragile_server() -> Iterator[str]:
    """A live server whose app has one route that fails, and a short body read timeout."""
    app = create_app()

    @app.get("/api/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with serving(app) as url:
        yield url


def connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)


def test_a_500_keeps_the_connection_alive(fragile_server: str) -> None:
    connection = connect(fragile_server)
    connection.request("GET", "/api/boom")
    first = connection.getresponse()
    assert first.status == 500 and json.loads(first.read())["message"] == "internal error"
    connection.request("GET", "/healthz")  # the same socket
    second = connection.getresponse()
    assert second.status == 200 and json.loads(second.read()) == {"status": "ok"}
    connection.close()


def test_a_body_shorter_than_its_content_length_is_a_408(
    fragile_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inputs, "BODY_READ_TIMEOUT_S", 0.5)
    parts = urlsplit(fragile_server)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=10) as sock:
        sock.sendall(
            b"POST /api/estimate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"model":'
        )
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 408"), answer[:200]
    assert "did not arrive within" in answer


class Gate:
    """A fake Hub: every lookup waits until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def fetch(self, hub_id: str) -> ModelSpec:
        with self.lock:
            self.calls.append(hub_id)
        self.opened.wait(30)
        raise InputError("model", f"{hub_id} is not on this Hub")


def test_hung_hub_lookups_never_starve_other_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """50 Hub lookups that hang: at most 4 run, the rest get a 503 at once, and /healthz, the
    page, the catalog and a catalog estimate still answer quickly all the while."""
    gate = Gate()
    app = create_app()
    app.state.hub_lookups = HubLookups(gate.fetch, slots=4, wait_s=3.0)
    with serving(app) as url:

        def lookup(index: int) -> int:
            connection = connect(url)
            body = json.dumps({"model": f"someone/missing-{index}"})
            connection.request("POST", "/api/estimate", body, {"content-type": "application/json"})
            status = connection.getresponse().status
            connection.close()
            return status

        with ThreadPoolExecutor(max_workers=50) as pool:
            hung = [pool.submit(lookup, index) for index in range(50)]
            time.sleep(0.5)
            for method, path, body in [
                ("GET", "/healthz", None),
                ("GET", "/", None),
                ("GET", "/api/models", None),
                ("POST", "/api/estimate", json.dumps({"model": "Llama-3.1-8B"})),
            ]:
                connection = connect(url)
                started = time.perf_counter()
                connection.request(method, path, body, {"content-type": "application/json"})
                response = connection.getresponse()
                response.read()
                elapsed = time.perf_counter() - started
                connection.close()
                assert response.status == 200 and elapsed < 1.0, (path, response.status, elapsed)
            statuses = sorted(future.result() for future in hung)
        gate.opened.set()
    assert len(gate.calls) == 4
    assert statuses.count(504) == 4 and statuses.count(503) == 46


def test_hub_lookups_share_one_call_and_remember_failures() -> None:
    import asyncio

    calls: list[str] = []

    def fetch(hub_id: str) -> ModelSpec:
        calls.append(hub_id)
        time.sleep(0.05)
        raise InputError("model", f"{hub_id} does not exist")

    lookups = HubLookups(fetch, slots=2, wait_s=2.0)

    async def ask(name: str) -> str:
        try:
            await lookups.spec(name)
        except InputError as error:
            return error.message
        return "found"

    async def run() -> list[str]:
        together = await asyncio.gather(ask("a/b"), ask("a/b"))
        later = await ask("a/b")
        return [*together, later]

    answers = run_async(run())
    assert answers == ["a/b does not exist"] * 3
    assert calls == ["a/b"]  # two at once shared one call; the third came from the failure cache


def test_hub_lookup_past_its_wait_is_a_504() -> None:

    release = threading.Event()

    def fetch(hub_id: str) -> ModelSpec:
        release.wait(5)
        raise InputError("model", "late")

    lookups = HubLookups(fetch, slots=1, wait_s=0.1)

    async def run() -> tuple[int, int]:
        statuses = []
        for _ in range(2):
            try:
                await lookups.spec("x/y" if not statuses else "x/z")
            except BodyError as error:
                statuses.append(error.status)
        return statuses[0], statuses[1]

    try:
        assert run_async(run()) == (504, 503)  # the hung one still holds the only slot
    finally:
        release.set()


def test_openapi_says_what_model_accepts(client: TestClient) -> None:
    """The server reads no paths, and its schema and field list say so."""
    body = client.get("/openapi.json").json()["paths"]["/api/estimate"]["post"]["requestBody"]
    model = body["content"]["application/json"]["schema"]["properties"]["model"]
    assert "path" not in model["description"].replace("reads no paths", "")
    assert "Hub id" in model["description"] and "model_config" in model["description"]
    fields = {entry["name"]: entry for entry in client.get("/api/fields").json()["fields"]}
    assert fields["model"]["help"] == model["description"]


def test_hub_lookups_are_not_made_for_catalog_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "fetch_hub_config", lambda hub_id: pytest.fail("looked up"))
    assert not inputs.is_hub_lookup("Llama-3.1-8B")
    assert not inputs.is_hub_lookup("meta-llama/Llama-3.1-8B")  # a catalog Hub id
    assert inputs.is_hub_lookup("someone/else")
    assert not inputs.is_hub_lookup("../x/y")


def test_identical_requests_are_answered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second identical request is served from the kept answers, byte for byte; a different
    body or query is computed afresh."""
    from trainplan.interfaces.web import routes

    made: list[bool] = []
    real = routes.estimate_payload

    def counted(inputs: Any, with_hints: bool, result: Any = None) -> dict[str, Any]:
        made.append(with_hints)
        return real(inputs, with_hints, result)

    monkeypatch.setattr(routes, "estimate_payload", counted)
    with TestClient(create_app(), base_url="http://localhost") as fresh:
        first = fresh.post("/api/estimate", json={"model": "GPT-2", "micro_batch": 3})
        again = fresh.post("/api/estimate", json={"micro_batch": 3, "model": "GPT-2"})
        other = fresh.post("/api/estimate?hints=false", json={"model": "GPT-2", "micro_batch": 3})
    assert first.status_code == again.status_code == other.status_code == 200
    assert again.content == first.content
    assert made == [True, False]
