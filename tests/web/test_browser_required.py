"""CI installs Chromium and sets TRAINPLAN_REQUIRE_BROWSER=1 (.ci/run): a browser that is missing
there fails the run instead of skipping every browser test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def test_a_missing_browser_fails_where_required_and_skips_elsewhere(
    tmp_path: Path, browser_check: Any
) -> None:
    need_browser = browser_check
    absent = tmp_path / "chromium"
    with pytest.raises(pytest.fail.Exception, match="chromium is absent"):
        need_browser(absent, required=True)
    with pytest.raises(pytest.skip.Exception):
        need_browser(absent, required=False)
    absent.write_text("")
    need_browser(absent, required=True)  # present: nothing to say


def test_ci_requires_the_browser() -> None:
    script = (Path(__file__).parents[2] / ".ci" / "run").read_text()
    assert "export TRAINPLAN_REQUIRE_BROWSER=1" in script
    assert script.index("TRAINPLAN_REQUIRE_BROWSER=1") < script.index("make test")
