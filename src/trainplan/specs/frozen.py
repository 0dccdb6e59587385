"""Cheaper frozen records: a faster `__init__` for the frozen dataclasses one estimate builds by
the dozen, and `once` for a figure worked out on first read.

`@dataclass(frozen=True)` writes each field through `object.__setattr__` (its own `__setattr__`
refuses), a call per field: a ten-field record costs about three times a plain one. `direct_init`
replaces that generated `__init__` with one of the same signature that stores the fields into the
instance's `__dict__` (where `object.__setattr__` puts them too), so the object is the same:
fields, defaults, equality, hashing, repr, `dataclasses.replace` and the frozen refusal of
assignment all stay the dataclass's own. It takes only the plain shapes it can copy exactly
(fields set by `__init__`, positional or keyword, with a default or a default factory, no
`__post_init__`, no slots) and refuses any other class at import time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

Record = TypeVar("Record", bound=type)

_FACTORY = object()  # the default of a field whose default is made by its factory at each call


def direct_init(cls: Record) -> Record:
    """Give the frozen dataclass `cls` an `__init__` that writes its fields straight into the
    instance dict (see the module docstring); apply it above `@dataclass(frozen=True)`."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: direct_init is for frozen dataclasses")
    if hasattr(cls, "__post_init__") or "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__}: direct_init cannot copy __post_init__ or slots")
    fields = dataclasses.fields(cls)
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    params_text, body = [], []
    for item in fields:
        if not item.init or item.kw_only or item.name.startswith("_"):
            raise TypeError(f"{cls.__name__}.{item.name}: direct_init takes plain init fields only")
        if item.default is not dataclasses.MISSING:
            namespace[f"_default_{item.name}"] = item.default
            params_text.append(f"{item.name}=_default_{item.name}")
        elif item.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{item.name}"] = item.default_factory
            params_text.append(f"{item.name}=_FACTORY")
            body.append(f"    if {item.name} is _FACTORY:\n        {item.name} = _factory_{item.name}()")
        else:
            params_text.append(item.name)
        body.append(f"    _fields[{item.name!r}] = {item.name}")
    source = f"def __init__(_self, {', '.join(params_text)}):\n    _fields = _self.__dict__\n"
    source += "\n".join(body) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[misc]
    return cls


Value = TypeVar("Value")


class once(Generic[Value]):
    """A figure worked out on its first read and kept on the instance (its `__dict__`, so a
    frozen dataclass works too), as `functools.cached_property` does, without the lock Python
    3.11's cached_property takes on every first read (it costs more than the sum it guards; two
    threads racing on one pure figure would only both work out the same number)."""

    def __init__(self, compute: Callable[[Any], Value]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> once[Value]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Value: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> once[Value] | Value:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value
