"""``fenceline kafka-ingress``: accept one tenant's submissions from a Kafka topic.

A thin shell over :mod:`pipeline.messaging.kafka_ingress` (docs/kafka.md): it
composes the ingress with the REST intake's document limits (admission, the same
quotas, spend budget and capacity, the ingress takes from the store's settings), and
runs it until SIGTERM or SIGINT, after which it finishes the records it read,
commits their durable prefix and leaves the consumer group.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from cluster.cli.base import CommandTable
from cluster.cli.tenant_ref import tenant_options, tenant_ref
from pipeline.settings import Settings

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers (host:port,...)")
    p.add_argument("--topic", required=True, help="the topic of the tenant's submissions")
    p.add_argument(
        "--group", default=None, help="consumer group (default: fenceline-ingress-<topic>)"
    )
    tenant_options(p)
    p.add_argument(
        "--window",
        type=int,
        default=64,
        help="records outstanding before the partitions are paused (default 64)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve the ingress's Prometheus metrics on this port (0: any free port; "
        "default: not served)",
    )
    p.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a further librdkafka setting (security.protocol=SSL, ...); repeatable; "
        "auto-commit cannot be turned on",
    )


def _options(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--kafka-option wants KEY=VALUE, not {pair!r}")
        out[key] = value
    return out


@command("kafka-ingress", "accept a tenant's submissions from a Kafka topic (docs/kafka.md)", _args)
def _kafka_ingress(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import FencelineError

    logging.basicConfig(level=logging.INFO)
    try:
        return asyncio.run(_run(args, settings))
    except (FencelineError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.extraction import DocumentLimits, over_limit
    from pipeline.jobs import JobStore
    from pipeline.messaging.kafka_inbox import KafkaInbox
    from pipeline.messaging.kafka_ingress import KafkaIngress, KafkaIngressConfig
    from pipeline.tenants import resolve_tenant

    config = KafkaIngressConfig(
        bootstrap_servers=args.bootstrap,
        topic=args.topic,
        group_id=args.group or f"fenceline-ingress-{args.topic}",
        window=args.window,
        extra=_options(args.kafka_option),
    )
    limits = DocumentLimits.from_settings(settings)

    def refuse_text(text: str) -> str | None:
        over = over_limit(text, limits)
        return None if over is None else over.limit

    pool = await create_pool(settings.database_url, min_size=1, max_size=4)
    try:
        async with pool.acquire() as conn:
            tenant = await resolve_tenant(conn, tenant_ref(args))
        inbox = KafkaInbox(
            pool,
            JobStore(pool, settings),
            tenant.id,
            refuse_text=refuse_text,
        )
        ingress = KafkaIngress(inbox, config)
        if args.metrics_port is not None:
            from prometheus_client import start_http_server

            server, _ = start_http_server(args.metrics_port, registry=ingress.metrics.registry)
            print(f"kafka-ingress: metrics on port {server.server_port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        print(
            f"kafka-ingress: {config.topic} → tenant {tenant.name} (group {config.group_id})",
            flush=True,
        )
        await ingress.run(stop)
        print(f"kafka-ingress: stopped; {dict(sorted(ingress.counts.items()))}", flush=True)
    finally:
        await pool.close()
    return 0
