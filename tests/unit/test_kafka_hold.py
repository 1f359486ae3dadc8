"""How long the Kafka ingress waits before trying a record admission refused again."""

from __future__ import annotations

from pipeline.messaging.kafka_ingress import hold_delay


def test_the_refusals_retry_after_is_waited_while_the_backoff_is_shorter() -> None:
    assert hold_delay(30.0, 1, base=1.0, cap=60.0) == 30.0
    assert hold_delay(30.0, 5, base=1.0, cap=60.0) == 30.0  # 16 s of back-off < 30


def test_repeated_refusals_back_off_by_doubling_up_to_the_cap() -> None:
    waits = [hold_delay(0.5, n, base=1.0, cap=60.0) for n in range(1, 9)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    # Thousands of refusals in, the wait is still the cap (no overflow, no growth).
    assert hold_delay(0.5, 10_000, base=1.0, cap=60.0) == 60.0


def test_a_spend_budgets_distant_retry_after_is_capped() -> None:
    # The budget frees when the period turns (days away): the record is tried each cap.
    assert hold_delay(3 * 86400.0, 1, base=1.0, cap=60.0) == 60.0
