"""Replay a storage event log with hindsight categories: peak, breakdown, per-phase peaks.

Pure Python (no torch), so it can be unit-tested on hand-made logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from trainplan.engine.measure.result import CATEGORIES
from trainplan.engine.terms.allocator import CachingAllocator

ALLOC, FREE, CHECK, PHASE = 0, 1, 2, 3


class Cat(IntEnum):
    """Storage categories, in CATEGORIES order; HOST storages are tracked but not counted (they
    live in host memory)."""

    PARAM = 0
    BUFFER = 1
    GRAD = 2
    OPT = 3
    ACT = 4
    TEMP = 5
    EMA = 6
    HOST = 7


class Rec:
    """One storage: rounded size, when it was born/died (event indices), what it is."""

    __slots__ = ("alloc", "desc", "fixed", "free", "nbytes", "phase", "recomputed", "weight_copy")

    def __init__(self, nbytes: int, alloc: int, phase: int, desc: str) -> None:
        self.nbytes = nbytes
        self.alloc = alloc
        self.free: int | None = None
        self.phase = phase
        self.desc = desc
        self.fixed: Cat | None = None
        self.recomputed = False
        self.weight_copy = False


@dataclass
class Snapshot:
    """Totals per category at one instant, and where that instant was."""

    total: int = -1
    by_cat: list[int] = field(default_factory=lambda: [0] * len(Cat))
    event: int = -1
    check: int = -1
    phase: int = -1
    #: Autocast/frozen-weight low-precision copies alive (a subset of activations + temporaries).
    weight_copies: int = 0

    def breakdown(self) -> dict[str, int]:
        """Category name -> bytes (HOST dropped)."""
        return {name: self.by_cat[i] for i, name in enumerate(CATEGORIES)}


@dataclass
class Replay:
    """Peak over the whole log, peaks per phase, and the instants just before each backward."""

    peak: Snapshot
    phase_peaks: dict[int, Snapshot]
    forward_ends: dict[int, Snapshot]
    cats: list[Cat]
    #: The caching allocator's reserved peak for the same allocations and frees, by its rules
    #: (terms/allocator.py; modelled: fake tensors never reach the allocator), without and with
    #: expandable segments.
    reserved_peak: int = 0
    reserved_peak_expandable: int = 0


def classify(recs: list[Rec], phases: list[tuple[int, str]], phase_start: list[int]) -> list[Cat]:
    """Hindsight category of every record (see tracker module docstring)."""
    backward_start = {step: phase_start[i] for i, (step, kind) in enumerate(phases) if kind == "backward"}
    cats: list[Cat] = []
    for rec in recs:
        if rec.fixed is not None:
            cats.append(rec.fixed)
            continue
        step, kind = phases[rec.phase] if rec.phase >= 0 else (0, "setup")
        if kind == "forward":
            start = backward_start.get(step)
            alive = start is not None and (rec.free is None or rec.free > start)
            cats.append(Cat.ACT if alive else Cat.TEMP)
        elif kind == "backward" and rec.recomputed:
            cats.append(Cat.ACT)
        else:
            cats.append(Cat.TEMP)
    return cats


def replay(recs: list[Rec], kinds: list[int], args: list[int], phases: list[tuple[int, str]]) -> Replay:
    """Walk the events once, keeping running totals per category."""
    phase_start = [0] * len(phases)
    for i, kind in enumerate(kinds):
        if kind == PHASE:
            phase_start[args[i]] = i
    cats = classify(recs, phases, phase_start)
    by_cat = [0] * len(Cat)
    total = 0
    copies = 0
    peak = Snapshot()
    phase_peaks: dict[int, Snapshot] = {}
    forward_ends: dict[int, Snapshot] = {}
    phase = -1
    heaps = (CachingAllocator(), CachingAllocator(expandable_segments=True))
    handles: dict[int, tuple[int, int]] = {}
    for i, kind in enumerate(kinds):
        arg = args[i]
        if kind in (ALLOC, FREE):
            cat = cats[arg]
            if cat is not Cat.HOST:
                delta = recs[arg].nbytes if kind == ALLOC else -recs[arg].nbytes
                by_cat[cat] += delta
                total += delta
                if recs[arg].weight_copy:
                    copies += delta
                if kind == ALLOC:
                    handles[arg] = (heaps[0].malloc(recs[arg].nbytes), heaps[1].malloc(recs[arg].nbytes))
                elif arg in handles:
                    first, second = handles.pop(arg)
                    heaps[0].free(first)
                    heaps[1].free(second)
        elif kind == CHECK:
            # On a tie, the later step wins: its state is the steady one.
            if total > peak.total or (
                total == peak.total and phase >= 0 and phases[phase][0] > phases[peak.phase][0]
            ):
                peak = Snapshot(total, by_cat.copy(), i, arg, phase, copies)
            current = phase_peaks.get(phase)
            if current is None or total > current.total:
                phase_peaks[phase] = Snapshot(total, by_cat.copy(), i, arg, phase, copies)
        else:
            phase = arg
            if phases[arg][1] == "backward":
                forward_ends[arg] = Snapshot(total, by_cat.copy(), i, -1, arg, copies)
    return Replay(peak, phase_peaks, forward_ends, cats, heaps[0].peak_reserved, heaps[1].peak_reserved)


def alive_at(recs: list[Rec], cats: list[Cat], event: int) -> list[int]:
    """Indices of counted records alive just after event index `event`."""
    return [
        i
        for i, rec in enumerate(recs)
        if rec.alloc <= event and (rec.free is None or rec.free > event) and cats[i] is not Cat.HOST
    ]
