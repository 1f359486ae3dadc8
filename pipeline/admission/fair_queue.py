"""The waiters of one admission scope, served by deficit round robin in tokens.

Waiters queue per (tenant, priority class) flow. Each visit to the flow at the
head of the round adds its quantum (``quantum_tokens × tenant weight × class
weight``) to the flow's deficit once; its first ticket is served when its cost
fits the deficit, else the round moves on. An emptied flow leaves the round and
forfeits its deficit (the DRR rule), so a tenant with 10,000 queued requests
gets one quantum per round and another tenant's single request waits at most
one round.

The queue decides order only: whether a served ticket may be granted now (the
scope's global limits, a tenant's in-flight limit) is the caller's, passed in
as predicates (:meth:`FairQueue.serve`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator

from pipeline.admission.grants import PriorityClass
from pipeline.admission.state import FlowKey, Ticket


class FairQueue:
    """Tickets by flow in deficit-round-robin order. Not thread-safe: one owner."""

    def __init__(self, quantum: Callable[[str, PriorityClass], float]) -> None:
        self._quantum = quantum
        self._flows: dict[FlowKey, deque[Ticket]] = {}
        self._active: deque[FlowKey] = deque()
        self._deficit: dict[FlowKey, float] = {}
        self._head_charged = False
        self._tickets: dict[int, Ticket] = {}
        #: The id the next queued ticket takes.
        self.next_id = 0

    def push(self, ticket: Ticket) -> None:
        """Queue ``ticket`` (its id :attr:`next_id`) at the tail of its flow."""
        self.next_id = ticket.id + 1
        self._tickets[ticket.id] = ticket
        key = (ticket.tenant, ticket.priority)
        queue = self._flows.get(key)
        if queue is None:
            queue = self._flows[key] = deque()
            self._deficit[key] = 0.0
            self._active.append(key)
        queue.append(ticket)

    def cancel(self, ticket_id: int) -> bool:
        """Withdraw a queued ticket; False if it was served or is unknown."""
        ticket = self._tickets.pop(ticket_id, None)
        if ticket is None:
            return False
        key = (ticket.tenant, ticket.priority)
        queue = self._flows[key]
        queue.remove(ticket)
        if not queue:
            self._retire(key)
        return True

    def get(self, ticket_id: int) -> Ticket | None:
        return self._tickets.get(ticket_id)

    def serve(
        self, tenant_full: Callable[[str], bool], blocked: Callable[[int], bool]
    ) -> Iterator[Ticket]:
        """Dequeue tickets in DRR order while ``blocked(cost)`` is False.

        A flow whose tenant is full (``tenant_full(tenant)``) is passed over
        without a quantum; a round in which every flow was passed over ends the
        call. ``blocked`` stops the call at the head of the round, so smaller
        requests never bypass a large one held by a global limit. The caller
        grants each ticket before asking for the next (the predicates then see
        the grant).
        """
        skipped = 0
        while self._active and skipped < len(self._active):
            key = self._active[0]
            queue = self._flows[key]
            ticket = queue[0]
            if tenant_full(key[0]):
                self._rotate()
                skipped += 1
                continue
            if not self._head_charged:
                self._deficit[key] += self._quantum(*key)
                self._head_charged = True
            if ticket.cost > self._deficit[key]:
                self._rotate()
                skipped = 0
                continue
            if blocked(ticket.cost):
                break
            queue.popleft()
            del self._tickets[ticket.id]
            self._deficit[key] -= ticket.cost
            yield ticket
            skipped = 0
            if not queue:
                self._retire(key)

    def heads(self) -> Iterator[Ticket]:
        """The first ticket of every flow, in round order from the head."""
        for key in self._active:
            yield self._flows[key][0]

    def by_tenant(self) -> dict[str, int]:
        """Queued tickets per tenant."""
        return dict(Counter(t.tenant for t in self._tickets.values()))

    def backlog(self) -> int:
        """The queued tickets' backlogs together (see :attr:`Ticket.backlog`)."""
        return sum(t.backlog for t in self._tickets.values())

    def __len__(self) -> int:
        return len(self._tickets)

    def _rotate(self) -> None:
        self._active.rotate(-1)
        self._head_charged = False

    def _retire(self, key: FlowKey) -> None:
        """An emptied flow leaves the round and forfeits its deficit (DRR rule)."""
        if self._active and self._active[0] == key:
            self._head_charged = False
        self._active.remove(key)
        del self._flows[key]
        del self._deficit[key]
