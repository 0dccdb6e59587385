"""A model reference -> ModelSpec: a catalog name, a config.json (or its folder), a diffusers
pipeline folder, an I-JEPA / V-JEPA pretraining YAML, or a Hub id (an optional lookup)."""

from __future__ import annotations

import dataclasses
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from trainplan.inputs.catalogs.gpus import GpuSpec, find_gpu, user_gpu
from trainplan.inputs.catalogs.models import ModelRecord, catalog_match, find_model_record, model_records
from trainplan.inputs.hf import spec_from_config
from trainplan.inputs.userfiles import parse_json, parse_yaml, read_config_file, read_text
from trainplan.specs.errors import ConfigError, InputError, TrainplanError, UnknownNameError, shown_value
from trainplan.specs.loader import normalise
from trainplan.specs.model import ModelSpec
from trainplan.specs.units import GIB


def record_spec(record: ModelRecord, vae: str | None = None) -> ModelSpec:
    """The ModelSpec of a catalog record (its config through the HF adapter, plus its extras);
    `vae` replaces a pipeline's VAE and text encoders (`with_pipeline`)."""
    from dataclasses import replace

    config: dict[str, Any] = dict(record.config)
    if record.pipeline:  # a diffusion pipeline's VAE and text encoders (hf/pipeline.py)
        from trainplan.inputs.hf.pipeline import PIPELINE_KEY

        config = {**record.config, PIPELINE_KEY: record.pipeline}
    config, note = with_pipeline(config, vae)
    base = spec_from_config(config, record.name, source=record.config_source)
    return replace(
        base,
        extras=base.extras + record.extra_components,
        family=record.family,
        modality=record.modality,
        notes=(*base.notes, note) if note else base.notes,
    )


def resolve_model(reference: str, force: bool = False, vae: str | None = None) -> ModelSpec:
    """A catalog name, a path to a config.json (or its folder), or a Hub id -> ModelSpec; `force`
    reads a refused architecture with the closest modelled reading (labelled approximate). A Hub
    id that is a copy or a same-shape variant of a catalog model is that model, offline, with a
    note saying so (`catalog_match`), unless a local path of that name exists. A diffusion
    denoiser's config.json given without its pipeline takes the VAE and text encoders of `vae`
    (a catalog model or a VAE config.json), else of the closest catalog pipeline (`with_pipeline`)."""
    found = catalog_model(reference)
    if found is not None:
        record, how = found
        if vae is not None:
            return record_spec(record, vae)
        return matched_spec(record.name, how) if how else catalog_spec(record.name)
    config, name, source = model_config(reference)
    config, note = with_pipeline(config, vae)
    spec = spec_from_config(config, name, source, force=force)
    if not note:
        return spec
    from dataclasses import replace

    return replace(spec, notes=(*spec.notes, note))


def with_pipeline(config: dict[str, Any], vae: str | None = None) -> tuple[dict[str, Any], str]:
    """A diffusers denoiser's config.json with a pipeline's VAE and text encoders (hf/pipeline.py
    PIPELINE_KEY), and the sentence saying which. Without one of its own, they come from `vae`: a
    catalog diffusion model (its pipeline) or a path to a VAE's config.json (the text encoders
    then from the closest catalog pipeline); failing that from the catalog pipeline whose
    denoiser is closest: the same class and in_channels, then the most equal config keys (an
    SDXL UNet's cross_attention_dim 2048 is not SD 1.5's 768). Any other config is unchanged."""
    from trainplan.inputs.hf.pipeline import PIPELINE_KEY

    if "_class_name" not in config:
        if vae is not None:
            raise InputError("vae", "applies to diffusion and video models, which have a VAE")
        return config, ""
    if PIPELINE_KEY in config and vae is None:
        return config, ""
    closest = _closest_pipeline(config)
    pipeline: dict[str, Any] | None = dict(closest.pipeline) if closest and closest.pipeline else None
    if vae is not None:
        record = find_model_record(vae)
        if record is not None:
            if not record.pipeline:
                raise InputError("vae", f"{record.name} is not a diffusion pipeline: it has no VAE")
            pipeline, how = dict(record.pipeline), f"the VAE and text encoders of {record.name} (--vae)"
        else:
            vae_config = read_config_file(Path(vae).expanduser())
            pipeline = {**(pipeline or {}), "vae": vae_config}
            how = f"the VAE of {vae} (--vae)" + (f", the text encoders of {closest.name}" if closest else "")
    elif closest is not None:
        how = (
            f"no VAE config beside it: the VAE and text encoders of {closest.name} assumed (the closest "
            f"catalog {config['_class_name']} with in_channels {config.get('in_channels')}); give the "
            "pipeline folder or --vae to change them"
        )
    if pipeline is None:
        return config, ""
    return {**config, PIPELINE_KEY: pipeline}, how


