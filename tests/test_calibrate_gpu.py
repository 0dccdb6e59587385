"""The real-GPU calibration script (scripts/calibrate_gpu.py): its cases estimate, its
comparison is the estimate's three figures against the record's, and it skips without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

calibrate_gpu = pytest.importorskip("calibrate_gpu")


def test_every_case_estimates_on_a_24_gb_card_or_says_it_does_not_fit() -> None:
    cases = calibrate_gpu.load_cases(calibrate_gpu.CASES)
    assert len(cases) >= 5
    fits = [calibrate_gpu.fits_here(case, "GeForce RTX 4090", 24564 * 2**20) for case in cases]
    # most steps run on a 24 GB card; the 8B full fine-tune needs a datacenter GPU
    assert sum(fits) >= 4 and not all(fits)
    assert all(calibrate_gpu.fits_here(case, "H200 SXM 141GB", 143771 * 2**20) for case in cases)


def test_comparison_is_the_three_figures() -> None:
    case = calibrate_gpu.load_cases(calibrate_gpu.CASES)[0]
    measured = {"allocated_bytes": 10 * 2**30, "reserved_bytes": 11 * 2**30, "device_bytes": 12 * 2**30}
    record = {"case": case, "gpu_catalog": "H100 SXM 80GB", "measured": {**measured, "context_bytes": 0}}
    rows = calibrate_gpu.compare(record)
    result = calibrate_gpu.estimate_of(case, "H100 SXM 80GB")
    expected = (result.allocated_peak_bytes, result.reserved_peak_bytes, result.total_bytes)
    assert [row[1] for row in rows] == [
        "max_memory_allocated",
        "max_memory_reserved",
        "device used (nvidia-smi)",
    ]
    for row, estimated, key in zip(rows, expected, measured, strict=True):
        assert row[3] == estimated and row[2] == measured[key]
        assert row[4] == pytest.approx(estimated / measured[key] - 1)
    # the estimate runs with the derived overhead on one GPU: the context and the workspace
    assert result.device.communicators == 0 and result.device.flat == 0


@pytest.mark.parametrize(
    ("device", "catalog"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM 80GB"),
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
    ],
)
def test_device_names_find_their_catalog_gpu(device: str, catalog: str) -> None:
    assert calibrate_gpu.catalog_gpu(device) == catalog


def test_without_cuda_it_skips() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here: the script would run")
    ran = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "calibrate_gpu.py")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0 and "no CUDA GPU here; skipped" in ran.stdout


def test_accuracy_page_shows_recorded_runs(tmp_path: Path) -> None:
    import accuracy

    assert "None recorded yet" in "\n".join(accuracy.gpu_run_lines(tmp_path / "absent.json"))
    case = calibrate_gpu.load_cases(calibrate_gpu.CASES)[0]
    measured = {
        "allocated_bytes": 2**30,
        "reserved_bytes": 2**31,
        "device_bytes": 3 * 2**30,
        "context_bytes": 0,
    }
    runs = tmp_path / "gpu_runs.json"
    runs.write_text(
        json.dumps(
            [
                {
                    "case": case,
                    "gpu": "NVIDIA H100 80GB HBM3",
                    "gpu_catalog": "H100 SXM 80GB",
                    "measured": measured,
                }
            ]
        )
    )
    lines = accuracy.gpu_run_lines(runs)
    rows = [line for line in lines if line.startswith(f"| {case['id']} |")]
    assert len(rows) == 3
    estimated = calibrate_gpu.estimate_of(case, "H100 SXM 80GB").reserved_peak_bytes
    assert (
        f"| max_memory_reserved | 2.00 | {estimated / 2**30:.2f} | {estimated / 2**31 - 1:+.1%} |" in rows[1]
    )
