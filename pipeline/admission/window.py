"""The sliding window of charges one admission scope keeps: the request slots and
tokens a provider's RPM/TPM window may still count (see :mod:`pipeline.admission.policy`).

A charge stays in the window ``seconds`` after it *settled*: the provider counts a
call when it arrives, somewhere between our grant and its release, so no
provider-side window can see more than was admitted. An unsettled charge (a call
still in flight) never leaves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Literal

from pipeline.admission.state import Charge

Dimension = Literal["requests", "tokens"]


class ChargeWindow:
    """Charges of the last ``seconds``, with their request and token sums kept current."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.charges: deque[Charge] = deque()
        self.requests = 0
        self.tokens = 0

    def add(self, charge: Charge) -> None:
        self.charges.append(charge)
        self.requests += charge.requests
        self.tokens += charge.tokens

    def replace(self, charges: Iterable[Charge]) -> None:
        """Start over from ``charges`` (a restart replaying the ledger), oldest first."""
        self.charges = deque(sorted(charges, key=lambda c: c.t))
        self.requests = sum(c.requests for c in self.charges)
        self.tokens = sum(c.tokens for c in self.charges)

    def prune(self, now: float) -> None:
        """Drop settled charges older than the window; keep unsettled ones, re-dated."""
        while self.charges and now - self.charges[0].t >= self.seconds:
            c = self.charges.popleft()
            if not c.settled:  # still in flight: the provider may not have seen it yet
                c.t = now
                self.charges.append(c)
                continue
            c.in_window = False
            self.requests -= c.requests
            self.tokens -= c.tokens

    def settle(self, charge: Charge, now: float, requests: int, tokens: int) -> None:
        """Rewrite ``charge`` to its settled amount, in the window from ``now`` on."""
        if charge.in_window:
            self.requests -= charge.requests
            self.tokens -= charge.tokens
            self.charges.remove(charge)
        charge.t, charge.in_window, charge.settled = now, True, True
        charge.requests, charge.tokens = requests, tokens
        self.add(charge)

    def eta(self, now: float, need: int, dimension: Dimension, fallback: float) -> float:
        """Seconds until charges worth ``need`` of ``dimension`` leave the window
        (``fallback`` when the window alone cannot free that much)."""
        freed = 0
        for c in self.charges:
            freed += getattr(c, dimension)
            if freed >= need:
                return max(0.0, c.t + self.seconds - now)
        return fallback
