"""Provider budgets that ship (issue 46, item 6), below the cluster: ``fenceline up``'s
flags and the ``FENCELINE_PROVIDER_*`` variables become the provider scope's admission
limits, and the admission actor built from them keeps RPM, TPM and TPD (a day's
tokens, replayed from the ledger after a restart) and a 429's cooldown.

The end-to-end run through ``fenceline up`` with the fake provider is
tests/e2e/test_provider_budgets.py.
"""

from __future__ import annotations

import pytest

from cluster.admission import AdmissionActor
from cluster.cli.entry import build_parser, subcommands
from cluster.cli.system import provider_budgets, provider_of
from cluster.drivers import EngineSpec
from cluster.runtime import ClusterConfig
from pipeline.admission import (
    AdmissionConfig,
    AdmissionPolicy,
    AdmissionRequest,
    Grant,
    PriorityClass,
    Wait,
    WaitReason,
)
from pipeline.admission.grants import GrantOutcome, RestoredGrant
from pipeline.errors import ReservationTooLarge
from pipeline.settings import Settings
from pipeline.usage import Usage

URL = "http://127.0.0.1:9/v1"


def _up(*argv: str) -> object:
    return build_parser(subcommands(plugins=False)).parse_args(["up", *argv])


def _provider_cluster(settings: Settings) -> ClusterConfig:
    return ClusterConfig(settings=settings, engine=EngineSpec(kind="openai", base_url=URL))


def test_up_flags_become_the_provider_scopes_admission_limits() -> None:
    args = _up("--provider-url", URL, "--rpm", "60", "--tpm", "90000", "--tpd", "2000000",
               "--provider-concurrency", "8")  # fmt: skip
    settings = provider_budgets(args, Settings())  # type: ignore[arg-type]
    limits = {"rpm": 60, "tpm": 90_000, "tpd": 2_000_000, "max_in_flight": 8}
    assert settings.provider_limits() == limits
    runtime = _provider_cluster(settings).runtime()
    assert runtime.admission_scopes(settings) == {"fenceline-inference": limits}
    # They travel to the supervisor as FENCELINE_* and come back as the same limits.
    env = settings.to_env()
    assert {k: env[k] for k in env if k.startswith("FENCELINE_PROVIDER_")} == {
        "FENCELINE_PROVIDER_RPM": "60",
        "FENCELINE_PROVIDER_TPM": "90000",
        "FENCELINE_PROVIDER_TPD": "2000000",
        "FENCELINE_PROVIDER_CONCURRENCY": "8",
    }
    AdmissionConfig(scope="p", **runtime.admission_scopes(settings)["fenceline-inference"])


def test_environment_budgets_reach_the_scope_and_a_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FENCELINE_PROVIDER_RPM", "30")
    monkeypatch.setenv("FENCELINE_PROVIDER_TPM", "40000")
    settings = provider_budgets(_up("--provider-url", URL, "--rpm", "10"), Settings())  # type: ignore[arg-type]
    assert settings.provider_limits() == {"rpm": 10, "tpm": 40_000}
    scopes = _provider_cluster(settings).runtime().admission_scopes(settings)
    assert scopes == {"fenceline-inference": {"rpm": 10, "tpm": 40_000}}


def test_the_provider_may_come_from_the_environment_and_a_flag_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FENCELINE_PROVIDER_URL", URL)
    monkeypatch.setenv("FENCELINE_PROVIDER_MODEL", "env-model")
    settings = provider_budgets(_up("--rpm", "10"), Settings())  # type: ignore[arg-type]
    assert settings.provider_limits() == {"rpm": 10}
    assert provider_of(_up(), settings) == (URL, "env-model")  # type: ignore[arg-type]
    flags = _up("--provider-url", "http://other/v1", "--provider-model", "m")
    assert provider_of(flags, settings) == ("http://other/v1", "m")  # type: ignore[arg-type]
    monkeypatch.delenv("FENCELINE_PROVIDER_URL")
    monkeypatch.delenv("FENCELINE_PROVIDER_MODEL")
    assert provider_of(_up(), Settings()) == (None, "default")  # type: ignore[arg-type]