def _closest_pipeline(config: dict[str, Any]) -> ModelRecord | None:
    """The catalog pipeline whose denoiser config is closest to `config` (same class and
    in_channels; then the most keys with equal values)."""
    same = [
        record
        for record in model_records()
        if record.pipeline
        and record.config.get("_class_name") == config.get("_class_name")
        and record.config.get("in_channels") == config.get("in_channels")
    ]

    def agreement(record: ModelRecord) -> int:
        return sum(1 for key, value in record.config.items() if config.get(key) == value)

    return max(same, key=agreement) if same else None


def catalog_model(reference: str) -> tuple[ModelRecord, str] | None:
    """The catalog record of a name, alias or Hub id; failing that, when no local path has that
    name, of a Hub id that is a copy or same-shape variant of a catalog model."""
    record = find_model_record(reference)
    if record is not None:
        return record, ""
    return None if os.path.lexists(Path(reference).expanduser()) else catalog_match(reference)


@cache
def matched_spec(name: str, how: str) -> ModelSpec:
    """A catalog model's spec, read for a Hub id matched to it offline, the match in its notes
    (the estimate's warnings)."""
    from dataclasses import replace

    spec = catalog_spec(name)
    return replace(spec, notes=(*spec.notes, how))


@cache
def catalog_spec(name: str) -> ModelSpec:
    """The spec of catalog model `name`, built once (specs are immutable; an estimate for a
    catalog model then spends no time re-reading its config)."""
    (record,) = [record for record in model_records() if record.name == name]
    return record_spec(record)


def model_config(reference: str) -> tuple[dict[str, Any], str, str]:
    """(config.json contents, model name, where it came from) for a catalog name, a path to a
    config.json (or its folder), or a Hub id; UnknownNameError with suggestions otherwise."""
    path = Path(reference).expanduser()
    found = catalog_model(reference)
    if found is not None:
        record = found[0]
        return dict(record.config), record.name, record.config_source
    # anything that exists is read as a file (userfiles.read_text refuses a pipe, a device or a
    # socket with one line, never blocking on it)
    if path.is_dir() and os.path.lexists(path / "model_index.json"):  # a diffusers pipeline folder
        from trainplan.inputs.hf.pipeline import pipeline_config

        return pipeline_config(path), path.name, str(path)
    if path.is_dir():
        if not os.path.lexists(path / "config.json"):
            raise ConfigError(
                "model",
                f"the folder {path} holds no config.json (nor a pipeline's model_index.json); "
                "give the model's config.json, its folder or a Hub id",
            )
        path = path / "config.json"
    if os.path.lexists(path) and path.suffix in (".yaml", ".yml"):  # an I-JEPA / V-JEPA pretraining config
        return _jepa_yaml(path), path.stem, str(path)
    if os.path.lexists(path):
        name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        return read_config_file(path), name, str(path)
    if looks_like_hub_id(reference):
        return fetch_hub_config(reference), reference, f"hub:{reference}"
    raise UnknownNameError("model", reference, [r.name for r in model_records()], "model")


