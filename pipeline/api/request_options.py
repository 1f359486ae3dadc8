"""Request options this deployment can honour, checked at intake before anything is written.

A request's ``model_policy`` and ``options`` are promises the attempt keeps, so one the
deployment cannot keep is refused here (422), never accepted and served otherwise:

* **model_policy** is ``default`` (the router's context-length rule) or the name of a
  configured pool (``Settings.model_pools``: the pools file's pools, or a hosted
  provider's models); the driver sends the attempt to that pool and asks that pool's
  admission scope. Anything else is 422 ``unknown_model_policy`` naming the ones
  configured.
* **options.ocr_languages** names tesseract languages, each one the deployment
  installs (``Settings.ocr_languages``, the packs its image carries); the job's scanned
  pages are read with exactly those. A malformed value or a language not installed is
  422 ``invalid_option`` naming the installed ones.

The request hash is untouched: what is checked here is what was hashed.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.api.problems import ApiProblem
from pipeline.api.submission import JobOptions
from pipeline.documents import MAX_REQUESTED_LANGUAGES, requested_languages
from pipeline.settings import Settings


def refuse_unserved_options(options: JobOptions, settings: Settings) -> None:
    """Refuse a ``model_policy`` or an option value this deployment cannot honour.

    Raises:
        ApiProblem: 422 ``unknown_model_policy`` or ``invalid_option``.
    """
    policies = settings.model_policies()
    if options.model_policy not in policies:
        names = ", ".join(policies)
        raise ApiProblem(
            422,
            f"model_policy {options.model_policy!r} names no configured pool; configured: {names}",
            reason="unknown_model_policy",
            errors=[
                {
                    "loc": ["body", "model_policy"],
                    "msg": f"no such pool; configured: {names}",
                    "type": "unknown_model_policy",
                }
            ],
        )
    if "ocr_languages" in options.options:
        _check_ocr_languages(options.options["ocr_languages"], settings)


def _check_ocr_languages(value: object, settings: Settings) -> None:
    installed = [n for n in settings.ocr_languages.split("+") if n]
    try:
        asked = requested_languages(value)
    except ValueError as exc:
        _invalid("ocr_languages", f"{exc}; installed: {'+'.join(installed)}")
    missing = [n for n in asked if n not in installed]
    if missing:
        _invalid(
            "ocr_languages",
            f"not installed: {'+'.join(missing)}; installed: {'+'.join(installed)}",
        )


def _invalid(name: str, why: str) -> None:
    raise ApiProblem(
        422,
        f"option {name}: {why}",
        reason="invalid_option",
        errors=[{"loc": ["body", "options", name], "msg": why, "type": "invalid_option"}],
    )


def describe_honoured_options(components: dict[str, Any], settings: Settings) -> None:
    """Write what this deployment honours into the request schemas of its OpenAPI
    document: ``model_policy`` as the configured names, ``options.ocr_languages`` as
    the installed languages (text or a list), so a request the document calls valid
    is one the intake accepts."""
    installed = [n for n in settings.ocr_languages.split("+") if n]
    one = "(" + "|".join(map(re.escape, installed)) + ")"
    languages = {
        "anyOf": [
            {"type": "string", "pattern": f"^{one}(\\+{one}){{0,{MAX_REQUESTED_LANGUAGES - 1}}}$"},
            {
                "type": "array",
                "items": {"type": "string", "enum": installed},
                "minItems": 1,
                "maxItems": MAX_REQUESTED_LANGUAGES,
            },
        ],
        "description": "installed: " + "+".join(installed),
    }
    for name in ("JobOptions", "JobSubmission"):
        props = components.get(name, {}).get("properties", {})
        if "model_policy" in props:
            props["model_policy"]["enum"] = list(settings.model_policies())
        if "options" in props:
            props["options"]["properties"] = {"ocr_languages": languages}
