"""The ``fenceline`` command line.

Sub-commands import their implementation lazily, so ``fenceline db migrate``
does not pay for importing Ray or vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from pipeline.settings import Settings

Handler = Callable[[argparse.Namespace, Settings], int]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(
    name: str, help_text: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register a sub-command (``name`` may contain a space: ``"db migrate"``)."""

    def deco(fn: Handler) -> Handler:
        COMMANDS[name] = (help_text, configure, fn)
        return fn

    return deco


def _none(_: argparse.ArgumentParser) -> None:
    return None


@command("db migrate", "create the database if missing and apply migrations", _none)
def _db_migrate(_args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.admin import setup_database

    applied = asyncio.run(setup_database(settings))
    print(f"migrations applied: {applied or 'none (up to date)'}")
    return 0


def _tenant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("--weight", type=int, default=1)
    p.add_argument("--max-in-flight", type=int, default=1000)


@command("tenants create", "create a tenant and print its first API key", _tenant_args)
def _tenants_create(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import connect
    from pipeline.tenants import create_api_key, create_tenant

    async def go() -> dict[str, Any]:
        conn = await connect(settings.database_url)
        try:
            t = await create_tenant(
                conn, args.name, weight=args.weight, max_in_flight=args.max_in_flight
            )
            key_id, secret = await create_api_key(conn, t.id)
            return {"tenant_id": str(t.id), "key_id": str(key_id), "api_key": secret}
        finally:
            await conn.close()

    print(json.dumps(asyncio.run(go()), indent=2))
    return 0


@command("tenants list", "list tenants", _none)
def _tenants_list(_args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import connect
    from pipeline.tenants import list_tenants

    async def go() -> None:
        conn = await connect(settings.database_url)
        try:
            for t in await list_tenants(conn):
                print(f"{t.id}  {t.name}  weight={t.weight}  max_in_flight={t.max_in_flight}")
        finally:
            await conn.close()

    asyncio.run(go())
    return 0


def _key_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tenant_id", type=uuid.UUID)
    p.add_argument("--scope", action="append", default=None, help="jobs (default), operator")


@command("keys create", "create an API key for a tenant (printed once)", _key_args)
def _keys_create(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import connect
    from pipeline.tenants import create_api_key

    async def go() -> tuple[uuid.UUID, str]:
        conn = await connect(settings.database_url)
        try:
            return await create_api_key(conn, args.tenant_id, scopes=tuple(args.scope or ["jobs"]))
        finally:
            await conn.close()

    key_id, secret = asyncio.run(go())
    print(json.dumps({"key_id": str(key_id), "api_key": secret}))
    return 0


def _revoke_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("tenant_id", type=uuid.UUID)
    p.add_argument("key_id", type=uuid.UUID)


@command("keys revoke", "revoke an API key", _revoke_args)
def _keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.database import connect
    from pipeline.tenants import revoke_api_key

    async def go() -> bool:
        conn = await connect(settings.database_url)
        try:
            return await revoke_api_key(conn, args.tenant_id, args.key_id)
        finally:
            await conn.close()

    ok = asyncio.run(go())
    print("revoked" if ok else "no active key with that id for that tenant")
    return 0 if ok else 1


def _job_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=uuid.UUID)
    p.add_argument("--json", action="store_true")


@command("explain", "the full audit trail of one job", _job_arg)
def _explain(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.admin import explain_job, render_explain
    from pipeline.errors import NotFound

    try:
        data = asyncio.run(explain_job(settings, args.job_id))
    except NotFound:
        print(f"no job {args.job_id}", file=sys.stderr)
        return 1
    print(json.dumps(data, default=str, indent=2) if args.json else render_explain(data))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fenceline", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="overrides FENCELINE_DATABASE_URL")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in PASSTHROUGH.items():
        sub.add_parser(name, help=f"{help_text} (see `fenceline {name} --help`)", add_help=False)
    groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
    for name, (help_text, configure, handler) in sorted(COMMANDS.items()):
        head, _, tail = name.partition(" ")
        if tail:
            if head not in groups:
                gp = sub.add_parser(head, help=f"{head} commands")
                groups[head] = gp.add_subparsers(dest="subcommand", required=True)
            p = groups[head].add_parser(tail, help=help_text)
        else:
            p = sub.add_parser(head, help=help_text)
        configure(p)
        p.set_defaults(handler=handler)
    return parser


#: Commands whose module parses its own arguments: ``fenceline NAME ARGS`` runs
#: ``MODULE.main(ARGS)``.
PASSTHROUGH: dict[str, tuple[str, str]] = {
    "endpoints": ("pipeline.endpoints", "webhook endpoints: register|rotate|disable|enable|list"),
    "erp-receiver": ("pipeline.erp_receiver", "run the reference ERP webhook receiver"),
    "dlq": ("pipeline.dlq", "dead-letter queue: list|show|replay"),
    "broker": ("pipeline.broker", "RabbitMQ topology: setup"),
    "eval": ("benchmarks.eval", "extraction accuracy over generated invoices"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] in PASSTHROUGH:
        import importlib

        module = importlib.import_module(PASSTHROUGH[args_list[0]][0])
        result: int = module.main(args_list[1:])
        return result
    _load_plugins()
    args = build_parser().parse_args(args_list)
    settings = Settings()
    if args.database_url:
        settings = settings.model_copy(update={"database_url": args.database_url})
    handler: Handler = args.handler
    return handler(args, settings)


def _load_plugins() -> None:
    """Import modules that register more commands (demo, up, submit, bench, ...)."""
    import importlib

    for mod in ("cluster.commands",):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


if __name__ == "__main__":
    # Run the importable module, not this __main__ copy: plugin modules register
    # their commands on ``cluster.cli``'s table.
    from cluster.cli import main as _main

    raise SystemExit(_main())
