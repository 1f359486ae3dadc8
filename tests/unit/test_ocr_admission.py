"""The OCR pool's admission scope: a budget of pages in flight, in an actor of its own,
so OCR load never spends an LLM scope's token budget and the reverse."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from cluster.admission import AdmissionActor
from deployments.ocr_autoscaling import OcrAutoscaling, decide, scope_demand
from deployments.pools import OcrPoolConfig
from pipeline.admission import AdmissionConfig, AdmissionRequest, Grant, Wait, WaitReason


def _page() -> AdmissionRequest:
    return AdmissionRequest(tenant="ocr", prompt_tokens=1, max_output_tokens=0)


def _ocr_actor(config: OcrPoolConfig) -> AdmissionActor:
    return AdmissionActor({"scope": config.scope, **config.admission()})


async def test_the_pages_budget_is_enforced() -> None:
    actor = _ocr_actor(OcrPoolConfig(replicas=2, max_pages_in_flight=3))
    grants = [await actor.acquire(_page(), timeout=0) for _ in range(3)]
    assert all(isinstance(g, Grant) for g in grants)
    fourth = await actor.acquire(_page(), timeout=0)
    assert isinstance(fourth, Wait) and fourth.reason is WaitReason.IN_FLIGHT
    first = grants[0]
    assert isinstance(first, Grant)
    await actor.release(first.grant_id)
    assert isinstance(await actor.acquire(_page(), timeout=0), Grant)
    await actor.stop()


async def test_the_budget_defaults_to_one_page_per_replica() -> None:
    config = OcrPoolConfig(replicas=4)
    assert config.admission()["max_in_flight"] == 4
    limits = AdmissionConfig.model_validate({"scope": config.scope, **config.admission()})
    assert (limits.max_concurrent_tokens, limits.tpm, limits.rpm) == (None, None, None)


async def test_ocr_pages_and_llm_tokens_do_not_share_a_budget() -> None:
    """An engine scope full of tokens still lets pages through, and a full page
    budget still lets LLM attempts through: two actors, two budgets."""
    ocr = _ocr_actor(OcrPoolConfig(replicas=1))
    engine = AdmissionActor(
        AdmissionConfig(scope="fenceline-inference-engine-short", max_concurrent_tokens=1000)
    )
    llm = await engine.acquire(
        AdmissionRequest(tenant="t", prompt_tokens=900, max_output_tokens=100), timeout=0
    )
    assert isinstance(llm, Grant)
    blocked = await engine.acquire(
        AdmissionRequest(tenant="t", prompt_tokens=1, max_output_tokens=1), timeout=0
    )
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.CONCURRENT_TOKENS
    page = await ocr.acquire(_page(), timeout=0)
    assert isinstance(page, Grant)  # the engine's full token budget is not OCR's
    assert isinstance(await ocr.acquire(_page(), timeout=0), Wait)  # one page: full
    await engine.release(llm.grant_id)
    again = await engine.acquire(
        AdmissionRequest(tenant="t", prompt_tokens=500, max_output_tokens=100), timeout=0
    )
    assert isinstance(again, Grant)  # the full page budget is not the engine's
    assert (await engine.snapshot())["scope"] != (await ocr.snapshot())["scope"]
    await ocr.stop()
    await engine.stop()


def test_one_tenants_many_pages_hold_another_tenants_page_back_one_page_at_most() -> None:
    """Tenant a's pages queue first (a long upload on several drivers), then b's one
    page: as a page comes back, the scope grants b's before a's next, whatever a has
    queued; a cap per tenant keeps a from taking the whole budget too."""
    from pipeline.admission import AdmissionPolicy

    def page(tenant: str) -> AdmissionRequest:
        return AdmissionRequest(tenant=tenant, prompt_tokens=1, max_output_tokens=0)

    config = OcrPoolConfig(replicas=2)
    policy = AdmissionPolicy(AdmissionConfig(scope=config.scope, **config.admission()))
    running = [policy.submit(page("a")) for _ in range(2)]
    policy.dispatch()
    queued_a = [policy.submit(page("a")) for _ in range(50)]
    b = policy.submit(page("b"))
    order: list[str] = []
    while b.grant is None:
        done = running.pop(0)
        assert done.grant is not None
        policy.release(done.grant)
        for ticket in policy.dispatch():
            order.append(ticket.tenant)
            running.append(ticket)
    assert order.count("a") <= 1, order  # at most one of a's pages before b's
    assert sum(t.grant is not None for t in queued_a) <= 1

    capped = OcrPoolConfig(replicas=4, tenant_max_pages_in_flight=2)
    policy = AdmissionPolicy(AdmissionConfig(scope=capped.scope, **capped.admission()))
    grants = [policy.try_acquire(page("a")) for _ in range(3)]
    assert [isinstance(g, Grant) for g in grants] == [True, True, False]
    assert isinstance(grants[2], Wait) and grants[2].reason is WaitReason.TENANT_IN_FLIGHT
    assert isinstance(policy.try_acquire(page("b")), Grant)  # the budget is not a's alone


async def test_the_page_budget_follows_the_running_replicas() -> None:
    actor = _ocr_actor(OcrPoolConfig(replicas=1))
    first = await actor.acquire(_page(), timeout=0)
    assert isinstance(first, Grant)
    assert isinstance(await actor.acquire(_page(), timeout=0), Wait)  # one replica: full
    grown = await actor.resize(2)  # a second replica came up
    assert grown["limits"]["max_in_flight"] == 2
    assert isinstance(await actor.acquire(_page(), timeout=0), Grant)
    await actor.resize(1)  # back to one: the open grants stay, no new one until below
    await actor.release(first.grant_id)
    assert isinstance(await actor.acquire(_page(), timeout=0), Wait)
    await actor.stop()


async def test_a_long_documents_pages_behind_its_ask_show_as_demand_never_as_charge() -> None:
    """A driver asks for a document's pages one at a time, so a 40-page document alone
    is one queued ask: the 38 pages behind it must reach scaling, or a pool of two
    replicas reads it two pages at a time however long it is."""
    config = OcrPoolConfig(
        replicas=2,
        autoscaling=OcrAutoscaling(min_replicas=2, max_replicas=8, target_waiting_per_replica=1),
    )
    actor = _ocr_actor(config)
    for asked in (1, 2):  # the budget's two pages go out
        grant = await actor.acquire(replace(_page(), backlog=40 - asked), timeout=0)
        assert isinstance(grant, Grant)
    third = asyncio.ensure_future(actor.acquire(replace(_page(), backlog=37), timeout=None))
    await asyncio.sleep(0.05)
    snap = await actor.snapshot()
    assert snap["in_flight"] == 2  # the backlog is never charged to the budget
    assert scope_demand(snap) == (1 + 37, 2)
    assert config.autoscaling is not None
    assert decide(config.autoscaling, 2, *scope_demand(snap)) == 8
    # Without the backlog the same queue looks like one page waiting: no growth.
    assert decide(config.autoscaling, 2, sum(snap["queued"].values()), 2) == 2
    third.cancel()
    await actor.stop()


async def test_a_negative_backlog_is_refused() -> None:
    actor = _ocr_actor(OcrPoolConfig(replicas=1))
    with pytest.raises(ValueError, match="backlog"):
        await actor.acquire(replace(_page(), backlog=-1), timeout=0)
    await actor.stop()
