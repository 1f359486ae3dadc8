"""Acceptance throughput and latency: Serve vs plain uvicorn vs a bare Starlette endpoint.

Run: ``python -m benchmarks.load.intake_bench [--seconds 10] [--concurrency 16] [--tenants 4]``

Three targets answer the same ``POST /v1/extraction-jobs`` with the same bodies,
one after the other on this machine, from the same closed-loop load generator
(``--concurrency`` requests in flight, unique Idempotency-Key and document per
request):

* ``starlette`` — a bare Starlette endpoint that parses the JSON and answers 202
  (no database): the floor of HTTP + JSON on this machine;
* ``uvicorn`` — the Fenceline app (``pipeline.api.app``) under one uvicorn process:
  authentication, admission (tenant lock, quotas, capacity), document + job +
  outbox event committed before the 202;
* ``uvicorn_nocache`` — the same with the API-key cache off
  (``FENCELINE_API_KEY_CACHE_SIZE=0``: every request reads its key from PostgreSQL);
* ``serve`` — the same app as a Ray Serve ingress (one replica, ``num_cpus=0``)
  as ``fenceline up`` deploys it: HAProxy on the HTTP port forwards to the
  replica, which serves HTTP itself (``RAY_SERVE_ENABLE_HA_PROXY``, see
  ``deployments.intake.PROXY_ENV``);
* ``serve_pyproxy`` — the same behind Serve's Python HTTP proxy, which relays
  each request to the replica over Ray (the default before HAProxy).

``--half-knee`` adds, after each Serve target's closed loop, an open loop of
Poisson arrivals at half the closed loop's saturated rate for ``--seconds``,
and reports its acceptance latency from each scheduled arrival (p50, p99).
``--open-rates 50,100,200`` adds, after the uvicorn and Serve closed loops, one
such window at each fixed rate (``open_rates`` in the results): the tail by
offered rate, which does not move with a noisy knee.

The load generator (``--client``) is :mod:`benchmarks.load.raw_http` by default: keep-alive
sockets opened before the load, about 0.1-0.3 ms of CPU per request here, where
``httpx`` (``--client httpx``, the client before the seventh pass) spends 2.2-3.3 ms
and so took more of the two shared cores than the server it measured (the bare
endpoint answered 440-490 jobs/s under httpx and 6,200-8,100 under the raw
client). Each result reports ``client_cpu_ms_per_request``. The intakes open
their whole pool at start, as ``fenceline up`` deploys them; ``--no-freeze``
starts uvicorn without freezing its heap (``pipeline.process_heap``), for the A/B (a
Serve replica freezes its own: ``RAY_SERVE_FREEZE_GC_ON_STARTUP``).

Ratios are the headline (these machines are noisy and the load generator shares
the cores): throughput of each target over ``starlette``, and ``serve`` over
``uvicorn``. Each target also reports the CPU its server processes spent per
answered request (``cpu_ms_per_request``: the uvicorn process; for Serve the
replica, HAProxy and the proxy actor), which, unlike jobs/s, does not move with
what the load generator leaves of the cores. After each Fenceline run the bench
checks that every 202 left a job and an outbox event in PostgreSQL. Results:
``results/intake/intake_bench.json`` and ``.png``.

``--serve-replicas N`` deploys N intake replicas behind Serve's proxy (default 1).

``--profile DIR`` samples the Fenceline targets with py-spy while the load runs
(``--nonblocking``, so sampling does not pause them): the uvicorn process, and the
Serve replica and HTTP proxy (found among this run's own Ray processes), each as
a flame graph ``DIR/intake_<target>[_<process>].svg``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchmarks.infra import free_port
from benchmarks.load.generator import OpenLoopGenerator, lag_stats, schedule
from benchmarks.load.raw_http import RawPool
from benchmarks.report import percentile, write_json
from benchmarks.scenario import ArrivalSpec
from benchmarks.settings import admin_dsn
from pipeline.database import connect, create_database, drop_database
from pipeline.process_heap import freeze_startup_heap
from pipeline.tenants import create_api_key, create_tenant

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "intake"
#: Keep-alive connections the open loop may hold, and how many the raw client opens first.
OPEN_LOOP_CONNECTIONS = 256
OPEN_LOOP_WARM = 32
#: Connections the intake's pool opens at start (Settings.db_pool_max's default).
POOL = 10


# ---------------------------------------------------------------- the baseline
async def _bare_accept(request: Request) -> JSONResponse:
    body = await request.json()
    job_id = uuid.uuid4()
    return JSONResponse(
        {
            "job_id": str(job_id),
            "state": "READY",
            "status_url": f"/v1/extraction-jobs/{job_id}",
            "chars": len(body["document"]["text"]),
        },
        status_code=202,
        headers={"Location": f"/v1/extraction-jobs/{job_id}"},
    )


def bare_app() -> Starlette:
    """``uvicorn --factory benchmarks.load.intake_bench:bare_app``: JSON in, 202 out."""
    return Starlette(routes=[Route("/v1/extraction-jobs", _bare_accept, methods=["POST"])])


# ------------------------------------------------------------------- plumbing
async def wait_up(url: str, path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=url, timeout=2) as client:
        while True:
            try:
                r = await client.get(path)
                if r.status_code < 500 or path == "/nope":
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not up after {timeout} s")
            await asyncio.sleep(0.1)


def uvicorn_app(factory: str, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "uvicorn", "--factory", factory,
        "--host", "127.0.0.1", "--port", str(port),
        "--log-level", "warning", "--no-access-log",
    ]  # fmt: skip
    return subprocess.Popen(cmd, env={**os.environ, **env}, cwd=ROOT)


async def bench_database() -> tuple[str, str]:
    name = f"fl_intake_bench_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    return name, await create_database(admin_dsn(), name)


async def drop_bench_database(name: str) -> None:
    await drop_database(admin_dsn(), name)


async def tenant_keys(dsn: str, tenants: int) -> list[str]:
    conn = await connect(dsn)
    keys = []
    try:
        for i in range(tenants):
            t = await create_tenant(conn, f"bench-{i}-{uuid.uuid4().hex[:6]}")
            keys.append((await create_api_key(conn, t.id))[1])
    finally:
        await conn.close()
    return keys


# ------------------------------------------------------------------ profiling
def _py_spy(pid: int, svg: Path, seconds: float) -> subprocess.Popen[bytes] | None:
    """Sample ``pid`` for ``seconds`` into ``svg`` (None without py-spy)."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        print("   py-spy not found: no profile", flush=True)
        return None
    svg.parent.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "record", "--nonblocking", "-r", "100", "-d", str(int(seconds) + 1),
           "-o", str(svg), "--pid", str(pid)]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _own_ray_processes(*titles: str) -> dict[str, int]:
    """Pids of this driver's own Ray workers whose title contains one of ``titles``.

    Only descendants of this process: other Ray clusters on the machine are not
    touched.
    """
    import psutil

    found: dict[str, int] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        for title in titles:
            if title in cmdline and title not in found:
                found[title] = child.pid
    return found


