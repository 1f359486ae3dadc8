"""A job's request options as the attempt honours them.

The intake refused what the deployment cannot honour
(:mod:`pipeline.api.request_options`); what it accepted is kept with the job
(``job_options``, migration 029) and read here once per attempt:

* ``ocr_languages``: the tesseract languages the document stage reads this job's
  pages without text with, instead of the deployment's list (``FENCELINE_OCR_LANGUAGES``);
* ``model_policy`` (a job column, on the lease): the pool the engine runs the call
  on and whose admission scope the attempt asks; ``default`` leaves both to the
  context-length rule.

A value kept before the intake checked it and that no attempt can honour (a
malformed ``ocr_languages``) fails the job terminally with ``invalid_option``; it is
never ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.documents import requested_languages
from pipeline.errors import InvalidOption
from pipeline.jobs import Lease


@dataclass(frozen=True)
class JobRequestOptions:
    """What an attempt reads from its job's ``options``."""

    #: ``+``-joined tesseract languages for this job's pages; None: the deployment's.
    ocr_languages: str | None = None

    @classmethod
    def of(cls, stored: Mapping[str, Any] | str | None) -> JobRequestOptions:
        """The options a ``job_options_get_for_tenant`` value holds (None: none kept).

        Raises:
            InvalidOption: a kept ``ocr_languages`` that names no languages.
        """
        if stored is None:
            return cls()
        options = json.loads(stored) if isinstance(stored, str) else stored
        if "ocr_languages" not in options:
            return cls()
        try:
            languages = requested_languages(options["ocr_languages"])
        except ValueError as exc:
            raise InvalidOption(f"option ocr_languages: {exc}") from exc
        return cls(ocr_languages="+".join(languages))


def routed_pool(lease: Lease) -> str | None:
    """The pool the job's ``model_policy`` names; None for ``default`` (the length rule)."""
    policy = lease.model_policy
    return None if policy in ("", "default") else policy
