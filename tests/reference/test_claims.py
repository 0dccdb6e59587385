"""The accuracy claims of calibration/claims.py as a whole: every class of figure has a claim for
each of its splits, with a reason; the cases outside the claims are exactly the declared known
misses (a new miss fails here, and so does a fixed one until it is taken off the list); the
median claims hold; the accuracy page prints every claim and every known miss."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "calibration"))

from claims import (
    CLAIMS,
    FIGURES,
    KNOWN_MISSES,
    Claim,
    KnownMiss,
    claim_for,
    known_miss,
    measured,
    median,
    outside,
    verdict,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("figure", FIGURES)
def test_every_split_of_every_class_has_one_claim(figure: str) -> None:
    rows = measured(figure)
    assert rows, figure
    splits = {row.split for row in rows}
    claimed = [split for claim in CLAIMS if claim.figure == figure for split in claim.splits]
    assert sorted(claimed) == sorted(splits), figure  # each split claimed once, no claim on nothing
    assert len({row.case for row in rows}) == len(rows), "case ids are unique within a class"


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.figure}:{'+'.join(c.splits)}")
def test_claim_is_stated_with_its_reason(claim: Claim) -> None:
    assert claim.figure in FIGURES
    assert 0 < claim.worst < 1
    assert claim.median is None or 0 < claim.median < claim.worst
    if claim.share is not None:
        fraction, bound = claim.share
        assert 0 < fraction < 1 and 0 < bound < claim.worst
    assert len(claim.reason) > 80 and claim.reason.endswith(".")


def test_cases_outside_the_claims_are_exactly_the_known_misses() -> None:
    found = {(figure, row.case) for figure in FIGURES for row in outside(figure)}
    declared = {(miss.figure, miss.case) for miss in KNOWN_MISSES}
    assert found - declared == set(), "new misses: fix them, or declare them in claims.KNOWN_MISSES"
    assert declared - found == set(), "known misses now within the claim: take them off the list"
    assert len(declared) == len(KNOWN_MISSES)


@pytest.mark.parametrize("miss", KNOWN_MISSES, ids=lambda m: f"{m.figure}:{m.case}")
def test_known_miss_is_a_case_outside_its_claim_on_the_side_its_reason_gives(miss: KnownMiss) -> None:
    (row,) = [row for row in measured(miss.figure) if row.case == miss.case]
    assert miss.direction in ("over", "under")
    assert abs(row.error) > claim_for(miss.figure, row.split).worst
    assert (row.error > 0) == (miss.direction == "over")
    assert miss.reason and miss.fix


@pytest.mark.parametrize("figure", FIGURES)
def test_every_case_within_its_claim_or_a_known_miss(figure: str) -> None:
    wrong = [verdict(figure, row.case, row.split, row.error) for row in measured(figure)]
    assert [w for w in wrong if w] == []


@pytest.mark.parametrize(
    "claim", [c for c in CLAIMS if c.median is not None], ids=lambda c: f"{c.figure}:{'+'.join(c.splits)}"
)
def test_median_claim_holds_on_each_split_and_all_together(claim: Claim) -> None:
    assert claim.median is not None
    for split in (*claim.splits, None):
        assert median(claim, split) <= claim.median, (claim.figure, split)


def test_the_verdict_catches_a_new_miss_and_a_fixed_one() -> None:
    claim = claim_for("llm-throughput", "all")
    assert verdict("llm-throughput", "a-new-case", "all", claim.worst * 1.01) is not None
    assert verdict("llm-throughput", "a-new-case", "all", -claim.worst * 0.99) is None
    miss = KNOWN_MISSES[0]
    assert known_miss(miss.figure, miss.case) is miss
    split = next(row.split for row in measured(miss.figure) if row.case == miss.case)
    assert verdict(miss.figure, miss.case, split, 0.0) is not None  # fixed: must come off the list
    wrong_side = -1.0 if miss.direction == "over" else 1.0
    assert verdict(miss.figure, miss.case, split, wrong_side) is not None


def test_accuracy_page_prints_every_claim_and_known_miss() -> None:
    text = (ROOT / "docs" / "accuracy.md").read_text()
    for claim in CLAIMS:
        assert claim.text() in text and claim.reason in text, claim.figure
    for miss in KNOWN_MISSES:
        assert miss.case in text and miss.fix in text, miss.case
