"""Planted documents of a load run (benchmarks.load.plants): each derives from an
earlier invoice of the run as its rule needs, and the oracle scores a plant decided
otherwise as wrong."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

import pytest

from benchmarks.invoices.derived import credit_note_number
from benchmarks.load.generator import schedule
from benchmarks.load.plants import (
    MIN_GAP,
    Plant,
    plan_plants,
    score,
    tenant_assignment,
)
from benchmarks.scenario import parse_scenario, scenario_corpus
from pipeline.extraction.cii import read_cii
from pipeline.jobs.near_duplicates import normalise_number
from pipeline.worker import interpret

SCENARIO = parse_scenario(
    {
        "name": "plants",
        "seed": 3,
        "arrival": {"process": "burst", "count": 160},
        "tenants": [{"name": "a", "weight": 2}, {"name": "b", "weight": 1}],
        "documents": {
            "corpus": 160,
            "max_line_items": 3,
            "plants": {"amendment": 0.1, "near_duplicate": 0.05, "credit_note": 0.05},
        },
    }
)


def _result(text: str, answer: str, master: Any, today: date) -> dict[str, Any]:
    outcome = interpret(answer, text, master, today=today)
    result: dict[str, Any] = outcome.result()
    return result


def _value(result: dict[str, Any], name: str) -> str:
    return str(result[name]["value"])


def test_plants_derive_from_an_earlier_invoice_of_the_same_tenant_as_their_rule_needs() -> None:
    corpus = scenario_corpus(SCENARIO)
    arrivals = len(schedule(SCENARIO.arrival, SCENARIO.seed))
    tenant_of = tenant_assignment(SCENARIO, arrivals)
    plants = plan_plants(SCENARIO, corpus, arrivals)
    kinds = [p.kind for p in plants]
    # Shares of 160 arrivals; an early slot may find no unused origin MIN_GAP before it.
    assert kinds.count("credit_note") == 8
    assert 13 <= kinds.count("amendment") <= 16 and 6 <= kinds.count("near_duplicate") <= 8
    origins = [p.origin for p in plants]
    replaced = {p.index for p in plants if p.index is not None}
    assert len(set(origins)) == len(origins) and not replaced & set(origins)
    for p in plants:
        origin = corpus[p.origin]
        before = _result(origin.ocr_text, _answer_of(origin), origin.master_data, origin.today)
        if p.kind == "credit_note":
            facts = read_cii(p.xml)
            assert facts.type_code == "381"
            number = _value(before, "invoice_number")
            assert [r.number for r in facts.preceding_invoices] == [number]
            assert facts.invoice_number == credit_note_number(number)
            assert facts.seller_vat_id == origin.truth.supplier.vat_id.value  # type: ignore[union-attr]
            continue
        assert p.index is not None and p.index - p.origin >= MIN_GAP
        assert tenant_of[p.index] == tenant_of[p.origin]
        after = _result(p.text, p.answer, origin.master_data, origin.today)
        assert after["supplier"] == before["supplier"]
        assert _value(after, "gross_total") == _value(before, "gross_total")
        old_number, new_number = _value(before, "invoice_number"), _value(after, "invoice_number")
        old_day = date.fromisoformat(_value(before, "issue_date"))
        new_day = date.fromisoformat(_value(after, "issue_date"))
        if p.kind == "amendment":
            assert new_number == old_number
            assert new_day == old_day + timedelta(days=3)
        else:
            assert new_day == old_day
            assert new_number != old_number
            assert normalise_number(new_number) == normalise_number(old_number)


def _answer_of(inv: Any) -> str:
    from pipeline.extraction.extractor import answer_for

    return answer_for(inv.candidate, inv.ocr_text)


PLANTS = [
    Plant("amendment", origin=0, index=50),
    Plant("near_duplicate", origin=1, index=51),
    Plant("credit_note", origin=2, index=None),
]
JOB_OF = {0: "j0", 1: "j1", 2: "j2", 50: "j50", 51: "j51"}


def _reason(code: str, other: str) -> dict[str, Any]:
    return {"reasons": [{"code": code, "other_job_id": other}]}


def _jobs(**changes: tuple[str, Any]) -> dict[str, tuple[str, Any]]:
    jobs: dict[str, tuple[str, Any]] = {
        "j0": ("SUCCEEDED", {}),
        "j1": ("SUCCEEDED", {}),
        "j2": ("SUCCEEDED", {}),
        "j50": ("REVIEW_REQUIRED", _reason("possible_amendment", "j0")),
        "j51": ("REVIEW_REQUIRED", _reason("possible_duplicate", "j1")),
        "cn": ("SUCCEEDED", {}),
    }
    jobs.update(changes)
    return jobs


def test_the_oracle_counts_plants_decided_as_their_rule() -> None:
    out = score(PLANTS, JOB_OF, {2: "cn"}, _jobs(), {"cn": "j2"}, {"cn": "j2"})
    assert out.as_rule == {"amendment": 1, "near_duplicate": 1, "credit_note": 1}
    assert out.wrong == []
    assert out.unplanted_held == []
    assert json.dumps(out.as_dict())


def test_the_oracle_counts_an_unplanted_invoice_held_as_a_false_hold() -> None:
    held = _jobs(j1=("REVIEW_REQUIRED", _reason("possible_amendment", "j0")))
    out = score(PLANTS, JOB_OF, {2: "cn"}, held, {"cn": "j2"}, {"cn": "j2"})
    assert out.unplanted_held == ["arrival 1: REVIEW_REQUIRED ['possible_amendment']"]
    assert out.as_dict()["unplanted_held_count"] == 1


@pytest.mark.parametrize(
    ("case", "jobs", "links", "posted"),
    [
        (
            "amendment held as a duplicate",
            _jobs(j50=("REVIEW_REQUIRED", _reason("possible_duplicate", "j0"))),
            {"cn": "j2"},
            {"cn": "j2"},
        ),
        (
            "amendment naming another job",
            _jobs(j50=("REVIEW_REQUIRED", _reason("possible_amendment", "j1"))),
            {"cn": "j2"},
            {"cn": "j2"},
        ),
        ("near duplicate posted", _jobs(j51=("SUCCEEDED", {})), {"cn": "j2"}, {"cn": "j2"}),
        ("credit note held", _jobs(cn=("REVIEW_REQUIRED", {})), {"cn": "j2"}, {"cn": "j2"}),
        ("credit note linked to another job", _jobs(), {"cn": "j1"}, {"cn": "j2"}),
        ("credit note not posted as a credit", _jobs(), {"cn": "j2"}, {}),
    ],
)
def test_the_oracle_scores_a_plant_decided_otherwise_as_wrong(
    case: str, jobs: dict[str, Any], links: dict[str, str], posted: dict[str, str | None]
) -> None:
    out = score(PLANTS, JOB_OF, {2: "cn"}, jobs, links, posted)
    assert sum(out.as_rule.values()) == 2, case
    assert len(out.wrong) == 1, case
