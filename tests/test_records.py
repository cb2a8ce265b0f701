"""doctor.model.records.dataclass defines frozen classes faster than the standard decorator; a user sees the same
objects: the same repr, equality, hash, immutability and copying, field by field options included."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from doctor.model import records


def _pair(body: dict[str, Any], annotations: dict[str, Any]) -> tuple[type, type]:
    """The same class body decorated by the standard decorator and by records.dataclass (frozen=True)."""
    made = []
    for deco in (dataclasses.dataclass(frozen=True), records.dataclass(frozen=True)):
        ns = {"__annotations__": dict(annotations), **body, "__module__": __name__, "__qualname__": "Sample"}
        made.append(deco(type("Sample", (), ns)))
    return made[0], made[1]


CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({}, {}),
    ({"b": 2}, {"a": "int", "b": "int"}),
    ({"b": dataclasses.field(default=0, repr=False), "c": dataclasses.field(default=0, compare=False)},
     {"a": "int", "b": "int", "c": "int"}),
    ({"b": dataclasses.field(default=0, hash=False), "c": dataclasses.field(default=0, compare=False, hash=True)},
     {"a": "int", "b": "int", "c": "int"}),
    ({"items": dataclasses.field(default_factory=list)}, {"a": "int", "items": "list"}),
    ({"__eq__": lambda self, other: True}, {"a": "int"}),  # its own __eq__ (and so __hash__ None from Python)
    ({"__hash__": lambda self: 7}, {"a": "int"}),
    ({"__repr__": lambda self: "mine"}, {"a": "int"}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_a_frozen_record_behaves_as_the_standard_dataclass(case: int) -> None:
    body, annotations = CASES[case]
    std, fast = _pair(body, annotations)
    values = [dict.fromkeys(annotations, v) for v in (1, 2)]
    for kwargs in values:
        kwargs.pop("items", None)
        a_std, b_std, a_fast, b_fast = std(**kwargs), std(**values[0]), fast(**kwargs), fast(**values[0])
        assert repr(a_fast) == repr(a_std)
        assert (a_fast == b_fast) == (a_std == b_std)
        assert (a_fast != b_fast) == (a_std != b_std)
        assert (a_fast == object()) == (a_std == object())
        try:
            expected: Any = hash(a_std)
        except TypeError as exc:
            expected = type(exc)
        try:
            got: Any = hash(a_fast)
        except TypeError as exc:
            got = type(exc)
        assert got == expected
        for name in annotations:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(a_fast, name, 3)
        assert dataclasses.replace(a_fast) == a_fast or body.get("__eq__")
        assert dataclasses.asdict(a_fast) == dataclasses.asdict(a_std)
        assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(std)]
        assert fast.__match_args__ == std.__match_args__


def test_a_record_inherits_fields_and_keeps_its_own_methods() -> None:
    @records.dataclass(frozen=True)
    class Base:
        kind: str = "base"

    @records.dataclass(frozen=True)
    class Child(Base):
        size: int = 1

    assert repr(Child(size=2)).endswith("<locals>.Child(kind='base', size=2)")
    assert Child() == Child() and Child() != Base() and hash(Child()) == hash(("base", 1))


def test_a_recursive_repr_stops_as_the_standard_one_does() -> None:
    @records.dataclass(frozen=True)
    class Node:
        children: list[Any] = dataclasses.field(default_factory=list)

    node = Node()
    node.children.append(node)
    assert repr(node).endswith("Node(children=[...])")


def test_every_frozen_record_of_the_check_path_is_the_fast_kind() -> None:
    """The frozen classes `check` defines go through records.dataclass (their __repr__ is the shared one)."""
    slow = []
    for name in ("doctor.model.facts", "doctor.model.remedy", "doctor.model.plan", "doctor.model.findings",
                 "doctor.model.report", "doctor.model.severity", "doctor.registry", "doctor.beliefs",
                 "doctor.matrix", "doctor.queries", "doctor.fixplan", "doctor.host", "doctor.checks.require_cuda"):
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (isinstance(value, type) and value.__module__ == name and records.is_frozen(value)
                    and not value.__dict__.get("__records_frozen__")):
                slow.append(f"{name}.{value.__name__}")
    assert slow == []


def _outcome(action: Any) -> Any:
    """What a user sees of an attempt: the exception's type and message, or the value."""
    try:
        return ("ok", action())
    except Exception as exc:
        return (type(exc), str(exc))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_assigning_and_deleting_fail_and_succeed_as_the_standard_ones_do(case: int) -> None:
    """Frozen __setattr__/__delattr__: the same exception and message on a field, on an unknown name, on a plain
    subclass (which may set its own attributes but no field), and the same qualified names."""
    body, annotations = CASES[case]
    std, fast = _pair(body, annotations)
    kwargs = {name: 1 for name in annotations if name != "items"}
    for make in (lambda cls: cls, lambda cls: type("Plain", (cls,), {})):
        a_std, a_fast = make(std)(**kwargs), make(fast)(**kwargs)
        for name in (*annotations, "other", "__dict__"):
            assert _outcome(lambda o=a_fast, n=name: setattr(o, n, 3)) == _outcome(
                lambda o=a_std, n=name: setattr(o, n, 3))
            assert _outcome(lambda o=a_fast, n=name: delattr(o, n)) == _outcome(
                lambda o=a_std, n=name: delattr(o, n))
        assert vars(a_fast) == vars(a_std)
    for method in ("__setattr__", "__delattr__"):
        assert getattr(fast, method).__qualname__ == getattr(std, method).__qualname__
        assert getattr(fast, method).__module__ == getattr(std, method).__module__


