"""The engine under a benchmark run: the fake provider or vLLM behind Ray Serve.

:class:`BenchEngine` starts the scenario's engine once; the main run and the
``pipeline_vs_direct`` baseline share it (so both sides see the same engine
settings and the vLLM start is paid once):

* ``fake``: :class:`benchmarks.infra.FakeProcess`, called over HTTP by
  :class:`pipeline.extraction.engines.OpenAICompatibleEngine`. It does not stream, so
  its TTFT is the time to the whole response (reported as such).
* ``vllm-cpu`` / ``vllm-gpu``: a local Ray head, then the inference app
  (context-length router + one vLLM deployment per pool) from the scenario's
  pools file, as :class:`cluster.runtime.LocalCluster` deploys it, called
  through :class:`deployments.router.ServeEngine`. TTFT and inter-token
  latencies are timed by the engine replica as tokens arrive.

:class:`RecordingEngine` wraps either and keeps every call's timings and usage.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.infra import FakeProcess, free_port
from benchmarks.report import percentile
from benchmarks.scenario import ROOT, Scenario
from pipeline.extraction import Completion, Engine, JsonSchema, Messages, OpenAICompatibleEngine


@dataclass
class CallTiming:
    ok: bool
    e2e_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""


@dataclass
class RecordingEngine:
    """An :class:`Engine` that forwards to ``inner`` and records every call."""

    inner: Engine
    calls: list[CallTiming] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(
        self,
        messages: Messages,
        *,
        json_schema: JsonSchema,
        max_tokens: int,
        timeout: float,
        pool: str | None = None,
    ) -> Completion:
        started = time.perf_counter()
        try:
            out = await self.inner.complete(
                messages, json_schema=json_schema, max_tokens=max_tokens, timeout=timeout,
                pool=pool,
            )  # fmt: skip
        except Exception as exc:
            # A truncated or unparseable answer still reports what it spent.
            usage = getattr(exc, "usage", None)
            self.calls.append(
                CallTiming(
                    False,
                    time.perf_counter() - started,
                    prompt_tokens=usage.prompt_tokens if usage else 0,
                    completion_tokens=usage.completion_tokens if usage else 0,
                    error=type(exc).__name__,
                )
            )
            raise
        self.calls.append(
            CallTiming(
                True,
                time.perf_counter() - started,
                out.timings.ttft_s,
                tuple(out.timings.itl_s),
                out.usage.prompt_tokens,
                out.usage.completion_tokens,
            )
        )
        return out


def _ms_stats(name: str, values: list[float]) -> dict[str, float]:
    """``mean_<name>_ms``, ``median_<name>_ms``, ``p99_<name>_ms`` as vLLM names them."""
    if not values:
        nan = math.nan
        return {f"mean_{name}_ms": nan, f"median_{name}_ms": nan, f"p99_{name}_ms": nan}
    return {
        f"mean_{name}_ms": sum(values) / len(values) * 1000,
        f"median_{name}_ms": percentile(values, 50) * 1000,
        f"p99_{name}_ms": percentile(values, 99) * 1000,
    }


def timing_summary(calls: list[CallTiming], *, streams: bool) -> dict[str, Any]:
    """TTFT, TPOT, ITL and E2EL of successful calls, with ``vllm bench serve`` names.

    Without streaming (``streams=False``) TTFT is the time to the whole response
    and TPOT/ITL are unknown (NaN); ``ttft_source`` says which applies.
    """
    ok = [c for c in calls if c.ok]
    if streams:
        ttft = [c.ttft_s for c in ok if c.ttft_s is not None]
        tpot = [sum(c.itl_s) / len(c.itl_s) for c in ok if c.itl_s]
        itl = [x for c in ok for x in c.itl_s]
    else:
        ttft, tpot, itl = [c.e2e_s for c in ok], [], []
    return {
        "calls": len(calls),
        "ok": len(ok),
        "ttft_source": "first token (engine replica)" if streams else "whole response (no stream)",
        **_ms_stats("ttft", ttft),
        **_ms_stats("tpot", tpot),
        **_ms_stats("itl", itl),
        **_ms_stats("e2el", [c.e2e_s for c in ok]),
        "total_output_tokens": sum(c.completion_tokens for c in ok),
        "total_input_tokens": sum(c.prompt_tokens for c in ok),
        "output_tokens_all_calls": sum(c.completion_tokens for c in calls),
    }


class BenchEngine:
    """Start/stop the scenario's engine; :meth:`engine` builds a fresh client."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.kind = scenario.engine.kind
        self.fake: FakeProcess | None = None
        self._handle: Any = None
        self._deployments: list[str] = []
        self._app = ""
        self._owns_ray = False
        self.start_seconds = 0.0

    @property
    def streams(self) -> bool:
        return self.kind != "fake"

    @property
    def model(self) -> str:
        return "fake-model" if self.kind == "fake" else "pools"

    async def start(self, progress: Any = None) -> None:
        t0 = time.monotonic()
        if self.kind == "fake":
            self.fake = FakeProcess(self.scenario)
            await self.fake.start()
        else:
            await self._start_serve(progress)
        self.start_seconds = time.monotonic() - t0

    async def _start_serve(self, progress: Any) -> None:
        import asyncio

        import ray
        from ray import serve

        from cluster.runtime import forwarded_env
        from deployments.app import deploy_inference_app
        from deployments.pools import load_pools

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        spec = self.scenario.engine
        pools = load_pools(ROOT / str(spec.pools_file))
        self._deployments = pools.engine_deployments()
        self._app = pools.app_name
        if not ray.is_initialized():
            env = {**forwarded_env(), "PYTHONPATH": str(ROOT)}
            ray.init(
                num_cpus=spec.ray_cpus,
                include_dashboard=False,
                object_store_memory=200 * 1024**2,
                log_to_driver=False,
                runtime_env={"env_vars": env},
            )
            self._owns_ray = True
        serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
        if progress:
            progress(f"engine: deploying {[p.name for p in pools.pools]} from {spec.pools_file}")
        self._handle = await asyncio.to_thread(
            deploy_inference_app, pools, timeout_s=spec.deploy_timeout_s
        )

    async def metrics_snapshot(self) -> dict[str, Any] | None:
        """The vLLM replicas' engine-core histograms now (None for the fake provider).

        One handle call per engine deployment reaches one replica: with several
        replicas per pool this sees only some of them (the shipped benchmark pools
        have one). Pools sharing an engine (``served_by``) are read once.
        """
        if self.kind == "fake":
            return None
        from ray import serve

        from benchmarks.engines.metrics import combine

        texts = [
            await serve.get_deployment_handle(name, self._app).metrics_text.remote()
            for name in self._deployments
        ]
        return combine(texts)

    def engine(self) -> Engine:
        """A client for the engine (one per side, so connection pools are not shared)."""
        if self.kind == "fake":
            assert self.fake is not None
            return OpenAICompatibleEngine(self.fake.base_url, "fake-model")
        from deployments.router import ServeEngine

        return ServeEngine(self._handle)

    async def stop(self) -> None:
        if self.fake is not None:
            await self.fake.stop()
            self.fake = None
        if self._owns_ray:
            import ray
            from ray import serve

            serve.shutdown()  # type: ignore[no-untyped-call]
            ray.shutdown()
            self._owns_ray = False


async def close_engine(engine: Engine) -> None:
    """Close an engine client if it has anything to close."""
    inner = engine.inner if isinstance(engine, RecordingEngine) else engine
    aclose = getattr(inner, "aclose", None)
    if aclose is not None:
        await aclose()
