"""How sure a count of false accepts lets a report be: the exact (Clopper-Pearson) bound.

A run that saw 0 false accepts in 200 invoices has not shown a rate of 0: it has
shown, with 95 % confidence, a rate below about 1.5 %. Every report that counts false
accepts prints that bound next to the count, so a small sample cannot pass for a proof.
The bound is one-sided (the question is only "how bad can it be"): the rate ``p`` at
which seeing ``k`` or fewer events in ``n`` trials has probability ``1 - confidence``.
"""

from __future__ import annotations

import math


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space (n in the millions is fine)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k + 1):
        log_term = (
            math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
            + i * log_p + (n - i) * log_q
        )  # fmt: skip
        total += math.exp(log_term)
    return min(total, 1.0)


def false_accept_bound(k: int, n: int, confidence: float = 0.95) -> float | None:
    """The one-sided Clopper-Pearson upper bound on a rate after ``k`` events in ``n``.

    Returns None for ``n == 0`` (nothing was measured, so nothing is bounded); 1.0 when
    every trial was an event. For ``k == 0`` this is ``1 - (1 - confidence) ** (1 / n)``
    (0 in 5,000: 0.0599 %).

    Raises:
        ValueError: ``k`` outside ``0..n`` or ``confidence`` outside (0, 1).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), not {confidence}")
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return None
    if k == n:
        return 1.0
    alpha = 1.0 - confidence
    if k == 0:
        return 1.0 - float(alpha ** (1.0 / n))
    low, high = k / n, 1.0
    for _ in range(200):  # bisection: the cdf falls as p rises
        mid = (low + high) / 2
        if _binomial_cdf(k, n, mid) > alpha:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return high
