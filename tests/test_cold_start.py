"""The short path of `trainplan estimate --json` and the kept parse of the bundled data files.

The short path reads argv itself and must answer exactly what the typer app answers; anything
it is unsure of goes to the typer app. The data cache must give back exactly what the YAML says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.interfaces.cli import main as cli
from trainplan.specs.errors import InputError
from trainplan.specs.loader import DATA_FOLDER, _cache_path, load_yaml

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = str(ROOT / "examples/default.yaml")


def short_path(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of main() with this argv, asserting it took the short path."""
    assert cli.json_estimate_arguments(argv) is not None, argv
    code = 0
    old = sys.argv
    sys.argv = ["trainplan", *argv]
    try:
        cli.main()
    except SystemExit as done:
        code = int(done.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--scenario", SCENARIO, "--json"],
        [
            "estimate",
            "--json",
            "--model=Qwen2.5-0.5B",
            "--gpus",
            "2",
            "--zero-stage",
            "2",
            "--lora-rank",
            "8",
        ],
        ["estimate", "--model", "Qwen2.5-0.5B", "--max", "micro_batch", "--headroom", "0", "--json"],
        ["estimate", "--model", "Qwen2.5-0.5B", "--micro-batch", "0", "--json"],  # an error: exit 2
        ["estimate", "--model", "Qwen2.5-0.5B", "--gpus", "3", "--tensor-parallel", "2", "--json"],
        ["estimate", "--model", "no-such-model", "--json"],
    ],
)
def test_the_short_path_answers_what_the_typer_app_answers(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = short_path(argv, capsys)
    full = CliRunner().invoke(cli.app, argv)
    assert (code, out, err) == (full.exit_code, full.stdout, full.stderr)
    if code == 0:
        assert json.loads(out)["memory"]["per_gpu"]["total_bytes"] > 0
    else:
        assert code == 2 and err.startswith("error: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--json", "--help"],
        ["estimate", "--json", "--no-such-flag", "1"],
        ["estimate", "--json", "--gpus", "2", "--gpus", "4"],  # repeated: typer's rule decides
        ["estimate", "--json", "--model"],  # missing value
        ["estimate", "--json", "--model", "--gpus"],
        ["estimate", "--json", "--json"],
        ["estimate", "--json", "--headroom", "lots"],  # typer's own conversion error
        ["estimate", "--json=1"],
        ["estimate", "--model", "Qwen2.5-0.5B"],  # text output needs rich anyway
        ["plan", "--json"],
        ["estimate", "--json", "--", "--model"],
    ],
)
def test_anything_unsure_goes_to_the_typer_app(argv: list[str]) -> None:
    assert cli.json_estimate_arguments(argv) is None


def test_repeatable_from_and_equals_values() -> None:
    kwargs = cli.json_estimate_arguments(
        ["estimate", "--from", "a.yml", "--json", "--from=b.json", "--lora-targets=q_proj,v_proj"]
    )
    assert kwargs is not None
    assert kwargs["from_files"] == ["a.yml", "b.json"] and kwargs["lora_targets"] == "q_proj,v_proj"
    assert kwargs["as_json"] is True and kwargs["scenario"] is None and kwargs["maximise"] is None


def test_the_json_path_imports_neither_typer_nor_rich() -> None:
    code = (
        "import sys; sys.argv = ['trainplan', 'estimate', '--scenario', sys.argv[1], '--json']\n"
        "from trainplan.interfaces.cli.main import main\n"
        "main()\n"
        "loaded = [m for m in ('typer', 'rich', 'click', 'pydantic') if m in sys.modules]\n"
        "print(loaded, file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, SCENARIO], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout)["gpu"]
    assert done.stderr.strip() == "[]"


def test_the_kept_parse_is_read_back_and_equals_the_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """architectures.yaml has boolean keys (norms_per_layer maps), which a JSON copy would turn
    into strings: the copy must give back the very same data."""
    import yaml

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parse = load_yaml.__wrapped__
    raw = (DATA_FOLDER / "architectures.yaml").read_bytes()
    expected = yaml.safe_load(raw.decode("utf-8"))
    assert parse("architectures.yaml") == expected
    kept = _cache_path("architectures.yaml", raw)
    assert kept.is_file() and kept.parent == tmp_path / "trainplan"
    monkeypatch.setitem(sys.modules, "yaml", None)  # a second parse would fail: the copy is read
    assert parse("architectures.yaml") == expected
    kept.write_bytes(b"\x00 not marshal data")  # a damaged copy is skipped and replaced
    monkeypatch.delitem(sys.modules, "yaml")
    assert parse("architectures.yaml") == expected
    monkeypatch.setitem(sys.modules, "yaml", None)
    assert parse("architectures.yaml") == expected


def test_an_unwritable_cache_folder_only_costs_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert load_yaml.__wrapped__("energy.yaml")["defaults"]["pue"]["value"] == pytest.approx(1.2)


def test_a_scenario_file_read_again_comes_from_its_kept_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainplan.inputs.userfiles import read_mapping

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "run.yaml"
    path.write_text("model: Llama-3.1-8B\nmethod: lora\nlora: {rank: 16}\ngpus: 8\n")
    expected = {"model": "Llama-3.1-8B", "method": "lora", "lora": {"rank": 16}, "gpus": 8}
    assert read_mapping(path, "scenario") == expected
    kept = list((tmp_path / "cache" / "trainplan").glob("scenario-checked.*.marshal"))
    assert len(kept) == 1  # named by the content's SHA-256
    monkeypatch.setitem(sys.modules, "yaml", None)  # a second parse would fail: the copy is read
    assert read_mapping(path, "scenario") == expected
    path.write_text("model: Llama-3.1-8B\nmethod: full\n")  # an edit is a new content: parsed again
    monkeypatch.delitem(sys.modules, "yaml")
    assert read_mapping(path, "scenario") == {"model": "Llama-3.1-8B", "method": "full"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        read_mapping(bad, "scenario")
    assert (
        len(list((tmp_path / "cache" / "trainplan").glob("scenario-checked.*.marshal"))) == 2
    )  # nothing kept
