"""Cost and energy of a run.

Cost: GPU-hours x $/GPU-hour x (1 - discount) for committed or spot capacity.
Energy (first order, the seed calculator's model): each GPU draws
  P = TDP x (idle + (1 - idle) x utilisation),
with utilisation the busy (compute) fraction of the step; the host adds a fraction of the GPU
power and the facility multiplies by its PUE (The Green Grid's definition: total facility
energy / IT energy). CO2e = kWh x grid intensity (location-based, gCO2e/kWh).
"""

from __future__ import annotations

from typing import Any


def cost_usd(gpu_hours: Any, usd_per_gpu_hour: Any, discount: float) -> Any:
    """GPU-hours times the discounted hourly rate."""
    return gpu_hours * usd_per_gpu_hour * (1 - discount)


def gpu_power_w(tdp_w: Any, idle_fraction: float, utilisation: Any) -> Any:
    """Idle draw plus a linear share of the rest of TDP with utilisation (0..1)."""
    return tdp_w * (idle_fraction + (1 - idle_fraction) * utilisation)


def energy_kwh(gpu_power: Any, gpus: Any, seconds: Any, host_overhead: float, pue: float) -> Any:
    """Facility energy: GPUs, plus host overhead, times PUE; in kWh."""
    return gpu_power * gpus * seconds * (1 + host_overhead) * pue / 3.6e6


def co2e_kg(kwh: float, gco2e_per_kwh: float) -> float:
    """Emissions of `kwh` at a grid intensity."""
    return kwh * gco2e_per_kwh / 1000
