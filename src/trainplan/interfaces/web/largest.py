"""`POST /api/estimate?max=FIELD`: the largest micro-batch or sequence length that fits.

The search is `trainplan.engine.largest_fit.largest_that_fits`, the same one as `trainplan estimate --max`:
doubling, then bisection over `estimate()`, bounded by the field's range (micro_batch <= 65536,
seq_len <= 10,000,000: at most about 50 estimates), with `headroom` of the GPU's memory left free
and the answer rounded down to a useful multiple.
"""

from __future__ import annotations

from typing import Literal, get_args

from trainplan.engine.largest_fit import DEFAULT_HEADROOM, largest_that_fits
from trainplan.engine.result import Largest
from trainplan.specs.model import ModelSpec
from trainplan.specs.scenario import Scenario

MaxField = Literal["micro_batch", "seq_len"]
MAX_FIELDS: tuple[str, ...] = get_args(MaxField)  # the keys of search.SEARCHABLE (a test checks)


def largest(
    scenario: Scenario,
    field: str,
    model: ModelSpec | None,
    headroom: float = DEFAULT_HEADROOM,
    past_context: bool = False,
) -> Largest:
    """The answer at the largest `field` value that fits (its estimate, and the `max` object of
    the CLI's `--json`); an InputError on `max` when not even 1 fits. A sequence stops at the
    model's context window unless `past_context`."""
    return largest_that_fits(scenario, field, model, headroom, past_context)
