"""trainplan: will this training run fit, how long will it take, and what will it cost?

The public API is one function, `estimate(scenario) -> Estimate`, plus the spec types, and
`scenario_from_config(paths)`, which reads another framework's training config into a scenario.
The config readers load on first use (PEP 562), so `import trainplan` stays quick.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainplan.engine.estimate import estimate
from trainplan.engine.result import Estimate
from trainplan.specs.errors import ConfigError, InputError, TrainplanError, UnknownNameError
from trainplan.specs.scenario import LoraSettings, Scenario, scenario_from_mapping

if TYPE_CHECKING:
    from trainplan.inputs.configs import ConfigReading, scenario_from_config

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

_LAZY = ("ConfigReading", "scenario_from_config")  # defined in trainplan.inputs.configs


def __getattr__(name: str) -> Any:
    """The config readers' public names, imported the first time one is asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module 'trainplan' has no attribute {name!r}")
    from trainplan.inputs import configs

    value = getattr(configs, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