def test_frozen_records_copy_pickle_and_replace_as_the_standard_ones() -> None:
    import copy
    import pickle

    for cls in (PickledStd, PickledFast):
        record = cls(a=1, items=[2])
        for twin in (copy.copy(record), copy.deepcopy(record), pickle.loads(pickle.dumps(record)),
                     dataclasses.replace(record)):
            assert twin == record and twin is not record
        assert dataclasses.replace(record, a=5).a == 5
        with pytest.raises(TypeError):
            dataclasses.replace(record, nope=1)


def test_a_subclass_frozen_mismatch_and_an_own_setattr_are_refused_as_before() -> None:
    @dataclasses.dataclass
    class Mutable:
        a: int = 0

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        records.dataclass(frozen=True)(type("Frozen", (Mutable,), {"__annotations__": {"b": "int"}, "b": 1}))
    own = {"__setattr__": lambda self, name, value: None, "__annotations__": {"a": "int"}}
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__ in class Own"):
        records.dataclass(frozen=True)(type("Own", (), own))


@dataclasses.dataclass(frozen=True)
class PickledStd:
    a: int
    items: list[int] = dataclasses.field(default_factory=list)


@records.dataclass(frozen=True)
class PickledFast:
    a: int
    items: list[int] = dataclasses.field(default_factory=list)


def test_a_catalog_severity_outside_the_scale_falls_back_instead_of_breaking_the_ranking() -> None:
    from doctor.model.severity import rank, severity_of

    assert [severity_of(v, "fail") for v in ("warn", "info", "ok", "fail")] == ["warn", "info", "ok", "fail"]
    assert [severity_of(v, "fail") for v in ("error", "WARN", None, 2)] == ["fail"] * 4
    assert rank(severity_of("critical", "warn")) == 2  # "critical" itself would raise KeyError in rank()


def _init_cases() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        *CASES,
        ({"b": dataclasses.field(default=3, kw_only=True), "c": dataclasses.field(default_factory=dict,
                                                                                  kw_only=True)},
         {"a": "int", "b": "int", "c": "dict"}),
        ({"b": dataclasses.field(default=3, init=False), "c": dataclasses.field(default_factory=list, init=False)},
         {"a": "int", "b": "int", "c": "list"}),
        ({"log": [], "__post_init__": lambda self: self.log.append(self.a)}, {"a": "int"}),
        ({"other": 5}, {"self": "int", "other": "int"}),  # a field named self, as the standard decorator allows
    ]


