"""``dataclass`` as the standard library's, made faster to define: the start-up cost of every command.

The standard decorator writes each method of a class as source text and compiles it: six compilations for a
frozen class (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``), ~0.7 ms a
class on the machines gpu-doctor runs on; the ~50 frozen classes on `check`'s path cost about a third of its
imports. For ``@dataclass(frozen=True)`` this one compiles nothing when the class is defined:

- the standard decorator still collects the fields (defaults, factories, ``kw_only``, its checks on them) and
  sets ``__dataclass_fields__``, ``__match_args__`` and the rest, asked for no method, so ``fields``, ``asdict``,
  ``replace`` and ``is_dataclass`` work as on any dataclass;
- ``__repr__``, ``__eq__`` and ``__hash__`` are shared functions reading the class's fields, and the frozen
  ``__setattr__`` / ``__delattr__`` are closures over the class and its field names: the same results, the same
  exceptions and messages, the same qualified names as the generated ones (honouring ``repr=`` / ``compare=`` /
  ``hash=`` of each field and any of these methods the class defines itself, or refusing it as the standard one
  does);
- ``__init__`` is a shared one that binds the arguments as the standard one does, for a class's first
  :data:`GENERIC_CALLS` instances; then the standard one's code is written and compiled, and replaces it on the
  class (a command imports ~50 of these classes, instantiates ~35 of them, most only a few times).

One difference is left, by design: ``__dataclass_params__`` of such a class does not say ``frozen`` (the standard
decorator, which wrote it, was asked for a plain class); :func:`is_frozen` says whether a class is frozen, by
either decorator. Any other use is the standard decorator's. Type checkers see the standard decorator.
"""

from __future__ import annotations

import dataclasses
import inspect  # imported by dataclasses in any case
import sys
import threading
from types import MethodType
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass", "field", "is_frozen"]

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


_FROZEN = "__records_frozen__"  # set on each class this module made frozen


