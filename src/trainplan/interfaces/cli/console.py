"""Human-readable terminal output with rich (tables), and JSON listings of the catalogs."""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from trainplan.engine.result import Estimate
from trainplan.interfaces.text.phrasing import (
    APPROXIMATE,
    NOTE,
    batch_line,
    device_parts,
    fit_summary,
    fit_verdict,
    format_kwh,
    format_usd,
    free_text,
    note_lines,
    params_line,
    recipe_line,
    rollout_lines,
    runtime_lines,
    stage_line,
)
from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.scenario import data_parallel
from trainplan.specs.stages import SUPERVISED_STAGES, stage_name
from trainplan.specs.units import format_count, format_gib

if TYPE_CHECKING:
    from trainplan.interfaces.text.hints import Hint  # loaded only where hints are asked for


def savers_text(checkpointing: str, offload: str) -> str:
    """'ckpt full, offload optimizer' in a plan row; '-' when neither is used."""
    parts = [f"ckpt {checkpointing}"] if checkpointing != "none" else []
    parts += [f"offload {offload}"] if offload != "none" else []
    return ", ".join(parts) or "-"


def no_match(what: str, query: str, names: list[str]) -> str:
    """'no model matches 'zzzz'; did you mean: ...?' (or where to see the list)."""
    from trainplan.specs.errors import suggest

    close = suggest(query, names)
    hint = (
        f"; did you mean: {', '.join(close)}?" if close else f"; run `trainplan {what.lower()}s` for the list"
    )
    return f"no {what} matches {shown_value(query)}{hint}"


def print_estimate(result: Estimate, console: Console | None = None) -> None:
    """Memory table, parameter line, batch line and the fit table."""
    console = console or Console()
    stage = "" if result.scenario.stage in SUPERVISED_STAGES else f"{stage_name(result.scenario.stage)}, "
    console.print(
        f"[bold]{result.model_name}[/] — {stage}{result.scenario.method}, "
        f"{result.scenario.precision}, {result.scenario.optimizer}"
    )
    console.print(params_line(result))
    table = Table(title=f"Memory per GPU (peak during {result.peak.name})")
    table.add_column("term")
    table.add_column("GiB", justify="right")
    table.add_column("kind")
    for term in result.peak.terms:
        if term.name == "rollout" and result.rollout is None:
            continue  # the engine's row only where the stage generates
        table.add_row(term.name, f"{term.value / 2**30:,.2f}", term.kind)
        if term.name == "weights" and result.reference_bytes:
            table.add_row(
                "  of it the frozen reference model", f"{result.reference_bytes / 2**30:,.2f}", "exact"
            )
        if term.name == "temporaries" and result.stream_pool_bytes:
            table.add_row(
                "  reserved by FSDP2's side streams", f"{result.stream_pool_bytes / 2**30:,.2f}", "estimate"
            )
        if term.name == "overhead":
            for label, value in device_parts(result):
                table.add_row(f"  {label}", f"{value / 2**30:,.2f}", "estimate")
    # the three figures: the device's used memory (fits is decided on it), the caching
    # allocator's pool (max_memory_reserved) and the live tensors (max_memory_allocated)
    table.add_row("[bold]total on the device[/]", f"[bold]{result.total_bytes / 2**30:,.2f}[/]", "")
    table.add_row("of it reserved (allocator)", f"{result.reserved_peak_bytes / 2**30:,.2f}", "estimate")
    table.add_row("of it live tensors (allocated)", f"{result.allocated_peak_bytes / 2**30:,.2f}", "estimate")
    if result.paged_bytes:
        # unified memory, outside the total: the driver pages it to the host under pressure
        table.add_row("paged optimizer state (outside)", f"{result.paged_bytes / 2**30:,.2f}", "exact")
    console.print(table)
    phases = ", ".join(f"{phase.name} {format_gib(phase.total)}" for phase in result.phases)
    console.print(f"Phases: {phases}")
    stages = stage_line(result)
    if stages:
        console.print(stages)
    for line in rollout_lines(result):
        console.print(line)
    if result.cpu_offload_bytes:
        console.print(f"CPU memory for offloaded state: {format_gib(result.cpu_offload_bytes)}")
    console.print(batch_line(result.batch, result.sample))
    for line in runtime_lines(result):
        console.print(line)
    fit = Table(title="Can you train it?")
    for column in ("GPU", "class", "memory", "free", ""):
        fit.add_column(column, justify="right" if column in ("memory", "free") else "left")
    for row in result.fit:
        fit.add_row(
            row.gpu,
            row.gpu_class,
            format_gib(row.memory_bytes),
            free_text(row.free_bytes),
            "[green]fits[/]" if row.fits else "[red]does not fit[/]",
        )
    console.print(fit)
    console.print(f"{fit_summary(result)}; the chosen GPU: {fit_verdict(result)}")
    recipe = recipe_line(result)
    if recipe:
        console.print(recipe)
    for label, text in note_lines(result):
        console.print(f"[yellow]{label}:[/] {text}")


