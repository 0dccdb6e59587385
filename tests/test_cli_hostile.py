"""No file or flag makes the CLI print a traceback: each is an `error:` line naming what is wrong."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.userfiles import MAX_FILE_BYTES

TINY = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "vocab_size": 1000,
}


def run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def config_file(tmp_path: Path, text: str, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"hidden_size": 1e300}, "hidden_size: must be between 1 and 1,048,576 (width), got 1e+300"),
        ({"hidden_size": float("nan")}, "hidden_size: must be an integer, got nan"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers: must be between 1 and 4,096 (layer count)"),
        ({"num_local_experts": 10**12, "num_experts_per_tok": 2}, "num_local_experts: must be between 0 and"),
        ({"num_local_experts": 8, "num_experts_per_tok": 9}, "9 experts per token exceeds the 8 experts"),
    ],
)
def test_absurd_configs_are_refused_with_the_limit_named(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    path = config_file(tmp_path, json.dumps({**TINY, **changes}))
    result = run("estimate", "--model", path)
    assert result.exit_code == 2
    assert message in result.output


def test_a_5000_digit_integer_in_a_config(tmp_path: Path) -> None:
    text = json.dumps(TINY)[:-1] + ', "vocab_size": 1' + "0" * 5000 + "}"
    result = run("estimate", "--model", config_file(tmp_path, text))
    assert result.exit_code == 2 and "vocab_size: must be an integer, got a number beyond float range" in (
        result.output
    )


def test_a_config_nested_100k_deep(tmp_path: Path) -> None:
    text = '{"a":' * 100_000 + "1" + "}" * 100_000
    result = run("estimate", "--model", config_file(tmp_path, text))
    assert result.exit_code == 2 and "nested too deeply" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)) * 4, "is not UTF-8 text"),
        (b"micro_batch: 1" + b"0" * 5000 + b"\n", "holds a number too long to read"),
        (b"micro_batch: 1" + b"0" * 400 + b"\n", "micro_batch (--micro-batch): must be between 1 and 65,536"),
        (b"overhead_gib: 1" + b"0" * 400 + b"\n", "overhead_gib (--overhead-gib): is too large"),
        (b"lora: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", "is not valid YAML"),
        (b"- just\n- a list\n", "must hold a mapping"),
    ],
)
def test_hostile_scenario_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_bytes(content)
    result = run("estimate", "--scenario", str(path))
    assert result.exit_code == 2
    assert message in result.output, result.output


def test_a_huge_scenario_file_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("w") as handle:
        handle.write("model: GPT-2\nnotes:\n")
        line = "  - " + "x" * 60 + "\n"
        handle.write(line * (MAX_FILE_BYTES // len(line) + 10))
    started = time.perf_counter()
    result = run("estimate", "--scenario", str(path))
    assert time.perf_counter() - started < 5
    assert result.exit_code == 2 and "larger than 8 MiB" in result.output


def test_serve_on_a_taken_port_says_so_before_any_banner() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-c", "from trainplan.cli import main; main()", "serve", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "trainplan calculator:" not in result.stdout
