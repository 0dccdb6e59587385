"""Hugging Face configs end to end: files, folders, nested multimodal configs, bad fields, Hub ids."""

from __future__ import annotations

import builtins
import json
from pathlib import Path
from typing import Any

import pytest

from trainplan.inputs.catalogs.models import find_model_record
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.resolve import record_spec, resolve_model
from trainplan.specs.errors import ConfigError, InputError
from trainplan.specs.weights import total_params


def write(tmp_path: Path, config: dict[str, Any], name: str = "model") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "name", ["Gemma-3-4B", "Janus-Pro-7B", "Mixtral-8x7B-v0.1", "DeepSeek-V3", "Flan-T5-XL"]
)
def test_catalog_config_round_trips_through_a_file(tmp_path: Path, name: str) -> None:
    record = find_model_record(name)
    assert record is not None
    folder = write(tmp_path, dict(record.config))
    from_file = resolve_model(str(folder))
    from_file_json = resolve_model(str(folder / "config.json"))
    assert total_params(from_file) == total_params(from_file_json)
    # the catalog adds only the components a config cannot describe
    extras = sum(extra.params for extra in record.extra_components)
    assert total_params(from_file) + extras == total_params(record_spec(record))


def test_nested_text_config_and_vision_tower() -> None:
    record = find_model_record("Gemma-3-4B")
    assert record is not None
    spec = spec_from_config(record.config, "g")
    assert spec.hidden_size == 2560 and spec.vocab_size == 262208
    assert {extra.name for extra in spec.extras} == {"vision_tower", "multi_modal_projector"}
    assert spec.modality == "text+vision"


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (
            {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10},
            "num_hidden_layers",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": "big",
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "vocab_size": 10,
            },
            "hidden_size",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 3,
                "vocab_size": 10,
            },
            "num_key_value_heads",
        ),
        (
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 0,
                "num_attention_heads": 4,
                "vocab_size": 10,
            },
            "num_hidden_layers",
        ),
    ],
)
def test_invalid_config_names_the_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "bad")
    assert error.value.field == field


def test_unreadable_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"config.json is not valid JSON .*line 1 column 2"):
        resolve_model(str(folder))


def test_hub_id_without_huggingface_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_hub(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("huggingface_hub"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hub)
    with pytest.raises(InputError, match=r"huggingface_hub is not installed.*local config\.json"):
        resolve_model("some-org/some-model")


def test_hub_id_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(InputError, match=r"could not fetch config\.json.*Offline"):
        resolve_model("some-org/some-model-that-is-not-cached")


def test_unknown_name_suggests() -> None:
    with pytest.raises(InputError, match="Did you mean"):
        resolve_model("Qwen2.5-7")


def test_hub_lookup_uses_the_cache_first_and_never_retries() -> None:
    """A cached config.json needs no network; an uncached one costs one metadata request made
    without the library's retry backoff, then the download."""
    from trainplan.inputs.resolve import HUB_TIMEOUT_S, _hub_config_path

    calls: list[tuple[str, Any]] = []

    def download(hub_id: str, filename: str, **options: Any) -> str:
        calls.append(("download", options))
        if options.get("local_files_only") and hub_id == "not/cached":
            raise FileNotFoundError(hub_id)
        return f"/cache/{hub_id}/{filename}"

    def metadata(url: str, **options: Any) -> None:
        calls.append(("metadata", options))

    def url(hub_id: str, filename: str) -> str:
        return f"hub://{hub_id}/{filename}"

    assert _hub_config_path("is/cached", download, metadata, url) == "/cache/is/cached/config.json"
    assert calls == [("download", {"local_files_only": True})]
    calls.clear()
    assert _hub_config_path("not/cached", download, metadata, url) == "/cache/not/cached/config.json"
    assert calls == [
        ("download", {"local_files_only": True}),
        ("metadata", {"timeout": HUB_TIMEOUT_S, "retry_on_errors": False}),
        ("download", {"etag_timeout": HUB_TIMEOUT_S}),
    ]