def is_frozen(cls: Any) -> bool:
    """Whether ``cls`` is a frozen dataclass, made by this module or by the standard decorator."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return False
    return bool(cls.__dict__.get(_FROZEN)) or bool(getattr(getattr(cls, "__dataclass_params__", None), "frozen", False))


def _frozen(cls: Any) -> Any:
    for name in ("__setattr__", "__delattr__"):  # as the standard decorator refuses them on a frozen class
        if name in cls.__dict__:
            raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
    bases = [b for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)]
    if bases and not any(is_frozen(b) for b in bases):
        raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    own = {name for name in ("__repr__", "__eq__", "__init__") if name in cls.__dict__}
    # As the standard decorator decides: a __hash__ of None that Python set because the class defines __eq__ is
    # not the class's own.
    explicit_hash = cls.__dict__.get("__hash__", _MISSING)
    if not (explicit_hash is _MISSING or (explicit_hash is None and "__eq__" in cls.__dict__)):
        own.add("__hash__")
    # No method asked for: the standard decorator only collects and checks the fields (a mutable default, a
    # field() misused), and adds __match_args__ and its records of the class. Nothing is compiled.
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    for f in cls.__dataclass_fields__.values():  # besides the fields: ClassVar (ignored here too) or InitVar
        if f not in fields and _is_initvar(f):
            raise TypeError(f"{cls.__name__}.{f.name}: an InitVar needs dataclasses.dataclass, not records.dataclass")
    shown = tuple(f.name for f in fields if f.repr)
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    if "__init__" not in own:
        positional = [f for f in fields if f.init and not f.kw_only]
        seen_default = None
        for f in positional:  # the standard decorator's check, at definition as there
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                if seen_default is not None:
                    raise TypeError(f"non-default argument {f.name!r} follows default argument")
            else:
                seen_default = f
        _set(cls, "__init__", _SharedInit(cls, fields))
    if "__repr__" not in own:
        cls.__repr__ = _repr_of(shown)
    if "__eq__" not in own:
        cls.__eq__ = _eq_of(compared)
    if "__hash__" not in own:
        cls.__hash__ = _hash_of(hashed)
    names = frozenset(f.name for f in fields)
    _set(cls, "__setattr__", _frozen_setattr(cls, names))
    _set(cls, "__delattr__", _frozen_delattr(cls, names))
    setattr(cls, _FROZEN, True)
    return cls


def _is_initvar(f: dataclasses.Field[Any]) -> bool:
    kind = f.type
    return isinstance(kind, dataclasses.InitVar) or kind is dataclasses.InitVar or (
        isinstance(kind, str) and "InitVar" in kind)


def _set(cls: type, name: str, fn: Any) -> None:
    """A method made for ``cls``, named as the standard decorator names the ones it writes."""
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    fn.__module__ = cls.__module__
    setattr(cls, name, fn)


def _frozen_setattr(cls: Any, names: frozenset[str]) -> Any:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr(cls: Any, names: frozenset[str]) -> Any:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


GENERIC_CALLS = 64  # instances a class gets from the shared __init__ before its own is written


class _SharedInit:
    """A class's stand-in ``__init__``, shared code: it binds the arguments to the fields as the standard
    ``__init__`` does (positional fields in order, keyword-only ones by name, defaults, factories,
    ``__post_init__``). A class's first :data:`GENERIC_CALLS` instances are made by it (a `check` makes most of its
    ~35 classes a few times: writing each one's ``__init__`` would cost more than it saves); the next call writes
    the class's own ``__init__`` (:func:`_init_of`), puts it on the class and runs it. Any call it cannot bind (a
    missing, an unknown or a repeated argument) goes to the written one too, which raises the standard TypeError,
    and so does a look at its signature (``inspect.signature``, ``help``): the class's own, never ``*args``."""

    def __init__(self, cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> None:
        self.cls, self.fields = cls, fields
        self.post_init = hasattr(cls, "__post_init__")
        self.positional = tuple(f.name for f in fields if f.init and not f.kw_only)
        self.accepted = frozenset(f.name for f in fields if f.init)
        self.plan = tuple((f.name, f.init, f.default, f.default_factory) for f in fields)
        self.calls = 0
        self.__name__, self.__qualname__, self.__module__ = "__init__", f"{cls.__qualname__}.__init__", cls.__module__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self if instance is None else MethodType(self, instance)

    def __call__(self, instance: Any, /, *args: Any, **kwargs: Any) -> None:  # a field may be named "self"
        self.calls += 1
        if self.calls <= GENERIC_CALLS and self._bind(instance, args, kwargs):
            return
        self.written()(instance, *args, **kwargs)

    def _bind(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Set the fields as the standard ``__init__`` would; False (nothing set) where it would raise."""
        positional = self.positional
        if len(args) > len(positional) or not all(name in self.accepted for name in kwargs) or any(
                name in kwargs for name in positional[:len(args)]):
            return False
        given = dict(zip(positional, args, strict=False), **kwargs)  # len(args) ≤ len(positional)
        values = []
        missing = dataclasses.MISSING
        for name, init, default, factory in self.plan:
            if init and name in given:
                values.append((name, given[name]))
            elif factory is not missing:
                values.append((name, factory()))
            elif not init:
                continue  # a plain default: the class attribute answers, as with the standard __init__
            elif default is not missing:
                values.append((name, default))
            else:
                return False  # a required argument is missing: the written __init__ says so
        for name, value in values:
            object.__setattr__(instance, name, value)
        if self.post_init:
            instance.__post_init__()
        return True

    def written(self) -> Any:
        """The class's own ``__init__``, written now and put on the class in place of this one (two threads may
        both write it: each gets the same method)."""
        real = _init_of(self.cls, self.fields, self.post_init)
        if self.cls.__dict__.get("__init__") is self:
            _set(self.cls, "__init__", real)
        return real

    @property
    def __signature__(self) -> Any:
        return inspect.signature(self.written())


class _HasFactory:  # the default of a parameter whose field has a default_factory, as in the standard decorator
    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _HasFactory()


def _init_of(cls: type, fields: tuple[dataclasses.Field[Any], ...], post_init: bool) -> Any:
    """The frozen class's ``__init__``, the code the standard decorator writes: parameters in its order (the
    positional fields, then the keyword-only ones), defaults and factories, each field set through
    ``object.__setattr__``, then ``__post_init__``."""
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    values: dict[str, Any] = {"__dataclass_set__": object.__setattr__, "__dataclass_HAS_FACTORY__": _HAS_FACTORY}
    params: list[str] = []
    kw_only: list[str] = []
    body: list[str] = []
    for f in fields:
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            values[f"__dataclass_factory_{f.name}__"] = f.default_factory
        if f.init:
            if has_factory:
                param = f"{f.name}=__dataclass_HAS_FACTORY__"
                value = f"__dataclass_factory_{f.name}__() if {f.name} is __dataclass_HAS_FACTORY__ else {f.name}"
            elif f.default is not dataclasses.MISSING:
                values[f"__dataclass_default_{f.name}__"] = f.default
                param = f"{f.name}=__dataclass_default_{f.name}__"
                value = f.name
            else:
                param = value = f.name
            (kw_only if f.kw_only else params).append(param)
        elif has_factory:
            value = f"__dataclass_factory_{f.name}__()"
        else:
            continue  # init=False with a plain default (the class attribute answers) or none: not set here
        body.append(f"  __dataclass_set__({self_name}, {f.name!r}, {value})")
    if post_init:
        body.append(f"  {self_name}.__post_init__()")
    signature = ", ".join([self_name, *params, *(["*", *kw_only] if kw_only else [])])
    source = (f"def __create_fn__({', '.join(values)}):\n def __init__({signature}):\n"
              + "\n".join(" " + line for line in body or ["  pass"]) + "\n return __init__\n")
    namespace: dict[str, Any] = {}
    module = sys.modules.get(cls.__module__)
    exec(source, vars(module) if module is not None else {}, namespace)  # as the standard decorator: its globals
    init = namespace["__create_fn__"](**values)
    init.__annotations__ = {**{f.name: f.type for f in fields if f.init}, "return": None}  # as the standard one's
    return init


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
