"""A job's ``model_policy`` routes its attempt (issue 46, item 5): the router sends the
call to the pool it names (never to another, even when a smaller one fits), the
attempt asks that pool's admission scope, and a name of no pool is refused.

No Ray and no vLLM: the router runs with a character tokenizer and engine handles that
record what they were sent (as in tests/unit/test_router_trace.py); the admission
scopes are real admission actors in process.
"""

from __future__ import annotations

import pytest

from cluster.admission import (
    ActorGate,
    AdmissionActor,
    AdmissionClient,
    LocalActorHandle,
    PoolRoute,
    RoutedGate,
    route_scope,
)
from cluster.drivers import EngineSpec
from cluster.runtime import ClusterConfig
from deployments.router import POLICY_REASON, ROUTE_REASON
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant
from pipeline.errors import ContextTooLong, TerminalError
from pipeline.settings import Settings
from tests.unit.test_pool_engine import SCHEMA
from tests.unit.test_router_trace import router

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

SHORT_TEXT = [{"role": "user", "content": "x" * 10}]  # fits the 64-token pool


async def test_the_router_runs_a_call_on_the_pool_the_policy_names() -> None:
    r, handles = router()
    by_rule = await r.complete(SHORT_TEXT, json_schema=SCHEMA, max_tokens=8, timeout=5)
    by_policy = await r.complete(
        SHORT_TEXT, json_schema=SCHEMA, max_tokens=8, timeout=5, pool="long"
    )
    assert (by_rule.pool, by_policy.pool) == ("short", "long")
    assert [q.pool for q in handles["short"].requests] == ["short"]
    assert [q.pool for q in handles["long"].requests] == ["long"]
    decided = await r.route(SHORT_TEXT, 8, pool="long")
    assert (decided.pool, decided.reason, decided.skipped) == ("long", POLICY_REASON, ())
    assert (await r.route(SHORT_TEXT, 8, pool="default")).reason == ROUTE_REASON


async def test_a_named_pool_is_kept_to_or_the_call_is_refused() -> None:
    r, handles = router()
    too_long = [{"role": "user", "content": "x" * 60}]  # fits "long" only
    with pytest.raises(ContextTooLong, match="model_policy names"):
        await r.complete(too_long, json_schema=SCHEMA, max_tokens=8, timeout=5, pool="short")
    with pytest.raises(TerminalError, match="names no pool"):
        await r.complete(SHORT_TEXT, json_schema=SCHEMA, max_tokens=8, timeout=5, pool="huge")
    assert not handles["short"].requests and not handles["long"].requests


ROUTES = [
    PoolRoute(pool="short", max_model_len=8192, scope="eng-short"),
    PoolRoute(pool="long", max_model_len=32768, scope="eng-long"),
]


def test_the_policy_pool_picks_its_admission_scope() -> None:
    assert route_scope(ROUTES, 100) == "eng-short"
    assert route_scope(ROUTES, 100, pool="long") == "eng-long"
    assert route_scope(ROUTES, 100, pool="huge") == "eng-short"  # the router refuses it


async def test_the_routed_gate_asks_the_scope_of_the_named_pool() -> None:
    actors = {
        scope: AdmissionActor(AdmissionConfig(scope=scope, max_concurrent_tokens=20_000))
        for scope in ("eng-short", "eng-long")
    }
    gates = {
        scope: ActorGate(AdmissionClient(LocalActorHandle(actor), scope=scope))
        for scope, actor in actors.items()
    }
    gate = RoutedGate(gates, ROUTES)
    got = await gate.acquire(AdmissionRequest("t", 200, 100, pool="long"), timeout=0.0)
    assert isinstance(got, Grant) and got.scope == "eng-long"
    assert (await actors["eng-short"].snapshot())["in_flight"] == 0
    await gate.release(got, usage=None, uncertain=False)
    for actor in actors.values():
        await actor.stop()


def test_a_local_cluster_lets_requests_name_the_pools_it_deploys() -> None:
    serve = ClusterConfig(settings=Settings())
    assert serve.settings.model_pools == tuple(p.name for p in serve.serve_pools().pools)
    assert serve.settings.model_policies()[0] == "default"
    assert "FENCELINE_MODEL_POOLS" in serve.settings.to_env()
    hosted = ClusterConfig(
        settings=Settings(), engine=EngineSpec(kind="openai", base_url="http://127.0.0.1:1/v1")
    )
    assert hosted.settings.model_pools == ()


def test_model_pools_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FENCELINE_MODEL_POOLS", "short, long")
    assert Settings().model_policies() == ("default", "short", "long")
    monkeypatch.setenv("FENCELINE_MODEL_POOLS", '["big"]')
    assert Settings().model_pools == ("big",)