def _jepa_yaml(path: Path) -> dict[str, Any]:
    """The model config of an I-JEPA or V-JEPA pretraining YAML (hf/jepa_yaml.py)."""
    from trainplan.inputs.hf.jepa_yaml import is_jepa_yaml, jepa_yaml_config
    from trainplan.inputs.userfiles import parse_yaml, read_text

    try:
        data = parse_yaml(read_text(path, "model"), str(path), "model")
    except InputError as error:
        raise ConfigError("model", error.message) from None
    if not is_jepa_yaml(data):
        raise ConfigError(
            "model",
            f"{path} is not an I-JEPA or V-JEPA pretraining config (a model is a config.json, a "
            "pipeline folder, a Hub id, or such a YAML)",
        )
    return jepa_yaml_config(data)


HUB_TIMEOUT_S = 5.0  # seconds to wait for the Hub before reporting it unreachable
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$")


def looks_like_hub_id(reference: str) -> bool:
    """owner/name in the Hub's id syntax (no '..', no leading dot, no path separators)."""
    return bool(_HUB_ID.match(reference)) and ".." not in reference


def fetch_hub_config(hub_id: str) -> dict[str, Any]:
    """Download config.json for `hub_id` with huggingface_hub (optional); a clear error offline.
    A diffusers pipeline repository (no config.json at its root) gives its model_index.json, the
    denoiser's and the VAE's config.json instead.

    Only config files are read; no model code is ever run (no trust_remote_code).
    """
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    except ImportError:
        raise InputError(
            "model",
            f"{shown_value(hub_id)} is not in the catalog and looks like a Hub id, but huggingface_hub is "
            "not installed (pip install 'trainplan[hub]'); or pass a local config.json path",
        ) from None
    from huggingface_hub.utils import EntryNotFoundError  # type: ignore[attr-defined]

    from trainplan.inputs.hf.pipeline import pipeline_config_from

    def fetch(filename: str) -> dict[str, Any] | None:
        try:
            path = _hub_config_path(hub_id, hf_hub_download, get_hf_file_metadata, hf_hub_url, filename)
        except EntryNotFoundError:  # the repository exists but has no such file
            return None
        return read_config_file(Path(path))

    try:
        config = fetch("config.json")
        return config if config is not None else pipeline_config_from(fetch, f"hub:{hub_id}")
    except TrainplanError:
        raise
    except Exception as error:  # network, auth, missing repo: all reported the same way
        raise InputError(
            "model",
            f"could not fetch config.json of {shown_value(hub_id)} from the Hub ({type(error).__name__})"
            f"{close_models(hub_id)}. Offline, pass its config.json (--model path/to/config.json) or a "
            "catalog name",
        ) from None


def close_models(reference: str) -> str:
    """'; close catalog models: A, B' for a model reference the catalog lacks: by spelling, else
    those of the same size ("7b" in zephyr-7b-sft-full); or that none is close."""
    from trainplan.specs.errors import suggest

    names = [record.name for record in model_records()]
    repo = reference.rsplit("/", 1)[-1]
    close = suggest(repo, names)
    size = re.search(r"(?<![\d.])(\d+(?:\.\d+)?[bm])(?![a-z])", repo.lower())
    if not close and size:
        close = [
            name
            for name in names
            if re.search(rf"(?<![\d.]){re.escape(size.group(1))}(?![a-z])", name.lower())
        ][:3]
    return f"; close catalog models: {', '.join(close)}" if close else "; no catalog model is close"


def _hub_config_path(
    hub_id: str, download: Any, metadata: Any, url: Any, filename: str = "config.json"
) -> str:
    """The local path of `hub_id`'s config.json (or `filename`): the Hub cache when it has one (no
    network at all); otherwise one metadata request, without the library's retries (a missing or
    unreachable model fails in one timeout, not a minute of backoff), then the download."""
    try:
        return str(download(hub_id, filename, local_files_only=True))
    except Exception:  # not cached (or offline mode): ask the Hub
        pass
    metadata(url(hub_id, filename), timeout=HUB_TIMEOUT_S, retry_on_errors=False)
    return str(download(hub_id, filename, etag_timeout=HUB_TIMEOUT_S))


#: The most GPU records one user file may hold.
MAX_USER_GPUS = 64


