"""The wheel is the product: built from this tree and installed into a fresh virtualenv with only
the web extra, it serves the whole page (charts and the API docs page included) and carries the
vendored files' licences."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLEAN_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}  # no source tree
ASSETS = (
    "trainplan/interfaces/web/static/vendor/chart.umd.min.js",
    "trainplan/interfaces/web/static/vendor/swagger-ui-bundle.js",
    "trainplan/interfaces/web/static/vendor/swagger-ui.css",
    "trainplan/interfaces/web/static/vendor/chart.js-LICENSE.md",
    "trainplan/interfaces/web/static/vendor/swagger-ui-LICENSE",
    "trainplan/interfaces/web/static/app.js",
    "trainplan/data/gpus.yaml",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the tree (a build writes egg-info next to the sources)."""
    folder = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "trainplan"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"
        ),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(folder), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
        env=CLEAN_ENV,
    )
    (built,) = folder.glob("trainplan-*.whl")
    return built


def test_the_wheel_carries_the_assets_and_their_licences(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [asset for asset in ASSETS if asset not in names]
    assert not missing
    # and every module the page's entry script imports (static/js/)
    modules = ROOT / "src" / "trainplan" / "interfaces" / "web" / "static" / "js"
    shipped = {f"trainplan/interfaces/web/static/js/{path.name}" for path in modules.glob("*.js")}
    assert len(shipped) > 2 and shipped <= names, sorted(shipped - names)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


@pytest.mark.slow
def test_a_fresh_install_of_the_web_extra_serves_the_whole_page(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--quiet",
        "-c",
        str(ROOT / "constraints.txt"),
    ]
    subprocess.run([*pip, f"{wheel}[web]"], check=True, capture_output=True, timeout=600, env=CLEAN_ENV)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, timeout=60
    )
    assert installed.returncode != 0  # the web extra pulls in no measure or test tools
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [str(venv / "bin" / "trainplan"), "serve", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            cwd=tmp_path,
            env=CLEAN_ENV,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/healthz")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                time.sleep(0.1)
        page = _get(f"{base}/")[1].decode()
        assert "/static/vendor/chart.umd.min.js" in page
        for asset in ASSETS[:3]:
            status, body = _get(f"{base}/static/{asset.removeprefix('trainplan/interfaces/web/static/')}")
            assert status == 200 and len(body) > 10_000
        # the page's entry module and every module it imports, with a JavaScript type
        assert '<script type="module" src="/static/app.js">' in page
        entry = _get(f"{base}/static/app.js")[1].decode()
        imported = re.findall(r'from "\./(js/[a-z-]+\.js)"', entry)
        assert len(imported) > 5
        for module in imported:
            with urllib.request.urlopen(f"{base}/static/{module}", timeout=5) as response:
                assert response.status == 200 and "javascript" in response.headers["content-type"]
        docs = _get(f"{base}/docs")[1].decode()
        assert "/static/vendor/swagger-ui-bundle.js" in docs
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "missing from the package" not in log.read_text()
