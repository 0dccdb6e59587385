"""Text renderings shared by the CLI and the web page (no engine logic here)."""

from __future__ import annotations

from trainplan.result import Batch, Estimate
from trainplan.units import format_count, format_gib, format_int, format_percent


def batch_line(batch: Batch) -> str:
    """'Global batch 65.5K tok = 1 micro x 16 accum x 1 replicas x 4,096 seq'."""
    return (
        f"Global batch {format_count(batch.global_tokens)} tok = {batch.micro_batch} micro"
        f" x {batch.grad_accum} accum x {batch.replicas} replicas x {format_int(batch.seq_len)} seq"
    )


def params_line(result: Estimate) -> str:
    """'Trainable 6.82M of 8.03B params (0.08% of base)'."""
    params = result.params
    approx = " (approximate: MLP width not in the config)" if result.approximations else ""
    return (
        f"Trainable {format_count(params.trainable)} of {format_count(params.total)} params "
        f"({format_percent(params.trainable_fraction)} of base){approx}"
    )


def fit_summary(result: Estimate) -> str:
    """'Fits 9 of 30 catalog GPUs'."""
    fitting = sum(row.fits for row in result.fit)
    return f"Fits {fitting} of {len(result.fit)} catalog GPUs at {format_gib(result.total_bytes)} per GPU"
