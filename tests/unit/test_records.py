"""``from_record``: rows become dataclasses by field name, and a missing column is loud."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from decimal import Decimal

import pytest

from pipeline.records import MissingColumn, from_record


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner:
    id: uuid.UUID
    colour: Colour


@dataclass(frozen=True)
class Outer:
    inner: Inner
    job_id: uuid.UUID
    price: Decimal
    tags: tuple[str, ...]
    note: str | None = None
    extra: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Flat:
    id: uuid.UUID
    name: str


def test_copies_columns_by_field_name_and_ignores_extra_columns() -> None:
    ident = uuid.uuid4()
    row = {"id": ident, "name": "acme", "unrelated": 3, "also": None}
    assert from_record(Flat, row) == Flat(id=ident, name="acme")


def test_a_missing_column_names_the_class_the_field_and_the_column() -> None:
    with pytest.raises(MissingColumn) as caught:
        from_record(Flat, {"id": uuid.uuid4()})
    assert caught.value.cls is Flat
    assert caught.value.column == "name"
    assert "Flat.name" in str(caught.value)
    assert "'name'" in str(caught.value)


def test_a_field_with_a_default_still_needs_its_column_unless_optional() -> None:
    row = {"id": uuid.uuid4(), "job_id": uuid.uuid4(), "price": "1.50", "tags": ["a"]}
    kwargs = {"inner": Inner(uuid.uuid4(), Colour.RED), "convert": {"tags": tuple}}
    with pytest.raises(MissingColumn, match=r"Outer\.note"):
        from_record(Outer, row, **kwargs)
    built = from_record(Outer, row, optional={"note", "extra"}, **kwargs)
    assert built.note is None
    assert built.extra == []


def test_optional_does_not_excuse_a_field_without_a_default() -> None:
    with pytest.raises(MissingColumn, match=r"Flat\.name"):
        from_record(Flat, {"id": uuid.uuid4()}, optional={"name"})


def test_conversion_hooks_apply_to_the_column_value() -> None:
    row = {
        "id": uuid.uuid4(),
        "colour": "blue",
        "job_id": uuid.uuid4(),
        "price": "12.30",
        "tags": ["x", "y"],
        "note": None,
        "extra": ["z"],
    }
    built = from_record(
        Outer,
        row,
        convert={"price": Decimal, "tags": tuple},
        inner=from_record(Inner, row, convert={"colour": Colour}),
    )
    assert built.price == Decimal("12.30") and isinstance(built.price, Decimal)
    assert built.tags == ("x", "y")
    assert built.inner.colour is Colour.BLUE
    assert built.inner.id == row["id"]


def test_a_renamed_column_feeds_a_nested_record() -> None:
    """One row, two records: the nested one reads ``id`` as its own, the outer one
    reads the same row's ``outer_job`` as ``job_id``."""
    row = {
        "id": uuid.uuid4(),
        "colour": "red",
        "outer_job": uuid.uuid4(),
        "price": Decimal("2"),
        "tags": (),
        "note": "n",
        "extra": [],
    }
    built = from_record(
        Outer,
        row,
        rename={"job_id": "outer_job"},
        inner=from_record(Inner, row, convert={"colour": Colour}),
    )
    assert built.job_id == row["outer_job"]
    assert built.inner == Inner(row["id"], Colour.RED)
    with pytest.raises(MissingColumn, match="'job_id'"):
        from_record(Outer, row, inner=built.inner)


def test_overrides_win_over_the_row_and_are_not_converted() -> None:
    ident = uuid.uuid4()
    built = from_record(Flat, {"id": uuid.uuid4(), "name": "row"}, id=ident, name="given")
    assert built == Flat(id=ident, name="given")


def test_names_that_are_not_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="no field"):
        from_record(Flat, {"id": 1, "name": "x"}, convert={"nme": str})
    with pytest.raises(TypeError, match="dataclass"):
        from_record(dict, {})
