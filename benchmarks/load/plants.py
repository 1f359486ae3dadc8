"""Planted documents of a load run and the oracle that scores how each was decided.

A scenario's ``documents.plants`` gives shares of the arrivals that are derived from
an EARLIER invoice of the same run and tenant (the *origin*), each with the decision
its rule in docs/delivery.md prescribes:

* ``amendment``: the same supplier and number, the issue date a few days later
  ("Invoice versions"): REVIEW_REQUIRED ``possible_amendment`` naming the origin's job;
* ``near_duplicate``: the number printed otherwise (a leading zero, separators
  as spaces: :func:`pipeline.jobs.near_duplicates.normalise_number` reads them as
  one), the same gross total and issue date: REVIEW_REQUIRED ``possible_duplicate``
  naming the origin's job;
* ``credit_note``: a CII credit note (type 381) of the origin's supplier whose
  preceding invoice reference names the origin's number, uploaded as XML once the
  origin's job SUCCEEDED ("Credit notes"): SUCCEEDED, linked to the origin's job in
  ``credit_note_links`` and posted at the ERP as a credit of it.

Amendments and near duplicates take the place of an arrival of the schedule at
least :data:`MIN_GAP` arrivals after their origin, as text whose fake-provider answer
is the origin's with the changed field; credit notes are sent by the runner beside
the schedule. :func:`score` is the oracle over the settled jobs and the ERP ledger.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.invoices.derived import amended, credit_note, near_duplicate
from benchmarks.invoices.generator import GeneratedInvoice, Variant
from benchmarks.scenario import Scenario
from pipeline.worker import interpret

#: Arrivals between an origin and a document derived from it, so the origin has
#: settled (claimed its identity) before the plant is extracted.
MIN_GAP = 40
#: Credit notes credit origins in the first part of the schedule, so they are sent
#: while arrivals still come.
CREDIT_ORIGIN_SHARE = 0.7
IN_STREAM = ("amendment", "near_duplicate")


@dataclass(frozen=True)
class Plant:
    """One planted document: its kind, the arrival it derives from and how it is sent.

    ``index`` is the arrival it replaces (None for a credit note, sent beside the
    schedule); ``text`` and ``answer`` the OCR text and the fake provider's answer of an
    in-stream plant; ``xml`` a credit note's upload.
    """

    kind: str
    origin: int
    index: int | None
    text: str = ""
    answer: str = ""
    xml: bytes = b""


def tenant_assignment(scenario: Scenario, arrivals: int) -> list[int]:
    """Which tenant (position in ``scenario.tenants``) sends each arrival (deterministic)."""
    rng = random.Random(f"tenants:{scenario.seed}")
    weights = [t.weight for t in scenario.tenants]
    return [rng.choices(range(len(weights)), weights)[0] for _ in range(arrivals)]


def _clean_alone(inv: GeneratedInvoice, text: str, answer: str) -> bool:
    """Whether the derived document SUCCEEDS on its own (no other reason than its rule's:
    a number printed "RE 2026 505" reads as a label and number, so it is not planted)."""
    outcome = interpret(answer, text, inv.master_data, today=inv.today)
    return outcome.report.as_dict().get("decision") == "SUCCEEDED"


def plan_plants(
    scenario: Scenario, corpus: Sequence[GeneratedInvoice], arrivals: int
) -> list[Plant]:
    """The scenario's planted documents (deterministic in the scenario).

    Arrival ``i`` sends ``corpus[i % len(corpus)]``; an origin is an arrival of a
    clean invoice that is neither planted nor the origin of another plant.
    """
    shares: dict[str, float] = {str(k): v for k, v in scenario.documents.plants.items()}
    if not shares or arrivals == 0:
        return []
    tenant_of = tenant_assignment(scenario, arrivals)
    rng = random.Random(f"plants:{scenario.seed}")
    used: set[int] = set()
    slots = list(range(MIN_GAP, arrivals))
    rng.shuffle(slots)
    wanted = {k: round(shares.get(k, 0.0) * arrivals) for k in (*IN_STREAM, "credit_note")}
    # The replaced arrivals first, so no origin is one of them.
    replaced: dict[str, list[int]] = {}
    for kind in IN_STREAM:
        replaced[kind] = []
        while len(replaced[kind]) < wanted[kind] and slots:
            i = slots.pop()
            replaced[kind].append(i)
            used.add(i)
    plants: list[Plant] = []

    def inv_of(i: int) -> GeneratedInvoice:
        return corpus[i % len(corpus)]

    def pick_origin(limit: int, tenant: int | None) -> list[int]:
        choices = [
            j
            for j in range(limit)
            if j not in used
            and (tenant is None or tenant_of[j] == tenant)
            and inv_of(j).variant == Variant.CLEAN
        ]
        rng.shuffle(choices)
        return choices

    derive = {"amendment": amended, "near_duplicate": near_duplicate}
    for kind in IN_STREAM:
        for i in replaced[kind]:
            for j in pick_origin(i - MIN_GAP + 1, tenant_of[i]):
                made = derive[kind](inv_of(j))
                if made is not None and _clean_alone(inv_of(j), *made):
                    used.add(j)
                    plants.append(Plant(kind, j, i, text=made[0], answer=made[1]))
                    break
    for j in pick_origin(int(arrivals * CREDIT_ORIGIN_SHARE), None):
        if sum(p.kind == "credit_note" for p in plants) >= wanted["credit_note"]:
            break
        xml = credit_note(inv_of(j))
        if xml is not None:
            used.add(j)
            plants.append(Plant("credit_note", j, None, xml=xml))
    return plants


def planted_in_stream(plants: Sequence[Plant]) -> list[Plant]:
    """The plants that take an arrival's place (amendments, near duplicates), in order."""
    return [p for p in plants if p.index is not None]


