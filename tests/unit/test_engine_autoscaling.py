"""The engine replicas' autoscaling rule, Ray-free, and the config Serve gets from a pool.

:func:`deployments.engine_autoscaling.decide` is pure: each test hands it replica
loads and reads the count. The last tests check the glue Serve sees — the
``autoscaling_config`` a pool produces, Serve's own ``AutoscalingConfig`` accepting
it and instantiating the policy class from it — and the replica's stats method.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError

from deployments.engine_autoscaling import (
    KV_USAGE,
    POLICY_PATH,
    RUNNING,
    WAITING,
    EngineLoad,
    EngineReplicaPolicy,
    EngineTargets,
    decide,
    loads_from,
)
from deployments.pools import GPU_POOLS_PATH, load_pools, parse_pools
from tests.unit.test_pool_engine import pool_engine

TARGETS = EngineTargets(waiting_per_replica=2, kv_usage=0.8, downscale_fraction=0.5, max_num_seqs=8)


def replicas(
    current: int, loads: list[EngineLoad], lo: int = 1, hi: int = 4, **kw: float
) -> tuple[int, str]:
    d = decide(loads, current=current, targets=TARGETS, min_replicas=lo, max_replicas=hi, **kw)
    return d.replicas, d.reason


def test_scales_up_when_waiting_requests_per_replica_exceed_the_target():
    # 2 replicas, 5 + 4 waiting = 4.5 per replica > 2; KV moderate.
    loads = [EngineLoad(waiting=5, running=8, kv_usage=0.5), EngineLoad(4, 8, 0.5)]
    n, reason = replicas(2, loads)
    # The excess over target (9 - 2*2 = 5) fills ceil(5/8) = 1 more replica.
    assert n == 3 and reason.startswith("up on queue")
    # A deep queue asks for more than one at once: 2 + ceil((40 - 4) / 8) = 7, clamped to 4.
    deep = [EngineLoad(20, 8, 0.5), EngineLoad(20, 8, 0.5)]
    n, reason = replicas(2, deep)
    assert n == 4 and "clamped to [1, 4]" in reason


def test_handle_queued_requests_count_as_waiting():
    loads = [EngineLoad(waiting=1, running=8, kv_usage=0.5)]
    assert replicas(1, loads)[0] == 1  # 1 waiting ≤ 2: in band
    assert replicas(1, loads, queued=3)[0] == 2  # 4 waiting at vLLM + handles > 2


def test_scales_up_on_kv_usage_even_without_a_queue():
    # Few long documents: nothing waits, but the KV cache is 95 % full.
    loads = [EngineLoad(waiting=0, running=3, kv_usage=0.95)]
    n, reason = replicas(1, loads)
    assert n == 2 and reason.startswith("up on kv")
    # Proportional: 3 replicas at 0.95 want ceil(3 * 0.95 / 0.8) = 4.
    n, _ = replicas(3, [EngineLoad(0, 3, 0.95)] * 3, hi=8)
    assert n == 4


def test_scales_down_to_the_fewest_replicas_that_stay_in_band_when_idle():
    idle = [EngineLoad(0, 0, 0.0)] * 3
    n, reason = replicas(3, idle)
    assert n == 1 and reason.startswith("down")
    # Light load on 4 replicas: 4 * 0.15 = 0.6 of KV, 4 running. Fewest replicas holding
    # that at ≤ 0.4 KV each (half the target): ceil(0.6 / 0.4) = 2; sequences: ceil(4 / 4) = 1.
    light = [EngineLoad(0, 1, 0.15)] * 4
    assert replicas(4, light)[0] == 2
    # ... and on 2 replicas that load sits at 0.3 KV: no scale-up follows (no flapping).
    assert replicas(2, [EngineLoad(0, 2, 0.3)] * 2)[0] == 2


def test_does_not_scale_down_while_either_signal_is_only_moderately_low():
    # KV well below (0.2 ≤ 0.4) but 1.5 waiting per replica (> 1 = half the target): hold.
    loads = [EngineLoad(waiting=1.5, running=8, kv_usage=0.2)] * 2
    n, reason = replicas(2, loads)
    assert n == 2 and reason.startswith("hold in band")
    # No queue but KV 0.6 (between 0.4 and 0.8): hold.
    assert replicas(2, [EngineLoad(0, 4, 0.6)] * 2)[0] == 2


def test_holds_within_the_band_over_a_fluctuating_load():
    # Load wanders between the down and up thresholds: the count never moves.
    for kv, waiting in [(0.45, 0), (0.79, 2), (0.5, 1.5), (0.8, 0), (0.41, 2)]:
        assert replicas(2, [EngineLoad(waiting, 6, kv)] * 2)[0] == 2, (kv, waiting)


def test_bounds_clamp_every_decision():
    busy = [EngineLoad(10, 8, 0.99)]
    assert replicas(2, busy * 2, lo=1, hi=2)[0] == 2
    idle = [EngineLoad(0, 0, 0.0)] * 3
    assert replicas(3, idle, lo=2, hi=4)[0] == 2
    # Fewer running than the minimum (one died): back to the minimum.
    assert replicas(1, [EngineLoad(0, 0, 0.0)], lo=2, hi=4)[0] == 2
    # Scale to zero only where the pool allows it.
    assert replicas(1, [EngineLoad(0, 0, 0.0)], lo=0, hi=4)[0] == 0


def test_without_engine_stats_serve_s_ongoing_rule_applies():
    targets = EngineTargets(target_ongoing_requests=4)
    decision = decide([], current=2, targets=targets, min_replicas=1, max_replicas=4, ongoing=13)
    assert decision.replicas == 4 and "no engine stats" in decision.reason
    decision = decide([], current=2, targets=targets, min_replicas=1, max_replicas=4)
    assert decision.replicas == 1


def test_targets_are_validated():
    for bad in ({"kv_usage": 0}, {"kv_usage": 1.2}, {"downscale_fraction": 1}, {"max_num_seqs": 0}):
        with pytest.raises(ValueError):
            EngineTargets(**bad)  # type: ignore[arg-type]


def test_loads_come_from_serve_s_aggregated_metrics_of_running_replicas_only():
    aggregated = {
        WAITING: {"r1": 3.0, "r2": 0.0, "gone": 9.0},
        RUNNING: {"r1": 8.0, "r2": 1.0, "gone": 9.0},
        KV_USAGE: {"r1": 0.7, "gone": 1.0},  # r2 has not pushed KV yet
    }
    assert loads_from(aggregated, ["r1", "r2"]) == [EngineLoad(3.0, 8.0, 0.7)]
    assert loads_from(None, ["r1"]) == [] and loads_from({}, ["r1"]) == []


def context(**overrides: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "deployment_name": "engine-short",
        "current_num_replicas": 1,
        "target_num_replicas": 1,
        "running_replicas": ["r1"],
        "aggregated_metrics": {WAITING: {"r1": 6.0}, RUNNING: {"r1": 8.0}, KV_USAGE: {"r1": 0.5}},
        "capacity_adjusted_min_replicas": 1,
        "capacity_adjusted_max_replicas": 3,
        "total_queued_requests": 0.0,
        "total_num_requests": 14.0,
        "policy_state": {},
    }
    return SimpleNamespace(**(base | overrides))


def test_the_policy_class_reads_serve_s_context_and_keeps_its_reason():
    policy = EngineReplicaPolicy(waiting_per_replica=2, kv_usage=0.8, max_num_seqs=8)
    n, state = policy(context())
    assert n == 2 and state["wanted"] == 2 and state["reason"].startswith("up on queue")
    idle = {WAITING: {"r1": 0.0, "r2": 0.0}, RUNNING: {"r1": 0.0, "r2": 0.0}}
    idle[KV_USAGE] = {"r1": 0.0, "r2": 0.0}
    ctx = context(current_num_replicas=2, running_replicas=["r1", "r2"], aggregated_metrics=idle)
    assert policy(ctx)[0] == 1


def test_a_pool_s_autoscaling_becomes_serve_s_config_with_the_policy():
    from ray.serve._private.autoscaling_state import _resolve_policy_callable
    from ray.serve.config import AutoscalingConfig

    config = load_pools(GPU_POOLS_PATH)
    for pool in config.engine_pools():
        assert pool.autoscaling is not None
        serve = pool.deployment_options()["autoscaling_config"]
        assert serve["policy"]["policy_function"] == POLICY_PATH
        kwargs = serve["policy"]["policy_kwargs"]
        assert kwargs["max_num_seqs"] == pool.max_num_seqs
        assert kwargs["kv_usage"] == pool.autoscaling.target_kv_usage
        assert kwargs["waiting_per_replica"] == pool.autoscaling.target_waiting_per_replica
        # Serve accepts it, pickles the policy and builds it from policy_kwargs.
        parsed = AutoscalingConfig(**serve)
        assert (parsed.min_replicas, parsed.max_replicas) == (
            pool.autoscaling.min_replicas,
            pool.autoscaling.max_replicas,
        )
        policy = _resolve_policy_callable(parsed.policy)
        assert type(policy).__name__ == "EngineReplicaPolicy"
        assert policy.targets.max_num_seqs == pool.max_num_seqs


@pytest.mark.parametrize(
    "section",
    [
        {"min_replicas": 1, "max_replicas": 2, "target_kv_usage": 1.5},
        {"min_replicas": 1, "max_replicas": 2, "target_kv_usage": 0},
        {"min_replicas": 1, "max_replicas": 2, "target_waiting_per_replica": -1},
        {"min_replicas": 1, "max_replicas": 2, "downscale_fraction": 1},
        {"min_replicas": 3, "max_replicas": 2},
        {"min_replicas": 1, "max_replicas": 2, "target_queue": 3},
    ],
)
def test_invalid_autoscaling_sections_are_refused(section: dict[str, Any]):
    with pytest.raises(ValidationError):
        parse_pools({"pools": [{"name": "a", "max_model_len": 512, "autoscaling": section}]})


def test_serve_timing_knobs_pass_through_only_when_set():
    doc = {"name": "a", "max_model_len": 512, "max_num_seqs": 4}
    plain = parse_pools({"pools": [doc | {"autoscaling": {"max_replicas": 2}}]}).pools[0]
    serve = plain.deployment_options()["autoscaling_config"]
    assert not {"upscale_delay_s", "downscale_delay_s", "metrics_interval_s"} & set(serve)
    fast = {"max_replicas": 2, "upscale_delay_s": 1, "downscale_delay_s": 2}
    quick = parse_pools({"pools": [doc | {"autoscaling": fast}]}).pools[0]
    serve = quick.deployment_options()["autoscaling_config"]
    assert (serve["upscale_delay_s"], serve["downscale_delay_s"]) == (1, 2)


async def test_the_replica_reports_vllm_s_load_while_busy_and_zeros_when_idle():
    engine, tiny = pool_engine()
    engine.metrics.set_load(EngineLoad(waiting=4, running=16, kv_usage=0.9))
    # Nothing in flight: whatever vLLM last logged, the replica is idle.
    assert await engine.record_autoscaling_stats() == {
        WAITING: 0.0,
        RUNNING: 0.0,
        KV_USAGE: 0.0,
    }
    engine._in_flight.add("r")
    assert await engine.record_autoscaling_stats() == {
        WAITING: 4,
        RUNNING: 16,
        KV_USAGE: 0.9,
    }
    # The gauges Prometheus scrapes carry the same numbers.
    assert 'fenceline_engine_kv_cache_usage_ratio{pool="short"} 0.9' in engine.metrics_text()
    assert tiny.pool is engine.pool


async def test_vllm_s_scheduler_stats_are_what_the_replica_reports():
    engine, _ = pool_engine()
    # What vLLM's stat logger hands EngineMetrics.record every engine step.
    scheduler = SimpleNamespace(
        num_waiting_reqs=3, num_running_reqs=5, kv_cache_usage=0.42, prefix_cache_stats=None
    )
    engine.metrics.record(scheduler, None)  # type: ignore[arg-type]
    engine._in_flight.add("r")
    assert await engine.record_autoscaling_stats() == {WAITING: 3, RUNNING: 5, KV_USAGE: 0.42}
