"""The server answers only its own Host names (a guard against DNS rebinding), and every HTML or
SVG document it serves carries the page's security headers."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from trainplan.interfaces.web.app import PAGE_POLICY, STATIC, create_app
from trainplan.interfaces.web.hosts import HostPolicy, host_name

PATHS = ["/", "/healthz", "/docs", "/openapi.json", "/api/models", "/static/app.js", "/static/index.html"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.2"])
def test_a_foreign_host_is_refused_everywhere(host: str, path: str) -> None:
    with TestClient(create_app(), base_url=f"http://{host}") as client:
        response = client.get(path)
    assert response.status_code == 400
    data = response.json()
    assert data["field"] == "Host"
    assert "DNS rebinding" in data["message"] and f"--allowed-host {host_name(host)}" in data["message"]
    assert response.headers["x-content-type-options"] == "nosniff"


def test_a_foreign_host_cannot_post_an_estimate() -> None:
    with TestClient(create_app(), base_url="http://rebound.example") as client:
        response = client.post("/api/estimate", json={"model": "someone/model"})  # would be a Hub lookup
    assert response.status_code == 400 and response.json()["field"] == "Host"


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000", "LOCALHOST", "localhost.", "[::1]"]
)
def test_the_loopback_names_are_answered_on_any_port(host: str) -> None:
    with TestClient(create_app(), base_url=f"http://{host}") as client:
        assert client.get("/healthz").status_code == 200


def test_no_host_header_is_refused() -> None:
    policy = HostPolicy()
    assert not policy.allows(None) and not policy.allows(b"")
    assert "no Host header" in policy.refusal(None)
    assert not policy.allows("h\u00e9.example".encode())


@pytest.mark.parametrize(
    ("bound", "allowed", "answered", "refused"),
    [
        ("127.0.0.1", (), ["localhost:1", "127.0.0.1"], ["10.0.0.5", "0.0.0.0"]),
        ("10.0.0.5", (), ["10.0.0.5:8000", "localhost"], ["10.0.0.6"]),
        ("0.0.0.0", (), ["localhost", "[::1]"], ["0.0.0.0", "10.0.0.5", "calc.example"]),
        ("::", (), ["[::1]:80"], ["[::]", "calc.example"]),
        ("0.0.0.0", ("calc.example", "10.0.0.5"), ["calc.example:443", "10.0.0.5"], ["other.example"]),
        ("fe80::1", (), ["[fe80::1]:8000"], ["[fe80::2]"]),
    ],
)
def test_the_bound_address_and_the_allowed_hosts(
    bound: str, allowed: tuple[str, ...], answered: list[str], refused: list[str]
) -> None:
    policy = HostPolicy(bound, allowed)
    for host in answered:
        assert policy.allows(host.encode()), host
    for host in refused:
        assert not policy.allows(host.encode()), host


def test_an_allowed_host_is_answered_by_the_app() -> None:
    with TestClient(create_app("0.0.0.0", ["calc.example"]), base_url="http://calc.example:8000") as client:
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("path", ["/", "/static/index.html", "/static/favicon.svg", "/api/nothing"])
def test_every_document_carries_the_page_policy(client: TestClient, path: str) -> None:
    response = client.get(path)
    kind = response.headers["content-type"]
    if kind.startswith(("text/html", "image/svg+xml")):
        assert response.headers["content-security-policy"] == PAGE_POLICY
        assert "frame-ancestors 'none'" in PAGE_POLICY
        assert response.headers["x-frame-options"] == "DENY"
    else:
        assert path == "/api/nothing" and kind == "application/json"


def test_the_docs_page_allows_only_its_own_inline_script(client: TestClient) -> None:
    response = client.get("/docs")
    policy = response.headers["content-security-policy"]
    scripts = re.findall(r"<script>(.*?)</script>", response.text, re.DOTALL)
    assert len(scripts) == 1 and "SwaggerUIBundle(" in scripts[0]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"script-src 'self' 'sha256-{digest}';" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in policy and response.headers["x-frame-options"] == "DENY"


def test_the_page_runs_only_module_scripts_of_this_server(client: TestClient) -> None:
    """The page's script is ES modules (static/app.js and what it imports from static/js/) that
    the page policy allows as they are: 'self', no inline script. Each module is served with a
    JavaScript type (a module under nosniff needs one) and each import names a served file."""
    response = client.get("/")
    assert "script-src 'self';" in response.headers["content-security-policy"]
    assert "unsafe-inline" not in PAGE_POLICY.split("script-src")[1].split(";")[0]
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", response.text, re.DOTALL)
    assert all(body.strip() == "" and 'src="/static/' in attrs for attrs, body in scripts)
    assert ' type="module" src="/static/app.js"' in [attrs for attrs, _ in scripts]
    modules = [STATIC / "app.js", *sorted((STATIC / "js").glob("*.js"))]
    for module in modules:
        served = client.get("/static/" + module.relative_to(STATIC).as_posix())
        assert served.status_code == 200 and "javascript" in served.headers["content-type"], module.name
        for target in re.findall(
            r'^(?:import|export) .*? from "(\.[^"]+)";$', served.text, re.MULTILINE | re.DOTALL
        ):
            assert (module.parent / target).resolve().is_file(), (module.name, target)
