"""How a figure is known: `exact` (arithmetic from the config and the settings) or `estimate`
(a model of what the software does, checked against measurements)."""

from __future__ import annotations

__all__ = ["ESTIMATE", "EXACT"]

EXACT = "exact"
ESTIMATE = "estimate"
