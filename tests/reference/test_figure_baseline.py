"""Every figure for every catalog model under the baseline scenarios is what
tests/reference/figure_baseline.json records (scripts/figure_baseline.py): a change meant to
move no figure moves none, and one that moves figures rewrites the file, so its diff lists them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from figure_baseline import OUT, differences, figures  # noqa: E402


def test_every_figure_is_the_baselines() -> None:
    lines = differences(json.loads(OUT.read_text()), figures())
    assert not lines, "figures moved (rewrite with scripts/figure_baseline.py if meant):\n" + "\n".join(
        lines[:40]
    )