def print_hints(found: list[Hint], console: Console | None = None) -> None:
    """The page's "worth knowing" list: each change of one setting and what its estimate gives."""
    console = console or Console()
    if not found:
        console.print("Worth knowing: no single change of a setting helps here.")
        return
    console.print("[bold]Worth knowing[/] (each a full estimate with that one change):")
    for hint in found:
        change = ", ".join(f"{name}={value}" for name, value in hint.change.items())
        console.print(f"- {hint.title} ({change}): {hint.text}", markup=False, highlight=False)


def print_models(query: str, as_json: bool, kind: str | None = None) -> None:
    """Catalog models whose name, family or Hub id contains `query`, of `kind` (llm, diffusion,
    video, jepa) when given."""
    from trainplan.inputs.catalogs.models import model_records
    from trainplan.inputs.resolve import catalog_spec
    from trainplan.specs.model import MODEL_KINDS

    if kind is not None and kind not in MODEL_KINDS:
        raise InputError(
            "family", f"{shown_value(kind)} is not a model family; choose one of {', '.join(MODEL_KINDS)}"
        )
    needle = query.lower()
    rows = [
        r
        for r in model_records()
        if (needle in r.name.lower() or needle in r.family.lower() or needle in r.hub_id.lower())
        and (kind is None or catalog_spec(r.name).kind == kind)
    ]
    if as_json:
        from trainplan.interfaces.listings import model_listing

        print(json.dumps(model_listing(rows), indent=2))
        return
    if not rows:
        print(no_match("model", query, [r.name for r in model_records()]))
        return
    table = Table(title=f"{len(rows)} models")
    for column in ("name", "family", "params", "modality", "hub id"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.name, r.family, format_count(r.published_params), r.modality, r.hub_id)
    Console().print(table)


def print_gpus(query: str, as_json: bool) -> None:
    """Catalog GPUs whose name, alias, vendor or class contains `query`."""
    from trainplan.inputs.catalogs.gpus import matching_gpus

    rows = matching_gpus(query)
    if as_json:
        from trainplan.interfaces.listings import gpu_listing

        print(json.dumps(gpu_listing(rows), indent=2))
        return
    if not rows:
        from trainplan.inputs.catalogs.gpus import gpu_catalog

        print(no_match("GPU", query, [g.name for g in gpu_catalog()]))
        return
    table = Table(title=f"{len(rows)} GPUs")
    for column in ("name", "class", "memory", "bf16 dense TFLOP/s", "TDP W"):
        table.add_column(column)
    for g in rows:
        bf16 = g.dense_flops_per_s.get("bf16")
        table.add_row(
            g.name,
            g.gpu_class,
            format_gib(g.memory_bytes),
            f"{bf16 / 1e12:,.0f}" if bf16 else "-",
            f"{g.tdp_w:,.0f}" if g.tdp_w else "-",
        )
    Console().print(table)


def print_measurement(comparison: Any, console: Console | None = None) -> None:
    """Measured vs estimated, term by term, with what a trace cannot see; the trace alone, with
    the reason, while the model's memory is not estimated."""
    console = console or Console()
    measured = comparison.measured
    estimate = comparison.estimate
    name = estimate.model_name if estimate is not None else comparison.model_name
    title = "traced step vs estimate" if estimate is not None else "traced step"
    table = Table(title=f"{name}: {title} (GiB)")
    columns = (
        ("term", "measured", "estimated", "difference") if estimate is not None else ("term", "measured")
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "term" else "right")
    for term, measured_bytes, estimated_bytes in comparison.terms():
        row = [term, f"{measured_bytes / 2**30:,.2f}"]
        if estimated_bytes is not None:
            difference = (
                f"{estimated_bytes / measured_bytes - 1:+.1%}"
                if measured_bytes
                else f"{estimated_bytes / 2**30:+.2f}"
            )
            row += [f"{estimated_bytes / 2**30:,.2f}", difference]
        table.add_row(*row)
    console.print(table)
    where = f"Measured peak during {measured.peak_phase} (step {measured.peak_step})"
    if estimate is not None:
        where += f"; estimated peak during {(estimate.allocated_peak or estimate.peak).name}"
    console.print(where + ".")
    if measured.reserved_peak_bytes:
        # what max_memory_reserved would show for the traced allocations (the allocator's rules)
        console.print(
            f"Reserved (modelled: the caching allocator's rules over the traced allocations): "
            f"{measured.reserved_peak_bytes / 2**30:,.2f} GiB, "
            f"{measured.reserved_peak_bytes / measured.peak_bytes - 1:+.1%} over the allocated peak; "
            f"with expandable segments {measured.reserved_peak_expandable_bytes / 2**30:,.2f} GiB."
        )
        if comparison.reserved_error is not None and estimate is not None:
            # the estimate's reserved figure on the same one stream (its cache_fraction)
            console.print(
                f"Estimated reserved (one stream): "
                f"{(estimate.reserved_peak_bytes - estimate.stream_pool_bytes) / 2**30:,.2f} GiB, "
                f"{comparison.reserved_error:+.1%} against the modelled figure."
            )
    for note in (*comparison.notes, *measured.notes):
        console.print(f"[yellow]{NOTE}:[/] {note}")