async def _profiled_load(
    url: str, keys: list[str], args: argparse.Namespace, targets: dict[str, int]
) -> dict[str, Any]:
    """The closed loop, with the CPU each of ``targets`` (name -> pid) spent on it.

    ``server_cpu_ms`` holds each target's CPU time (user + system) over the whole
    run, warm-up included, and ``cpu_ms_per_request`` the targets' sum over every
    answered request: a figure that does not depend on how much CPU the load
    generator left the server, unlike jobs/s on a shared machine. Python targets
    are also sampled with py-spy under ``--profile``.
    """
    spies: list[subprocess.Popen[bytes]] = []
    profile = getattr(args, "profile", None)
    if profile is not None:
        for name, pid in targets.items():
            if name.endswith("haproxy"):
                continue  # not a Python process
            spy = _py_spy(pid, Path(profile) / f"intake_{name}.svg", args.warmup + args.seconds)
            if spy is not None:
                spies.append(spy)
    before = _cpu_seconds(targets)
    try:
        result = await load(
            url,
            keys,
            seconds=args.seconds,
            warmup=args.warmup,
            concurrency=args.concurrency,
            client=getattr(args, "client", "raw"),
        )
    finally:
        for spy in spies:
            try:
                await asyncio.to_thread(spy.wait, 30)
            except subprocess.TimeoutExpired:
                spy.terminate()
    after = _cpu_seconds(targets)
    spent = {name: (after[name] - before[name]) * 1000 for name in before if name in after}
    result["server_cpu_ms"] = spent
    answered = result["answered_incl_warmup"]
    result["cpu_ms_per_request"] = sum(spent.values()) / answered if answered else float("nan")
    return result


