"""Serve deployment vs vLLM ``AsyncLLM`` called directly: the cost of the Serve hop.

The same prompts (synthetic invoices, schema-constrained, greedy) run twice
in one invocation, one engine at a time (a 2-core machine cannot host two):

1. **direct**: ``AsyncLLM`` built from the pool's engine arguments, called in
   this process (chat template rendered here, as the router would);
2. **serve**: the inference app (router + that pool's engine deployment) on a
   local Ray cluster, called through its handle with :class:`ServeEngine`.

Each side runs a warm-up request (structured-output grammar compilation),
then ``--requests`` requests with ``--concurrency`` in flight (closed loop).
Reported per side, with ``vllm bench serve`` names: output tokens/s, TTFT,
ITL and E2EL p50/p99; and the serve/direct ratios. JSON + PNG go to
``results/``.

TTFT and ITL are timed where tokens arrive, which for the serve side is the
engine replica (a handle call does not stream), so that TTFT leaves out the
router and both handle hops. ``ttft_caller_ms`` adds them back per request:
replica TTFT + (caller E2EL − replica E2EL), the time the caller waited outside
the engine. The headline TTFT ratios use it on both sides (on the direct side
the difference is only the call's own overhead); ``ttft_ms`` stays in the JSON
as ``ttft_replica_*`` ratios.

The tuning knobs (``--bind``, ``--allocator``, ``--compile``, ``--max-num-seqs``,
``--max-num-batched-tokens``) override the pool so the same script measured
the CPU defaults in ``docs/inference.md``; ``--mode direct`` runs one side.

Usage::

    python -m benchmarks.engines.compare --pool short --concurrency 8 --requests 24
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.pools import PoolConfig, PoolsConfig, load_pools
from pipeline.extraction import ChatMessage, Completion, Timings
from pipeline.usage import Usage

INVOICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "invoice_number": {"type": "string", "maxLength": 16},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "CHF"]},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["invoice_number", "currency", "total", "paid"],
    "additionalProperties": False,
}

_SUPPLIERS = ("ACME GmbH", "Nordwind AB", "Blue Harbor Ltd", "Cedar & Co", "Kestrel SARL")
_CURRENCIES = ("EUR", "USD", "GBP", "CHF")


def invoice_messages(i: int, *, lines: int = 3) -> list[ChatMessage]:
    """A small synthetic invoice as chat messages; ``lines`` grows the prompt."""
    currency = _CURRENCIES[i % len(_CURRENCIES)]
    body = [f"INVOICE INV-{1000 + i}", f"Supplier: {_SUPPLIERS[i % len(_SUPPLIERS)]}"]
    total = 0.0
    for n in range(lines):
        amount = round(10 + (i * 7 + n * 13) % 90 + 0.25 * n, 2)
        total += amount
        body.append(f"Line {n + 1}: item {chr(65 + n % 26)}-{i % 50} qty 1 {amount:.2f} {currency}")
    body.append(f"Total due: {total:.2f} {currency}. Status: {'PAID' if i % 2 else 'OPEN'}.")
    return [
        {"role": "system", "content": "Extract the invoice fields as JSON."},
        {"role": "user", "content": "\n".join(body)},
    ]


@dataclass
class SideResult:
    """One side's run. ``caller_e2e_s`` is timed around each call by this script,
    one entry per completion, in the same order."""

    name: str
    wall_s: float
    completions: list[Completion]
    errors: list[str]
    caller_e2e_s: list[float]

    def summary(self) -> dict[str, Any]:
        out_tokens = sum(c.usage.completion_tokens for c in self.completions)
        ttft = [c.timings.ttft_s for c in self.completions if c.timings.ttft_s is not None]
        itl = [x for c in self.completions for x in c.timings.itl_s]
        # TTFT/ITL are timed where tokens arrive (the engine replica for "serve": a
        # handle call does not stream); E2EL is timed here, so it includes every hop.
        e2e = self.caller_e2e_s
        # What the caller waited outside the engine, per request (router, handle hops).
        outside = [
            caller - c.timings.e2e_s
            for c, caller in zip(self.completions, self.caller_e2e_s, strict=True)
        ]
        ttft_caller = [
            c.timings.ttft_s + hop
            for c, hop in zip(self.completions, outside, strict=True)
            if c.timings.ttft_s is not None
        ]
        return {
            "side": self.name,
            "requests_ok": len(self.completions),
            "requests_failed": len(self.errors),
            "errors": self.errors[:5],
            "duration_s": round(self.wall_s, 3),
            "total_output_tokens": out_tokens,
            "total_input_tokens": sum(c.usage.prompt_tokens for c in self.completions),
            "output_throughput": out_tokens / self.wall_s if self.wall_s else 0.0,
            "request_throughput": len(self.completions) / self.wall_s if self.wall_s else 0.0,
            "ttft_ms": _pcts(ttft),
            "ttft_caller_ms": _pcts(ttft_caller),
            "outside_engine_ms": _pcts(outside),
            "itl_ms": _pcts(itl),
            "e2el_ms": _pcts(e2e),
            "pools": sorted({c.pool or "?" for c in self.completions}),
        }


def _pcts(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p99": float("nan"), "mean": float("nan")}
    ordered = sorted(values)

    def pct(q: float) -> float:
        k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[k] * 1000

    return {"p50": pct(0.50), "p99": pct(0.99), "mean": statistics.fmean(ordered) * 1000}


async def _drive(call: Any, prompts: list[list[ChatMessage]], concurrency: int) -> SideResult:
    """Closed loop: ``concurrency`` requests in flight until ``prompts`` are done."""
    gate = asyncio.Semaphore(concurrency)
    completions: list[Completion] = []
    errors: list[str] = []
    e2e: list[float] = []

    async def one(messages: list[ChatMessage]) -> None:
        async with gate:
            t0 = time.perf_counter()
            try:
                completions.append(await call(messages))
                e2e.append(time.perf_counter() - t0)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")

    started = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    return SideResult("", time.perf_counter() - started, completions, errors, e2e)


async def run_direct(
    pool: PoolConfig, prompts: list[list[ChatMessage]], args: argparse.Namespace
) -> SideResult:
    """vLLM ``AsyncLLM`` in this process, no Serve."""
    from deployments.engine import render_prompt
    from deployments.vllm_engine import (
        build_engine,
        lora_request,
        sampling_params,
        stream_request,
    )

    lora = lora_request(pool)  # the same adapter a Serve replica of the pool runs with
    engine = build_engine(pool)
    tokenizer = engine.get_tokenizer()

    async def call(messages: list[ChatMessage]) -> Completion:
        started = time.perf_counter()
        ids = render_prompt(tokenizer, messages)
        params = sampling_params(INVOICE_SCHEMA, args.max_tokens)
        s = await stream_request(engine, ids, params, os.urandom(8).hex(), started, lora=lora)
        return Completion(
            text="".join(s.text),
            usage=Usage(s.prompt_tokens, s.token_count, s.cached_tokens),
            timings=Timings(time.perf_counter() - started, s.ttft_s, tuple(s.itl_s), s.queue_s),
            engine="direct",
            model=pool.model_name(),
            pool=pool.name,
            finish_reason=s.finish_reason,
        )

    try:
        await call(invoice_messages(10_000))  # warm-up: grammar compile, first batch
        result = await _drive(call, prompts, args.concurrency)
    finally:
        engine.shutdown()
    result.name = "direct"
    return result


def run_serve(
    pools: PoolsConfig, prompts: list[list[ChatMessage]], args: argparse.Namespace
) -> SideResult:
    """The inference app on a local Ray cluster, through the router's handle."""
    import ray
    from ray import serve

    from deployments.app import deploy_inference_app
    from deployments.router import ServeEngine

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=256 * 1024**2,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}},
        log_to_driver=False,
    )
    try:
        handle = deploy_inference_app(pools, timeout_s=args.deploy_timeout)
        engine = ServeEngine(handle)

        async def call(messages: list[ChatMessage]) -> Completion:
            return await engine.complete(
                messages, json_schema=INVOICE_SCHEMA, max_tokens=args.max_tokens, timeout=120
            )

        async def go() -> SideResult:
            await call(invoice_messages(10_000))
            return await _drive(call, prompts, args.concurrency)

        result = asyncio.run(go())
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
    result.name = "serve"
    return result


