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
            if (isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value)
                    and value.__dataclass_params__.frozen
                    and not value.__repr__.__qualname__.startswith("_repr_of")):
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
