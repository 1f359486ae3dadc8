"""Operator commands over the delivery and broker paths: ``endpoints``, ``dlq``, ``broker``.

Thin shells over :mod:`pipeline.delivery.endpoints`, :mod:`pipeline.messaging.dlq` and
:mod:`pipeline.messaging.broker`; the settings (``--database-url``, ``FENCELINE_AMQP_*``)
come from the CLI's global options and the environment through :class:`Settings`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import uuid
from typing import Any

from cluster.cli.base import CommandTable
from pipeline.settings import Settings
from pipeline.text_safety import refuse_invisible

TABLE = CommandTable()
command = TABLE.command
register = TABLE.register


def _print(value: Any) -> None:
    print(json.dumps(value, default=str, indent=2))


# ------------------------------------------------------------------ endpoints
def _tenant(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tenant", required=True)


def _register_args(p: argparse.ArgumentParser) -> None:
    from pipeline.delivery import DEFAULT_EVENT_TYPES

    _tenant(p)
    p.add_argument("--url", required=True)
    p.add_argument("--description")
    p.add_argument(
        "--event-types",
        action="append",
        metavar="TYPE[,TYPE...]",
        help="event types to deliver (comma-separated or repeated); an empty value means "
        f"every type; omitted: {','.join(DEFAULT_EVENT_TYPES)}",
    )
    p.add_argument(
        "--ack-window",
        metavar="SECONDS",
        help="ask the ERP to acknowledge each delivery within SECONDS of its 2xx "
        "(60..2592000); omitted: no acknowledgements",
    )


def _ack_window_args(p: argparse.ArgumentParser) -> None:
    _endpoint_args(p)
    p.add_argument(
        "--seconds", required=True, help="the acknowledgement window (60..2592000), or 'off'"
    )


def _ack_window(value: str | None) -> int | None:
    """An acknowledgement window from the command line: seconds, or None for 'off'."""
    from pipeline.delivery import MAX_ACK_WINDOW_SECONDS, MIN_ACK_WINDOW_SECONDS

    if value is None or value == "off":
        return None
    seconds = int(value)
    if not MIN_ACK_WINDOW_SECONDS <= seconds <= MAX_ACK_WINDOW_SECONDS:
        raise ValueError(
            f"an acknowledgement window is {MIN_ACK_WINDOW_SECONDS}..{MAX_ACK_WINDOW_SECONDS} s"
        )
    return seconds


def _endpoint_args(p: argparse.ArgumentParser) -> None:
    _tenant(p)
    p.add_argument("--endpoint", required=True)


def _disable_args(p: argparse.ArgumentParser) -> None:
    _endpoint_args(p)
    p.add_argument("--reason", default="disabled_by_tenant", help="kept on the endpoint")


def _endpoints(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import FencelineError

    logging.basicConfig(level=logging.INFO)
    try:
        return asyncio.run(_endpoints_async(args, settings))
    except (FencelineError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def _endpoints_async(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.delivery import (
        DEFAULT_EVENT_TYPES,
        EndpointRegistry,
        SecretBox,
        guard_from_settings,
    )
    from pipeline.delivery.endpoints import parse_event_types
    from pipeline.tenants import get_tenant_by_name

    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        registry = EndpointRegistry(
            pool,
            guard_from_settings(settings),
            SecretBox.from_settings(settings),
            rotation_grace_seconds=settings.webhook_rotation_grace_seconds,
        )
        async with pool.acquire() as conn:
            tenant = await get_tenant_by_name(conn, args.tenant)
        if tenant is None:
            print(f"no tenant named {args.tenant!r}", file=sys.stderr)
            return 2
        if args.subcommand == "register":
            types = DEFAULT_EVENT_TYPES
            if args.event_types is not None:
                types = parse_event_types(args.event_types)
            refuse_invisible("--description", args.description)
            issued = await registry.register(
                tenant.id,
                args.url,
                event_types=types,
                description=args.description,
                ack_window_seconds=_ack_window(args.ack_window),
            )
            _print({"endpoint_id": issued.endpoint.id, "key_id": issued.key_id,
                    "secret": issued.secret, "url": issued.endpoint.url,
                    "event_types": issued.endpoint.event_types,
                    "ack_window_seconds": issued.endpoint.ack_window_seconds})  # fmt: skip
        elif args.subcommand == "ack-window":
            endpoint = await registry.set_ack_window(
                tenant.id, uuid.UUID(args.endpoint), _ack_window(args.seconds)
            )
            _print(endpoint.__dict__)
        elif args.subcommand == "rotate":
            issued = await registry.rotate(tenant.id, uuid.UUID(args.endpoint))
            _print({"endpoint_id": issued.endpoint.id, "key_id": issued.key_id,
                    "secret": issued.secret, "previous_key_id": issued.previous_key_id,
                    "previous_expires_at": issued.previous_expires_at})  # fmt: skip
        elif args.subcommand == "disable":
            if not args.reason.strip():
                raise ValueError("--reason must not be empty")
            refuse_invisible("--reason", args.reason)
            endpoint = await registry.disable(tenant.id, uuid.UUID(args.endpoint), args.reason)
            _print(endpoint.__dict__)
        elif args.subcommand == "enable":
            _print((await registry.enable(tenant.id, uuid.UUID(args.endpoint))).__dict__)
        else:
            _print([e.__dict__ for e in await registry.list_endpoints(tenant.id)])
        return 0
    finally:
        await pool.close()


command(
    "endpoints register", "register a webhook endpoint; prints its secret once", _register_args
)(_endpoints)
command("endpoints rotate", "rotate an endpoint's signing secret", _endpoint_args)(_endpoints)
command("endpoints disable", "disable an endpoint", _disable_args)(_endpoints)
command("endpoints enable", "enable a disabled endpoint", _endpoint_args)(_endpoints)
command("endpoints list", "a tenant's webhook endpoints", _tenant)(_endpoints)
command(
    "endpoints ack-window",
    "ask an endpoint's ERP for acknowledgements within a window, or stop ('off')",
    _ack_window_args,
)(_endpoints)


# ------------------------------------------------------------------------ dlq
def _dlq_list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reason")
    p.add_argument("--limit", type=int, default=50)


def _dlq_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("id")


def _dlq_replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id")
    p.add_argument("--by", required=True, help="who replays (kept in the audit row)")
    p.add_argument("--note", default="")


def _dlq_archive_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=1000)


def _dlq(args: argparse.Namespace, settings: Settings) -> int:
    return asyncio.run(_dlq_async(args, settings))


async def _dlq_async(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import create_pool
    from pipeline.errors import BrokerUnavailable, NotFound, ReplayRefused
    from pipeline.messaging import DeadLetterArchiver
    from pipeline.messaging.dlq import (
        dlq_depth,
        dlq_list,
        dlq_replay,
        dlq_show,
    )

    pool = await create_pool(settings.database_url, min_size=1, max_size=2)
    try:
        if args.subcommand == "list":
            _print(await dlq_list(pool, reason=args.reason, limit=args.limit))
        elif args.subcommand == "show":
            letter = await dlq_show(pool, uuid.UUID(args.id))
            letter["body"] = bytes(letter["body"]).decode("utf-8", "replace")
            _print(letter)
        elif args.subcommand == "replay":
            refuse_invisible("--by", args.by)
            refuse_invisible("--note", args.note, multiline=True)
            replay = await dlq_replay(
                pool, uuid.UUID(args.id), requested_by=args.by, note=args.note
            )
            _print(replay.__dict__)
        elif args.subcommand == "archive":
            archiver = DeadLetterArchiver(pool, settings)
            _print({"archived": await archiver.run_once(args.limit)})
            await archiver.stop()
        else:
            _print(await dlq_depth(pool, settings))
    except (NotFound, ReplayRefused, BrokerUnavailable, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        await pool.close()
    return 0


command("dlq list", "archived dead letters, newest first", _dlq_list_args)(_dlq)
command("dlq show", "one dead letter: headers, body, replay history", _dlq_id)(_dlq)
command("dlq replay", "re-enqueue a dead letter through the outbox (audited)", _dlq_replay_args)(
    _dlq
)
command("dlq archive", "drain the DLQ into the archive once", _dlq_archive_args)(_dlq)
command("dlq depth", "print the work queue and DLQ depths")(_dlq)


# --------------------------------------------------------------------- broker
def _broker(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.messaging import BrokerConfig, declare_topology
    from pipeline.messaging.broker import queue_depths

    cfg = BrokerConfig.from_settings(settings)
    if cfg is None:
        print("no broker configured: set FENCELINE_AMQP_URL", file=sys.stderr)
        return 2
    if args.subcommand == "setup":
        print(json.dumps(declare_topology(cfg).__dict__, indent=2))
    else:
        print(json.dumps(queue_depths(cfg), indent=2))
    return 0


command("broker setup", "declare exchange, work queue, DLX and DLQ (idempotent)")(_broker)
command("broker depth", "print ready messages in the work queue and the DLQ")(_broker)
