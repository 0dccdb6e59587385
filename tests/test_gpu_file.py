"""Your own GPU: a file of records in the catalog's schema (`gpu_file`) and a memory override
(`gpu_memory_gib`), with the result saying which record and which overrides were used."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainplan.engine.estimate import estimate
from trainplan.engine.largest_fit import largest_fitting
from trainplan.engine.plan import plan
from trainplan.engine.plan_request import PlanRequest
from trainplan.inputs.catalogs.gpus import find_gpu
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping

GIB = 2**30
# A power-capped 96 GB Hopper part as a cluster might describe it: only the keys the catalog
# never leaves null, and the figures that matter for time and energy
OWN = {
    "name": "H100 SXM 96GB 500W",
    "aliases": ["h100-96-500w"],
    "vendor": "NVIDIA",
    "class": "datacenter",
    "architecture": "Hopper",
    "memory_bytes": 95 * GIB,
    "memory_bandwidth_bytes_per_s": 2.4e12,
    "dense_flops_per_s": {"bf16": 8.0e14, "fp16": 8.0e14, "tf32": 4.0e14, "fp32": 5.0e13},
    "tdp_w": 500,
    "idle_w": 70,
    "scale_up_domain_gpus": 8,
    "source": "the cluster's own measurements",
    "as_of": "2026-12-02",
}


def own_file(tmp_path: Path, records: object) -> str:
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(records))
    return str(path)


def test_a_gpu_of_your_own_is_estimated_with_its_figures(tmp_path: Path) -> None:
    path = own_file(tmp_path, {"gpus": [OWN]})
    result = estimate({"model": "Llama-3.1-8B", "gpu": "h100-96-500w", "gpu_file": path})
    assert result.gpu == "H100 SXM 96GB 500W"
    assert result.chosen_fit.memory_bytes == 95 * GIB and result.fits
    assert result.time is not None and result.time.peak_flops_per_s == 8.0e14
    assert result.assumptions["gpu_record"] == {
        "name": "H100 SXM 96GB 500W", "from": path, "memory_bytes": 95 * GIB, "overrides": {},
    }  # fmt: skip
    # no catalog price: the cost asks for your rate, and takes it
    assert result.cost is not None and result.cost.usd is None
    priced = estimate(
        {"model": "Llama-3.1-8B", "gpu": "h100-96-500w", "gpu_file": path, "usd_per_gpu_hour": 2}
    )
    assert priced.cost is not None and priced.cost.usd == pytest.approx(priced.time.gpu_hours * 2)
    # the energy uses its own power: 500 W at full use, 70 W idle
    assert priced.energy is not None and 70 <= (priced.energy.gpu_power_w or 0) <= 500
    # a name the file does not hold is looked up in the catalog
    catalog = estimate({"model": "Llama-3.1-8B", "gpu": "A100 80GB SXM4", "gpu_file": path})
    assert catalog.assumptions["gpu_record"]["from"] == "catalog"


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({k: v for k, v in OWN.items() if k != "memory_bytes"}, "memory_bytes"),
        ({**OWN, "memory_gb": 96}, "memory_gb"),
        ({**OWN, "class": "cloud"}, "class"),
        ({**OWN, "memory_bandwidth_bytes_per_s": 0}, "memory bandwidth must be positive"),
        ({**OWN, "memory_bytes": "lots"}, "lots"),
    ],
)
def test_a_bad_record_names_the_key(tmp_path: Path, record: dict[str, object], words: str) -> None:
    path = own_file(tmp_path, [record])
    with pytest.raises(InputError) as error:
        estimate({"model": "Llama-3.1-8B", "gpu": "h100-96-500w", "gpu_file": path})
    assert error.value.field == "gpu_file" and words in error.value.message


def test_bad_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="must hold a GPU record"):
        estimate({"model": "Llama-3.1-8B", "gpu_file": own_file(tmp_path, "an H100")})
    with pytest.raises(InputError, match="at most 64"):
        estimate({"model": "Llama-3.1-8B", "gpu_file": own_file(tmp_path, [OWN] * 65)})
    with pytest.raises(InputError, match="cannot read"):
        estimate({"model": "Llama-3.1-8B", "gpu_file": str(tmp_path / "missing.yaml")})
    path = own_file(tmp_path, [OWN])
    with pytest.raises(InputError) as error:
        estimate({"model": "Llama-3.1-8B", "gpu": "nope", "gpu_file": path})
    assert error.value.field == "gpu" and "H100 SXM 96GB 500W" in error.value.message


def test_the_memory_you_give_decides_the_fit_and_the_largest_micro_batch() -> None:
    """An H100 with 16 GiB usable (say a MIG slice): the 20.53 GiB default LoRA no longer fits,
    the fit row says so with the memory given, and the largest micro-batch search uses it."""
    plain = estimate({"model": "Llama-3.1-8B"})
    small = estimate({"model": "Llama-3.1-8B", "gpu_memory_gib": 16})
    assert plain.fits and not small.fits
    assert small.chosen_fit.memory_bytes == 16 * GIB
    assert small.chosen_fit.free_bytes == 16 * GIB - small.total_bytes
    assert small.assumptions["gpu_record"]["overrides"] == {"gpu_memory_gib": 16}
    assert small.total_bytes == plain.total_bytes  # the estimate itself does not change
    roomy = largest_fitting(
        scenario_from_mapping({"model": "Llama-3.1-8B", "gpu_memory_gib": 40}), "micro_batch"
    )
    full = largest_fitting(scenario_from_mapping({"model": "Llama-3.1-8B"}), "micro_batch")
    assert roomy is not None and full is not None and roomy.value < full.value
    assert roomy.estimate.total_bytes <= 40 * GIB * 0.95


def test_the_planner_refuses_a_gpu_file_and_keeps_a_memory_with_its_gpu(tmp_path: Path) -> None:
    """The planner searches catalog GPUs, so it refuses a gpu_file; a usable memory given for the
    scenario's GPU holds for that type only: an H100 with 16 GiB needs ZeRO-3 over several GPUs,
    an A100 beside it keeps its 80 GB, and every plan re-estimates to the planner's own peak
    within the memory its GPU has."""
    base = scenario_from_mapping({"model": "Llama-3.1-8B", "gpu_file": own_file(tmp_path, [OWN])})
    with pytest.raises(InputError) as error:
        plan(PlanRequest(base=base))
    assert error.value.field == "gpu_file"
    small = scenario_from_mapping(
        {"model": "Llama-3.1-8B", "gpu": "H100 SXM 80GB", "gpu_memory_gib": 16, "train_tokens": 1e8}
    )
    found = plan(PlanRequest(base=small, gpu_types=("H100 SXM 80GB", "A100 80GB SXM4"), max_gpus=8, top_k=8))
    by_gpu = {item.scenario.gpu: item for item in found.plans}
    assert set(by_gpu) == {"H100 SXM 80GB", "A100 80GB SXM4"}
    for item in found.plans:
        given = 16 if item.scenario.gpu == "H100 SXM 80GB" else None
        assert item.scenario.gpu_memory_gib == given
        catalog = find_gpu(item.scenario.gpu).memory_bytes
        assert item.estimate.fits and item.estimate.chosen_fit.memory_bytes == (
            16 * GIB if given else catalog
        )
    h100 = by_gpu["H100 SXM 80GB"].scenario
    assert h100.gpus > 1 and h100.zero_stage == 3
    assert by_gpu["A100 80GB SXM4"].estimate.total_bytes > 16 * GIB


def test_the_example_gpu_file_reads() -> None:
    """examples/my-gpus.yaml, which the README's command uses, is a valid file of one record."""
    path = str(Path(__file__).resolve().parents[1] / "examples" / "my-gpus.yaml")
    result = estimate({"model": "Llama-3.1-8B", "gpu": "my-h100", "gpu_file": path})
    assert result.gpu == "My H100 500W" and result.assumptions["gpu_record"]["from"] == path
    assert result.chosen_fit.memory_bytes == 85_520_809_984
