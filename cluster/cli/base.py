"""What a command module needs to add its sub-commands to ``fenceline``.

A command module declares its commands on its own :class:`CommandTable` and
exposes ``register = TABLE.register``; :mod:`cluster.cli.entry` imports the
modules and calls ``register`` with the one :class:`Subcommands` of the
parser. Imports run one way only (main → command modules → this module), and
options reach a handler as its ``args`` and a :class:`Settings` built from them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pipeline.settings import Settings

if TYPE_CHECKING:
    import asyncpg

_T = TypeVar("_T")

#: A parsed command: its arguments and the settings built from the global options.
Handler = Callable[[argparse.Namespace, Settings], int]
Configure = Callable[[argparse.ArgumentParser], None]
#: A command that parses its own arguments: ``fenceline NAME ARGS`` runs ``run(ARGS, settings)``.
Passthrough = Callable[[list[str], Settings], int]


def no_arguments(_: argparse.ArgumentParser) -> None:
    return None


@dataclass(frozen=True)
class _Command:
    name: str
    help_text: str
    configure: Configure
    handler: Handler


class Subcommands:
    """The ``fenceline`` sub-commands: one word (``up``) or a group and a word (``db migrate``).

    Commands of one group may come from several modules (``tenants create`` and
    ``tenants currencies``); :meth:`build` adds them all, sorted, to the parser.
    """

    def __init__(self) -> None:
        self._commands: dict[str, _Command] = {}
        self._passthrough: dict[str, tuple[str, Passthrough]] = {}

    def add(self, name: str, help_text: str, configure: Configure, handler: Handler) -> None:
        if name in self._commands or name.partition(" ")[0] in self._passthrough:
            raise ValueError(f"two commands named {name!r}")
        self._commands[name] = _Command(name, help_text, configure, handler)

    def add_passthrough(self, name: str, help_text: str, run: Passthrough) -> None:
        if name in self._passthrough or any(c.partition(" ")[0] == name for c in self._commands):
            raise ValueError(f"two commands named {name!r}")
        self._passthrough[name] = (help_text, run)

    def passthrough(self, name: str) -> Passthrough | None:
        entry = self._passthrough.get(name)
        return entry[1] if entry else None

    def build(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        for name, (help_text, _) in sorted(self._passthrough.items()):
            sub.add_parser(
                name, help=f"{help_text} (see `fenceline {name} --help`)", add_help=False
            )
        groups: dict[str, argparse._SubParsersAction[argparse.ArgumentParser]] = {}
        for name, cmd in sorted(self._commands.items()):
            head, _, tail = name.partition(" ")
            if tail:
                if head not in groups:
                    gp = sub.add_parser(head, help=f"{head} commands")
                    groups[head] = gp.add_subparsers(dest="subcommand", required=True)
                p = groups[head].add_parser(tail, help=cmd.help_text)
            else:
                p = sub.add_parser(head, help=cmd.help_text)
            cmd.configure(p)
            p.set_defaults(handler=cmd.handler)


class CommandTable:
    """One module's commands, declared with :meth:`command`, added by :meth:`register`."""

    def __init__(self) -> None:
        self._commands: list[_Command] = []
        self._passthrough: list[tuple[str, str, Passthrough]] = []

    def command(
        self, name: str, help_text: str, configure: Configure = no_arguments
    ) -> Callable[[Handler], Handler]:
        """Declare a sub-command (``name`` may contain a space: ``"db migrate"``)."""

        def deco(fn: Handler) -> Handler:
            self._commands.append(_Command(name, help_text, configure, fn))
            return fn

        return deco

    def passthrough(self, name: str, help_text: str) -> Callable[[Passthrough], Passthrough]:
        """Declare a sub-command that parses its own arguments."""

        def deco(fn: Passthrough) -> Passthrough:
            self._passthrough.append((name, help_text, fn))
            return fn

        return deco

    def register(self, subcommands: Subcommands) -> None:
        for c in self._commands:
            subcommands.add(c.name, c.help_text, c.configure, c.handler)
        for name, help_text, run in self._passthrough:
            subcommands.add_passthrough(name, help_text, run)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> float:
    """``90d``, ``12h``, ``30m``, ``45s`` or plain seconds; more than zero."""
    unit = text[-1:].lower()
    number = text[:-1] if unit in _UNITS else text
    try:
        value = float(number) * _UNITS.get(unit, 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (e.g. 90d, 12h, 30m, 3600)"
        ) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a finite duration above zero")
    return value


def run_with_pool(settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[_T]]) -> _T:
    """Run ``work`` on a small pool of the settings' database, closed after it."""
    from pipeline.database import create_pool

    async def go() -> _T:
        pool = await create_pool(settings.database_url, min_size=1, max_size=2)
        try:
            return await work(pool)
        finally:
            await pool.close()

    return asyncio.run(go())


def run_with_connection(
    settings: Settings, work: Callable[[asyncpg.Connection], Awaitable[_T]]
) -> _T:
    """Run ``work`` on one connection to the settings' database, closed after it."""
    from pipeline.database import connect

    async def go() -> _T:
        conn = await connect(settings.database_url)
        try:
            return await work(conn)
        finally:
            await conn.close()

    return asyncio.run(go())
