"""The GPU price index: dated quotes per GPU, a default price computed from them, spot and
committed discounts per provider class, and staleness. Data: data/prices.yaml.

Default on-demand price of a GPU (an estimate of what renting one costs): the sample median of
its quotes from hyperscalers, GPU clouds and marketplaces, each quote already per GPU-hour
(an instance price divided by its GPU count). The median is the middle value of the sorted
prices, or the mean of the two middle values when there is an even number of them; it is robust
to the few hyperscaler list prices that sit 2-4x above the rest. Quotes from a price index
(provider class `index`) already aggregate many providers, so they are shown beside the median
and not counted in it.

Staleness: a quote is stale when its date lies more than `max_age_days` before `today` (183
days, about 6 months, by default); a date given to the month counts from the first of that month,
so it turns stale no later than a day-precise one. A default price is stale when even its newest
counted quote is.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from trainplan.specs.errors import InputError, shown_value
from trainplan.specs.loader import load_yaml
from trainplan.specs.loader import require as _require
from trainplan.specs.scenario import USD_PER_GPU_HOUR_RANGE

PROVIDER_CLASSES = ("hyperscaler", "gpu-cloud", "marketplace", "index")
MEDIAN_CLASSES = ("hyperscaler", "gpu-cloud", "marketplace")
DISCOUNT_CLASSES = MEDIAN_CLASSES
PLANS = ("spot", "committed")
STALE_AFTER_DAYS = 183
QUOTE_KEYS = ("provider", "provider_class", "offering", "usd_per_gpu_hour", "date", "source")
QUOTE_OPTIONAL = ("region", "instance_usd_per_hour", "gpus_per_instance")
INSTANCE_TOLERANCE = 0.005  # instance price / GPUs must match the per-GPU price within 0.5%
_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")


@lru_cache(maxsize=1024)
def parse_date(text: str, where: str) -> datetime.date:
    """'2026-09-20' or '2026-09' (the first of the month) -> date; anything else is a data error."""
    match = _DATE.match(text)
    if not match:
        raise RuntimeError(f"{where}: date {text!r} is not YYYY-MM-DD or YYYY-MM")
    year, month, day = match.groups()
    try:
        return datetime.date(int(year), int(month), int(day or 1))
    except ValueError:
        raise RuntimeError(f"{where}: date {text!r} is not a calendar date") from None


def parse_today(text: str | None) -> datetime.date:
    """The date staleness is judged against: `text` as YYYY-MM-DD, or the date now when empty."""
    if text is None or not text.strip():
        return datetime.date.today()
    try:
        return datetime.date.fromisoformat(text.strip())
    except ValueError:
        raise InputError("today", f"{shown_value(text)} is not a date in the form YYYY-MM-DD") from None


def median(values: Sequence[float]) -> float:
    """The sample median: the middle of the sorted values, or the mean of the two middle ones."""
    if not values:
        raise ValueError("median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def is_stale(day: datetime.date, today: datetime.date, max_age_days: int = STALE_AFTER_DAYS) -> bool:
    """True when `day` is more than `max_age_days` before `today`."""
    return (today - day).days > max_age_days


@dataclass(frozen=True)
class Quote:
    """One dated price for one GPU from one provider's offering."""

    provider: str
    provider_class: str
    offering: str
    usd_per_gpu_hour: float
    date: str
    source: str
    source_address: str
    region: str | None = None
    instance_usd_per_hour: float | None = None
    gpus_per_instance: int | None = None

    @property
    def day(self) -> datetime.date:
        return parse_date(self.date, self.provider)

    @property
    def counted(self) -> bool:
        """Whether this quote enters the median (index quotes do not)."""
        return self.provider_class in MEDIAN_CLASSES


@dataclass(frozen=True)
class GpuPrice:
    """The quotes of one GPU and the default price they give."""

    gpu: str
    quotes: tuple[Quote, ...]
    flags: tuple[str, ...]

    @property
    def counted(self) -> tuple[Quote, ...]:
        return tuple(q for q in self.quotes if q.counted)

    @property
    def usd_per_gpu_hour(self) -> float:
        return median([q.usd_per_gpu_hour for q in self.counted])

    @property
    def as_of(self) -> str:
        """Date of the newest counted quote."""
        return max(self.counted, key=lambda q: q.day).date

    @property
    def oldest(self) -> str:
        return min(self.counted, key=lambda q: q.day).date

    def stale(self, today: datetime.date, max_age_days: int = STALE_AFTER_DAYS) -> bool:
        return is_stale(parse_date(self.as_of, self.gpu), today, max_age_days)

    def basis(self) -> str:
        """'median of 5 on-demand quotes (2026-08-26 .. 2026-11-09)'."""
        n = len(self.counted)
        span = self.as_of if self.oldest == self.as_of else f"{self.oldest} .. {self.as_of}"
        return f"median of {n} on-demand quote{'s' if n != 1 else ''} ({span})"


