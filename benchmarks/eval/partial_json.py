"""What a truncated answer got right before it was cut: scoring only, never decisions.

A small model that runs out of output tokens leaves open JSON, which the
pipeline rightly treats as malformed (no job ever uses a repaired answer). For
the accuracy report it is still worth knowing which fields it had already
written, and whether they were right: :func:`parse_prefix` closes the longest
prefix that ends after a complete value, and :func:`salvage` keeps, field by
field, whatever of it validates against the extraction schema.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

M = TypeVar("M", bound=BaseModel)

#: How many cut points (from the end) :func:`parse_prefix` tries before giving up.
MAX_CUTS = 200


def parse_prefix(text: str) -> Any | None:
    """The longest prefix of ``text`` that closes into valid JSON, parsed; None if none.

    Cut points are the places right after a complete value: before a ``,`` and
    after a ``}`` or ``]`` outside strings. The open containers at that point are
    closed in order.
    """
    stack: list[str] = []
    in_string = escaped = False
    cuts: list[tuple[int, str]] = []
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack[-1] != ch:
                break  # not JSON any more: keep the cuts made so far
            stack.pop()
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-MAX_CUTS:]):
        try:
            return json.loads(text[:end] + closers)
        except ValueError:
            continue
    return None


def salvage(model: type[M], data: Any) -> M | None:
    """``model`` built from the parts of ``data`` that validate; None if even that fails.

    A field that validates as given is kept; a nested model is salvaged in turn;
    a tuple keeps the items that validate; anything else becomes None (optional
    fields) or an empty tuple. Required fields that cannot be salvaged make the
    model None.
    """
    if not isinstance(data, dict):
        data = {}
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        annotation: Any = info.annotation
        raw = data.get(name)
        if name not in data and not info.is_required():
            continue  # an optional field not written yet: its default (contract v3's)
        if name in data:
            try:
                values[name] = TypeAdapter(annotation).validate_python(raw)
                continue
            except ValidationError:
                pass
        values[name] = _fallback(annotation, raw)
    try:
        return model.model_validate(values)
    except ValidationError:
        return None


def _fallback(annotation: Any, raw: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is tuple and args:
        item = args[0]
        kept = []
        for value in raw if isinstance(raw, list) else []:
            try:
                kept.append(TypeAdapter(item).validate_python(value))
            except ValidationError:
                continue
        return tuple(kept)
    if origin in (typing.Union, types.UnionType):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models and isinstance(raw, dict):
            return salvage(models[0], raw)
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return salvage(annotation, raw)
    return None
