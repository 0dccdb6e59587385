"""`direct_init`: a frozen dataclass whose __init__ writes its fields straight into the instance
dict must be the same object as the stock dataclass builds, and refuse what it cannot copy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from trainplan.engine.per_gpu import Layout
from trainplan.engine.result import Estimate
from trainplan.specs.frozen import direct_init


@dataclass(frozen=True)
class Stock:
    name: str
    value: float
    note: str = "none"
    tags: dict[str, int] = field(default_factory=dict)


@direct_init
@dataclass(frozen=True)
class Direct:
    name: str
    value: float
    note: str = "none"
    tags: dict[str, int] = field(default_factory=dict)


def test_same_fields_defaults_and_factories_as_the_stock_dataclass() -> None:
    for args, kwargs in (
        (("a", 1.5), {}),
        (("a",), {"value": 2.0, "note": "x"}),
        ((), {"tags": {"k": 1}, "value": 3.0, "name": "b"}),
    ):
        stock, direct = Stock(*args, **kwargs), Direct(*args, **kwargs)
        assert dataclasses.astuple(stock) == dataclasses.astuple(direct)
        assert vars(stock) == vars(direct) and list(vars(stock)) == list(vars(direct))
    assert Direct("a", 1.0).tags is not Direct("a", 1.0).tags  # the factory runs at each call
    assert Direct("a", 1.0) == Direct("a", 1.0) != Direct("a", 2.0)
    assert dataclasses.replace(Direct("a", 1.0), note="y") == Direct("a", 1.0, "y")
    assert repr(Direct("a", 1.0)).replace("Direct", "Stock") == repr(Stock("a", 1.0))


def test_still_frozen_and_strict_about_arguments() -> None:
    record = Direct("a", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.value = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Direct("a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Direct("a", 1.0, unknown=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Direct("a", 1.0, "n", {}, "extra")  # type: ignore[call-arg]


def test_refuses_what_it_cannot_copy() -> None:
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class Checked:
        x: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class Derived:
        x: int
        y: int = field(init=False, default=0)

    for cls in (Mutable, Checked, Derived):
        with pytest.raises(TypeError):
            direct_init(cls)


def test_result_types_keep_their_fields_order() -> None:
    layout = Layout(1, 2, 3, 0, 4, 5, 1.0)
    assert list(vars(layout)) == [item.name for item in dataclasses.fields(Layout)]
    assert layout.offload == 0 and layout.gpus == 6
    assert Estimate.__init__.__qualname__ == "Estimate.__init__"
