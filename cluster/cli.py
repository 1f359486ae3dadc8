"""The ``fenceline`` command line.

Sub-commands import their implementation lazily, so ``fenceline db migrate``
does not pay for importing Ray or vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from collections.abc import Callable, Sequence

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
    from pipeline.jobs import setup_database

    applied = asyncio.run(setup_database(settings))
    print(f"migrations applied: {applied or 'none (up to date)'}")
    return 0


def _job_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("job_id", type=uuid.UUID)
    p.add_argument("--json", action="store_true")


@command("explain", "the full audit trail of one job", _job_arg)
def _explain(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.errors import NotFound
    from pipeline.jobs import explain_job, render_explain

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
    "endpoints": (
        "pipeline.delivery.endpoints",
        "webhook endpoints: register|rotate|disable|enable|list",
    ),
    "erp-receiver": ("benchmarks.erp_receiver", "run the reference ERP webhook receiver"),
    "dlq": ("pipeline.messaging.dlq", "dead-letter queue: list|show|replay"),
    "broker": ("pipeline.messaging.broker", "RabbitMQ topology: setup"),
    "eval": ("benchmarks.eval", "extraction accuracy over generated invoices or a dataset"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = _apply_global_options(list(sys.argv[1:] if argv is None else argv))
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


def _apply_global_options(args_list: list[str]) -> list[str]:
    """Take ``--database-url`` wherever it stands and export it for every command.

    Pass-through commands (``dlq``, ``endpoints``, ...) parse their own arguments
    and read :class:`Settings` from the environment, so the option reaches them as
    ``FENCELINE_DATABASE_URL``.
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--database-url")
    known, rest = pre.parse_known_args(args_list)
    if known.database_url:
        os.environ["FENCELINE_DATABASE_URL"] = known.database_url
    return rest


def _load_plugins() -> None:
    """Import modules that register more commands (demo, up, submit, tenants, keys, ...)."""
    import importlib

    for mod in ("cluster.commands", "cluster.tenant_commands", "cluster.master_data_commands"):
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
