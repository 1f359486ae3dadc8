"""No request body answers 500, and a refused one writes nothing (issue 45, defect 1).

The GET routes get generated query parameters, headers and cookies in
``test_api_no_server_errors.py``; here every POST route of the committed OpenAPI
document gets generated JSON bodies (schemathesis draws them from the request
schemas, valid and invalid), and some of each body's values, or the whole body,
are swapped for what a hostile client sends: numbers past any float (``1e400``)
or past Python's integer digit limit, ``NaN``, NUL, lone surrogates, nesting deeper
than a parser's recursion limit, duplicate keys, bytes that are not UTF-8, under
a content type now and then not JSON's. The server is a real uvicorn on loopback;
every answer must be below 500, and every 4xx must leave each table's row count as
it was. (Checked to fail: with the re-drive route's date check taken out, it finds
the 500 of a ``failed_before`` in year 1 with a positive offset.)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation import GenerationMode

from pipeline.api import create_app
from pipeline.api.app import OPENAPI_PATH
from pipeline.database import connect
from tests.support.api import (
    WRITTEN_TABLES,
    settings_for,
    submission,
    tenant_key_at,
    threaded_server,
)

pytestmark = pytest.mark.integration

KEK = base64.b64encode(bytes(range(32))).decode()
#: Every table a POST route writes: a refused request leaves each count as it was.
TABLES = (
    *WRITTEN_TABLES,
    "webhook_endpoints",
    "webhook_endpoint_keys",
    "endpoint_events",
    "job_redrives",
    "review_decisions",
)

#: Raw JSON a hostile client sends in place of a value (json.dumps cannot write most).
HOSTILE_VALUES = (
    "1e400",
    "-1e400",
    "1E+999",
    "2.5e-400000",
    "1" + "0" * 5000,  # past Python's 4300-digit int conversion limit
    "-" + "9" * 40,
    "18446744073709551616",
    "NaN",
    "Infinity",
    "-Infinity",
    "-0",
    '"9999-12-31T23:59:59-05:00"',
    '"0001-01-01T00:00:00+00:01"',
    '"+275760-09-13T00:00:00Z"',
    "1.0000000000000000000000001",
    '"\\u0000"',
    '"ACME\\u0000"',
    '"\\ud800"',
    '"x\\udfff"',
    '"\\ud83d"',
    '"\\u202egnp.exe"',
    '"' + "x" * 70_000 + '"',
    "[" * 5000 + "]" * 5000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    "[]",
    "{}",
    "null",
    "true",
    '""',
)
#: A whole body a hostile client sends (bytes: not always UTF-8, not always JSON).
HOSTILE_BODIES = (
    b"",
    b"null",
    b"[]",
    b'"x"',
    b"1e400",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"reason": "a", "reason": "b"}',
    b'{"reason": "\xff\xfe"}',
    b"\xef\xbb\xbf{}",
    b'{"reason": "a"',
    b'{"url": "https://93.184.216.34/", "description": "\\ud800"}',
    b'{"decision": "reject", "note": "x", "state_version": 1e400}',
    b'{"reason": "x", "attempts": 1e400}',
    b'{"document": {"text": "INVOICE 1"}, "options": {"x": [1e400]}}',
    b'{"document": {"text": "INVOICE 2"}, "options": {"x": {"y": -1e-400}}}',
    b'{"reason": "x", "failed_from": "9999-12-31T23:59:59-05:00"}',
    b'{"reason": "x", "failed_before": "0001-01-01T00:00:00+00:01"}',
)
#: Mostly JSON; now and then what a confused or hostile client labels it.
CONTENT_TYPES = (
    *("application/json",) * 6,
    "application/json; charset=utf-16",
    "application/json; charset=x-unknown",
    "application/merge-patch+json",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "multipart/form-data",
    "",
)
_MARK = "\x00hostile:{}\x00"
_MARKED = re.compile(r'"\\u0000hostile:(\d+)\\u0000"')

schema = schemathesis.openapi.from_path(str(OPENAPI_PATH))
schema.config.generation.update(allow_x00=True)


def _post_operations() -> list[Any]:
    ops = [result.ok() for result in schema.get_all_operations()]
    return [op for op in ops if op.method.upper() == "POST"]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``value`` a hostile value can go: each key's value, each item."""
    if path:
        yield path
    if isinstance(value, dict):
        yield (*path, "extra")  # a key no model declares (``options`` takes any)
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))


def _put(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _put(value.get(head), rest, new)}
    copy = list(value)
    copy[head] = _put(copy[head], rest, new)
    return copy


