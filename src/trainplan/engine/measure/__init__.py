"""Measured mode: peak memory of a real HF training step, traced on fake tensors (needs torch).

torch, transformers and peft are imported lazily, inside the functions, so importing this package
is cheap and the core of trainplan never needs torch.
"""

from __future__ import annotations

from trainplan.engine.measure.result import CATEGORIES, MeasuredStep

__all__ = ["CATEGORIES", "MeasuredStep", "measure_sample_step", "measure_training_step"]


def __getattr__(name: str) -> object:
    if name == "measure_training_step":
        from trainplan.engine.measure.trace import measure_training_step

        return measure_training_step
    if name == "measure_sample_step":
        from trainplan.engine.measure.sample import measure_sample_step

        return measure_sample_step
    raise AttributeError(name)
