"""``dataclass`` as the standard library's, made faster to define: the start-up cost of every command.

The standard decorator writes each method of a class as source text and compiles it: six compilations for a
frozen class, ~1 ms per class on the machines gpu-doctor runs on, ~70 classes on `check`'s path (about a third of
its own CPU time, measured with benchmarks/peers.py). For ``@dataclass(frozen=True)`` this one lets the standard
decorator write ``__init__`` and the frozen ``__setattr__`` / ``__delattr__`` (their semantics are subtle) and
gives the class ``__repr__``, ``__eq__`` and ``__hash__`` that are shared functions reading the class's fields:
the same results as the generated ones (the same fields, in the same order, honouring ``repr=`` / ``compare=`` /
``hash=`` of each field and any of the three the class defines itself), with no compilation. Any other use is
the standard decorator's. Type checkers see the standard decorator.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass", "field"]

field = dataclasses.field

if TYPE_CHECKING:
    from dataclasses import dataclass
else:

    def dataclass(cls: Any = None, /, **params: Any) -> Any:
        """``dataclasses.dataclass``; with exactly ``frozen=True``, the faster definition described above."""
        if params != {"frozen": True}:
            return dataclasses.dataclass(cls, **params) if cls is not None else dataclasses.dataclass(**params)

        def wrap(klass: type) -> type:
            return _frozen(klass)

        return wrap if cls is None else wrap(cls)


def _frozen(cls: type) -> type:
    own = {name for name in ("__repr__", "__eq__") if name in cls.__dict__}
    # As the standard decorator decides: a __hash__ of None that Python set because the class defines __eq__ is
    # not the class's own.
    explicit_hash = cls.__dict__.get("__hash__", _MISSING)
    if not (explicit_hash is _MISSING or (explicit_hash is None and "__eq__" in cls.__dict__)):
        own.add("__hash__")
    # repr=False, eq=False: the standard decorator writes neither (nor, with eq=False, a __hash__); they are added
    # below exactly where it would have added them: not over one the class defines.
    cls = dataclasses.dataclass(cls, frozen=True, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    shown = tuple(f.name for f in fields if f.repr)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    if "__repr__" not in own:
        cls.__repr__ = _repr_of(shown)  # type: ignore[method-assign]  # written onto the class, as dataclasses does
    if "__eq__" not in own:
        cls.__eq__ = _eq_of(compared)  # type: ignore[method-assign]  # set on the class, as dataclasses does
    if "__hash__" not in own:
        cls.__hash__ = _hash_of(hashed)  # type: ignore[method-assign]  # set on the class, as dataclasses does
    return cls


_MISSING = object()


def _repr_of(names: tuple[str, ...]) -> Any:
    running: set[tuple[int, int]] = set()  # as dataclasses' _recursive_repr: (id(self), thread) in progress

    def __repr__(self: Any) -> str:
        key = (id(self), threading.get_ident())
        if key in running:
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            running.discard(key)

    return __repr__


def _eq_of(names: tuple[str, ...]) -> Any:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)
        return NotImplemented

    return __eq__


def _hash_of(names: tuple[str, ...]) -> Any:
    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    return __hash__
