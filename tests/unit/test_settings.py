"""Settings travel to Ray processes as FENCELINE_* variables and come back equal."""

from __future__ import annotations

import os
from decimal import Decimal

import pytest

from pipeline.settings import Settings


def test_to_env_round_trips_every_kind_of_field(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Settings(
        database_url="postgresql://u@db:5432/x",
        amqp_url="amqp://guest:guest@mq:5672/%2F",
        reaper_interval_seconds=2.5,
        max_attempts=1,
        delivery_allowed_ports=(443, 8443),
        delivery_schedule_seconds=(1.0, 2.0),
        delivery_allow_loopback_http=True,
        retry_beyond_deadline="defer",
        token_price_per_1k=Decimal("0.0035"),
        completion_price_per_1k=Decimal("0.014"),
        model_prices={"m": {"prompt_per_1k": "0.00015", "completion_per_1k": "0.0006"}},
        webhook_secret_key="c2VjcmV0",
    )
    env = original.to_env()
    assert env["FENCELINE_MAX_ATTEMPTS"] == "1"
    assert env["FENCELINE_WEBHOOK_SECRET_KEY"] == "c2VjcmV0"  # the value, not '**********'
    for key in list(os.environ):
        if key.startswith("FENCELINE_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert Settings() == original


def test_unset_optional_values_are_left_out() -> None:
    env = Settings(amqp_url=None, webhook_secret_key=None).to_env()
    assert "FENCELINE_AMQP_URL" not in env and "FENCELINE_WEBHOOK_SECRET_KEY" not in env
