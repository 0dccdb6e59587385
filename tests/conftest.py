"""Shared fixtures: small hand-checkable model configs."""

from __future__ import annotations

from typing import Any

import pytest
from configs import LLAMA_8B, TINY_LLAMA


@pytest.fixture
def llama8b_config() -> dict[str, Any]:
    return dict(LLAMA_8B)


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    return dict(TINY_LLAMA)