def gpus_from_file(path: str) -> tuple[GpuSpec, ...]:
    """Your own GPU records (`gpu_file`): a YAML or JSON file holding one record, a list of them,
    or a mapping with a `gpus` list, each in the catalog's schema (data/gpus.yaml) and validated
    the same way; keys that may be null in the catalog (links, power, year, flags) may be left
    out. Errors are InputErrors naming `gpu_file`, the record and the key."""
    try:
        stat = os.stat(path)
    except OSError:  # read_text names the failure
        return _gpus_from_file(path, 0, 0)
    return _gpus_from_file(path, stat.st_mtime_ns, stat.st_size)


@cache
def _gpus_from_file(path: str, mtime_ns: int, size: int) -> tuple[GpuSpec, ...]:
    """The records of one version of a file (its path, modification time and size): an
    estimate's hints re-read nothing."""
    text = read_text(Path(path), "gpu_file")
    data = (
        parse_json(text, path, "gpu_file") if path.endswith(".json") else parse_yaml(text, path, "gpu_file")
    )
    if isinstance(data, dict) and "gpus" in data:
        data = data["gpus"]
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list) or not records:
        raise InputError("gpu_file", f"{path} must hold a GPU record, a list of them, or a `gpus:` list")
    if len(records) > MAX_USER_GPUS:
        raise InputError("gpu_file", f"{path} holds {len(records)} records; at most {MAX_USER_GPUS}")
    found = []
    for index, raw in enumerate(records):
        if not isinstance(raw, dict):
            raise InputError("gpu_file", f"{path} record {index} must be a mapping of the catalog's keys")
        try:
            found.append(user_gpu(raw, index, path))
        except RuntimeError as error:
            raise InputError("gpu_file", str(error)) from None
        except (TypeError, ValueError, AttributeError) as error:
            raise InputError("gpu_file", f"{path} record {index} ({raw.get('name')}): {error}") from None
    return tuple(found)


def scenario_gpu(scenario: Any) -> GpuSpec:
    """The GPU a scenario runs on: `gpu` looked up in its `gpu_file` first, then the catalog,
    with `gpu_memory_gib` (when given) as its usable memory."""
    return chosen_gpu(scenario)[0]


def chosen_gpu(scenario: Any) -> tuple[GpuSpec, dict[str, Any]]:
    """`scenario_gpu` and, for the result, which record it is, where it came from (the file or
    the catalog) and what the scenario overrode."""
    gpu: GpuSpec | None = None
    origin = "catalog"
    if scenario.gpu_file is not None:
        wanted = normalise(scenario.gpu)
        own = gpus_from_file(scenario.gpu_file)
        gpu = next((g for g in own if wanted in {normalise(n) for n in (g.name, *g.aliases)}), None)
        if gpu is not None:
            origin = scenario.gpu_file
        else:
            try:
                gpu = find_gpu(scenario.gpu)
            except UnknownNameError:
                names = ", ".join(g.name for g in own)
                where = f"{scenario.gpu_file} ({names})"
                raise InputError(
                    "gpu", f"{shown_value(scenario.gpu)} is neither in {where} nor in the catalog"
                ) from None
    if gpu is None:
        gpu = find_gpu(scenario.gpu)
    overrides: dict[str, Any] = {}
    if scenario.gpu_memory_gib is not None:
        overrides["gpu_memory_gib"] = scenario.gpu_memory_gib
        gpu = dataclasses.replace(
            gpu,
            memory_bytes=int(scenario.gpu_memory_gib * GIB),
            memory_source=f"gpu_memory_gib {scenario.gpu_memory_gib:g} "
            f"(the record says {gpu.memory_bytes / GIB:.2f} GiB)",
        )
    # the links the scenario gives for its GPU: its network (the scale-up domain it gives is
    # resolved with its nodes where the step is timed, catalogs/gpus.py scale_up_domain)
    if scenario.scale_up_domain is not None:
        overrides["scale_up_domain"] = scenario.scale_up_domain
    if scenario.scale_out_bytes_per_s is not None:
        overrides["scale_out_bytes_per_s"] = scenario.scale_out_bytes_per_s
        gpu = dataclasses.replace(gpu, scale_out_bytes_per_s=scenario.scale_out_bytes_per_s)
    return gpu, {"name": gpu.name, "from": origin, "memory_bytes": gpu.memory_bytes, "overrides": overrides}
