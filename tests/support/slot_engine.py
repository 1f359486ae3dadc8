"""A stand-in vLLM for Serve tests: a scheduler with ``max_num_seqs`` slots, no model.

:class:`SlotEngine` is a :class:`deployments.engine.PoolBackend` that
``PoolEngine(pool, engine_cls=SlotEngine)`` drives inside a real Serve replica. Like
vLLM's scheduler it runs at most ``pool.max_num_seqs`` requests at once and keeps the
rest waiting; each running request holds ``1 / max_num_seqs`` of the KV cache. It
reports that state through the replica's :class:`EngineMetrics` exactly where vLLM's
stat logger does (``metrics.set_load``), so the replica's ``record_autoscaling_stats``
and the pool's autoscaling policy see the real numbers a load makes.

A request holds its slot until the file named by the pool's
``env["FENCELINE_STUB_RELEASE"]`` exists (the test creates it to drain the load),
then answers ``{"ok": true}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deployments.engine_autoscaling import EngineLoad
from deployments.engine_metrics import EngineMetrics
from deployments.pools import PoolConfig
from deployments.vllm_engine import Stream
from pipeline.errors import FencelineError, ProviderUnavailable

RELEASE_ENV = "FENCELINE_STUB_RELEASE"


class SlotEngine:
    def __init__(self, pool: PoolConfig, metrics: EngineMetrics) -> None:
        self.pool, self.metrics = pool, metrics
        self.slots = asyncio.Semaphore(pool.max_num_seqs)
        self.release = Path(pool.env[RELEASE_ENV])
        self.waiting = 0
        self.running = 0

    def _report(self) -> None:
        kv = self.running / self.pool.max_num_seqs
        self.metrics.set_load(EngineLoad(self.waiting, self.running, kv))

    def tokenizer(self) -> Any:
        raise NotImplementedError("send prompt_token_ids")

    async def stream(
        self,
        prompt_token_ids: list[int],
        json_schema: Any,
        max_tokens: int,
        request_id: str,
        started: float,
        into: Stream,
        trace_headers: Mapping[str, str] | None = None,
    ) -> Stream:
        self.waiting += 1
        self._report()
        try:
            await self.slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        self._report()
        try:
            while not self.release.exists():
                await asyncio.sleep(0.05)
            into.prompt_tokens = len(prompt_token_ids)
            into.text.append('{"ok": true}')
            into.token_count, into.finish_reason = 4, "stop"
            return into
        finally:
            self.running -= 1
            self.slots.release()
            self._report()

    async def abort(self, request_id: str) -> None:
        return None

    async def check_health(self) -> None:
        return None

    def unfinished(self) -> int:
        return self.waiting + self.running

    def classify(self, exc: Exception) -> FencelineError:
        return ProviderUnavailable(f"slot engine: {exc}", uncertain=True)

    def shutdown(self) -> None:
        return None


def slot_app(args: dict[str, Any]) -> Any:
    """Serve application builder (``import_path: tests.support.slot_engine:slot_app``).

    ``args.pool`` is a pool document; the app is that pool's engine deployment, with
    the options the inference app gives it, over a :class:`SlotEngine`.
    """
    from ray import serve

    from deployments.engine import PoolEngine

    pool = PoolConfig.model_validate(args["pool"])
    engine: Any = serve.deployment(PoolEngine)
    return engine.options(**pool.deployment_options()).bind(pool.model_dump(), None, SlotEngine)