def _cpu_seconds(targets: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each live process in ``targets``."""
    import psutil

    out: dict[str, float] = {}
    for name, pid in targets.items():
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[name] = t.user + t.system
    return out


# ------------------------------------------------------------- load generator
Post = Callable[[str, dict[str, Any], dict[str, str]], Awaitable[int]]


@asynccontextmanager
async def _client(url: str, kind: str, connections: int, warm: int) -> AsyncIterator[Post]:
    """A ``post(path, json, headers) -> status`` over ``kind``'s keep-alive pool.

    ``raw`` (:mod:`benchmarks.load.raw_http`) opens ``warm`` connections before the
    first request and costs the shared cores a fraction of ``httpx``'s CPU per
    request; ``httpx`` opens connections as requests need them (the bench's
    client before the seventh pass).
    """
    # The load generator's own heap (Ray, the app's modules) frozen too: a full
    # collection in this process would stall every request it is timing.
    freeze_startup_heap()
    if kind == "raw":
        pool = RawPool.for_url(url, size=connections)
        await pool.warm(warm)

        async def raw_post(path: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
            return (await pool.post_json(path, payload, headers)).status

        try:
            yield raw_post
        finally:
            await pool.close()
        return
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:

        async def httpx_post(path: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
            return (await client.post(path, json=payload, headers=headers)).status_code

        yield httpx_post


async def load(
    url: str,
    keys: list[str],
    *,
    seconds: float,
    warmup: float,
    concurrency: int,
    client: str = "raw",
) -> dict[str, Any]:
    """Closed loop: ``concurrency`` workers, each sends its next POST when one returns."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    all_202 = 0
    answered = 0
    async with _client(url, client, concurrency, concurrency) as post:
        stop_at = time.perf_counter() + warmup + seconds
        measure_from = time.perf_counter() + warmup
        cpu_from = time.process_time()

        async def worker(n: int) -> None:
            nonlocal all_202, answered
            i = 0
            key = keys[n % len(keys)]
            while (now := time.perf_counter()) < stop_at:
                i += 1
                body = {"document": {"text": f"INVOICE {n}-{i}-{uuid.uuid4().hex} total 10.00 EUR"}}
                headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": uuid.uuid4().hex}
                status = await post("/v1/extraction-jobs", body, headers)
                done = time.perf_counter()
                answered += 1
                if status == 202:
                    all_202 += 1
                if now >= measure_from:
                    statuses[status] = statuses.get(status, 0) + 1
                    if status == 202:
                        latencies.append(done - now)

        started = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        elapsed = time.perf_counter() - started - warmup
        client_cpu_s = time.process_time() - cpu_from
    accepted = statuses.get(202, 0)
    return {
        "client": client,
        "accepted": accepted,
        "accepted_incl_warmup": all_202,
        "answered_incl_warmup": answered,
        "statuses": statuses,
        "seconds": elapsed,
        "jobs_per_s": accepted / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "mean_ms": (sum(latencies) / len(latencies) * 1000) if latencies else float("nan"),
        "client_cpu_ms_per_request": client_cpu_s * 1000 / answered if answered else float("nan"),
    }


async def open_load(
    url: str, keys: list[str], *, rate: float, seconds: float, client: str = "raw"
) -> dict[str, Any]:
    """Open loop: Poisson arrivals at ``rate``/s for ``seconds``, each sent at its time.

    Latency counts from the scheduled arrival to the answer, so time spent
    waiting for a client connection is included.
    """
    offsets = schedule(ArrivalSpec(process="poisson", rate=rate, duration_s=seconds), seed=21)
    async with _client(url, client, OPEN_LOOP_CONNECTIONS, OPEN_LOOP_WARM) as post:

        async def fire(i: int) -> tuple[str, int | None, Any]:
            body = {"document": {"text": f"INVOICE open-{i}-{uuid.uuid4().hex} total 10.00 EUR"}}
            headers = {
                "Authorization": f"Bearer {keys[i % len(keys)]}",
                "Idempotency-Key": uuid.uuid4().hex,
            }
            status = await post("/v1/extraction-jobs", body, headers)
            return ("accepted" if status == 202 else "refused"), status, None

        cpu_from = time.process_time()
        sends = await OpenLoopGenerator(offsets, fire).run(timeout=60)
        client_cpu_s = time.process_time() - cpu_from
    latencies = [s.done - s.scheduled for s in sends if s.done is not None and s.status == 202]
    accepted = sum(1 for s in sends if s.status == 202)
    return {
        "client": client,
        "rate": rate,
        "sent": len(sends),
        "accepted": accepted,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "client_cpu_ms_per_request": client_cpu_s * 1000 / len(sends) if sends else float("nan"),
        **lag_stats(sends),
    }


async def _committed(dsn: str) -> tuple[int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        jobs = await conn.fetchval("SELECT count(*) FROM extraction_jobs")
        events = await conn.fetchval(
            "SELECT count(*) FROM outbox_events WHERE event_type = 'extraction.requested.v1'"
        )
    finally:
        await conn.close()
    return int(jobs), int(events)


def _check_durable(result: dict[str, Any], jobs: int, events: int) -> None:
    """Every 202 (warm-up included) must have left exactly one job and one event."""
    result["committed_jobs"], result["committed_events"] = jobs, events
    result["durable"] = jobs == events == result["accepted_incl_warmup"]
    if not result["durable"]:
        raise AssertionError(
            f"{result['accepted_incl_warmup']} accepted but {jobs} jobs / {events} events"
        )


# ------------------------------------------------------------------- targets
async def run_starlette(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    proc = uvicorn_app("benchmarks.load.intake_bench:bare_app", port, {})
    try:
        url = f"http://127.0.0.1:{port}"
        await wait_up(url, "/nope")
        return await _profiled_load(url, ["none"], args, {"starlette": proc.pid})
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def run_uvicorn(args: argparse.Namespace, *, key_cache: bool = True) -> dict[str, Any]:
    name, dsn = await bench_database()
    port = free_port()
    # The whole pool open at start, as ``fenceline up`` and the KubeRay ConfigMap do.
    env = {"FENCELINE_DATABASE_URL": dsn, "FENCELINE_DB_POOL_MIN": str(POOL)}
    if getattr(args, "no_freeze", False):
        env["FENCELINE_FREEZE_HEAP_AT_START"] = "false"
    if not key_cache:
        env["FENCELINE_API_KEY_CACHE_SIZE"] = "0"
    proc = uvicorn_app("pipeline.api.app:app_from_env", port, env)
    try:
        keys = await tenant_keys(dsn, args.tenants)
        url = f"http://127.0.0.1:{port}"
        await wait_up(url, "/readyz")
        result = await _profiled_load(url, keys, args, {"uvicorn": proc.pid})
        _check_durable(result, *await _committed(dsn))
        await _open_loops(url, keys, dsn, result, args, label="uvicorn", half_knee=False)
        return result
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        await drop_bench_database(name)


async def run_serve(args: argparse.Namespace, *, haproxy: bool = True) -> dict[str, Any]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    from deployments.intake import deploy_intake_app, proxy_env_defaults

    name, dsn = await bench_database()
    # The head's processes read the switch when ray.init starts them.
    os.environ["RAY_SERVE_ENABLE_HA_PROXY"] = "1" if haproxy else "0"
    proxy_env_defaults()
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}},
        log_to_driver=False,
    )
    try:
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        await asyncio.to_thread(
            deploy_intake_app,
            {"database_url": dsn, "db_pool_min": POOL},
            timeout_s=180,
            num_replicas=getattr(args, "serve_replicas", 1),
        )
        keys = await tenant_keys(dsn, args.tenants)
        url = f"http://127.0.0.1:{port}"
        await wait_up(url, "/readyz")
        pids = _own_ray_processes("ServeReplica:intake", "ProxyActor", "bin/haproxy")
        titles = {
            "ServeReplica:intake": "serve_replica",
            "ProxyActor": "serve_proxy",
            "bin/haproxy": "serve_haproxy",
        }
        targets = {("" if haproxy else "pyproxy_") + titles[k]: v for k, v in pids.items()}
        result = await _profiled_load(url, keys, args, targets)
        _check_durable(result, *await _committed(dsn))
        await _open_loops(url, keys, dsn, result, args, label="serve", half_knee=True)
        return result
    finally:
        serve.shutdown()  # type: ignore[no-untyped-call]
        ray.shutdown()
        await drop_bench_database(name)