@pytest.mark.parametrize("case", range(len(_init_cases())))
def test_the_shared_init_and_the_written_one_make_what_the_standard_one_makes(case: int) -> None:
    """A class's first instances come from the shared __init__, the next ones from its own, written then with the
    standard signature (positional, then keyword-only parameters, defaults and factories): both set the same
    fields, in the same order, with the same values, as the standard decorator's."""
    import inspect

    body, annotations = _init_cases()[case]
    std, fast = _pair(body, annotations)
    stand_in = fast.__dict__["__init__"]
    fields = std.__dataclass_fields__.values()
    required = {f.name: 7 for f in fields
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    given = {f.name: 8 for f in fields if f.init}  # every init argument, by name
    positional = [8 for f in fields if f.init and not f.kw_only]
    calls = [((), required), ((), given), (tuple(positional), {k: v for k, v in given.items()
                                                                if std.__dataclass_fields__[k].kw_only})]
    rounds = records.GENERIC_CALLS // len(calls) + 1  # past the shared __init__'s share
    for _round in range(rounds):
        for args, kwargs in calls:
            a_std, a_fast = std(*args, **kwargs), fast(*args, **kwargs)
            assert vars(a_fast) == vars(a_std) and list(vars(a_fast)) == list(vars(a_std))
            assert repr(a_fast) == repr(a_std) and a_fast == fast(*args, **kwargs)
    assert fast.__dict__["__init__"] is not stand_in  # written once, on the class
    assert str(inspect.signature(fast.__init__)) == str(inspect.signature(std.__init__))
    assert fast.__init__.__qualname__ == std.__init__.__qualname__
    if "log" in body:  # __post_init__ ran once for each instance (3 a call), by either __init__
        assert len(body["log"]) == rounds * len(calls) * 3


def test_init_errors_are_the_standard_ones() -> None:
    """Missing, extra, repeated or unknown arguments: the standard TypeError and message, from the first call on."""
    bad = (((), {}), ((1, 2, 3), {}), ((1,), {"a": 1}), ((), {"a": 1, "c": 2}), ((), {"b": 1}))
    for args, kwargs in bad:
        std, fast = _pair({"b": 2}, {"a": "int", "b": "int"})  # a fresh class: this is its first call
        first = _outcome(lambda f=fast, a=args, k=kwargs: f(*a, **k))
        assert first[0] is TypeError
        assert first == _outcome(lambda f=std, a=args, k=kwargs: f(*a, **k))
    std, fast = _pair({"b": dataclasses.field(default=0, kw_only=True)}, {"a": "int", "b": "int"})
    assert _outcome(lambda: fast(1, 2)) == _outcome(lambda: std(1, 2))  # keyword-only, given by position
    body, annotations = {"a": 1}, {"a": "int", "b": "int"}
    for deco in (dataclasses.dataclass(frozen=True), records.dataclass(frozen=True)):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            deco(type("Bad", (), {"__annotations__": dict(annotations), **body}))


def test_a_mutable_default_is_refused_as_the_standard_decorator_refuses_it() -> None:
    for deco in (dataclasses.dataclass(frozen=True), records.dataclass(frozen=True)):
        with pytest.raises(ValueError, match="mutable default"):
            deco(type("Bad", (), {"__annotations__": {"a": "list"}, "a": []}))


def test_defining_a_record_compiles_nothing() -> None:
    """The start-up saving itself: the class statement and its decorator run no compile()."""
    import builtins

    calls: list[object] = []
    real_exec, real_compile = builtins.exec, builtins.compile

    def method(source: object) -> bool:  # a method written for a class (other threads may compile other things)
        return isinstance(source, str) and any(f"def {name}(" in source for name in (
            "__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__create_fn__"))

    def counting_exec(*args: Any, **kwargs: Any) -> Any:
        if method(args[0]):
            calls.append(args[0])
        return real_exec(*args, **kwargs)

    def counting_compile(*args: Any, **kwargs: Any) -> Any:
        if method(args[0]):
            calls.append(args[0])
        return real_compile(*args, **kwargs)

    builtins.exec, builtins.compile = counting_exec, counting_compile
    try:
        fast = records.dataclass(frozen=True)(type("Fast", (), {"__annotations__": {"a": "int", "b": "int"},
                                                                "b": 1}))
        assert calls == []
        for value in range(records.GENERIC_CALLS):
            assert fast(value).a == value
        assert calls == []  # its first instances: the shared __init__
        fast(-1)
        assert len(calls) == 1  # then its own, written once
        fast(-2)
        assert len(calls) == 1
    finally:
        builtins.exec, builtins.compile = real_exec, real_compile
    std_calls: list[object] = []
    builtins.exec = lambda *a, **k: (std_calls.append(a[0]) if method(a[0]) else None, real_exec(*a, **k))[1]
    try:
        dataclasses.dataclass(frozen=True)(type("Std", (), {"__annotations__": {"a": "int"}}))
    finally:
        builtins.exec = real_exec
    assert len(std_calls) >= 3  # what the standard decorator compiles for the same kind of class
