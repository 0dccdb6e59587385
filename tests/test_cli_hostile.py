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

from trainplan.inputs.userfiles import MAX_FILE_BYTES
from trainplan.interfaces.cli.main import app

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
            [
                sys.executable,
                "-c",
                "from trainplan.interfaces.cli.main import main; main()",
                "serve",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "trainplan calculator:" not in result.stdout


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The installed entry point in a process of its own: a hang fails at `timeout`."""
    return subprocess.run(
        [sys.executable, "-c", "from trainplan.interfaces.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(result: subprocess.CompletedProcess[str], text: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout


ALIAS_BOMB = "\n".join(
    ["base_model: NousResearch/Meta-Llama-3.1-8B", "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    + ["micro_batch_size: *a8", ""]
)


@pytest.mark.parametrize(
    "command",
    [
        ["estimate", "--from"],
        ["estimate", "--scenario"],
        ["estimate", "--json", "--scenario"],
        ["plan", "--from"],
        ["serve", "--port", "1", "--scenario"],
    ],
)
def test_an_alias_bomb_is_one_error_line_at_once(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "qlora.yml"
    path.write_text(ALIAS_BOMB)
    started = time.perf_counter()
    result = run_cli(*command, str(path))
    assert time.perf_counter() - started < 30  # it hung for ever before the parse limits
    one_error_line(result, "holds more than 200,000 values once its aliases are expanded")


@pytest.mark.parametrize(
    ("flag", "field"), [("--scenario", "scenario"), ("--from", "from"), ("--model", "model")]
)
def test_a_named_pipe_is_refused_not_waited_on(tmp_path: Path, flag: str, field: str) -> None:
    import os

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    result = run_cli("estimate", flag, str(fifo), timeout=30)
    one_error_line(result, f"{field} ({flag}): {fifo} is a named pipe, not a regular file")


def test_a_model_folder_with_a_pipe_for_its_config_is_refused(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "config.json")
    one_error_line(run_cli("estimate", "--model", str(tmp_path), timeout=30), "is a named pipe")


def test_a_device_is_refused(tmp_path: Path) -> None:
    one_error_line(run_cli("estimate", "--scenario", "/dev/zero"), "/dev/zero is a character device")


def test_a_folder_without_a_config_says_so(tmp_path: Path) -> None:
    one_error_line(run_cli("estimate", "--model", str(tmp_path)), "holds no config.json")


def test_a_huge_plan_search_is_refused_like_the_web_one() -> None:
    result = run_cli("plan", "--model", "Llama-3.1-8B", "--max-gpus", "100000", "--methods", "any")
    # 28 GPU types (the priced NVIDIA and AMD ones) x the counts, layouts and methods, ZeRO-3
    # once more as HSDP over the counts past one node
    one_error_line(result, "max_gpus (--max-gpus): this search has 3,780,665,280 candidate layouts")
    assert "more than the 2,500,000 allowed" in result.stderr and "raise max_candidates" in result.stderr


def test_max_candidates_raises_the_cap() -> None:
    args = ["plan", "--model", "GPT-2", "--gpu-types", "RTX-4090", "--max-gpus", "8", "--json"]
    refused = run_cli(*args, "--max-candidates", "10")
    one_error_line(refused, "this search has 11,520 candidate layouts, more than the 10 allowed")
    answered = run_cli(*args, "--max-candidates", "11520")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["candidates_evaluated"] == 11520


@pytest.mark.parametrize("port", ["99999", "-1", "0", "65536"])
def test_serve_on_a_port_out_of_range(port: str) -> None:
    one_error_line(
        run_cli("serve", "--port", port), f"port (--port): must be between 1 and 65,535 (got {port})"
    )


def test_serve_on_a_host_that_is_no_address() -> None:
    one_error_line(run_cli("serve", "--host", "999.1.1.1", "--port", "8"), "host (--host): '999.1.1.1'")


def test_an_unexpected_exception_is_one_error_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from trainplan.interfaces.cli import main as cli

    def broken(argv: list[str]) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "json_estimate_arguments", broken)
    with pytest.raises(SystemExit) as caught:
        cli.main()
    assert caught.value.code == 2
    assert capsys.readouterr().err == "error: internal error (KeyError: \"'a bug'\")\n"


def test_running_out_of_memory_is_one_error_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from trainplan.interfaces.cli import main as cli

    def hungry(argv: list[str]) -> None:
        raise MemoryError

    monkeypatch.setattr(cli, "json_estimate_arguments", hungry)
    with pytest.raises(SystemExit) as caught:
        cli.main()
    assert caught.value.code == 2
    assert capsys.readouterr().err.startswith("error: out of memory: lower --max-gpus or --max-candidates")
