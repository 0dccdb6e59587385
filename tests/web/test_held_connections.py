"""Held connections cannot lock anyone out: idle ones and unfinished headers are closed at their
deadline or, at the connection limit, the longest-idle first, so a new request is still served."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from conftest import serving

from trainplan.interfaces.web import connections
from trainplan.interfaces.web.app import create_app

ESTIMATE = (
    b"POST /api/estimate?hints=false HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b'Content-Length: 25\r\nConnection: close\r\n\r\n{"model": "Llama-3.1-8B"}'
)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    with serving(create_app()) as url:
        parts = urlsplit(url)
        yield parts.hostname or "127.0.0.1", parts.port or 80


def ask(address: tuple[str, int], request: bytes = ESTIMATE, timeout: float = 10) -> tuple[bytes, float]:
    """The whole answer to one request on a new connection, and how long it took."""
    started = time.perf_counter()
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks), time.perf_counter() - started


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_600_idle_and_100_unfinished_connections_do_not_stop_an_estimate(server: tuple[str, int]) -> None:
    held: list[socket.socket] = []
    try:
        for _ in range(600):
            held.append(socket.create_connection(server, timeout=10))
        for index in range(100):
            sock = socket.create_connection(server, timeout=10)
            sock.sendall(b"POST /api/estimate HTTP/1.1\r\nHost: localhost\r\nX-Slow-" + str(index).encode())
            held.append(sock)
        answer, elapsed = ask(server)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["memory"]
        assert elapsed < 2.0
        # the limit was kept by closing the longest-idle connections, the first ones opened
        assert closed_by_server(held[0], within=2.0)
        health, _ = ask(server, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert health.startswith(b"HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()


def test_unfinished_headers_are_closed_at_their_deadline(
    server: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "HEADER_TIMEOUT_S", 0.5)
    with socket.create_connection(server, timeout=10) as slow, socket.create_connection(server) as silent:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: local")
        started = time.perf_counter()
        for _ in range(3):  # a byte now and then does not push the deadline back
            time.sleep(0.1)
            slow.sendall(b"h")
        assert closed_by_server(slow, within=3.0)
        assert closed_by_server(silent, within=3.0)
        assert time.perf_counter() - started < 3.0


def test_a_kept_alive_connection_gets_a_new_deadline_after_each_answer(
    server: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "HEADER_TIMEOUT_S", 1.0)
    with socket.create_connection(server, timeout=10) as sock:
        for _ in range(3):  # three requests over 1.5 s on one connection, each within its deadline
            time.sleep(0.5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_headers_past_64_kib_are_a_431(server: tuple[str, int]) -> None:
    big = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + b"X-Big: " + b"a" * (70 * 1024) + b"\r\n\r\n"
    answer, _ = ask(server, big)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]


def test_when_every_connection_is_busy_a_new_one_gets_a_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two requests held in flight on a server capped at two connections: the third is turned
    away at once rather than left waiting, and is served once one finishes."""
    monkeypatch.setattr(connections, "MAX_CONNECTIONS", 2)
    release = threading.Event()
    app = create_app()

    @app.get("/api/hold")
    async def hold() -> dict[str, bool]:
        import asyncio

        while not release.is_set():
            await asyncio.sleep(0.01)
        return {"done": True}

    with serving(app) as url:
        parts = urlsplit(url)
        address = (parts.hostname or "127.0.0.1", parts.port or 80)
        holders = [socket.create_connection(address, timeout=10) for _ in range(2)]
        try:
            for sock in holders:
                sock.sendall(b"GET /api/hold HTTP/1.1\r\nHost: localhost\r\n\r\n")
            time.sleep(0.3)
            answer, elapsed = ask(address, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 503") and b"every connection is busy" in answer
            assert elapsed < 1.0
            release.set()
            for sock in holders:
                assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        finally:
            release.set()
            for sock in holders:
                sock.close()
        health, _ = ask(address, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert health.startswith(b"HTTP/1.1 200")
