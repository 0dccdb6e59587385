"""Catalog data: GPU aliases, strict records, every model's parameter count vs its published one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog
from trainplan.inputs.catalogs.models import model_records
from trainplan.inputs.resolve import record_spec
from trainplan.specs.errors import UnknownNameError
from trainplan.specs.loader import normalise
from trainplan.specs.weights import block_params, total_params


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("H100", "H100 SXM"),
        ("H100-SXM", "H100 SXM"),
        ("h100-80gb", "H100 SXM"),
        ("RTX 4090", "RTX 4090"),
        ("RTX-4090", "RTX 4090"),
        ("rtx_4090", "RTX 4090"),
        ("A100-80GB", "A100 80GB SXM"),
    ],
)
def test_gpu_aliases(alias: str, name: str) -> None:
    assert name in find_gpu(alias).name


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(UnknownNameError) as error:
        find_gpu("H10")
    assert error.value.suggestions


def test_gpu_rows_are_sourced() -> None:
    gpus = gpu_catalog()
    assert len(gpus) >= 24
    classes = {g.gpu_class for g in gpus}
    assert classes == {"consumer", "workstation", "datacenter"}
    for gpu in gpus:
        assert gpu.source and gpu.as_of
        assert gpu.memory_bytes > 8 * 2**30


def test_catalog_has_the_required_models() -> None:
    records = model_records()
    assert len(records) >= 35
    families = " ".join(r.name.lower() for r in records)
    for needle in ("llama-2", "llama-3.1-405b", "mixtral", "qwen2.5", "qwen3", "gemma-2", "gemma-3",
                   "phi-3", "phi-4", "deepseek-v3", "olmo", "gpt-2", "t5", "chameleon", "emu3",
                   "janus", "llamagen"):  # fmt: skip
        assert needle in families, needle


def published_tolerance(published: int) -> float:
    """0.5%, or half a unit of the last published digit when the figure is rounded
    ("1.4B" = 1,400,000,000 can only be checked to +-0.05B)."""
    digits = str(published)
    significant = len(digits.rstrip("0"))
    half_unit = 0.5 * 10 ** (len(digits) - significant)
    return max(0.005, half_unit / published)


@pytest.mark.parametrize("record", model_records(), ids=lambda r: r.name)
def test_params_match_published(record: object) -> None:
    from trainplan.inputs.catalogs.models import ModelRecord

    assert isinstance(record, ModelRecord)
    spec = record_spec(record)
    ours = total_params(spec)
    excluded = sum(e.params for e in spec.extras if e.name in record.published_params_excludes)
    # a published figure may leave out whole blocks by role (V-JEPA 2's encoder size omits the predictor)
    excluded += sum(
        block.count * block_params(block, spec)
        for block in spec.blocks
        if block.role in record.published_params_excludes
    )
    tolerance = published_tolerance(record.published_params)
    assert ours - excluded == pytest.approx(record.published_params, rel=tolerance), (
        record.published_params_source
    )
    if record.meta_device_params is not None:
        # the same config built by transformers on the meta device: exact
        assert ours == record.meta_device_params


def test_published_tolerance() -> None:
    assert published_tolerance(8_030_261_248) == 0.005
    assert published_tolerance(1_400_000_000) == pytest.approx(0.05 / 1.4)


def test_normalise_matches_its_definition_on_every_character() -> None:
    """Names are matched lower-cased with runs of whitespace, '_', '-' and '/' removed; ASCII
    names take a deletion table instead of the regex, so both readings must agree on every
    ASCII character (the control separators \\x1c-\\x1f count as whitespace) and on the Unicode
    spaces that only the regex path sees."""
    definition = re.compile(r"[\s_\-/]+")
    characters = [chr(code) for code in range(128)] + ["\u00a0", "\u2003", "\u3000", "\u00c9", "\u0130"]
    for char in characters:
        for text in (char, f"H1{char}00", f"{char}{char}RTX{char}-_/4090{char}"):
            assert normalise(text) == definition.sub("", text.strip().lower()), repr(text)
    assert normalise(" RTX_4090 / 24GB ") == "rtx409024gb"


def _gpu_record(change: Any) -> dict[str, Any]:
    import yaml

    from trainplan.specs.loader import DATA_FOLDER

    raw = yaml.safe_load((DATA_FOLDER / "gpus.yaml").read_text())
    record: dict[str, Any] = dict(raw[0] if isinstance(raw, list) else raw["gpus"][0])
    change(record)
    return record


@pytest.mark.parametrize(
    ("change", "text"),
    [
        (lambda r: r.update(colour="red"), "unknown keys ['colour']"),
        (lambda r: r.pop("pcie_gen"), "missing keys ['pcie_gen']"),
        (lambda r: r.update(memory_bandwidth_bytes_per_s=None), "null ['memory_bandwidth_bytes_per_s']"),
        (lambda r: r.update(architecture=None), "null ['architecture']"),
        (lambda r: r.update(scale_up_domain_gpus=0), "the scale-up domain at least 1"),
    ],
)
def test_a_gpu_record_is_checked_strictly(change: Any, text: str) -> None:
    from trainplan.inputs.catalogs.gpus import _gpu_from

    _gpu_from(_gpu_record(lambda r: None), 0)  # the unchanged record loads
    with pytest.raises(RuntimeError, match=re.escape(text)):
        _gpu_from(_gpu_record(change), 0)


def test_links_come_from_the_record_or_the_stated_assumption() -> None:
    from trainplan.inputs.catalogs.cost_inputs import (
        host_link_bytes_per_s,
        network_bytes_per_s,
        unpublished_links,
    )

    links = unpublished_links()
    assert (links.pcie_gen, links.network_bytes_per_s) == (4, 12.5e9)  # PCIe 4.0 x16; 100 Gb/s
    h100, tpu, rtx = find_gpu("H100 SXM 80GB"), find_gpu("TPU v5p"), find_gpu("RTX 4090")
    assert host_link_bytes_per_s(h100) == 5.5e10  # its own gen 5 (load_sources.yaml practical rate)
    assert host_link_bytes_per_s(tpu) == 2.5e10  # no published host link: the gen 4 row
    assert network_bytes_per_s(h100) == h100.scale_out_bytes_per_s
    assert network_bytes_per_s(tpu) == tpu.scale_out_bytes_per_s == 6.25e9
    assert network_bytes_per_s(rtx) == 12.5e9
    for gpu in gpu_catalog():  # every record's generation has a row: no silent rate
        assert host_link_bytes_per_s(gpu) > 0


def test_an_assumed_link_is_said_where_it_is_used() -> None:
    from trainplan import Scenario, estimate

    def warnings(**fields: Any) -> list[str]:
        return list(estimate(Scenario(model="Llama-3.1-8B", method="lora", **fields)).warnings)

    assert "TPU v5p has no published host link: PCIe gen 4 x16 assumed for loading and host traffic" in (
        warnings(gpu="TPU v5p", gpus=16)
    )
    network = "GeForce RTX 4090 has no published network figure: 100 Gb/s per GPU assumed between nodes"
    assert network in warnings(gpu="RTX 4090", gpus=16)
    assert not any("published network" in w or "host link" in w for w in warnings(gpu="RTX 4090", gpus=8))
    assert not any(
        "published network" in w or "host link" in w for w in warnings(gpu="H100 SXM 80GB", gpus=16)
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("source"), "missing keys ['source']"),
        (
            lambda r: r.update(basis="guess"),
            "basis 'guess' is not one of sourced, derived, fitted, judgement",
        ),
        (lambda r: r.update(value=True), "value True is not a number in [0, 1]"),
        (lambda r: r.update(value=-0.1), "value -0.1 is not a number in [0, 1]"),
        (lambda r: r.update(value=1.5), "value 1.5 is not a number in [0, 1]"),
    ],
)
def test_a_sourced_row_is_checked(change: Any, message: str) -> None:
    """Every sourced figure of the data files (device_memory.yaml, load_sources.yaml run_fixed and
    host_memory) passes one check: its four keys, a known basis, a number in range."""
    from trainplan.specs.loader import sourced_value

    row: dict[str, Any] = {"value": 0.5, "basis": "fitted", "source": "a fit", "as_of": "2026-12-02"}
    assert sourced_value(dict(row), "f row", 1.0) == 0.5
    change(row)
    with pytest.raises(RuntimeError) as error:
        sourced_value(row, "f row", 1.0)
    assert str(error.value).startswith("f row: ") and message in str(error.value)
