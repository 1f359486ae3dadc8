"""One settings object for the whole system, read from ``FENCELINE_*`` variables.

Nothing reads the environment at import time: build a :class:`Settings` at
start-up and pass it down.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FENCELINE_", extra="ignore")

    database_url: str = "postgresql://postgres@127.0.0.1:5432/fenceline"
    #: No broker when unset: the durable scheduler (LISTEN/NOTIFY + scan) finds work.
    amqp_url: str | None = None
    db_pool_min: int = 1
    db_pool_max: int = 10

    # Leases: lease > attempt timeout + commit margin; heartbeats well inside it.
    lease_seconds: float = Field(90.0, gt=0)
    heartbeat_seconds: float = Field(30.0, gt=0)
    attempt_timeout_seconds: float = Field(45.0, gt=0)

    # Retries (spec section 4): full jitter, capped, persisted.
    max_attempts: int = Field(5, ge=1)
    retry_base_seconds: float = Field(2.0, gt=0)
    retry_cap_seconds: float = Field(60.0, gt=0)
    #: Time a next attempt needs (attempt timeout + commit margin) before the deadline.
    next_attempt_margin_seconds: float = Field(50.0, ge=0)
    default_deadline_seconds: float = Field(3600.0, gt=0)

    reaper_interval_seconds: float = Field(5.0, gt=0)
    scan_interval_seconds: float = Field(2.0, gt=0)
