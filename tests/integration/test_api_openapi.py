"""The committed OpenAPI document: it is the app's, and the app honours it.

``docs/openapi.json`` must equal what the app generates (regenerate with
``fenceline api --write-openapi``). Schemathesis then drives every
operation of the *committed* document against a real uvicorn on loopback (a
fresh database, a valid tenant key) with a bounded number of examples per
operation, and its checks require: no 5xx, documented status codes, content
types and headers, and bodies that match the response schemas.

The webhook-endpoint routes get a second run whose ``url`` fields come from
:data:`tests.support.urls.hostile_urls` (malformed brackets, IPv4 in brackets,
port 0, ...): a URL is only a string to the schema, and the 500 of issue 16
hid exactly there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import positive_data_acceptance

from pipeline.api import create_app
from pipeline.api.app import OPENAPI_PATH, openapi_document
from pipeline.text_safety import is_invisible
from tests.support.api import settings_for, tenant_key_at, threaded_server
from tests.support.urls import hostile_urls, malformed_host_urls

pytestmark = pytest.mark.integration


def test_committed_openapi_matches_the_app() -> None:
    committed = json.loads(OPENAPI_PATH.read_text())
    assert committed == openapi_document(), (
        "docs/openapi.json is stale: run `fenceline api --write-openapi`"
    )


def test_openapi_documents_problem_json_on_every_operation() -> None:
    doc = openapi_document()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            errors = {c: r for c, r in op["responses"].items() if c.startswith(("4", "5"))}
            for code, resp in errors.items():
                assert list(resp["content"]) == ["application/problem+json"], (method, path, code)
            if path.startswith("/v1/"):
                assert "401" in errors, (method, path)
            if "429" in errors or "503" in errors:
                for code in ("429", "503"):
                    if code in errors:
                        assert "Retry-After" in errors[code]["headers"], (method, path)


schema = schemathesis.openapi.from_path(str(OPENAPI_PATH))
schema.config.generation.update(max_examples=25, allow_x00=False)


@pytest.fixture(scope="module")
async def api_key(module_dsn: str) -> str:
    _, key = await tenant_key_at(module_dsn, "schemathesis", ("jobs", "review", "operator"))
    return key


@pytest.fixture(scope="module")
def base_url(module_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Streams end after 0.5 s with `reconnect` (sse_max_stream_seconds), so the
    # tenant-wide stream, which never ends on its own, is checked like the rest.
    # Uploaded files (a generated part may read as XML) go to a folder store of its own.
    settings = settings_for(
        module_dsn,
        sse_poll_seconds=0.2,
        sse_keepalive_seconds=0.5,
        sse_max_stream_seconds=0.5,
        state_dir=tmp_path_factory.mktemp("state"),
    )
    with threaded_server(lambda: create_app(settings)) as url:
        yield url


@schema.parametrize()
@hypothesis.settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_the_committed_document(
    case: schemathesis.Case, base_url: str, api_key: str
) -> None:
    excluded = []
    if case.query and "cursor" in case.query:
        # A list cursor is opaque: only cursors the API issued are valid, which no
        # schema can say, so a schema-valid random cursor is rightly a 400.
        excluded.append(positive_data_acceptance)
    if _astral_invisible_text(case.body):
        # The schema's text pattern can only be written for the Basic Multilingual
        # Plane (pipeline.text_safety.safe_text_pattern); an option key, file name,
        # description, reason or note with a private use or tag character above it
        # matches the pattern, and is rightly 422 unsafe_text as its description says.
        excluded.append(positive_data_acceptance)
    document = case.body.get("document") if isinstance(case.body, dict) else None
    if isinstance(document, dict) and "uri" in document:
        # A reference names an object in the document store, which no schema can say
        # exists: a schema-valid reference is rightly a 422 (document_missing).
        excluded.append(positive_data_acceptance)
    if (case.method.upper(), case.path) in {
        ("POST", "/v1/webhook-endpoints"),
        ("PATCH", "/v1/webhook-endpoints/{endpoint_id}"),
    }:
        # A URL is registered only if the egress guard admits it and every address
        # its host resolves to is global, which no schema can say: a schema-valid
        # URL is rightly a 422 (egress_blocked).
        excluded.append(positive_data_acceptance)
    case.call_and_validate(
        base_url=base_url,
        headers={"Authorization": f"Bearer {api_key}"},
        excluded_checks=excluded,
        timeout=10,
    )


def _astral_invisible_text(body: Any) -> bool:
    """Whether an option key or file name of ``body`` (JSON or the multipart metadata
    part), or a stored text field (an endpoint's description, a disable or re-drive
    reason, a review note), holds an invisible character above U+FFFF."""
    if not isinstance(body, dict):
        return False
    names = [body[k] for k in ("description", "reason", "note") if isinstance(body.get(k), str)]
    for part in (body, body.get("metadata")):
        if isinstance(part, dict) and isinstance(part.get("options"), dict):
            names.extend(str(key) for key in part["options"])
    document = body.get("document")
    if isinstance(document, dict) and isinstance(document.get("filename"), str):
        names.append(document["filename"])
    return any(is_invisible(c) and ord(c) > 0xFFFF for name in names for c in name)


webhook_schema = schemathesis.openapi.from_path(str(OPENAPI_PATH)).include(
    path_regex="^/v1/webhook-endpoints"
)
webhook_schema.config.generation.update(max_examples=60, allow_x00=False)


@webhook_schema.hook
def flatmap_body(_: schemathesis.HookContext, body: Any) -> st.SearchStrategy[Any]:
    """Every generated body with a ``url`` gets a hostile URL in its place."""
    if isinstance(body, dict) and "url" in body:
        return st.one_of(malformed_host_urls, hostile_urls).map(lambda url: {**body, "url": url})
    return st.just(body)


@webhook_schema.parametrize()
@hypothesis.settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_webhook_routes_survive_malformed_urls(
    case: schemathesis.Case, base_url: str, api_key: str
) -> None:
    excluded = []
    if (case.method.upper(), case.path) in {
        ("POST", "/v1/webhook-endpoints"),
        ("PATCH", "/v1/webhook-endpoints/{endpoint_id}"),
    }:
        # Hostile URLs are rightly refused (422 egress_blocked) although the schema
        # calls them strings; every other check (no 5xx above all) stays on.
        excluded.append(positive_data_acceptance)
    if _astral_invisible_text(case.body):
        excluded.append(positive_data_acceptance)  # as in the test above
    case.call_and_validate(
        base_url=base_url,
        headers={"Authorization": f"Bearer {api_key}"},
        excluded_checks=excluded,
        timeout=10,
    )