def open_rates(text: str) -> list[float]:
    """``--open-rates 50,100,200``: offered rates in accepts per second, each > 0."""
    try:
        rates = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected rates like 50,100,200, not {text!r}") from None
    if not rates or any(not r > 0 for r in rates):
        raise argparse.ArgumentTypeError(f"every rate must be > 0, got {text!r}")
    return rates


async def _open_loops(
    url: str,
    keys: list[str],
    dsn: str,
    closed: dict[str, Any],
    args: argparse.Namespace,
    *,
    label: str,
    half_knee: bool,
) -> None:
    """After a target's closed loop: ``--half-knee`` (Serve targets) and each of
    ``--open-rates``, open loops of ``--seconds`` each, results added to ``closed``.

    Every 202 of every window must have left a job and an outbox event.
    """
    accepted = closed["accepted_incl_warmup"]
    windows: list[tuple[str, float]] = []
    if half_knee and getattr(args, "half_knee", False):
        windows.append(("half_knee", closed["jobs_per_s"] / 2))
    windows += [("open_rates", rate) for rate in getattr(args, "open_rates", None) or []]
    for key, rate in windows:
        what = "half the knee" if key == "half_knee" else "a fixed rate"
        print(f"-- {label}, open loop at {what}: {rate:.0f}/s for {args.seconds:.0f} s")
        window = await open_load(
            url, keys, rate=rate, seconds=args.seconds, client=getattr(args, "client", "raw")
        )
        accepted += window["accepted"]
        jobs, events = await _committed(dsn)
        if not jobs == events == accepted:
            raise AssertionError(f"{accepted} accepted but {jobs} jobs / {events} events")
        print(
            f"   accepted {window['accepted']}/{window['sent']}   "
            f"p50 {window['p50_ms']:6.1f} ms   p99 {window['p99_ms']:6.1f} ms   "
            f"max send lag {window['max_lag_s'] * 1000:.1f} ms"
        )
        if key == "half_knee":
            closed["half_knee"] = window
        else:
            closed.setdefault("open_rates", []).append(window)