def tuned_pool(pool: PoolConfig, args: argparse.Namespace) -> PoolConfig:
    """The pool with the command line's tuning overrides applied."""
    update: dict[str, Any] = {}
    cpu = pool.cpu.model_copy()
    if args.bind is not None:
        cpu.omp_threads_bind = args.bind
    if args.allocator is not None:
        cpu.allocator = args.allocator
    update["cpu"] = cpu
    if args.compile:
        update["enforce_eager"] = False
    if args.eager:
        update["enforce_eager"] = True
    if args.max_num_seqs is not None:
        update["max_num_seqs"] = args.max_num_seqs
    if args.max_num_batched_tokens is not None:
        update["max_num_batched_tokens"] = args.max_num_batched_tokens
    return PoolConfig.model_validate({**pool.model_dump(), **update, "cpu": cpu.model_dump()})


def ratios(direct: dict[str, Any], serve: dict[str, Any]) -> dict[str, float]:
    """serve / direct: >1 for latency means Serve is slower, <1 for throughput.

    ``ttft_*`` compares what callers wait for a first token (``ttft_caller_ms``);
    ``ttft_replica_*`` compares where tokens arrive, without Serve's hops.
    """

    def r(a: float, b: float) -> float:
        return a / b if b else float("nan")

    return {
        "output_throughput": r(serve["output_throughput"], direct["output_throughput"]),
        "ttft_p50": r(serve["ttft_caller_ms"]["p50"], direct["ttft_caller_ms"]["p50"]),
        "ttft_p99": r(serve["ttft_caller_ms"]["p99"], direct["ttft_caller_ms"]["p99"]),
        "ttft_replica_p50": r(serve["ttft_ms"]["p50"], direct["ttft_ms"]["p50"]),
        "ttft_replica_p99": r(serve["ttft_ms"]["p99"], direct["ttft_ms"]["p99"]),
        "itl_p50": r(serve["itl_ms"]["p50"], direct["itl_ms"]["p50"]),
        "itl_p99": r(serve["itl_ms"]["p99"], direct["itl_ms"]["p99"]),
        "e2el_p50": r(serve["e2el_ms"]["p50"], direct["e2el_ms"]["p50"]),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sides = [s for s in ("direct", "serve") if s in report]
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6))
    panels: list[tuple[str, Any, list[str] | None]] = [
        ("output tok/s", lambda s: [report[s]["output_throughput"]], [""]),
        (
            "TTFT ms (caller)",
            lambda s: [report[s]["ttft_caller_ms"]["p50"], report[s]["ttft_caller_ms"]["p99"]],
            None,
        ),
        ("ITL ms", lambda s: [report[s]["itl_ms"]["p50"], report[s]["itl_ms"]["p99"]], None),
        ("E2EL ms", lambda s: [report[s]["e2el_ms"]["p50"], report[s]["e2el_ms"]["p99"]], None),
    ]
    for ax, (title, getter, labels) in zip(axes, panels, strict=True):
        ticks = labels or ["p50", "p99"]
        width = 0.8 / max(len(sides), 1)
        for k, side in enumerate(sides):
            xs = [x + k * width for x in range(len(ticks))]
            ax.bar(xs, getter(side), width=width, label=side)
        ax.set_xticks([x + width * (len(sides) - 1) / 2 for x in range(len(ticks))], ticks)
        ax.set_title(title)
    axes[0].legend()
    cfg = report["config"]
    fig.suptitle(
        f"pool {cfg['pool']} · {cfg['concurrency']} concurrent · {cfg['requests']} requests · "
        f"bind={cfg['bind']} alloc={cfg['allocator']} eager={cfg['enforce_eager']}"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Serve deployment vs AsyncLLM direct.")
    p.add_argument("--pools", default=None)
    p.add_argument("--pool", default="short")
    p.add_argument("--mode", choices=["both", "direct", "serve"], default="both")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--lines", type=int, default=3, help="invoice lines per prompt")
    p.add_argument("--bind", default=None, help="VLLM_CPU_OMP_THREADS_BIND: auto|nobind|0-1")
    p.add_argument("--allocator", default=None, choices=["auto", "tcmalloc", "jemalloc", "none"])
    compiled = p.add_mutually_exclusive_group()
    compiled.add_argument("--compile", action="store_true", help="enforce_eager=False")
    compiled.add_argument("--eager", action="store_true", help="enforce_eager=True")
    p.add_argument("--max-num-seqs", type=int, default=None)
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--deploy-timeout", type=float, default=300)
    p.add_argument("--out", default="results")
    p.add_argument("--label", default=None)
    args = p.parse_args(argv)

    pools = load_pools(args.pools)
    pool = tuned_pool(pools.pool(args.pool), args)
    prompts = [invoice_messages(i, lines=args.lines) for i in range(args.requests)]
    report: dict[str, Any] = {
        "config": {
            "pool": pool.name,
            "model": pool.model_name(),
            "max_model_len": pool.max_model_len,
            "dtype": pool.dtype,
            "concurrency": args.concurrency,
            "requests": args.requests,
            "max_tokens": args.max_tokens,
            "bind": pool.cpu.omp_threads_bind,
            "allocator": pool.cpu.allocator,
            "enforce_eager": pool.enforce_eager,
            "max_num_seqs": pool.max_num_seqs,
            "max_num_batched_tokens": pool.max_num_batched_tokens,
            "label": args.label,
        }
    }
    report["config"]["load_avg_start"] = os.getloadavg()
    if args.mode in ("both", "direct"):
        report["direct"] = asyncio.run(run_direct(pool, prompts, args)).summary()
        gc.collect()  # finalise the stopped AsyncLLM while its modules are still loaded
        print(json.dumps({"direct": report["direct"]}, indent=1), flush=True)
    if args.mode in ("both", "serve"):
        single = PoolsConfig.model_validate({**pools.model_dump(), "pools": [pool.model_dump()]})
        report["serve"] = run_serve(single, prompts, args).summary()
        print(json.dumps({"serve": report["serve"]}, indent=1), flush=True)
    report["config"]["load_avg_end"] = os.getloadavg()
    if "direct" in report and "serve" in report:
        report["ratio_serve_over_direct"] = ratios(report["direct"], report["serve"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"engine_compare-{args.label or pool.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2))
    plot(report, out / f"{stem}.png")
    print(json.dumps(report.get("ratio_serve_over_direct", {}), indent=1))
    print(f"wrote {out / stem}.json and .png")
    return (
        0 if all(not report.get(s, {}).get("requests_failed") for s in ("direct", "serve")) else 1
    )


if __name__ == "__main__":
    sys.exit(main())
