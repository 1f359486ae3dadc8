"""Database rows to dataclasses, by field name.

:func:`from_record` builds a dataclass from an ``asyncpg.Record`` (or any mapping) by
copying the column named like each field. What is not a plain copy is said at the call:
``rename`` for a column whose name differs from the field, ``convert`` for a value
that needs a type (an enum, a tuple, a frozenset, a ``Decimal`` from text), and keyword
overrides for values that do not come from the row at all (a worker id, a nested record).

The invariant: a field is never filled by its default because the query forgot a
column. A missing column raises :class:`MissingColumn` naming the class, the field and
the column, unless the call lists the field in ``optional`` (a column only some of the
queries return, such as a trace context); then the field keeps its default. Columns the
class has no field for are ignored, so one query may feed several records.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")

_ABSENT = object()


class Row(Protocol):
    """What :func:`from_record` reads: ``asyncpg.Record`` and ``dict`` both have it."""

    def get(self, key: str, default: Any = ..., /) -> Any: ...


class MissingColumn(KeyError):
    """A record lacks the column a field needs: the query and the record disagree."""

    def __init__(self, cls: type, field: str, column: str) -> None:
        super().__init__(f"{cls.__name__}.{field}: the record has no column {column!r}")
        self.cls = cls
        self.field = field
        self.column = column

    def __str__(self) -> str:
        return str(self.args[0])


@functools.cache
def _init_fields(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """``cls``'s constructor fields by name (read once per class: rows are mapped on hot paths)."""
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"from_record needs a dataclass, not {cls!r}")
    return {f.name: f for f in dataclasses.fields(cast(Any, cls)) if f.init}


def from_record(
    cls: type[T],
    record: Row | Mapping[str, Any],
    /,
    *,
    rename: Mapping[str, str] | None = None,
    convert: Mapping[str, Callable[[Any], Any]] | None = None,
    optional: Collection[str] = (),
    **overrides: Any,
) -> T:
    """The ``cls`` instance ``record`` describes.

    Args:
        cls: a dataclass.
        record: the row; only its columns named by ``cls``'s fields are read.
        rename: field name → column name, where they differ.
        convert: field name → function applied to the column's value (not to overrides).
        optional: fields whose column may be absent; they then keep their default.
        **overrides: field values that do not come from the row.

    Raises:
        MissingColumn: a field's column is absent and the field is not optional.
        TypeError: ``cls`` is not a dataclass, or a name in ``rename``, ``convert``,
            ``optional`` or the overrides is not one of its fields.
    """
    fields = _init_fields(cast(type, cls))
    rename = rename or {}
    convert = convert or {}
    unknown = (set(rename) | set(convert) | set(optional) | set(overrides)) - set(fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
    values: dict[str, Any] = {}
    for name in fields:
        if name in overrides:
            values[name] = overrides[name]
            continue
        column = rename.get(name, name)
        value = record.get(column, _ABSENT)
        if value is _ABSENT:
            field = fields[name]
            has_default = (
                field.default is not dataclasses.MISSING
                or field.default_factory is not dataclasses.MISSING
            )
            if name in optional and has_default:
                continue
            raise MissingColumn(cls, name, column)
        hook = convert.get(name)
        values[name] = hook(value) if hook is not None else value
    return cls(**values)