def _plot(results: dict[str, dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    rates = [results[n]["jobs_per_s"] for n in names]
    left.bar(
        names, rates, color=["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"][: len(names)]
    )
    left.set_title("accepted jobs/s (closed loop)")
    for i, v in enumerate(rates):
        left.annotate(f"{v:.0f}", (i, v), ha="center", va="bottom")
    width = 0.38
    xs = range(len(names))
    p50 = [results[n]["p50_ms"] for n in names]
    p99 = [results[n]["p99_ms"] for n in names]
    right.bar([x - width / 2 for x in xs], p50, width, label="p50")
    right.bar([x + width / 2 for x in xs], p99, width, label="p99")
    right.set_xticks(list(xs), names)
    right.set_ylabel("ms")
    right.set_title("acceptance latency (202)")
    right.legend()
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "intake_bench.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    async def run_uvicorn_nocache(args: argparse.Namespace) -> dict[str, Any]:
        return await run_uvicorn(args, key_cache=False)

    async def run_serve_pyproxy(args: argparse.Namespace) -> dict[str, Any]:
        return await run_serve(args, haproxy=False)

    runners = {
        "starlette": run_starlette,
        "uvicorn": run_uvicorn,
        "uvicorn_nocache": run_uvicorn_nocache,
        "serve": run_serve,
        "serve_pyproxy": run_serve_pyproxy,
    }
    results: dict[str, dict[str, Any]] = {}
    for name in args.targets:
        print(f"-- {name}: {args.seconds:.0f} s at concurrency {args.concurrency}", flush=True)
        results[name] = await runners[name](args)
        r = results[name]
        print(
            f"   {r['jobs_per_s']:8.1f} jobs/s   p50 {r['p50_ms']:6.1f} ms   "
            f"p99 {r['p99_ms']:6.1f} ms   statuses {r['statuses']}",
            flush=True,
        )
        cpu = "  ".join(f"{k} {v:.0f} ms" for k, v in r.get("server_cpu_ms", {}).items())
        per_request = r.get("cpu_ms_per_request", float("nan"))
        print(
            f"   server CPU {per_request:.2f} ms per request ({cpu}); "
            f"load generator ({r['client']}) {r['client_cpu_ms_per_request']:.2f} ms"
        )
    base = results.get("starlette")
    ratios: dict[str, float] = {}
    for name, r in results.items():
        if base and name != "starlette":
            ratios[f"{name}/starlette jobs_per_s"] = r["jobs_per_s"] / base["jobs_per_s"]
            ratios[f"{name}/starlette p50"] = r["p50_ms"] / base["p50_ms"]
            ratios[f"{name}/starlette p99"] = r["p99_ms"] / base["p99_ms"]
            ratios[f"{name}/starlette cpu per request"] = (
                r["cpu_ms_per_request"] / base["cpu_ms_per_request"]
            )
    if "uvicorn" in results and "uvicorn_nocache" in results:
        c, n = results["uvicorn"], results["uvicorn_nocache"]
        ratios["key cache on/off jobs_per_s"] = c["jobs_per_s"] / n["jobs_per_s"]
        ratios["key cache on/off p50"] = c["p50_ms"] / n["p50_ms"]
    if "serve" in results and "uvicorn" in results:
        s, u = results["serve"], results["uvicorn"]
        ratios["serve/uvicorn jobs_per_s"] = s["jobs_per_s"] / u["jobs_per_s"]
        ratios["serve/uvicorn p50"] = s["p50_ms"] / u["p50_ms"]
        ratios["serve/uvicorn p99"] = s["p99_ms"] / u["p99_ms"]
        ratios["serve/uvicorn cpu per request"] = s["cpu_ms_per_request"] / u["cpu_ms_per_request"]
    if "serve" in results and "serve_pyproxy" in results:
        ratios["haproxy/python proxy jobs_per_s"] = (
            results["serve"]["jobs_per_s"] / results["serve_pyproxy"]["jobs_per_s"]
        )
    print("ratios:")
    for k, v in ratios.items():
        print(f"   {k:28s} {v:6.2f}")
    report = {
        "benchmark": "intake",
        "params": vars(args),
        "results": results,
        "ratios": ratios,
    }
    print(write_json(OUT, "intake_bench", report))
    print(_plot(results, OUT))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load.intake_bench")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument(
        "--targets", nargs="+", default=["starlette", "uvicorn", "serve"],
        choices=["starlette", "uvicorn", "uvicorn_nocache", "serve", "serve_pyproxy"],
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None, help="py-spy flame graphs into this folder"
    )
    parser.add_argument(
        "--serve-replicas", type=int, default=1, help="intake replicas behind Serve's proxy"
    )
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="load generator's HTTP client (raw: lean keep-alive sockets; httpx: as before)",
    )
    parser.add_argument(
        "--no-freeze",
        action="store_true",
        help="uvicorn's intake does not freeze its heap at start (pipeline.process_heap A/B)",
    )
    parser.add_argument(
        "--open-rates",
        type=open_rates,
        default=None,
        metavar="R1,R2,...",
        help="after the uvicorn and Serve closed loops, open-loop Poisson arrivals at each "
        "of these rates for --seconds each (p50, p99 per rate)",
    )
    parser.add_argument(
        "--half-knee",
        action="store_true",
        help="after Serve's closed loop, open-loop Poisson arrivals at half its rate (p99)",
    )
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