@st.composite
def _hostile_body(draw: st.DrawFn, body: Any) -> bytes:
    """``body`` as JSON bytes, some of its values (or a new key's) made hostile."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from(HOSTILE_BODIES))
    if kind == 1:
        return json.dumps(body).encode()  # as generated: valid bodies reach the writes
    places = list(_leaves(body))
    chosen = draw(st.lists(st.sampled_from(places), max_size=3, unique=True)) if places else []
    values = [draw(st.sampled_from(HOSTILE_VALUES)) for _ in chosen]
    for i, path in enumerate(chosen):
        try:
            body = _put(body, path, _MARK.format(i))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier swap replaced this place's parent
    text = json.dumps(body, allow_nan=True)
    return _MARKED.sub(lambda m: values[int(m.group(1))], text).encode("utf-8", "surrogatepass")


@pytest.fixture(scope="module")
async def caller_key(module_dsn: str) -> str:
    """A key with every scope, so each route runs past its scope check."""
    _, key = await tenant_key_at(module_dsn, "generated-bodies", ("jobs", "review", "operator"))
    return key


@pytest.fixture(scope="module")
def server(module_dsn: str, caller_key: str) -> Iterator[tuple[httpx.Client, list[str]]]:
    """A real uvicorn on loopback, a client with the key, and the ids a path may name
    (a job and a webhook endpoint of the caller's tenant)."""
    auth = {"Authorization": f"Bearer {caller_key}"}
    make = lambda: create_app(settings_for(module_dsn, webhook_secret_key=KEK))  # noqa: E731
    with (
        threaded_server(make) as base,
        httpx.Client(base_url=base, timeout=30, headers=auth) as client,
    ):
        job = client.post("/v1/extraction-jobs", json=submission())
        assert job.status_code == 202, job.text
        hook = {"url": "https://93.184.216.34/hooks/a"}  # a global literal: no DNS
        endpoint = client.post("/v1/webhook-endpoints", json=hook)
        assert endpoint.status_code == 201, endpoint.text
        yield client, [job.json()["job_id"], endpoint.json()["endpoint"]["id"]]


@pytest.fixture(scope="module")
def row_counts(module_dsn: str) -> Iterator[Callable[[], dict[str, int]]]:
    """Each table's row count, read on one connection of its own."""
    loop = asyncio.new_event_loop()
    conn: asyncpg.Connection = loop.run_until_complete(connect(module_dsn))

    async def counts() -> dict[str, int]:
        return {t: int(await conn.fetchval(f"SELECT count(*) FROM {t}")) for t in TABLES}

    yield lambda: loop.run_until_complete(counts())
    loop.run_until_complete(conn.close())
    loop.close()


POST_OPERATIONS = _post_operations()


def test_every_post_route_is_generated() -> None:
    assert {op.path for op in POST_OPERATIONS} >= {
        "/v1/extraction-jobs",
        "/v1/extraction-jobs/{job_id}/redrive",
        "/v1/extraction-jobs/{job_id}/review",
        "/v1/redrives",
        "/v1/webhook-endpoints",
        "/v1/webhook-endpoints/{endpoint_id}/disable",
    }


@pytest.mark.parametrize("op", POST_OPERATIONS, ids=lambda op: op.path)
def test_generated_and_hostile_post_bodies_never_cause_a_server_error_or_a_write(
    op: Any, server: tuple[httpx.Client, list[str]], row_counts: Callable[[], dict[str, int]]
) -> None:
    client, ids = server
    path_value = st.one_of(
        st.sampled_from(ids),
        st.sampled_from(["00000000-0000-0000-0000-000000000000", "x", "²", "%00"]),
        st.text(min_size=1, max_size=40),
    )
    cases = st.one_of([op.as_strategy(generation_mode=mode) for mode in GenerationMode])

    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        case=cases,
        data=st.data(),
        path_value=path_value,
        key=st.integers(0, 4),
        content_type=st.sampled_from(CONTENT_TYPES),
    )
    def post(case: Any, data: st.DataObject, path_value: str, key: int, content_type: str) -> None:
        body = case.body if isinstance(case.body, (dict, list, str, int, float)) else {}
        raw = data.draw(_hostile_body(body))
        path = re.sub(r"\{[^}]+\}", lambda _: quote(path_value, safe=""), op.path)
        headers = {"Content-Type": content_type}
        if key == 0:
            headers["Authorization"] = ""  # no key: refused before the body is read
        before = row_counts()
        r = client.post(path, content=raw, headers=headers)
        assert r.status_code < 500, (path, raw[:300], r.status_code, r.text[:500])
        if r.status_code >= 400:
            assert row_counts() == before, (path, raw[:300], r.status_code)

    post()
