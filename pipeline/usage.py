"""Token usage: what an engine reports for one call, and what an attempt records.

One concept, three shapes: :class:`Usage` is the engine's count (every engine
returns it); :class:`ReportedUsage` is what admission reads of it (any object
with the three counts, e.g. one that crossed a Ray actor boundary);
:class:`AttemptUsage` is what the job store writes on the attempt row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Usage:
    """Tokens the engine reports for one call.

    ``cached_tokens`` is the part of ``prompt_tokens`` served from a prefix cache
    (vLLM prefix caching, or the provider's ``prompt_tokens_details``).
    """

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ReportedUsage(Protocol):
    """What an engine reports for one call (:class:`Usage` fits)."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...

    @property
    def cached_tokens(self) -> int: ...


@dataclass(frozen=True)
class AttemptUsage:
    """What the attempt row records: the engine's :class:`Usage` counts (None where it
    said nothing) and which engine reported them."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    engine: str | None = None