def test_a_budget_without_a_provider_or_not_positive_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SystemExit, match="need --provider-url"):
        provider_budgets(_up("--rpm", "10"), Settings())  # type: ignore[arg-type]
    monkeypatch.setenv("FENCELINE_PROVIDER_TPD", "1000")
    with pytest.raises(SystemExit, match="need --provider-url"):
        provider_budgets(_up(), Settings())  # type: ignore[arg-type]
    with pytest.raises(SystemExit):
        _up("--provider-url", URL, "--tpm", "0")


def test_without_budgets_the_provider_scope_is_unlimited_as_before() -> None:
    settings = provider_budgets(_up("--provider-url", URL), Settings())  # type: ignore[arg-type]
    assert _provider_cluster(settings).runtime().admission_scopes(settings) == {
        "fenceline-inference": {}
    }


def _ask(tokens: int = 100, tenant: str = "t") -> AdmissionRequest:
    return AdmissionRequest(tenant, tokens, 0)


async def test_the_actor_built_from_the_budgets_keeps_rpm_and_the_429_cooldown() -> None:
    limits = Settings(provider_rpm=2, provider_tpm=1000).provider_limits()
    actor = AdmissionActor(AdmissionConfig(scope="provider", **limits))
    first = await actor.acquire(_ask(), timeout=0.0)
    second = await actor.acquire(_ask(), timeout=0.0)
    third = await actor.acquire(_ask(), timeout=0.0)
    assert isinstance(first, Grant) and isinstance(second, Grant)
    assert isinstance(third, Wait) and third.reason is WaitReason.RPM
    await actor.release(first.grant_id, None, uncertain=False, attempted=False)
    await actor.cooldown(30.0)  # a 429's Retry-After, shared by every driver
    refused = await actor.acquire(_ask(), timeout=0.0)
    assert isinstance(refused, Wait) and refused.reason is WaitReason.COOLDOWN
    assert refused.seconds >= 29.0
    await actor.stop()


def test_tpm_counts_charged_tokens_in_the_minute() -> None:
    now = [0.0]
    policy = AdmissionPolicy(AdmissionConfig(scope="p", tpm=1000), clock=lambda: now[0])
    grant = policy.try_acquire(_ask(600))
    assert isinstance(grant, Grant)
    blocked = policy.try_acquire(_ask(600))
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.TPM
    policy.release(grant.grant_id, Usage(prompt_tokens=200, completion_tokens=0))
    assert isinstance(policy.try_acquire(_ask(600)), Grant)  # charged 200, not 600


def test_tpd_holds_a_days_charged_tokens_past_the_minute() -> None:
    now = [0.0]
    config = AdmissionConfig(scope="p", tpm=1000, tpd=1500)
    policy = AdmissionPolicy(config, clock=lambda: now[0])
    for _ in range(2):
        grant = policy.try_acquire(_ask(600))
        assert isinstance(grant, Grant)
        policy.release(grant.grant_id, Usage(prompt_tokens=600, completion_tokens=0))
        now[0] += 61.0  # the minute's window empties; the day's does not
    blocked = policy.try_acquire(_ask(600))
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.TPD
    assert blocked.seconds > 80_000  # until the first charge is a day old
    assert policy.snapshot().day_tokens == 1200
    now[0] = 86_400.0 + 1
    assert isinstance(policy.try_acquire(_ask(600)), Grant)
    with pytest.raises(ReservationTooLarge, match="TPD"):
        AdmissionPolicy(AdmissionConfig(scope="p", tpd=500)).try_acquire(_ask(600))


def test_a_restarted_policy_replays_the_day_for_tpd() -> None:
    config = AdmissionConfig(scope="p", tpm=1000, tpd=1500)
    assert config.replay_seconds() == 86_400.0
    assert AdmissionConfig(scope="p", tpm=1000).replay_seconds() == 60.0
    policy = AdmissionPolicy(config, clock=lambda: 0.0)
    hours_ago = RestoredGrant(
        "g1", "t", PriorityClass.STANDARD, 1000, 3 * 3600.0, GrantOutcome.RECONCILED, 1000, True
    )
    assert policy.restore([hours_ago]) == 1
    snap = policy.snapshot()
    assert (snap.window_tokens, snap.day_tokens) == (0, 1000)
    blocked = policy.try_acquire(_ask(600))
    assert isinstance(blocked, Wait) and blocked.reason is WaitReason.TPD
