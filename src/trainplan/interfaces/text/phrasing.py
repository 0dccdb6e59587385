"""Text renderings shared by the CLI and the web page (no engine logic here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.engine.result import (
    CONTEXT_WINDOW,
    Batch,
    Estimate,
    FitRow,
    Largest,
    json_tree,
    largest_round,
    rollout_rounds,
)
from trainplan.engine.terms.geometry import TokenShape
from trainplan.engine.time_cost_energy import CostFigures
from trainplan.specs.scenario import field_noun
from trainplan.specs.stages import CRITIC_STAGES
from trainplan.specs.units import format_count, format_gib, format_int, format_percent

#: The labels of a result's notes: a setting with no effect here, and an approximate model reading.
NOTE, APPROXIMATE = "note", "approximate"


def batch_line(batch: Batch, sample: TokenShape | None = None) -> str:
    """'Global batch 65.5K tok = 1 micro x 16 accum x 1 replicas x 4,096 seq' (and '; each
    sequence over 2 GPUs' under context parallelism), or for an image /
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
    if batch.generations:
        prompts = format_int(batch.prompts_per_step or 0)
        each = (
            "one per prompt"
            if batch.generations == 1
            else f"{prompts} prompts x {batch.generations} generations"
        )
        return (
            f"Global batch {format_int(batch.global_sequences)} completions ({each}), "
            f"{format_count(batch.global_tokens)} tok = "
            f"{batch.micro_batch} micro x {batch.grad_accum} accum x {batch.replicas} replicas x "
            f"{format_int(batch.seq_len)} seq"
        )
    if batch.sequences_per_sample > 1:
        return (
            f"Global batch {format_count(batch.global_tokens)} tok = {batch.micro_batch} micro pairs"
            f" x {batch.grad_accum} accum x {batch.replicas} replicas x {batch.sequences_per_sample}"
            f" x {format_int(batch.seq_len // batch.sequences_per_sample)} seq"
        )
    split = f"; each sequence over {batch.context_parallel} GPUs" if batch.context_parallel > 1 else ""
    return (
        f"Global batch {format_count(batch.global_tokens)} tok = {batch.micro_batch} micro"
        f" x {batch.grad_accum} accum x {batch.replicas} replicas x {format_int(batch.seq_len)} seq{split}"
    )


def rollout_summary(result: Estimate) -> str:
    """A rollout stage's engine in a few words (`rollout_words`); '' without a rollout."""
    figures = result.rollout
    return rollout_words(json_tree(figures.rollout)) if figures is not None else ""


def rollout_words(settings: Mapping[str, Any]) -> str:
    """An engine's settings (memory.rollout's JSON) in a few words: 'vLLM colocated at 0.3, tp 1',
    'vLLM on 2 GPUs of its own, tp 2', 'transformers generate'."""
    if settings["engine"] == "hf":
        return "transformers generate"
    tp = settings["tensor_parallel"]
    if settings["placement"] == "colocate":
        asleep = ", asleep while training" if settings["sleep"] else ""
        return f"vLLM colocated at {settings['memory_fraction']:g}, tp {tp}{asleep}"
    return f"vLLM on {settings['engine_gpus']} GPUs of its own, tp {tp}"


def stage_line(result: Estimate) -> str | None:
    """Each pipeline rank's peak and the micro-batches it holds, the worst marked, e.g.
    'Pipeline stages, each rank's peak: stage 0 47.00 GiB (4 micro-batches in flight; the
    worst), stage 1 36.20 GiB (3), ...';
    none without pipelining."""
    if len(result.stages) < 2:
        return None
    worst = max(result.stages, key=lambda stage: stage.peak.total).stage
    parts = [
        f"stage {stage.stage} {format_gib(stage.peak.total)} ({stage.micro_batches_in_flight:g}"
        + (" micro-batches in flight; the worst" if stage.stage == worst else "")
        + ")"
        for stage in result.stages
    ]
    return "Pipeline stages, each rank's peak: " + ", ".join(parts)


def rollout_lines(result: Estimate) -> list[str]:
    """A rollout stage's engine and rounds, e.g. 'Rollout: vLLM colocated at 0.3, tp 1: 23.89 GiB
    of each engine GPU (weights 2.87 GiB, activations 0.51 GiB, KV cache 20.51 GiB: 777K tokens, 759
    sequences of 1,024 at once)' and 'Rounds: rollout 27.45 GiB, scoring 27.75 GiB, training
    31.34 GiB (peak)'; none without a rollout."""
    figures = result.rollout
    if figures is None:
        return []
    engine = figures.engine
    sequence = format_int(engine.sequence_tokens)
    if figures.rollout.forward_batch:  # PPO
        first = (
            f"Rollout: transformers' generate on the policy, {format_int(engine.concurrent)} prompts at "
            f"a time (KV cache {format_gib(engine.kv_cache_bytes)} for sequences of {sequence}); the "
            f"generated fp32 logits of the {format_int(engine.sequences)} completions are kept through "
            f"scoring and training, {format_gib(figures.held_logits_bytes)}, "
            f"{format_gib(figures.generation_logits_bytes)} while the next ones are generated"
        )
    elif engine.engine == "hf":
        first = (
            f"Rollout: transformers' generate on the policy, {format_gib(engine.total_bytes)} per "
            f"process (KV cache {format_gib(engine.kv_cache_bytes)} for {format_int(engine.sequences)} "
            f"sequences of {sequence}, logits {format_gib(engine.activation_bytes)})"
        )
    else:
        first = (
            f"Rollout: {rollout_summary(result)}: {format_gib(engine.budget_bytes)} of each engine GPU "
            f"(weights {format_gib(engine.weights_bytes)}, activations "
            f"{format_gib(engine.activation_bytes)}, KV cache {format_gib(max(engine.kv_cache_bytes, 0.0))}: "
            f"{format_count(engine.kv_tokens)} tokens, {format_int(engine.max_sequences)} sequences of "
            f"{sequence} at once)"
        )
    rounds = rollout_rounds(result)
    peak = largest_round(rounds)
    second = "Rounds: " + ", ".join(
        f"{name} {format_gib(phase.total)}" + (" (peak)" if name == peak else "")
        for name, phase in rounds.items()
    )
    lines = [first, second]
    if result.scenario.stage in CRITIC_STAGES:
        critic, reward = result.state_bytes("critic"), result.state_bytes("reward_model")
        value_name, reward_name = result.assumptions["value_model"], result.assumptions["reward_model"]
        lines.append(
            f"Value model ({value_name}) on each GPU {format_gib(critic)} (weights, gradients and "
            f"optimizer state, trained with the policy); reward model ({reward_name}) "
            f"{format_gib(reward)}, frozen"
        )
    return lines


def params_line(result: Estimate) -> str:
    """'Trainable 6.82M of 8.03B params (0.08% of base)'."""
    params = result.params
    approx = f" ({APPROXIMATE}: see the notes)" if result.approximations else ""
    return (
        f"Trainable {format_count(params.trainable)} of {format_count(params.total)} params "
        f"({format_percent(params.trainable_fraction)} of base){approx}"
    )


def fit_summary(result: Estimate) -> str:
    """'Fits 9 of 30 catalog GPUs' ('listed GPUs' where the table holds one of your own, or a
    catalog GPU with the memory you gave it)."""
    fitting = sum(row.fits for row in result.fit)
    record = result.assumptions.get("gpu_record") or {}
    listed = "listed" if record.get("from", "catalog") != "catalog" or record.get("overrides") else "catalog"
    return f"Fits {fitting} of {len(result.fit)} {listed} GPUs at {format_gib(result.total_bytes)} per GPU"


def free_text(free_bytes: float) -> str:
    """'12.34 GiB free', or 'short 1.20 GiB' when the peak is over the GPU's memory."""
    return f"{format_gib(free_bytes)} free" if free_bytes >= 0 else f"short {format_gib(-free_bytes)}"


def fit_verdict(result: Estimate) -> str:
    """'fits H100 SXM 80GB (12.34 GiB free)' or 'does not fit T4 (short 1.20 GiB)': the chosen GPU."""
    row = result.chosen_fit
    verb = "fits" if row.fits else "does not fit"
    return f"{verb} {row.gpu} ({free_text(row.free_bytes)})"


def fit_group_lines(result: Estimate) -> dict[str, str]:
    """'Consumer: 3 of 10 fit' for each GPU class, in the fit table's order."""
    groups: dict[str, list[FitRow]] = {}
    for row in result.fit:
        groups.setdefault(row.gpu_class, []).append(row)
    return {
        name: f"{name.capitalize()}: {sum(row.fits for row in rows)} of {len(rows)} fit"
        for name, rows in groups.items()
    }


def note_lines(result: Estimate) -> list[tuple[str, str]]:
    """(label, text) for every warning and every approximation of the result, in that order."""
    return [(NOTE, text) for text in result.warnings] + [
        (APPROXIMATE, text) for text in result.approximations
    ]


def trainable_detail(result: Estimate) -> str:
    """'0.08% of 8.03B params (LoRA adapters)'."""
    params, method = result.params, result.scenario.method
    what = "every weight" if method == "full" else f"{'QLoRA' if method == 'qlora' else 'LoRA'} adapters"
    approx = f"; {APPROXIMATE}: see the notes" if result.approximations else ""
    return (
        f"{format_percent(params.trainable_fraction)} of {format_count(params.total)} params ({what}){approx}"
    )


def weights_detail(result: Estimate) -> str:
    """'frozen base in nf4, plus adapters' or 'trainable weights, bf16', and "; this GPU's share"
    where ZeRO-3, tensor or pipeline parallelism splits the weights over several GPUs."""
    s = result.scenario
    base = result.assumptions.get("base_weights")
    text = f"frozen base in {base}, plus adapters" if base else f"trainable weights, {s.precision}"
    sharded = s.zero_stage == 3 or s.tensor_parallel > 1 or s.pipeline_parallel > 1
    return text + ("; this GPU's share" if sharded and s.gpus > 1 else "")


def largest_line(found: Largest) -> str:
    """'Largest micro-batch that fits on H100 SXM 80GB with 5% of its memory free: 24 (61.20 GiB of
    79.65 GiB); the limit is 27, rounded down to a multiple of 8'."""
    result = found.estimate
    free = f" with {found.headroom:.0%} of its memory free" if found.headroom else ""
    held = f" ({format_gib(result.total_bytes)} of {format_gib(result.chosen_fit.memory_bytes)})"
    rounded = (
        f"; the limit is {found.exact:,}, rounded down to a multiple of {found.multiple}"
        if found.value != found.exact
        else ""
    )
    if found.limit == CONTEXT_WINDOW:
        return (
            f"Largest {field_noun(found.field)}: {found.value:,}, {result.model_name}'s context window, "
            f"fits on {result.gpu}{free}{held}; past it the model has no trained positions "
            "(--past-context searches further)"
        )
    return (
        f"Largest {field_noun(found.field)} that fits on {result.gpu}{free}: {found.value:,}{held}{rounded}"
    )


def recipe_line(result: Estimate) -> str | None:
    """'recipe torchtune (0.6) set: lora.dtype=bf16'; without a recipe, the adapter dtype a
    model's kind took from one ('lora.dtype=compute: the diffusers recipe's, the default for a
    diffusion model (...)'); None when neither applies."""
    recipe = result.assumptions.get("recipe")
    if not recipe:
        adapters = result.assumptions.get("adapter_dtype")
        if adapters and adapters["recipe"]:
            return f"lora.dtype={adapters['value']}: {adapters['source']}; set lora.dtype to change it"
        return None
    applied = ", ".join(f"{key}={value}" for key, value in recipe["defaults"].items()) or "nothing new"
    return f"recipe {recipe['name']} ({recipe['version']}) set: {applied}"


def format_usd(usd: float) -> str:
    """'$1,234' from $100 up, '$12.34' below."""
    return f"${usd:,.0f}" if abs(usd) >= 100 else f"${usd:,.2f}"


def format_kwh(kwh: float) -> str:
    """'12.3' below 1,000 kWh, '1,234' from there."""
    return f"{kwh:,.1f}" if kwh < 1000 else f"{kwh:,.0f}"


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
        lines.append(f"Time: {no_time_text(result)}")
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
            price, unit = _price_and_unit_cost(result, cost)
            lines.append(f"Cost on {gpus_phrase(result)}: {format_usd(cost.usd)} {price}, {unit}")
            lines.append(f"  rate: {rate_line(cost)}")
    if energy is not None and energy.kwh is not None and energy.co2e_kg is not None:
        lines.append(
            f"Energy: {energy.kwh:,.0f} kWh, {energy.co2e_kg:,.0f} kg CO2e in {energy.region} "
            f"({energy.gco2e_per_kwh:.0f} g/kWh; PUE {energy.pue}, host +{energy.host_overhead:.0%})"
        )
    if load is not None:
        lines.append(
            f"Load weights: {format_duration(load.seconds)} from {load.source} ({load_mode(result)})"
        )
    if time is not None:
        lines.append(f"Fixed per run: {fixed_text(result)}; {run_text(result)} in all")
    return lines


def fixed_text(result: Estimate) -> str:
    """'2 min (launch 120 s, loading the weights 2 s, 123 checkpoint writes of 0.08 GiB 1 s)':
    the run's time outside its training steps, by part."""
    if result.time is None:
        return ""
    fixed = result.time.fixed
    writes = (
        f"{format_int(fixed.checkpoint_writes)} checkpoint write{'s' if fixed.checkpoint_writes != 1 else ''}"
    )
    return (
        f"{format_duration(fixed.total)} (launch {format_duration(fixed.launch_s)}, loading the weights "
        f"{format_duration(fixed.load_s)}, {writes} of {format_gib(fixed.checkpoint_bytes)} "
        f"{format_duration(fixed.checkpoints_s)})"
    )


def run_text(result: Estimate) -> str:
    """'2.3 d, $217.72': the whole run, training steps and fixed time, and its cost."""
    if result.time is None:
        return ""
    cost = result.cost.run_usd if result.cost is not None else None
    return format_duration(result.time.run_s) + (f", {format_usd(cost)}" if cost is not None else "")


def no_time_text(result: Estimate) -> str:
    """Why there is no time: 'T4 has no tensor-core rate for bf16'."""
    return f"{result.gpu} has no tensor-core rate for {result.scenario.precision}"


def load_mode(result: Estimate) -> str:
    """'sharded parallel' or 'single stream': how the checkpoint is read."""
    return "sharded parallel" if result.load is not None and result.load.parallel else "single stream"


def _price_and_unit_cost(result: Estimate, cost: CostFigures) -> tuple[str, str]:
    """('spot: $2.69/GPU-h on-demand less 30%', '$0.123 per million tokens')."""
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
    return price, unit


def cost_detail(result: Estimate) -> str:
    """The price and the unit cost of a priced run ('on-demand at $2.69/GPU-h; $0.123 per million
    tokens'), or where a price would come from when there is none."""
    cost = result.cost
    if cost is None:
        return ""
    if cost.usd is None:
        return cost.rate_source
    price, unit = _price_and_unit_cost(result, cost)
    return f"{price}; {unit}"


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


# How each planner objective orders the plans (the Pareto front is listed fastest first).
_RANKINGS = {
    "time": "fastest first",
    "cost": "cheapest first",
    "energy": "least energy first",
    "pareto": "cost vs time, fastest first",
    "gpus": "fewest GPUs first",
}


def plans_heading(count: int, objective: str) -> str:
    """'5 best plans, cheapest first', or that no plan meets the constraints."""
    if count == 0:
        return "No plan meets the constraints"
    return f"{count} best plan{'s' if count != 1 else ''}, {_RANKINGS[objective]}"


def device_parts(result: Estimate) -> list[tuple[str, float]]:
    """The parts of the memory outside the caching allocator, named (none where the scenario set
    its own overhead figure)."""
    device = result.device
    if device is None or device.flat:
        return []
    parts = [("CUDA context", float(device.context)), ("cuBLAS workspace", float(device.workspace))]
    count = int(device.communicators)
    if count:
        plural = "s" if count > 1 else ""
        parts.append((f"NCCL buffers, {count} communicator{plural}", float(device.nccl)))
    return parts
