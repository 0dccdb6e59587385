"""Human-readable terminal output with rich (tables), and JSON listings of the catalogs."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table

from trainplan.render import batch_line, fit_summary, params_line, runtime_lines
from trainplan.result import Estimate
from trainplan.units import format_count, format_gib


def print_estimate(result: Estimate, console: Console | None = None) -> None:
    """Memory table, parameter line, batch line and the fit table."""
    console = console or Console()
    console.print(
        f"[bold]{result.model_name}[/] — {result.scenario.method}, "
        f"{result.scenario.precision}, {result.scenario.optimizer}"
    )
    console.print(params_line(result))
    table = Table(title=f"Memory per GPU (peak during {result.peak.name})")
    table.add_column("term")
    table.add_column("GiB", justify="right")
    table.add_column("kind")
    for term in result.peak.terms:
        table.add_row(term.name, f"{term.value / 2**30:,.2f}", term.kind)
        if term.name == "optimizer" and result.paged_bytes:
            table.add_row("  paged: may spill to host", f"{result.paged_bytes / 2**30:,.2f}", "exact")
    table.add_row("[bold]total[/]", f"[bold]{result.total_bytes / 2**30:,.2f}[/]", "")
    console.print(table)
    phases = ", ".join(f"{phase.name} {format_gib(phase.total)}" for phase in result.phases)
    console.print(f"Phases: {phases}")
    if result.cpu_offload_bytes:
        console.print(f"CPU memory for offloaded state: {format_gib(result.cpu_offload_bytes)}")
    console.print(batch_line(result.batch))
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
            format_gib(row.free_bytes),
            "[green]fits[/]" if row.fits else "[red]does not fit[/]",
        )
    console.print(fit)
    console.print(fit_summary(result))
    recipe = result.assumptions.get("recipe")
    if recipe:
        applied = ", ".join(f"{key}={value}" for key, value in recipe["defaults"].items()) or "nothing new"
        console.print(f"recipe {recipe['name']} ({recipe['version']}) set: {applied}")
    for warning in result.warnings:
        console.print(f"[yellow]note:[/] {warning}")
    for note in result.approximations:
        console.print(f"[yellow]approximate:[/] {note}")


def print_models(query: str, as_json: bool) -> None:
    """Catalog models whose name, family or Hub id contains `query`."""
    from trainplan.catalog import model_records

    needle = query.lower()
    rows = [
        r
        for r in model_records()
        if needle in r.name.lower() or needle in r.family.lower() or needle in r.hub_id.lower()
    ]
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "family": r.family,
                        "hub_id": r.hub_id,
                        "modality": r.modality,
                        "published_params": r.published_params,
                        "source": r.published_params_source,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return
    table = Table(title=f"{len(rows)} models")
    for column in ("name", "family", "params", "modality", "hub id"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.name, r.family, format_count(r.published_params), r.modality, r.hub_id)
    Console().print(table)


def print_gpus(query: str, as_json: bool) -> None:
    """Catalog GPUs whose name, alias, vendor or class contains `query`."""
    from trainplan.gpus import gpu_catalog

    needle = query.lower()
    rows = [
        g
        for g in gpu_catalog()
        if not needle or any(needle in text.lower() for text in (g.name, g.vendor, g.gpu_class, *g.aliases))
    ]
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "name": g.name,
                        "class": g.gpu_class,
                        "memory_bytes": g.memory_bytes,
                        "aliases": list(g.aliases),
                        "dense_flops_per_s": g.dense_flops_per_s,
                        "tdp_w": g.tdp_w,
                        "source": g.source,
                        "as_of": g.as_of,
                    }
                    for g in rows
                ],
                indent=2,
            )
        )
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
    """Measured vs estimated, term by term, with what a trace cannot see."""
    console = console or Console()
    measured = comparison.measured
    table = Table(title=f"{comparison.estimate.model_name}: traced step vs estimate (GiB)")
    for column in ("term", "measured", "estimated", "difference"):
        table.add_column(column, justify="left" if column == "term" else "right")
    for name, measured_bytes, estimated_bytes in comparison.terms():
        difference = (
            f"{estimated_bytes / measured_bytes - 1:+.1%}"
            if measured_bytes
            else f"{estimated_bytes / 2**30:+.2f}"
        )
        table.add_row(name, f"{measured_bytes / 2**30:,.2f}", f"{estimated_bytes / 2**30:,.2f}", difference)
    console.print(table)
    console.print(
        f"Measured peak during {measured.peak_phase} (step {measured.peak_step}); "
        f"estimated peak during {comparison.estimate.peak.name}."
    )
    for note in (*comparison.notes, *measured.notes):
        console.print(f"[yellow]note:[/] {note}")


def print_plan(result: Any, console: Console | None = None) -> None:
    """The ranked plans as a table, then why the winner wins."""
    from trainplan.plan import explain

    console = console or Console()
    table = Table(title=f"Best plans by {result.objective}")
    for column in (
        "#",
        "method",
        "GPUs",
        "tp/pp/dp",
        "ZeRO",
        "micro x accum",
        "ckpt",
        "offload",
        "GiB/GPU",
        "time",
        "cost",
        "kWh",
    ):
        table.add_column(
            column, justify="right" if column not in ("method", "GPUs", "ckpt", "offload") else "left"
        )
    from trainplan.render import format_duration

    for rank, plan in enumerate(result.plans, 1):
        s = plan.scenario
        dp = s.gpus // (s.tensor_parallel * s.pipeline_parallel)
        table.add_row(
            str(rank),
            s.method,
            f"{s.gpus} x {s.gpu}",
            f"{s.tensor_parallel}/{s.pipeline_parallel}/{dp}",
            str(s.zero_stage),
            f"{s.micro_batch} x {s.grad_accum}",
            s.activation_checkpointing,
            s.offload,
            f"{plan.estimate.total_bytes / 2**30:,.1f}",
            format_duration(plan.total_s),
            f"${plan.usd:,.0f}" if plan.usd is not None else "-",
            f"{plan.kwh:,.0f}" if plan.kwh else "-",
        )
    console.print(table)
    for line in explain(result):
        console.print(line)


def print_regions(query: str, as_json: bool) -> None:
    """Grid regions whose id, name or kind contains `query`, with gCO2e/kWh, year and source."""
    from trainplan.tables import regions

    needle = query.lower()
    rows = [r for r in regions().values() if needle in f"{r.id} {r.name} {r.kind}".lower()]
    if as_json:
        print(json.dumps([
            {"id": r.id, "name": r.name, "kind": r.kind, "gco2e_per_kwh": r.gco2e_per_kwh,
             "year": r.year, "source": r.source}
            for r in rows
        ], indent=2))  # fmt: skip
        return
    table = Table(title=f"{len(rows)} regions")
    for column in ("id", "name", "kind", "gCO2e/kWh", "year"):
        table.add_column(column, justify="right" if column in ("gCO2e/kWh", "year") else "left")
    for r in rows:
        table.add_row(r.id, r.name, r.kind, f"{r.gco2e_per_kwh:,.0f}", str(r.year))
    Console().print(table)