@dataclass
class PlantScore:
    """The oracle's counts per kind: planted, decided as the rule says, and what was not."""

    planted: dict[str, int] = field(default_factory=dict)
    as_rule: dict[str, int] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    #: Arrivals that were not planted yet settled other than SUCCEEDED (a clean
    #: corpus invoice held as a version or duplicate of another is a false hold).
    unplanted_held: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"planted": self.planted, "as_rule": self.as_rule, "wrong": self.wrong[:20],
                "wrong_count": len(self.wrong), "unplanted_held": self.unplanted_held[:20],
                "unplanted_held_count": len(self.unplanted_held)}  # fmt: skip


def _names(validation: Mapping[str, Any] | None, code: str, origin_job: str | None) -> bool:
    for reason in (validation or {}).get("reasons") or []:
        if isinstance(reason, dict) and reason.get("code") == code:
            if origin_job is None or str(reason.get("other_job_id")) == origin_job:
                return True
    return False


def score(
    plants: Sequence[Plant],
    job_of: Mapping[int, str],
    credit_jobs: Mapping[int, str],
    jobs: Mapping[str, tuple[str, Mapping[str, Any] | None]],
    links: Mapping[str, str],
    credits_posted: Mapping[str, str | None],
) -> PlantScore:
    """Score each plant against its rule.

    ``job_of``: arrival index -> job id; ``credit_jobs``: origin index -> the credit
    note's job id; ``jobs``: job id -> (state, validation); ``links``: credit note job
    -> invoice job (``credit_note_links``); ``credits_posted``: credit note job -> the
    job the ERP booked it against (``erp_postings.credits_job_id``).
    """
    out = PlantScore()
    for p in plants:
        out.planted[p.kind] = out.planted.get(p.kind, 0) + 1
        origin_job = job_of.get(p.origin)
        ok = False
        if p.kind == "credit_note":
            job = credit_jobs.get(p.origin)
            state = jobs.get(job, ("missing", None))[0] if job else "unsent"
            ok = (
                job is not None
                and origin_job is not None
                and state == "SUCCEEDED"
                and links.get(job) == origin_job
                and credits_posted.get(job) == origin_job
            )
            what = f"credit_note of arrival {p.origin}: {state}"
        else:
            assert p.index is not None
            job = job_of.get(p.index)
            state, validation = jobs.get(job, ("missing", None)) if job else ("unsent", None)
            code = "possible_amendment" if p.kind == "amendment" else "possible_duplicate"
            ok = (
                origin_job is not None
                and state == "REVIEW_REQUIRED"
                and _names(validation, code, origin_job)
            )
            what = f"{p.kind} at arrival {p.index} of {p.origin}: {state}"
        if ok:
            out.as_rule[p.kind] = out.as_rule.get(p.kind, 0) + 1
        else:
            out.wrong.append(what)
    planted_at = {p.index for p in plants if p.index is not None}
    for index, job in sorted(job_of.items()):
        state, validation = jobs.get(job, ("missing", None))
        if index not in planted_at and state != "SUCCEEDED":
            codes = sorted(
                str(r.get("code"))
                for r in (validation or {}).get("reasons") or []
                if isinstance(r, dict)
            )
            out.unplanted_held.append(f"arrival {index}: {state} {codes}")
    return out
