"""Named services run together, treated alike: started in order, reported by one
health call, a stalled one replaced, stopped in the order the caller names.

The maintenance actor (``cluster.drivers.Maintenance``) runs its loops in one
group. Each member is a :class:`~pipeline.service.Service` and the factory that
built it: replacing a stalled member is ``stop()`` on the old one, then a fresh
one from the factory and ``start()``. Only members added with ``replace=True``
are replaced (a loop whose liveness depends on an outside connection: the outbox
relay, the queue consumers); the others are reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeline.service import Service, health_report

log = logging.getLogger(__name__)

S = TypeVar("S", bound=Service)


@dataclass
class _Member:
    service: Service
    make: Callable[[], Service]
    replace: bool


class ServiceGroup:
    """Services by name, in the order they were started.

    Invariant: every member was started by :meth:`start` (or by
    :meth:`replace_stalled`) and is stopped at most once, by :meth:`stop`.
    """

    def __init__(self) -> None:
        self._members: dict[str, _Member] = {}

    async def start(self, name: str, make: Callable[[], S], *, replace: bool = False) -> S:
        """Build a service with ``make``, start it and add it as ``name``."""
        if name in self._members:
            raise ValueError(f"service {name!r} is already in the group")
        service = make()
        await service.start()
        self._members[name] = _Member(service, make, replace)
        return service

    def get(self, name: str) -> Service | None:
        member = self._members.get(name)
        return member.service if member is not None else None

    def names(self) -> list[str]:
        """The members' names in the order they were started."""
        return list(self._members)

    def __iter__(self) -> Iterator[tuple[str, Service]]:
        return iter([(name, m.service) for name, m in self._members.items()])

    def __len__(self) -> int:
        return len(self._members)

    def health(self) -> dict[str, dict[str, Any]]:
        """Every member's :class:`~pipeline.service.ServiceHealth`, as plain values."""
        return health_report(self)

    async def replace_stalled(self) -> list[str]:
        """Replace each replaceable member whose health says stalled; their names."""
        replaced = []
        for name, member in self._members.items():
            if not member.replace:
                continue
            health = member.service.health()
            if not health.stalled:
                continue
            log.error("%s stalled (%s); starting a new one", name, health.as_dict())
            await member.service.stop()
            fresh = member.make()
            await fresh.start()
            member.service = fresh
            replaced.append(name)
        return replaced

    async def stop(self, *names: str) -> None:
        """Stop and remove the members named, in that order; with no names, every
        member, the last started first."""
        for name in names or tuple(reversed(self._members)):
            member = self._members.pop(name, None)
            if member is not None:
                await member.service.stop()
