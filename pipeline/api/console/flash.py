"""The console's status line: a fixed set of messages named by key.

A redirect after an action says what happened with ``?flash=<key>`` (and, where the
message names a job, ``&job=<uuid>``). The text is the server's own: a key this
module does not know shows nothing, and a ``job`` that is not a UUID is left out of
the message. So a link from anywhere cannot put words of its choosing in the green
line a reviewer trusts as the system's voice (issue 45, defect 5).
"""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

#: key → text; keys in ``_NAMES_JOB`` append the job's id when one is given.
MESSAGES: dict[str, str] = {
    "approved": "Approved",
    "rejected": "Rejected",
    "redriven": "Re-driven",
    "resent": "Resend queued: the same delivery id goes out again, the ERP deduplicates it",
    "saved": "Saved; validation passes, approve to deliver",
    "saved-reasons": "Saved; validation still finds reasons",
}
_NAMES_JOB = frozenset({"approved", "rejected", "redriven"})


def flash_text(key: str | None, job: str | None) -> str | None:
    """The message ``key`` names, or None for no key or an unknown one."""
    text = MESSAGES.get(key or "")
    if text is None or key not in _NAMES_JOB:
        return text
    try:
        return f"{text} job {uuid.UUID(job or '')}"
    except ValueError:
        return f"{text} the job"


def flash_url(path: str, key: str, job: uuid.UUID | None = None) -> str:
    """``path`` with the query that shows message ``key`` (about ``job``)."""
    if key not in MESSAGES:
        raise ValueError(f"unknown flash message {key!r}")
    query = {"flash": key} | ({"job": str(job)} if job is not None else {})
    return f"{path}?{urlencode(query)}"
