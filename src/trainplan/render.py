"""Text renderings shared by the CLI and the web page (no engine logic here)."""

from __future__ import annotations

from trainplan.result import Batch, Estimate
from trainplan.runtime import CostFigures
from trainplan.terms.geometry import TokenShape
from trainplan.units import format_count, format_gib, format_int, format_percent


def batch_line(batch: Batch, sample: TokenShape | None = None) -> str:
    """'Global batch 65.5K tok = 1 micro x 16 accum x 1 replicas x 4,096 seq', or for an image /
    clip model 'Global batch 16 images = 1 micro x 16 accum x 1 replicas; 1024x1024 px -> 4,096
    tokens + 512 text'."""
    if sample is not None:
        what = samples_word(sample)
        frames = f" x {sample.frames} frames" if sample.frames > 1 else ""
        text = f" + {format_int(sample.text_tokens)} text" if sample.text_tokens else ""
        return (
            f"Global batch {format_int(batch.global_sequences)} {what} = {batch.micro_batch} micro"
            f" x {batch.grad_accum} accum x {batch.replicas} replicas; {sample.width_px}x{sample.height_px}"
            f" px{frames} -> {format_int(sample.image_tokens)} tokens{text}"
        )
    return (
        f"Global batch {format_count(batch.global_tokens)} tok = {batch.micro_batch} micro"
        f" x {batch.grad_accum} accum x {batch.replicas} replicas x {format_int(batch.seq_len)} seq"
    )


def params_line(result: Estimate) -> str:
    """'Trainable 6.82M of 8.03B params (0.08% of base)'."""
    params = result.params
    approx = " (approximate: see the notes)" if result.approximations else ""
    return (
        f"Trainable {format_count(params.trainable)} of {format_count(params.total)} params "
        f"({format_percent(params.trainable_fraction)} of base){approx}"
    )


def fit_summary(result: Estimate) -> str:
    """'Fits 9 of 30 catalog GPUs'."""
    fitting = sum(row.fits for row in result.fit)
    return f"Fits {fitting} of {len(result.fit)} catalog GPUs at {format_gib(result.total_bytes)} per GPU"


_VOWEL_SOUND_LETTERS = frozenset("AEFHILMNORSX")  # letter names that start with a vowel sound


def with_article(name: str) -> str:
    """'an RTX A6000', 'an H100', 'a T4', 'a GeForce RTX 4090', 'an Instinct MI300X'. A name
    that starts with an initialism (capitals and digits) is read letter by letter."""
    first = name.split(" ", 1)[0]
    spelled = first.isupper() or any(char.isdigit() for char in first)
    vowel = first[:1].upper() in _VOWEL_SOUND_LETTERS if spelled else first[:1].lower() in "aeiou"
    return f"{'an' if vowel else 'a'} {name}"


def gpus_phrase(result: Estimate) -> str:
    """'8x H100 SXM 80GB': the GPUs a time or cost figure assumes."""
    return f"{result.scenario.gpus}x {result.gpu}"


def format_duration(seconds: float) -> str:
    """'3.2 h', '4.1 d', '12 min', '45 s'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def runtime_lines(result: Estimate) -> list[str]:
    """Compact time / cost / energy / load summary."""
    lines = []
    time, cost, energy, load = result.time, result.cost, result.energy, result.load
    if time is None:
        lines.append(f"Time: {result.gpu} has no tensor-core rate for {result.scenario.precision}")
    else:
        what = samples_word(result.sample)
        amount = (
            f"{format_count(time.train_samples)} {what}"
            if time.train_samples is not None
            else f"{format_count(time.train_tokens)} tokens"
        )
        speed = (
            f"{time.samples_per_s_per_gpu:,.2f} {what}/s per GPU"
            if time.samples_per_s_per_gpu is not None
            else f"{format_count(time.tokens_per_s)} tok/s"
        )
        lines.append(
            f"Time on {gpus_phrase(result)}: {format_duration(time.total_s)} for {amount} "
            f"({format_int(time.steps)} steps of {time.step.total:.2f} s), "
            f"{speed}, {time.gpu_hours:,.1f} GPU-hours, "
            f"MFU {time.mfu:.1%} (efficiency {time.efficiency:.2f}, {time.efficiency_source}); "
            f"largest overhead: {time.step.dominant_overhead()}"
        )
    if cost is not None:
        if cost.usd is None:
            lines.append(f"Cost: {cost.rate_source}")
        else:
            rate = f"${cost.usd_per_gpu_hour:,.2f}/GPU-h"
            price = (
                f"{cost.pricing}: {rate} on-demand less {cost.discount:.0%}"
                if round(cost.discount, 2) > 0
                else f"{cost.pricing} at {rate}"
            )
            unit = (
                f"${cost.usd_per_thousand_samples:,.3f} per 1,000 {samples_word(result.sample)}"
                if cost.usd_per_thousand_samples is not None
                else f"${cost.usd_per_million_tokens:,.3f} per million tokens"
            )
            lines.append(f"Cost on {gpus_phrase(result)}: ${cost.usd:,.0f} {price}, {unit}")
            lines.append(f"  rate: {rate_line(cost)}")
    if energy is not None and energy.kwh is not None and energy.co2e_kg is not None:
        lines.append(
            f"Energy: {energy.kwh:,.0f} kWh, {energy.co2e_kg:,.0f} kg CO2e in {energy.region} "
            f"({energy.gco2e_per_kwh:.0f} g/kWh; PUE {energy.pue}, host +{energy.host_overhead:.0%})"
        )
    if load is not None:
        mode = "sharded parallel" if load.parallel else "single stream"
        lines.append(f"Load weights: {format_duration(load.seconds)} from {load.source} ({mode})")
    return lines


def samples_word(sample: TokenShape | None) -> str:
    """'images' or 'clips': what an image / clip model's samples are called."""
    return "clips" if sample is not None and sample.frames > 1 else "images"


def rate_line(cost: CostFigures) -> str:
    """Where the hourly rate and the discount come from, with the price's date and staleness."""
    text = cost.rate_source if cost.quotes is None else f"estimate, {cost.rate_source}"
    if cost.discount_range is not None:
        low, high = cost.discount_range
        text += f"; {cost.pricing} discount {cost.discount:.0%} (sources give {low:.0%}-{high:.0%})"
    return text
