"""Sub-commands that run and use the system: ``up``, ``down``, ``api``, ``submit``, ``review``."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
import uuid
from datetime import UTC
from pathlib import Path
from typing import Any

import httpx

from cluster.cli.base import CommandTable
from cluster.cli.polling import Backoff, PoliteClient
from pipeline.settings import Settings
from pipeline.tenants import LOCAL_TENANT, IssuedKey, console_key
from pipeline.text_safety import visible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def pid_file(settings: Settings) -> Path:
    """Where ``fenceline up`` writes its pid (``FENCELINE_STATE_DIR``, default ``.fenceline``)."""
    return settings.state_dir / "up.pid"


def api_key(args: argparse.Namespace, settings: Settings) -> str | None:
    """``--api-key``, else ``FENCELINE_API_KEY`` (through :class:`Settings`)."""
    if args.api_key is not None:
        return str(args.api_key)
    return settings.api_key.get_secret_value() if settings.api_key is not None else None


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def provider_of(args: argparse.Namespace, settings: Settings) -> tuple[str | None, str]:
    """The provider's URL and model: ``--provider-url``/``--provider-model``, else
    ``FENCELINE_PROVIDER_URL``/``_MODEL``; no URL: the Serve pools, no provider."""
    url = args.provider_url or settings.provider_url
    return url, args.provider_model or settings.provider_model or "default"


def provider_budgets(args: argparse.Namespace, settings: Settings) -> Settings:
    """``settings`` with the provider budgets the flags give (a flag wins over its
    ``FENCELINE_PROVIDER_*`` variable); they reach the supervisor through the
    ``runtime_env`` and become the provider scope's admission limits.

    Raises:
        SystemExit: a budget without a provider (``--provider-url`` or
            ``FENCELINE_PROVIDER_URL``; the Serve pools are budgeted
            by their KV caches; a provider budget would limit nothing there).
    """
    flags = {
        "provider_rpm": args.rpm,
        "provider_tpm": args.tpm,
        "provider_tpd": args.tpd,
        "provider_concurrency": args.provider_concurrency,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if not provider_of(args, settings)[0] and (given or settings.provider_limits()):
        raise SystemExit(
            "provider budgets (--rpm, --tpm, --tpd, --provider-concurrency or "
            "FENCELINE_PROVIDER_*) need --provider-url (or FENCELINE_PROVIDER_URL)"
        )
    return settings.model_copy(update=given) if given else settings


def _up_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drivers", type=int, default=2, help="drivers at start (2)")
    p.add_argument(
        "--min-drivers", type=int, default=None,
        help="autoscaling floor (FENCELINE_DRIVER_MIN, default 1)",
    )  # fmt: skip
    p.add_argument(
        "--max-drivers", type=int, default=None,
        help="autoscaling ceiling (FENCELINE_DRIVER_MAX; default --drivers)",
    )  # fmt: skip
    p.add_argument(
        "--fixed-drivers", action="store_true",
        help="no driver autoscaling (FENCELINE_DRIVER_AUTOSCALING=false)",
    )  # fmt: skip
    p.add_argument("--concurrency", type=int, default=4, help="attempts per driver")
    p.add_argument("--port", type=int, default=8000, help="intake HTTP port")
    p.add_argument("--pools", type=Path, default=None, help="pools file (deployments/pools.yaml)")
    p.add_argument(
        "--provider-url",
        help="use an OpenAI-compatible provider instead of vLLM (FENCELINE_PROVIDER_URL)",
    )
    p.add_argument(
        "--provider-model",
        default=None,
        help="the provider's model (FENCELINE_PROVIDER_MODEL, default 'default')",
    )
    budgets = p.add_argument_group(
        "provider budgets",
        "the provider project's limits, shared by every driver through one admission "
        "actor (with --provider-url; FENCELINE_PROVIDER_RPM/_TPM/_TPD/_CONCURRENCY)",
    )
    for flag, what in (
        ("--rpm", "requests per sliding minute"),
        ("--tpm", "charged tokens per sliding minute"),
        ("--tpd", "charged tokens per sliding day"),
        ("--provider-concurrency", "concurrent provider calls, all drivers together"),
    ):
        budgets.add_argument(flag, type=_positive_int, default=None, metavar="N", help=what)
    p.add_argument(
        "--console-tenant",
        default=None,
        metavar="NAME",
        help="tenant whose review-console key to print at start (default: 'default', "
        "created on a database without tenants)",
    )
    p.add_argument(
        "--no-console-key", action="store_true", help="print no review-console key at start"
    )
    p.add_argument(
        "--eager",
        action="store_true",
        help="start the engines without torch.compile (~47 s faster start, ~5 %% slower decode)",
    )


@command(
    "up", "start a local cluster in the foreground (Ctrl-C or `fenceline down` stops)", _up_args
)
def _up(args: argparse.Namespace, settings: Settings) -> int:
    """Without a reachable database and none configured, on an embedded PostgreSQL
    in the state folder for as long as the cluster runs (:mod:`cluster.embedded_postgres`)."""
    from cluster.embedded_postgres import local_database

    with local_database(settings) as local:
        return _up_on(args, local)


def _up_on(args: argparse.Namespace, settings: Settings) -> int:
    from cluster.drivers import EngineSpec
    from cluster.runtime import ClusterConfig, LocalCluster
    from pipeline.extraction import DocumentLimits
    from pipeline.jobs import setup_database
    from pipeline.worker import WorkerConfig

    scaling = {
        k: v
        for k, v in {
            "driver_min": args.min_drivers,
            "driver_max": args.max_drivers,
            "driver_autoscaling": False if args.fixed_drivers else None,
        }.items()
        if v is not None
    }
    if scaling:  # they reach the supervisor as FENCELINE_* in the runtime_env
        settings = settings.model_copy(update=scaling)
    settings = provider_budgets(args, settings)
    if settings.kek is None and settings.kek_file is None:
        # invoice text is sealed at rest locally too, under a KEK in the state folder
        from pipeline.envelope import with_local_kek

        settings = with_local_kek(settings)
        print(f"invoice text is sealed at rest under the key-encryption key {settings.kek_file}")
    for warning in asyncio.run(setup_database(settings)).warnings:
        print(f"warning: {warning}", file=sys.stderr)
    issued = None
    tenant = args.console_tenant or LOCAL_TENANT
    if not args.no_console_key:
        issued = asyncio.run(_console_key(settings, tenant))
    provider_url, provider_model = provider_of(args, settings)
    engine = (
        EngineSpec(kind="openai", base_url=provider_url, model=provider_model)
        if provider_url
        else EngineSpec()
    )
    cluster = LocalCluster(
        ClusterConfig(
            settings=settings,
            pools_file=args.pools,
            drivers=args.drivers,
            engine=engine,
            http_port=args.port,
            worker=WorkerConfig(
                worker_id="driver",
                concurrency=args.concurrency,
                attempt_timeout_seconds=settings.attempt_timeout_seconds,
                heartbeat_seconds=settings.heartbeat_seconds,
                contract=settings.extraction_contract,
                limits=DocumentLimits.from_settings(settings),
                max_document_pages=settings.max_document_pages,
            ),
            eager=args.eager,
        )
    )
    pid_path = pid_file(settings)
    pid_path.parent.mkdir(exist_ok=True)
    pid_path.write_text(str(os.getpid()))
    stop = {"now": False}

    def _stop(_sig: int, _frame: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        cluster.start()
        print(f"fenceline is up: intake {cluster.intake_url}/v1/extraction-jobs")
        print(console_banner(cluster.intake_url, None if args.no_console_key else tenant, issued))
        while not stop["now"]:
            time.sleep(0.5)
    finally:
        print("stopping: drivers finish or release their leases ...")
        cluster.stop()
        pid_path.unlink(missing_ok=True)
    return 0


#: How long the console key ``fenceline up`` prints stays valid.
CONSOLE_KEY_SECONDS = 24 * 3600.0


async def _console_key(settings: Settings, tenant: str) -> IssuedKey | None:
    from pipeline.database import connect

    conn = await connect(settings.database_url)
    try:
        return await console_key(conn, tenant, expires_in_seconds=CONSOLE_KEY_SECONDS)
    finally:
        await conn.close()


def console_banner(intake_url: str, tenant: str | None, issued: IssuedKey | None) -> str:
    """What ``fenceline up`` prints about the review console: its URL and, when one was
    issued, the key to sign in with (shown this once: only its digest is stored).

    ``tenant`` None: no key was asked for (``--no-console-key``).
    """
    url = f"review console: {intake_url}/console"
    create = "fenceline keys create --tenant NAME --scope jobs --scope review"
    if tenant is None:
        return f"{url}\n  sign in with a key that has the review scope ({create})"
    if issued is None:
        return (
            f"{url}\n  the database has tenants but none named {visible(tenant)!r}: "
            f"fenceline up --console-tenant NAME prints a key, or {create}"
        )
    at = issued.expires_at
    expires = "" if at is None else f", expires {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    return (
        f"{url}\n  sign in with {issued.secret}\n  (tenant {visible(tenant)}, scopes "
        f"{', '.join(issued.scopes)}{expires}; shown once, not stored)"
    )


@command("down", "stop the cluster started by `fenceline up`")
def _down(_args: argparse.Namespace, settings: Settings) -> int:
    pid_path = pid_file(settings)
    if not pid_path.exists():
        print("no running `fenceline up` found", file=sys.stderr)
        return 1
    pid = int(pid_path.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_path.unlink(missing_ok=True)
        print("stale pid file removed")
        return 1
    for _ in range(240):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print("stopped")
            return 0
        time.sleep(0.5)
    print("still stopping after 120 s", file=sys.stderr)
    return 1


#: ``--write-openapi`` without a path: the repository's ``docs/openapi.json``.
_COMMITTED_OPENAPI = "docs/openapi.json (the committed one)"


def _api_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--write-openapi",
        nargs="?",
        const=_COMMITTED_OPENAPI,
        default=None,
        metavar="PATH",
        help="write the OpenAPI document (default docs/openapi.json) and exit",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)


@command(
    "api", "serve the intake API under uvicorn alone, or write its OpenAPI document", _api_args
)
def _api(args: argparse.Namespace, settings: Settings) -> int:
    """The app :mod:`deployments.intake` runs as the Serve ingress, without Ray."""
    from pipeline.api.app import OPENAPI_PATH, create_app, write_openapi

    if args.write_openapi:
        committed = args.write_openapi == _COMMITTED_OPENAPI
        print(write_openapi(OPENAPI_PATH if committed else Path(args.write_openapi)))
        return 0
    import uvicorn

    from pipeline.api.server import server_config

    config = server_config(create_app(settings), settings, host=args.host, port=args.port)
    uvicorn.Server(config).run()
    return 0


def _submit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--api-key", help="default: FENCELINE_API_KEY")
    p.add_argument("--no-wait", action="store_true")
    p.add_argument(
        "--poll-base", type=float, default=0.5, help="first polling backoff ceiling, seconds"
    )
    p.add_argument("--poll-cap", type=float, default=15.0, help="polling backoff cap, seconds")
    p.add_argument(
        "--max-retry-after",
        type=float,
        default=600.0,
        help="the longest Retry-After (429/503) waited out, seconds; a longer one is reported",
    )


@command("submit", "submit documents over REST and show progress until they settle", _submit_args)
def _submit(args: argparse.Namespace, settings: Settings) -> int:
    args.api_key = api_key(args, settings)
    if not args.api_key:
        print("an API key is needed: --api-key or FENCELINE_API_KEY", file=sys.stderr)
        return 2
    try:
        backoff = Backoff(base_seconds=args.poll_base, cap_seconds=args.poll_cap)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_submit_async(args, backoff))


async def _submit_async(args: argparse.Namespace, backoff: Backoff) -> int:
    """Submit each file (429/503 retried after their Retry-After, with the same
    Idempotency-Key), then poll until every job settled: full-jitter backoff between
    rounds that grows while nothing changes and starts again after a change."""
    from pipeline.states import SETTLED

    headers = {"Authorization": f"Bearer {args.api_key}"}
    jobs: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=30) as http:
        client = PoliteClient(http, backoff, max_retry_after_seconds=args.max_retry_after)
        for path in args.paths:
            text = path.read_text(encoding="utf-8")
            key = f"file-{uuid.uuid5(uuid.NAMESPACE_URL, str(path.resolve()))}"
            r = await client.request(
                "POST",
                "/v1/extraction-jobs",
                json={"document": {"text": text, "filename": path.name}},
                headers={"Idempotency-Key": key},
            )
            if r.status_code not in (200, 202):
                print(visible(f"{path}: {r.status_code} {r.text}"), file=sys.stderr)
                continue
            jobs[r.json()["job_id"]] = str(path)
            print(visible(f"{path}: accepted as {r.json()['job_id']}"))
        if args.no_wait:
            return 0
        settled = {s.value for s in SETTLED}
        states: dict[str, str] = {}
        idle = 0  # polling rounds in a row without a change
        while True:
            changed = False
            for job_id in jobs:
                if states.get(job_id) in settled:
                    continue
                r = await client.request("GET", f"/v1/extraction-jobs/{job_id}")
                state = r.json().get("state", "?") if r.status_code == 200 else "?"
                changed |= state != states.get(job_id)
                states[job_id] = state
            done = sum(1 for s in states.values() if s in settled)
            bar = "#" * int(30 * done / max(1, len(jobs)))
            print(f"\r[{bar:<30}] {done}/{len(jobs)} settled", end="", flush=True)
            if done == len(jobs):
                print()
                break
            idle = 0 if changed else idle + 1
            await asyncio.sleep(backoff.delay(idle))
    for job_id, path in jobs.items():
        print(visible(f"{states[job_id]:<16} {job_id}  {path}"))
    return 0 if all(s != "FAILED_TERMINAL" for s in states.values()) else 1


def _review_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=uuid.UUID)
    p.add_argument("decision", choices=["approve", "reject"])
    p.add_argument("--note", required=True, help="the reviewer's note (audited)")
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument(
        "--api-key",
        help="a key of the job's tenant with the review scope (default: FENCELINE_API_KEY)",
    )


@command(
    "review", "approve or reject a job awaiting review (through the audited API)", _review_args
)
def _review(args: argparse.Namespace, settings: Settings) -> int:
    """Reads the job's state_version first, so a decision applies only to what was seen."""
    args.api_key = api_key(args, settings)
    if not args.api_key:
        print(
            "an API key with the review scope is needed: --api-key or FENCELINE_API_KEY",
            file=sys.stderr,
        )
        return 2
    headers = {"Authorization": f"Bearer {args.api_key}"}
    with httpx.Client(base_url=args.url, headers=headers, timeout=30) as client:
        job = client.get(f"/v1/extraction-jobs/{args.job_id}")
        if job.status_code != 200:
            print(visible(f"{job.status_code}: {job.text}"), file=sys.stderr)
            return 1
        r = client.post(
            f"/v1/extraction-jobs/{args.job_id}/review",
            json={
                "decision": args.decision,
                "note": args.note,
                "state_version": job.json()["state_version"],
            },
        )
    print(visible(r.text))
    return 0 if r.status_code in (200, 201) else 1