@dataclass(frozen=True)
class ClassDiscount:
    """Fraction off on-demand for one plan at one provider class, with the spread sources give."""

    provider_class: str
    fraction_off: float
    low: float
    high: float
    basis: str
    sources: tuple[str, ...]
    as_of: str


@dataclass(frozen=True)
class Discount:
    """Spot or committed discounts per provider class; the default class gives the default."""

    plan: str
    default_class: str
    classes: Mapping[str, ClassDiscount]

    @property
    def default(self) -> ClassDiscount:
        return self.classes[self.default_class]

    @property
    def fraction_off(self) -> float:
        return self.default.fraction_off


@dataclass(frozen=True)
class PriceIndex:
    """The whole price data file, validated."""

    compiled: str
    sources: Mapping[str, str]
    prices: Mapping[str, GpuPrice]
    no_price: Mapping[str, str]
    discounts: Mapping[str, Discount]


def _fraction(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise RuntimeError(f"{where}: {value!r} is not a fraction in [0, 1)")
    return float(value)


def _quote(raw: Any, sources: Mapping[str, str], where: str) -> Quote:
    """One validated quote: known keys, a known class and source, a date, a sane price."""
    if not isinstance(raw, Mapping):
        raise RuntimeError(f"{where}: a quote must be a mapping")
    _require(raw, QUOTE_KEYS, set(QUOTE_KEYS + QUOTE_OPTIONAL), where)
    if raw["provider_class"] not in PROVIDER_CLASSES:
        raise RuntimeError(f"{where}: provider_class {raw['provider_class']!r} not in {PROVIDER_CLASSES}")
    if raw["source"] not in sources:
        raise RuntimeError(f"{where}: source {raw['source']!r} is not a key of `sources`")
    for key in ("provider", "offering", "date", "source"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise RuntimeError(f"{where}: {key} must be a non-empty string")
    parse_date(raw["date"], where)
    price = raw["usd_per_gpu_hour"]
    low, high = USD_PER_GPU_HOUR_RANGE
    if isinstance(price, bool) or not isinstance(price, int | float) or not low <= price <= high:
        raise RuntimeError(f"{where}: usd_per_gpu_hour {price!r} is not between {low:g} and {high:g}")
    instance, count = raw.get("instance_usd_per_hour"), raw.get("gpus_per_instance")
    if (instance is None) != (count is None):
        raise RuntimeError(f"{where}: give instance_usd_per_hour and gpus_per_instance together")
    if instance is not None:
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise RuntimeError(f"{where}: gpus_per_instance must be a positive integer")
        if abs(instance / count - price) > INSTANCE_TOLERANCE * price:
            raise RuntimeError(f"{where}: {instance} / {count} GPUs is not usd_per_gpu_hour {price}")
    return Quote(
        raw["provider"], raw["provider_class"], raw["offering"], float(price), raw["date"],
        raw["source"], sources[raw["source"]], raw.get("region"),
        None if instance is None else float(instance), count,
    )  # fmt: skip


def _discount(plan: str, raw: Any, sources: Mapping[str, str]) -> Discount:
    where = f"prices.yaml discounts.{plan}"
    _require(raw, ("default_class", "classes"), {"default_class", "classes"}, where)
    classes: dict[str, ClassDiscount] = {}
    if set(raw["classes"]) != set(DISCOUNT_CLASSES):
        raise RuntimeError(f"{where}: classes must be exactly {DISCOUNT_CLASSES}")
    for name, row in raw["classes"].items():
        here = f"{where}.{name}"
        keys = ("fraction_off", "low", "high", "basis", "sources", "as_of")
        _require(row, keys, set(keys), here)
        point, low, high = (_fraction(row[k], f"{here}.{k}") for k in ("fraction_off", "low", "high"))
        if not low <= point <= high:
            raise RuntimeError(f"{here}: need low <= fraction_off <= high")
        unknown = [s for s in row["sources"] if s not in sources]
        if not row["sources"] or unknown:
            raise RuntimeError(f"{here}: sources must be keys of `sources` (unknown: {unknown})")
        parse_date(row["as_of"], here)
        classes[name] = ClassDiscount(
            name, point, low, high, row["basis"], tuple(row["sources"]), row["as_of"]
        )
    if raw["default_class"] not in classes:
        raise RuntimeError(f"{where}: default_class {raw['default_class']!r} is not a class")
    return Discount(plan, raw["default_class"], classes)


def build_index(data: Mapping[str, Any], gpu_names: Iterable[str]) -> PriceIndex:
    """Validate the parsed price file against the GPU catalog's names; RuntimeError on any fault."""
    top = ("compiled", "sources", "gpus", "no_price", "discounts")
    _require(data, top, set(top), "prices.yaml")
    parse_date(data["compiled"], "prices.yaml compiled")
    sources: dict[str, str] = {}
    for key, row in data["sources"].items():
        _require(row, ("address", "read"), {"address", "read"}, f"prices.yaml sources.{key}")
        parse_date(row["read"], f"prices.yaml sources.{key}")
        sources[key] = f"{row['address']} (read {row['read']})"
    prices: dict[str, GpuPrice] = {}
    for index, row in enumerate(data["gpus"]):
        where = f"prices.yaml gpus[{index}]"
        _require(row, ("gpu", "quotes"), {"gpu", "quotes", "flags"}, where)
        quotes = tuple(
            _quote(q, sources, f"{where} ({row['gpu']}) quote {i}") for i, q in enumerate(row["quotes"])
        )
        if not any(q.counted for q in quotes):
            raise RuntimeError(f"{where} ({row['gpu']}): no on-demand quote to take a median of")
        if row["gpu"] in prices:
            raise RuntimeError(f"{where}: {row['gpu']!r} listed twice")
        prices[row["gpu"]] = GpuPrice(row["gpu"], quotes, tuple(row.get("flags") or ()))
    no_price: dict[str, str] = {}
    for index, row in enumerate(data["no_price"]):
        _require(row, ("gpu", "reason"), {"gpu", "reason"}, f"prices.yaml no_price[{index}]")
        no_price[row["gpu"]] = row["reason"]
    names = set(gpu_names)
    both = sorted(set(prices) & set(no_price))
    unknown = sorted((set(prices) | set(no_price)) - names)
    missing = sorted(names - set(prices) - set(no_price))
    if both or unknown or missing:
        raise RuntimeError(f"prices.yaml: priced and unpriced {both}, unknown {unknown}, missing {missing}")
    if set(data["discounts"]) != set(PLANS):
        raise RuntimeError(f"prices.yaml discounts: plans must be exactly {PLANS}")
    discounts = {plan: _discount(plan, data["discounts"][plan], sources) for plan in PLANS}
    return PriceIndex(data["compiled"], sources, prices, no_price, discounts)


@cache
def price_index() -> PriceIndex:
    """The bundled price index, validated against gpus.yaml on first use."""
    from trainplan.inputs.catalogs.gpus import gpu_catalog

    return build_index(load_yaml("prices.yaml"), (gpu.name for gpu in gpu_catalog()))


def quote_to_dict(quote: Quote, today: datetime.date, max_age_days: int = STALE_AFTER_DAYS) -> dict[str, Any]:
    """One quote as JSON, with whether it counts in the median and whether it is stale."""
    return {
        "provider": quote.provider,
        "provider_class": quote.provider_class,
        "offering": quote.offering,
        "usd_per_gpu_hour": quote.usd_per_gpu_hour,
        "instance_usd_per_hour": quote.instance_usd_per_hour,
        "gpus_per_instance": quote.gpus_per_instance,
        "region": quote.region,
        "date": quote.date,
        "stale": is_stale(quote.day, today, max_age_days),
        "in_median": quote.counted,
        "source_key": quote.source,
        "source": quote.source_address,
    }


def price_to_dict(
    price: GpuPrice, today: datetime.date, max_age_days: int = STALE_AFTER_DAYS
) -> dict[str, Any]:
    """A GPU's default price, how it was formed, and every quote behind it."""
    return {
        "gpu": price.gpu,
        "usd_per_gpu_hour": price.usd_per_gpu_hour,
        "kind": "estimate",
        "basis": price.basis(),
        "quotes_in_median": len(price.counted),
        "as_of": price.as_of,
        "stale": price.stale(today, max_age_days),
        "flags": list(price.flags),
        "quotes": [quote_to_dict(q, today, max_age_days) for q in price.quotes],
    }


def discounts_to_dict(index: PriceIndex) -> dict[str, Any]:
    """Spot and committed discounts per provider class, with ranges and sources."""
    return {
        plan: {
            "default_class": discount.default_class,
            "fraction_off": discount.fraction_off,
            "classes": {
                name: {
                    "fraction_off": row.fraction_off,
                    "low": row.low,
                    "high": row.high,
                    "as_of": row.as_of,
                    "basis": row.basis,
                    "sources": [index.sources[key] for key in row.sources],
                }
                for name, row in discount.classes.items()
            },
        }
        for plan, discount in index.discounts.items()
    }


def index_to_dict(
    names: Iterable[str], today: datetime.date, max_age_days: int = STALE_AFTER_DAYS
) -> dict[str, Any]:
    """The JSON of `trainplan prices` for the GPUs named (catalog names), in that order."""
    index = price_index()
    chosen = list(names)
    return {
        "compiled": index.compiled,
        "today": today.isoformat(),
        "stale_after_days": max_age_days,
        "prices": [price_to_dict(index.prices[n], today, max_age_days) for n in chosen if n in index.prices],
        "no_price": [{"gpu": n, "reason": index.no_price[n]} for n in chosen if n in index.no_price],
        "discounts": discounts_to_dict(index),
    }
