"""Web fixtures: an in-process client, a live server on a free loopback port, headless Chromium."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

# No Hub traffic from tests, even where huggingface_hub is installed.
os.environ["HF_HUB_OFFLINE"] = "1"

fastapi = pytest.importorskip("fastapi", reason="the web extra is not installed (pip install '.[web]')")

from fastapi.testclient import TestClient  # noqa: E402

from trainplan.interfaces.web.app import create_app  # noqa: E402

T = TypeVar("T")
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    with TestClient(create_app(), base_url="http://localhost") as test_client:
        yield test_client


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on a fresh thread: the browser tests keep an event loop in the main thread."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """`app` on uvicorn in a background thread on a free loopback port; yields its base URL."""
    import uvicorn

    from trainplan.interfaces.web.connections import uvicorn_config

    port = _free_port()
    server = uvicorn.Server(uvicorn_config(app, "critical", host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def live_server() -> Iterator[str]:
    """The app on uvicorn in a background thread; yields its base URL."""
    with serving(create_app()) as url:
        yield url


def need_browser(path: Path, required: bool) -> None:
    """Skip the browser tests where `path` (Chromium) is absent, or fail them where `required`."""
    if not path.exists():
        message = f"{path} is absent (apt-get install chromium); browser tests need it"
        if required:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def browser_check() -> Any:
    """`need_browser`, for the test that holds its rule."""
    return need_browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright (never a downloaded browser)."""
    required = os.environ.get("TRAINPLAN_REQUIRE_BROWSER") == "1"  # .ci/run sets it: CI fails, never skips
    need_browser(CHROMIUM, required)
    if required:
        import playwright.sync_api  # an ImportError fails the run
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
