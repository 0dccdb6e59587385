"""Every parser of user input stops at its limits while parsing: alias bombs, merge-key bombs,
self-referencing anchors, deep nesting and huge flat documents are refused with one clear
InputError before anything walks the result, and an error message never formats a whole value."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from trainplan.inputs.userfiles import (
    MAX_DEPTH,
    MAX_NODES,
    parse_any,
    parse_json,
    parse_toml,
    parse_yaml,
    read_mapping,
    read_text,
)
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.loader import _cache_path


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" shape as an axolotl key: `levels` lists of `width` references each
    (9 x 9 stands for 9^9 = 387 million values in 460 bytes)."""
    lines = ["base_model: NousResearch/Meta-Llama-3.1-8B", f"a0: &a0 [{', '.join(['1'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * width)}]")
    lines.append(f"micro_batch_size: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def mapping_bomb() -> str:
    """The same with nested mappings (each level a mapping of 9 references to the one below)."""
    lines = ["m0: &m0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1}"]
    for level in range(1, 9):
        refs = ", ".join(f"k{j}: *m{level - 1}" for j in range(9))
        lines.append(f"m{level}: &m{level} {{{refs}}}")
    lines.append("lora_r: *m8")
    return "\n".join(lines) + "\n"


def merge_bomb() -> str:
    """Merge keys: PyYAML's constructor copies each merged mapping's pairs, so 9 merges of 9
    merges ... build 9^8 pairs while constructing, before any walk."""
    lines = ["m0: &m0 {a: 1}"]
    for level in range(1, 9):
        lines.append(f"m{level}: &m{level} {{<<: [{', '.join([f'*m{level - 1}'] * 9)}]}}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "text", [alias_bomb(), mapping_bomb(), merge_bomb()], ids=["list", "mapping", "merge"]
)
def test_yaml_bombs_stop_while_parsing(text: str) -> None:
    started = time.perf_counter()
    with pytest.raises(InputError) as caught:
        parse_yaml(text, "bomb.yml", "from")
    assert time.perf_counter() - started < 1.0  # a bound this loose still fails a walk of 10^8 values
    assert caught.value.field == "from"
    assert (
        caught.value.message == f"bomb.yml holds more than {MAX_NODES:,} values once its aliases are expanded"
    )


def test_an_alias_expanding_to_just_under_the_bound_is_read() -> None:
    # 4 levels of 9 under the last list: 9^4 = 6,561 integers plus the lists: well under MAX_NODES
    data = parse_yaml(alias_bomb(levels=4), "fine.yml", "from")
    assert len(data["micro_batch_size"]) == 9 and data["micro_batch_size"][0][0][0] == [1] * 9


def test_an_anchor_that_contains_itself_is_refused() -> None:
    with pytest.raises(InputError, match=r"the alias \*a is inside its own anchor"):
        parse_yaml("a: &a [1, *a]\n", "loop.yml", "scenario")


def test_an_alias_adds_its_depth() -> None:
    half = MAX_DEPTH // 2 + 1
    text = "deep: &d " + "[" * half + "1" + "]" * half + "\nuse: " + "[" * half + "*d" + "]" * half + "\n"
    with pytest.raises(InputError, match=f"nested too deeply \\(more than {MAX_DEPTH} levels\\)"):
        parse_yaml(text, "deep.yml", "scenario")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deep.json"),
        ("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deep.yaml"),
        ("a = " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "deep.toml"),
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "deeper.json"),
    ],
)
def test_deep_nesting_is_refused_in_every_format(text: str, where: str) -> None:
    with pytest.raises(InputError, match=f"{where} is nested too deeply"):
        parse_any(text, where, "model")


def test_nesting_at_the_bound_is_read() -> None:
    text = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json(text, "ok.json", "model") is not None
    inner = MAX_DEPTH - 1  # under the top-level mapping
    assert parse_yaml("a: " + "[" * inner + "]" * inner, "ok.yaml", "model") is not None


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[" + "0," * MAX_NODES + "0]", "flat.json"),
        ("\n".join(f"k{i}: {i}" for i in range(MAX_NODES // 2 + 1)), "flat.yaml"),
        ("\n".join(f"[t{i}]\na = 1" for i in range(MAX_NODES // 3 + 1)), "tables.toml"),
    ],
)
def test_huge_flat_documents_are_refused(text: str, where: str) -> None:
    with pytest.raises(InputError, match=f"{where} holds more than {MAX_NODES:,} values$"):
        parse_any(text, where, "from")


def test_a_15000_table_toml_is_read() -> None:
    # 15,000 tables of one key: 45,001 values, within the bound (a torchtitan file has some 20)
    data = parse_toml("\n".join(f"[t{i}]\na = 1" for i in range(15_000)), "many.toml", "from")
    assert len(data) == 15_000


def test_a_classifier_config_with_its_label_maps_is_read() -> None:
    # ViT's ImageNet-21k config.json lists 21,843 labels both ways: real data near the bound
    labels = {str(i): f"label_{i}" for i in range(21_843)}
    config = {"model_type": "vit", "id2label": labels, "label2id": {v: int(k) for k, v in labels.items()}}
    assert parse_json(json.dumps(config), "config.json", "model")["id2label"]["21842"] == "label_21842"


def test_shown_value_formats_a_bounded_prefix_of_an_expanded_bomb() -> None:
    value: Any = [1] * 9
    for _ in range(12):  # 9^13 values if walked: repr() would never return
        value = [value] * 9
    started = time.perf_counter()
    text = shown_value(value)
    assert time.perf_counter() - started < 0.1
    nines = ", ".join(["1"] * 9)
    assert text == ("[" * 13 + f"{nines}], [{nines}]")[:57] + "..."


@pytest.mark.parametrize(
    "value",
    [{"a": [1, "x", (2, 3)], "b": None, "c": True, 1.5: [[], {}]}, [10_000, -3, "it's"], "short", 2.5, None],
)
def test_shown_value_matches_repr_for_short_values(value: Any) -> None:
    assert shown_value(value) == repr(value)


def test_shown_value_cuts_a_long_string_and_a_self_containing_list() -> None:
    assert shown_value("x" * 10_000) == "'" + "x" * 56 + "..."
    loop: list[Any] = []
    loop.append(loop)
    assert shown_value(loop) == "[" * 57 + "..."


def test_a_refused_scenario_keeps_no_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb())
    with pytest.raises(InputError, match="once its aliases are expanded"):
        read_mapping(path, "scenario")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.marshal"))
    good = tmp_path / "good.yaml"
    good.write_text("model: GPT-2\n")
    assert read_mapping(good, "scenario") == {"model": "GPT-2"}
    raw = good.read_bytes()
    import hashlib

    assert _cache_path("scenario-checked", raw, hashlib.sha256(raw).hexdigest()).is_file()


def test_a_named_pipe_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"scenario.yaml is a named pipe, not a regular file"):
        read_text(fifo, "scenario")


def test_a_socket_a_device_and_a_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="/dev/zero is a character device, not a regular file"):
        read_text(Path("/dev/zero"), "from")
    with pytest.raises(InputError, match="is a folder, not a regular file"):
        read_text(tmp_path, "from")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        where = tmp_path / "s.sock"
        server.bind(str(where))
        with pytest.raises(InputError, match=r"s\.sock is (a socket|not a regular file)|cannot read"):
            read_text(where, "from")
