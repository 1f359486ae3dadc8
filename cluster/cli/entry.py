"""The ``fenceline`` command line.

One entry point, :func:`main`. Sub-commands live in the modules of this
package; each declares its commands on a :class:`~cluster.cli.base.CommandTable`
and exposes ``register``, which :func:`subcommands` calls (imports run one way:
this module → command modules → :mod:`cluster.cli.base`). Handlers import their
implementation lazily, so ``fenceline db migrate`` does not pay for importing Ray
or vLLM.

Commands of packages the product never imports (``benchmarks``: ``demo``,
``eval``, ``bench``, ``capacity``, ``erp-receiver``, ``adapter train``) are plugins: an installed
distribution names a ``register(subcommands)`` function in the
``fenceline.commands`` entry-point group (``pyproject.toml``), and
:func:`subcommands` loads every one. Without the group (a checkout that was not
installed) the built-in commands still work.

``--database-url`` may stand anywhere on the line; it overrides
``FENCELINE_DATABASE_URL`` in the :class:`Settings` every handler receives. No
option is passed through the process environment.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points

from cluster.cli import (
    admin,
    cancel,
    data_keys,
    erase,
    kafka,
    master_data,
    operations,
    redrive,
    retention,
    system,
    tenants,
)
from cluster.cli.base import Subcommands
from pipeline.settings import Settings

PLUGIN_GROUP = "fenceline.commands"
BUILTIN = (
    admin,
    system,
    tenants,
    master_data,
    operations,
    redrive,
    cancel,
    retention,
    erase,
    data_keys,
    kafka,
)


def subcommands(*, plugins: bool = True) -> Subcommands:
    """Every sub-command: the built-in modules', then the installed plugins'."""
    subs = Subcommands()
    for module in BUILTIN:
        module.register(subs)
    if plugins:
        for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda ep: ep.name):
            ep.load()(subs)
    return subs


def build_parser(subs: Subcommands | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fenceline", description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="overrides FENCELINE_DATABASE_URL")
    (subs or subcommands()).build(parser)
    return parser


def settings_from(database_url: str | None) -> Settings:
    """``FENCELINE_*`` settings, with ``--database-url`` over the environment's."""
    settings = Settings()
    if database_url:
        settings = settings.model_copy(update={"database_url": database_url})
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    database_url, rest = _global_options(list(sys.argv[1:] if argv is None else argv))
    settings = settings_from(database_url)
    subs = subcommands()
    run = subs.passthrough(rest[0]) if rest else None
    if run is not None:
        return run(rest[1:], settings)
    args = build_parser(subs).parse_args(rest)
    result: int = args.handler(args, settings)
    return result


def _global_options(args_list: list[str]) -> tuple[str | None, list[str]]:
    """Take ``--database-url`` wherever it stands; return it and the other arguments."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--database-url")
    known, rest = pre.parse_known_args(args_list)
    return known.database_url, rest