def print_plan(result: Any, console: Console | None = None) -> None:
    """The ranked plans as a table, then why the winner wins. The figures a reader compares
    (memory, time, cost) never wrap. GiB is the device figure the fit is decided on; on a wide
    terminal (100 columns or more) the allocator's reserved and allocated figures follow it, and
    kWh."""
    from rich import box

    from trainplan.inputs.catalogs.gpus import find_gpu
    from trainplan.interfaces.text.phrasing import format_duration, plans_heading, rollout_summary
    from trainplan.interfaces.text.plans import explain

    console = console or Console()
    wide = console.width >= 100
    table = Table(
        title=plans_heading(len(result.plans), result.objective),
        caption="layout: tensor/pipeline/data parallel and ZeRO stage; batch: micro-batch x accumulation",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    columns = [
        ("#", True), ("method", False), ("GPUs", False), ("layout", True), ("batch", True),
        ("savers", False), ("GiB", True),
    ] + ([("res/alloc", True)] if wide else []) + [
        ("time", True), ("cost", True),
    ] + ([("kWh", True)] if wide else [])  # fmt: skip
    for column, figure in columns:
        table.add_column(column, justify="right" if figure else "left", no_wrap=figure, overflow="fold")
    for rank, plan in enumerate(result.plans, 1):
        s = plan.scenario
        dp = data_parallel(s)
        row = [
            str(rank),
            s.method,
            f"{s.gpus}x {find_gpu(s.gpu).short_name}",
            f"{s.tensor_parallel}/{s.pipeline_parallel}/{dp}"
            + (f" cp{s.context_parallel}" if s.context_parallel > 1 else "")
            + (f" HSDP{s.data_parallel_replicate}" if s.data_parallel_replicate > 1 else "")
            + f" Z{s.zero_stage}",
            f"{s.micro_batch}x{s.grad_accum}",
            "; ".join(
                part
                for part in (
                    savers_text(s.activation_checkpointing, s.offload),
                    rollout_summary(plan.estimate),
                )
                if part and part != "-"
            )
            or "-",
            f"{plan.estimate.total_bytes / 2**30:,.1f}",
        ]
        if wide:
            estimate = plan.estimate
            row.append(
                f"{estimate.reserved_peak_bytes / 2**30:,.1f}/{estimate.allocated_peak_bytes / 2**30:,.1f}"
            )
        row += [format_duration(plan.total_s), format_usd(plan.usd) if plan.usd is not None else "-"]
        if wide:
            row.append(format_kwh(plan.kwh) if plan.kwh else "-")
        table.add_row(*row)
    console.print(table)
    for line in explain(result):
        console.print(line)
    # one model, one set of notes
    for label, text in note_lines(result.plans[0].estimate) if result.plans else ():
        if label == APPROXIMATE:
            console.print(f"[yellow]{label}:[/] {text}")


def print_regions(query: str, as_json: bool) -> None:
    """Grid regions whose id, name or kind contains `query`, with gCO2e/kWh, year and source."""
    from trainplan.inputs.catalogs.cost_inputs import matching_regions, regions

    rows = matching_regions(query)
    if as_json:
        from trainplan.interfaces.listings import region_listing

        print(json.dumps(region_listing(rows), indent=2))
        return
    if not rows:
        print(no_match("region", query, [r.name for r in regions().values()] + list(regions())))
        return
    table = Table(title=f"{len(rows)} regions")
    for column in ("id", "name", "kind", "gCO2e/kWh", "year"):
        table.add_column(column, justify="right" if column in ("gCO2e/kWh", "year") else "left")
    for r in rows:
        table.add_row(r.id, r.name, r.kind, f"{r.gco2e_per_kwh:,.0f}", str(r.year))
    Console().print(table)


def print_prices(names: list[str], as_json: bool, today: date, max_age_days: int) -> None:
    """Default prices of the GPUs named, the quotes behind them (when at most three are named),
    the GPUs without a price and why, and the spot/committed discounts per provider class."""
    from trainplan.inputs.catalogs.prices import index_to_dict

    data = index_to_dict(names, today, max_age_days)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    console = Console()
    console.print(
        f"Price index compiled {data['compiled']}; a quote older than {max_age_days} days before "
        f"{data['today']} is stale. Prices are estimates: the median of each GPU's on-demand quotes."
    )
    if data["prices"]:
        table = Table(title=f"{len(data['prices'])} priced GPUs (USD per GPU-hour, on-demand)")
        for column in ("GPU", "$/GPU-h", "quotes", "as of", ""):
            table.add_column(column, justify="right" if column in ("$/GPU-h", "quotes") else "left")
        for row in data["prices"]:
            table.add_row(
                row["gpu"], f"{row['usd_per_gpu_hour']:,.2f}", str(row["quotes_in_median"]), row["as_of"],
                "[yellow]stale[/]" if row["stale"] else "",
            )  # fmt: skip
        console.print(table)
    if len(data["prices"]) <= 3:
        for row in data["prices"]:
            for line in _quote_lines(row):
                console.print(line, soft_wrap=True, highlight=False)
            for flag in row["flags"]:
                console.print(f"[yellow]{NOTE}:[/] {flag}")
            used = {quote["source_key"]: quote["source"] for quote in row["quotes"]}
            for key, address in used.items():
                console.print(f"  [bold]{key}[/]: {address}", soft_wrap=True)
    elif data["prices"]:
        console.print("Name one GPU (`trainplan prices H100`) to see the quotes behind its price.")
    for row in data["no_price"]:
        console.print(f"[bold]{row['gpu']}[/]: no default price ({row['reason']}); set usd_per_gpu_hour")
    console.print(_discount_table(data["discounts"]))


def _quote_lines(price: dict[str, Any]) -> list[str]:
    """'  $2.69  RunPod (gpu-cloud): H100 SXM, Community Cloud; 2026-11-09 [runpod-datareceipts]'."""
    lines = [f"[bold]{price['gpu']}[/]: ${price['usd_per_gpu_hour']:,.2f}/GPU-h, {price['basis']}"]
    for quote in price["quotes"]:
        where = f", {quote['region']}" if quote["region"] else ""
        stale = " [yellow]stale[/]" if quote["stale"] else ""
        counted = "" if quote["in_median"] else " (not in the median)"
        lines.append(
            f"  ${quote['usd_per_gpu_hour']:g}  {quote['provider']} ({quote['provider_class']}{where}): "
            f"{quote['offering']}{counted}; {quote['date']}{stale} \\[{quote['source_key']}]"
        )
    return lines


def _discount_table(discounts: dict[str, Any]) -> Table:
    table = Table(title="Discounts off on-demand (the default class applies to the default price)")
    for column in ("plan", "class", "default", "range", "as of"):
        table.add_column(column)
    for plan, discount in discounts.items():
        for name, row in discount["classes"].items():
            marker = " (default)" if name == discount["default_class"] else ""
            table.add_row(
                plan, name + marker, f"{row['fraction_off']:.0%}", f"{row['low']:.0%} - {row['high']:.0%}",
                row["as_of"],
            )  # fmt: skip
    return table


def print_config_reading(reading: Any, console: Console | None = None) -> None:
    """How the training configs were read: each file's format, where every field came from, and
    every setting that set nothing, with the reason. One plain print: rich's per-line layout
    would cost more than reading the files."""
    console = console or Console()
    lines = [f"Read {name} as {kind}" for name, kind in reading.files]
    lines += [f"  {source}" for source in reading.provenance]
    if reading.ignored:
        lines.append("Ignored")
        lines += [f"  {skipped.file}: {skipped}" for skipped in reading.ignored]
    console.print("\n".join(lines) + "\n", markup=False, highlight=False, soft_wrap=True)


def plan_header(plan: Any) -> list[str]:
    """What an emitted config fragment was estimated as: the model and layout, then the
    estimates (peak memory per GPU, time, cost)."""
    from trainplan.interfaces.text.phrasing import format_duration

    s = plan.scenario
    cost = f", {format_usd(plan.usd)}" if plan.usd is not None else ""
    return [
        f"trainplan plan: {s.model}, {s.method}, {s.gpus} x {s.gpu}, {s.precision}, seq_len {s.seq_len}",
        f"estimated: peak {format_gib(plan.estimate.total_bytes)} per GPU, "
        f"{format_duration(plan.total_s)}{cost} (estimates, not measurements)",
        "only the settings the plan decides; merge them into your own config",
    ]
