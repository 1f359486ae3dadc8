"""A due date inside payment terms that also grant a cash discount (issue 41).

Payment terms often print two dates in one sentence: the discount's deadline and the
net due date. The words before each date say which is which; a date in a discount term
whose own words name no net payment may be the discount's deadline and proves no due
date, even after "payable by". The pages are written here, in several languages.
"""

from __future__ import annotations

from datetime import date

import pytest

from pipeline.extraction.label_proof import date_proof
from pipeline.extraction.layout import Layout
from pipeline.extraction.locate import occurrences
from pipeline.invoice import ReasonCode
from tests.unit.test_role_proofs import PRICE_FIRST, _doc, _run


def _proof(text: str, printed: str) -> list[str | None]:
    doc = Layout.read(text)
    return [
        date_proof(doc, f, "due_date")
        for f in occurrences(doc, printed, fuzzy=False, boundary="number")
    ]


@pytest.mark.parametrize(
    ("terms", "due", "deadline"),
    [
        (
            "Payable within 30 days net by 02.04.2026,\n"
            "2 % discount within 10 days by 13.03.2026.\n",
            "02.04.2026",
            "13.03.2026",
        ),
        (
            "Zahlbar bis 13.03.2026 mit 2 % Skonto\noder ohne Abzug bis 02.04.2026.\n",
            "02.04.2026",
            "13.03.2026",
        ),
        (
            "Zahlungsziel: 2 % Skonto bei Zahlung bis 13.03.2026, 30 Tage netto bis 02.04.2026\n",
            "02.04.2026",
            "13.03.2026",
        ),
    ],
)
def test_the_net_date_is_the_due_date_and_the_discount_deadline_is_refused(
    terms: str, due: str, deadline: str
) -> None:
    doc = _doc(PRICE_FIRST, due=terms)
    out = _run(doc, due_date=due)
    assert out.report.reasons == ()
    assert out.extraction.due_date is not None
    assert out.extraction.due_date.value == date(2026, 4, 2)
    wrong = _run(doc, due_date=deadline)
    assert wrong.extraction.due_date is None
    assert ReasonCode.AMBIGUOUS_ROLE in wrong.report.codes


@pytest.mark.parametrize(
    "terms",
    [
        "Please pay by 13.03.2026 to receive a 2 % discount.\n",
        "Zahlbar bis 13.03.2026 abzüglich 3 % Skonto.\n",
        "Paiement avant le 13.03.2026 : escompte de 2 %.\n",
    ],
)
def test_a_payment_date_in_a_discount_term_proves_no_due_date(terms: str) -> None:
    assert _proof(_doc(PRICE_FIRST, due=terms), "13.03.2026") == [None]


def test_a_due_label_without_a_discount_still_proves() -> None:
    assert _proof(_doc(PRICE_FIRST, due="Zahlbar bis 02.04.2026.\n"), "02.04.2026") == ["label"]
