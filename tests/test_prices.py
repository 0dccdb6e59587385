"""The GPU price index: loader validation, the median, staleness, discounts, the `prices` command,
the planner's unpriced GPUs and the bounds of a user's own rate."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from datetime import date
from typing import Any

import pytest
from typer.testing import CliRunner

from trainplan.engine.plan import plan
from trainplan.engine.plan_request import DEFAULT_VENDORS, PlanRequest
from trainplan.engine.time_cost_energy import cost_figures, discount_for, discount_range
from trainplan.inputs.catalogs.cost_inputs import discounts, no_price_reasons, rates
from trainplan.inputs.catalogs.gpus import find_gpu, gpu_catalog
from trainplan.inputs.catalogs.prices import (
    STALE_AFTER_DAYS,
    build_index,
    is_stale,
    median,
    parse_date,
    price_index,
    price_to_dict,
)
from trainplan.interfaces.cli.main import app
from trainplan.interfaces.text.plans import explain, result_to_dict
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import Scenario, scenario_from_mapping

TODAY = date(2026, 12, 1)


def tiny() -> dict[str, Any]:
    """A two-GPU price file written by hand: GPU A priced by three quotes plus an index quote,
    GPU B unpriced."""
    quote = {
        "provider": "P",
        "provider_class": "gpu-cloud",
        "offering": "1x A",
        "date": "2026-10-01",
        "source": "s",
    }
    discount = {
        "fraction_off": 0.5,
        "low": 0.4,
        "high": 0.6,
        "basis": "b",
        "sources": ["s"],
        "as_of": "2026-10",
    }
    classes = {name: dict(discount) for name in ("hyperscaler", "gpu-cloud", "marketplace")}
    return {
        "compiled": "2026-11-30",
        "sources": {"s": {"address": "example.org/prices", "read": "2026-10-01"}},
        "gpus": [
            {
                "gpu": "A",
                "quotes": [
                    {**quote, "usd_per_gpu_hour": 3.0},
                    {**quote, "provider": "Q", "usd_per_gpu_hour": 1.0, "date": "2026-05"},
                    {
                        **quote, "provider": "Cloud", "provider_class": "hyperscaler", "offering": "8x A",
                        "instance_usd_per_hour": 80.0, "gpus_per_instance": 8, "usd_per_gpu_hour": 10.0,
                        "region": "us-east-1",
                    },
                    {**quote, "provider": "Index", "provider_class": "index", "usd_per_gpu_hour": 99.0},
                ],
            }
        ],
        "no_price": [{"gpu": "B", "reason": "nobody rents it"}],
        "discounts": {
            "spot": {"default_class": "gpu-cloud", "classes": copy.deepcopy(classes)},
            "committed": {"default_class": "hyperscaler", "classes": copy.deepcopy(classes)},
        },
    }  # fmt: skip


def test_median_by_hand() -> None:
    # odd count: the middle of 1 2 3; even count: the mean of the two middle values of 1 2 3 4
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0
    with pytest.raises(ValueError):
        median([])


def test_tiny_index_default_price() -> None:
    index = build_index(tiny(), ["A", "B"])
    price = index.prices["A"]
    # counted quotes 3.0, 1.0 and 80 / 8 = 10.0; the index quote (99) is not counted: median 3.0
    assert [q.usd_per_gpu_hour for q in price.counted] == [3.0, 1.0, 10.0]
    assert price.usd_per_gpu_hour == 3.0
    assert price.as_of == "2026-10-01" and price.oldest == "2026-05"
    assert price.basis() == "median of 3 on-demand quotes (2026-05 .. 2026-10-01)"
    assert index.no_price == {"B": "nobody rents it"}
    assert (
        index.discounts["spot"].fraction_off == 0.5
        and index.discounts["committed"].default_class == "hyperscaler"
    )


def test_staleness_with_an_injected_today() -> None:
    # 2026-05-18 + 183 days = 2026-11-17: still fresh that day, stale from the next
    assert not is_stale(date(2026, 5, 18), date(2026, 11, 17))
    assert is_stale(date(2026, 5, 18), date(2026, 11, 18))
    assert STALE_AFTER_DAYS == 183
    # a month-only date counts from the first of the month
    assert parse_date("2026-05", "x") == date(2026, 5, 1)
    index = build_index(tiny(), ["A", "B"])
    data = price_to_dict(index.prices["A"], today=date(2026, 12, 1))
    stale = {q["provider"]: q["stale"] for q in data["quotes"]}
    assert stale == {"P": False, "Q": True, "Cloud": False, "Index": False}
    assert data["stale"] is False  # the newest counted quote (2026-10-01) is 61 days old
    assert price_to_dict(index.prices["A"], today=date(2027, 6, 1))["stale"] is True
    assert price_to_dict(index.prices["A"], today=date(2027, 6, 1), max_age_days=365)["stale"] is False


def _broken(change: Any) -> dict[str, Any]:
    data = tiny()
    change(data)
    return data


def _quote0(data: dict[str, Any]) -> dict[str, Any]:
    quote: dict[str, Any] = data["gpus"][0]["quotes"][0]
    return quote


@pytest.mark.parametrize(
    ("change", "text"),
    [
        (lambda d: _quote0(d).pop("date"), "missing keys ['date']"),
        (lambda d: _quote0(d).pop("source"), "missing keys ['source']"),
        (lambda d: _quote0(d).update(source="nowhere"), "not a key of `sources`"),
        (lambda d: _quote0(d).update(colour="red"), "unknown keys ['colour']"),
        (lambda d: _quote0(d).update(date="Sept 2026"), "is not YYYY-MM-DD"),
        (lambda d: _quote0(d).update(date=""), "date must be a non-empty string"),
        (lambda d: _quote0(d).update(date="2026-02-30"), "not a calendar date"),
        (lambda d: _quote0(d).update(usd_per_gpu_hour=0), "is not between 0.001 and 1000"),
        (lambda d: _quote0(d).update(usd_per_gpu_hour=-2.5), "is not between 0.001 and 1000"),
        (lambda d: _quote0(d).update(usd_per_gpu_hour=1500), "is not between 0.001 and 1000"),
        (lambda d: _quote0(d).update(provider_class="cloud"), "provider_class 'cloud'"),
        (lambda d: _quote0(d).update(instance_usd_per_hour=80.0), "together"),
        (lambda d: d["gpus"][0]["quotes"][2].update(usd_per_gpu_hour=11.0), "80.0 / 8 GPUs"),
        (lambda d: d["gpus"][0].update(quotes=[d["gpus"][0]["quotes"][3]]), "no on-demand quote"),
        (lambda d: d["no_price"].append({"gpu": "A", "reason": "x"}), "priced and unpriced ['A']"),
        (lambda d: d["no_price"].clear(), "missing ['B']"),
        (lambda d: d["no_price"].append({"gpu": "Z", "reason": "x"}), "unknown ['Z']"),
        (lambda d: d["sources"]["s"].pop("read"), "missing keys ['read']"),
        (lambda d: d["discounts"]["spot"]["classes"]["gpu-cloud"].update(low=0.55), "low <= fraction_off"),
        (lambda d: d["discounts"]["spot"]["classes"].pop("marketplace"), "classes must be exactly"),
        (lambda d: d["discounts"]["spot"].update(default_class="index"), "not a class"),
    ],
)
def test_loader_refuses_bad_data(change: Any, text: str) -> None:
    with pytest.raises(RuntimeError) as error:
        build_index(_broken(change), ["A", "B"])
    assert text in str(error.value)


def test_bundled_index() -> None:
    index = price_index()
    catalog = {gpu.name for gpu in gpu_catalog()}
    assert set(index.prices) | set(index.no_price) == catalog
    assert not set(index.prices) & set(index.no_price)
    assert len(index.prices) == 32
    assert set(index.no_price) == {
        "H20 96GB",
        "Instinct MI250X (per GCD)",
        "TPU v5p",
        "GB300 (per Blackwell Ultra GPU, NVL72)",
    }
    for price in index.prices.values():
        for quote in price.quotes:
            assert quote.date and quote.source_address and quote.provider and quote.offering
            assert 0 < quote.usd_per_gpu_hour <= 1000
    assert all(reason.strip() for reason in index.no_price.values())
    # consumer and datacenter GPUs alike are priced
    assert {find_gpu(name).gpu_class for name in index.prices} == {"consumer", "workstation", "datacenter"}


def test_h100_price_by_hand() -> None:
    # H100 SXM counted quotes, sorted: 2.25 2.4024 2.69 2.69 2.71 3.20 3.90 | 3.99 3.99 4.50 6.155
    # 6.88 10.9791 12.29 (14; the AIMultiple index median 2.95 is not counted) -> (3.90 + 3.99) / 2
    rate = rates()["H100 SXM 80GB"]
    assert rate.quotes == 14
    assert rate.usd_per_gpu_hour == pytest.approx(3.945, abs=1e-9)
    # CoreWeave 8-GPU node 49.24 / 8 = 6.155 is the per-GPU price kept beside the instance price
    coreweave = next(q for q in price_index().prices["H100 SXM 80GB"].quotes if q.provider == "CoreWeave")
    assert (coreweave.instance_usd_per_hour, coreweave.gpus_per_instance) == (49.24, 8)
    assert coreweave.usd_per_gpu_hour == pytest.approx(49.24 / 8)


def test_second_round_prices_by_hand() -> None:
    # RTX 6000 Ada, sorted: Vast.ai 0.6015 | RunPod 0.74 | RunPod 0.84 | Verda 1.04 -> (0.74 + 0.84) / 2
    ada = rates()["RTX 6000 Ada Generation"]
    assert ada.quotes == 4 and ada.usd_per_gpu_hour == pytest.approx(0.79, abs=1e-9)
    # L4, sorted: 0.3252 0.44 0.49 | 0.7992 0.8048 0.9213 -> (0.49 + 0.7992) / 2
    assert rates()["L4"].usd_per_gpu_hour == pytest.approx(0.6446, abs=1e-9)
    # one Vast.ai quote whose offering names its two offers: (0.0763 + 0.0822) / 2
    assert rates()["GeForce RTX 4060 Ti 16GB"].usd_per_gpu_hour == pytest.approx(0.07925, abs=1e-9)
    # per-instance prices are divided and both figures kept: trn2.48xlarge 35.76 / 16 chips,
    # p3dn.24xlarge 31.212 / 8 V100s; the V100 32GB median is the midpoint of 0.17 and 3.9015
    index = price_index()
    (trn2,) = index.prices["Trainium2"].quotes
    assert (trn2.instance_usd_per_hour, trn2.gpus_per_instance) == (35.76, 16)
    assert trn2.usd_per_gpu_hour == pytest.approx(35.76 / 16)
    p3dn = next(q for q in index.prices["Tesla V100 SXM2 32GB"].quotes if q.provider == "AWS")
    assert p3dn.usd_per_gpu_hour == pytest.approx(31.212 / 8)
    assert rates()["Tesla V100 SXM2 32GB"].usd_per_gpu_hour == pytest.approx((0.17 + 31.212 / 8) / 2)
    # the January 2026 AWS snapshot is stale on 2026-12-01 (314 days > 183); Trainium2's price is too
    assert index.prices["Trainium2"].stale(TODAY) and not index.prices["L4"].stale(TODAY)


def test_tpu_prices_by_hand() -> None:
    # v5litepod-8 node meters divided by 8 chips: 9.60 / 8 = 1.20 (US), 12.48 / 8 = 1.56 (europe-west4);
    # two quotes, so the median is their midpoint (1.20 + 1.56) / 2 = 1.38
    index = price_index()
    v5e = index.prices["TPU v5e"].quotes
    assert sorted((q.instance_usd_per_hour, q.gpus_per_instance) for q in v5e) == [(9.60, 8), (12.48, 8)]
    assert sorted(q.usd_per_gpu_hour for q in v5e) == pytest.approx([1.20, 1.56])
    assert rates()["TPU v5e"].quotes == 2
    assert rates()["TPU v5e"].usd_per_gpu_hour == pytest.approx(1.38, abs=1e-9)
    # Trillium, sorted: 2.70 (GA, 2024) | 2.70 (US, 2026) | 2.97 (europe-west4) -> the middle one, 2.70
    trillium = rates()["TPU v6e (Trillium)"]
    assert trillium.quotes == 3 and trillium.usd_per_gpu_hour == pytest.approx(2.70, abs=1e-9)
    # checked 2026-04-27, 218 days before 2026-12-01 (> 183): stale like every Google TPU quote here
    assert (TODAY - date(2026, 4, 27)).days == 218
    assert index.prices["TPU v5e"].stale(TODAY) and index.prices["TPU v6e (Trillium)"].stale(TODAY)


def test_amd_prices_by_hand() -> None:
    # MI325X: TensorWave 1.95 and DigitalOcean 3.80 -> (1.95 + 3.80) / 2 = 2.875; the DigitalOcean
    # quote of 2026-09-23 is 69 days old on 2026-12-01, so the price is no longer stale as a whole
    mi325x = rates()["Instinct MI325X"]
    assert mi325x.quotes == 2 and mi325x.usd_per_gpu_hour == pytest.approx(2.875, abs=1e-9)
    assert (TODAY - date(2026, 9, 23)).days == 69
    index = price_index()
    assert not index.prices["Instinct MI325X"].stale(TODAY)
    # MI355X: one Oracle list price per GPU
    mi355x = rates()["Instinct MI355X"]
    assert mi355x.quotes == 1 and mi355x.usd_per_gpu_hour == pytest.approx(8.60, abs=1e-9)


def test_gaudi3_price_by_hand() -> None:
    # Intel Tiber bm-gnr-gaudi3-smc: 19.92 USD an hour for 8 cards -> 2.49 per card, from documentation
    # published 2025-02-28, 641 days before 2026-12-01 and so stale
    (quote,) = price_index().prices["Gaudi 3 (OAM HL-325L)"].quotes
    assert (quote.instance_usd_per_hour, quote.gpus_per_instance) == (19.92, 8)
    assert quote.usd_per_gpu_hour == pytest.approx(19.92 / 8) and quote.usd_per_gpu_hour == pytest.approx(
        2.49
    )
    assert (TODAY - date(2025, 2, 28)).days == 641
    assert price_index().prices["Gaudi 3 (OAM HL-325L)"].stale(TODAY)


def test_discounts_per_class_and_overrides() -> None:
    spot = discounts()["spot"]
    assert spot.default_class == "gpu-cloud" and spot.fraction_off == spot.classes["gpu-cloud"].fraction_off
    for discount in discounts().values():
        for row in discount.classes.values():
            assert 0 <= row.low <= row.fraction_off <= row.high < 1 and row.sources
    base = Scenario(pricing="spot")
    assert discount_for(base) == spot.fraction_off
    assert discount_range(base) == (spot.default.low, spot.default.high)
    given = dataclasses.replace(base, spot_discount=0.3)
    assert discount_for(given) == 0.3 and discount_range(given) is None
    assert discount_range(Scenario()) is None


def test_cost_figures_say_how_the_rate_was_formed() -> None:
    gpu = find_gpu("MI300X")
    scenario = Scenario(gpu="MI300X")
    fresh = cost_figures(scenario, gpu, None, today=date(2026, 10, 8))
    assert fresh.quotes == 6 and fresh.price_as_of == "2026-10-07" and fresh.price_stale is False
    assert "median of 6 on-demand quotes" in fresh.rate_source
    stale = cost_figures(scenario, gpu, None, today=date(2027, 6, 1))
    assert stale.price_stale is True and "stale: newest quote 2026-10-07" in stale.rate_source
    own = cost_figures(dataclasses.replace(scenario, usd_per_gpu_hour=2.0), gpu, None, today=TODAY)
    assert own.quotes is None and own.price_stale is None and own.rate_source == "user-given rate"


@pytest.mark.parametrize("raw", [0, "0", -1, "-0.5", "nan", "inf", 1000.01, "1e6"])
def test_own_rate_bounds(raw: Any) -> None:
    with pytest.raises(InputError) as error:
        scenario_from_mapping({"usd_per_gpu_hour": raw})
    assert error.value.field == "usd_per_gpu_hour"
    assert "between 0.001 and 1,000" in error.value.message or "finite" in error.value.message


def test_own_rate_accepted_at_the_bounds() -> None:
    assert scenario_from_mapping({"usd_per_gpu_hour": 1000}).usd_per_gpu_hour == 1000
    assert scenario_from_mapping({"usd_per_gpu_hour": "0.001"}).usd_per_gpu_hour == 0.001


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_prices_command_one_gpu() -> None:
    result = invoke("prices", "H100", "--today", "2026-12-01")
    assert result.exit_code == 0
    assert "H100 SXM 80GB" in result.output and "3.95" in result.output and "14" in result.output
    assert "CoreWeave" in result.output and "Discounts" in result.output
    data = json.loads(invoke("prices", "H100", "--today", "2026-12-01", "--json").output)
    assert [row["gpu"] for row in data["prices"]] == ["H100 SXM 80GB"] and data["no_price"] == []
    price = data["prices"][0]
    assert price["usd_per_gpu_hour"] == pytest.approx(3.945) and price["quotes_in_median"] == 14
    assert price["kind"] == "estimate" and len(price["quotes"]) == 15
    assert sum(not quote["in_median"] for quote in price["quotes"]) == 1  # the index quote
    assert data["today"] == "2026-12-01" and data["stale_after_days"] == 183
    assert set(data["discounts"]) == {"spot", "committed"}


def test_prices_command_staleness_and_filters() -> None:
    old = json.loads(invoke("prices", "MI300X", "--today", "2026-12-01", "--json").output)
    assert {q["provider"]: q["stale"] for q in old["prices"][0]["quotes"]}["TensorWave"] is True
    later = json.loads(invoke("prices", "H100", "--today", "2027-06-01", "--json").output)
    assert later["prices"][0]["stale"] is True
    lenient = json.loads(
        invoke("prices", "H100", "--today", "2027-06-01", "--stale-after-days", "400", "--json").output
    )
    assert lenient["prices"][0]["stale"] is False
    everything = json.loads(invoke("prices", "--json", "--today", "2026-12-01").output)
    assert len(everything["prices"]) + len(everything["no_price"]) == len(gpu_catalog())
    unpriced = json.loads(invoke("prices", "H20", "--json").output)
    assert unpriced["prices"] == [] and unpriced["no_price"][0]["reason"] == no_price_reasons()["H20 96GB"]
    text = invoke("prices", "H20").output
    assert "no default price" in text and "usd_per_gpu_hour" in text
    amd = json.loads(invoke("prices", "amd", "--json").output)
    assert {row["gpu"] for row in amd["prices"]} == {"Instinct MI300X", "Instinct MI325X", "Instinct MI355X"}
    assert [row["gpu"] for row in amd["no_price"]] == ["Instinct MI250X (per GCD)"]


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("prices", "H900"), "Did you mean"),
        (("prices", "H100", "--today", "1 Dec"), "today"),
        (("prices", "--stale-after-days", "0"), "stale_after_days"),
    ],
)
def test_prices_command_errors(args: tuple[str, ...], text: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2 and text in result.output and "Traceback" not in result.output


def test_planner_searches_every_priced_gpu_and_names_the_rest() -> None:
    base = Scenario(model="Qwen2.5-0.5B", method="lora", seq_len=512, train_tokens=1e7)
    request = PlanRequest(
        base=base, max_gpus=1, objective="cost", micro_batches=(1,), tensor_parallel=(1,),
        pipeline_parallel=(1,), zero_stages=(0,), checkpointing=("none",), offloads=("none",), top_k=40,
    )  # fmt: skip
    result = plan(request)
    # unpriced among the vendors searched by default (a TPU v5p is left out as a TPU)
    default_unpriced = {name for name in no_price_reasons() if find_gpu(name).vendor in DEFAULT_VENDORS}
    assert default_unpriced and "TPU v5p" in no_price_reasons() and "TPU v5p" not in default_unpriced
    assert set(result.unpriced) == default_unpriced and not result.unpriced_searched
    searched = {p.scenario.gpu for p in result.plans}
    assert "GeForce RTX 4090" in searched and not searched & set(no_price_reasons())
    assert all(find_gpu(name).vendor in DEFAULT_VENDORS for name in searched)
    cheapest = result.plans[0]
    assert all(cheapest.usd is not None and p.usd is not None and cheapest.usd <= p.usd for p in result.plans)
    assert any("Left out for lack of a price" in line for line in explain(result))
    assert result_to_dict(result)["unpriced"] == list(result.unpriced)
    named = plan(dataclasses.replace(request, gpu_types=("L40S", "H20 96GB")))
    assert named.unpriced == ("H20 96GB",) and named.unpriced_searched
    assert named.rejected.get("no price for this GPU", 0) > 0
    assert any("not compared on cost" in line for line in explain(named))
    own_rate = plan(dataclasses.replace(request, base=dataclasses.replace(base, usd_per_gpu_hour=1.0)))
    assert own_rate.unpriced == ()
    assert math.isfinite(own_rate.plans[0].usd or math.nan)
