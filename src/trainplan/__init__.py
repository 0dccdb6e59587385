"""trainplan: will this training run fit, how long will it take, and what will it cost?

The public API is one function, `estimate(scenario) -> Estimate`, plus the spec types, and
`scenario_from_config(paths)`, which reads another framework's training config into a scenario.
"""

from __future__ import annotations

from trainplan.configs import ConfigReading, scenario_from_config
from trainplan.errors import ConfigError, InputError, TrainplanError, UnknownNameError
from trainplan.estimate import estimate
from trainplan.result import Estimate
from trainplan.scenario import LoraSettings, Scenario, scenario_from_mapping

__all__ = [
    "ConfigError",
    "ConfigReading",
    "Estimate",
    "InputError",
    "LoraSettings",
    "Scenario",
    "TrainplanError",
    "UnknownNameError",
    "estimate",
    "scenario_from_config",
    "scenario_from_mapping",
]
__version__ = "0.1.0"
