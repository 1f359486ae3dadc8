"""The named transformations: each changes a :class:`~benchmarks.fuzz.layout.Layout` and,
where it changes what the invoice states, the :class:`~benchmarks.fuzz.facts.Facts` too.

A transformation keeps the truth or changes it consistently: the truth is always built
from the facts the renderer printed (an invoice number rewritten with slashes is the
new truth; a due date removed from the page is ``null`` in the truth). Two
transformations that set the same choice (their ``slots`` meet) are never combined
(:func:`compatible`), so a family name ("labels_after+noise") says exactly what was done.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import permutations

from benchmarks.fuzz.facts import Facts, number_digits
from benchmarks.fuzz.layout import Layout
from benchmarks.fuzz.vocabulary import COLUMNS, WORDS

Apply = Callable[[Facts, Layout, random.Random], Facts]

#: Every order of the table's five columns: the draw of ``columns`` reaches each.
COLUMN_ORDERS = tuple(permutations(COLUMNS))


@dataclass(frozen=True)
class Transform:
    name: str
    slots: frozenset[str]
    apply: Apply
    doc: str


def _columns(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    layout.columns = rng.choice(COLUMN_ORDERS)
    return facts


def _price_first(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    """Unit price before quantity, the quantity printed bare (issue 41's swapped table)."""
    layout.columns = rng.choice(
        [o for o in COLUMN_ORDERS if o.index("unit_price") < o.index("quantity")]
    )
    layout.units = rng.random() < 0.5
    return facts


def _headers_foreign(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    layout.header_language = rng.choice([lang for lang in WORDS if lang != facts.language])
    return facts


def _set(**changes: object) -> Apply:
    def apply(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
        del rng
        for key, value in changes.items():
            setattr(layout, key, value)
        return facts

    return apply


def _no_units_bare_table(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    layout.headers = "none"
    layout.units = rng.random() < 0.5
    return facts


def _number_spaced(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    """The invoice number rewritten with spaces and slashes; the truth takes the new form."""
    del layout
    serial, year = number_digits(facts.number, facts.issue.year), str(facts.issue.year)
    letters = "".join(ch for ch in facts.number if ch.isalpha())[:3] or "INV"
    form = rng.choice(
        (
            f"{year}/{serial}",
            f"{serial}/{year}",
            f"{letters} {year} {serial}",
            f"{letters}/{year}/{serial}",
            f"{serial[:3]} {serial[3:]}" if len(serial) > 4 else f"{letters} {serial}",
        )
    )
    return facts.replace(number=form)


def _due_sentence(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    layout.due = "sentence"
    layout.words = rng.random() < 0.5
    return facts


def _due_term(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    """Only "pay within N days": the truth keeps the due date the term states (None where
    the generator's due date is no whole term)."""
    del rng
    layout.due = "term"
    return facts if facts.term_days is not None else facts.replace(due=None)


def _no_due(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    del rng
    layout.due = "none"
    return facts.replace(due=None, term_days=None)


def _letter(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    layout.issue = "letter"
    layout.due = rng.choice(("sentence", "term", "none"))
    layout.words = True
    if layout.due == "none" or (layout.due == "term" and facts.term_days is None):
        return facts.replace(due=None, term_days=None)
    return facts


def _dates_in_words(facts: Facts, layout: Layout, rng: random.Random) -> Facts:
    del rng
    layout.words = True
    layout.issue = "sentence"
    layout.due = "sentence"
    return facts


TRANSFORMS: tuple[Transform, ...] = (
    Transform("columns", frozenset({"columns"}), _columns,
              "item-table columns in an order drawn from all 120"),
    Transform("price_before_qty", frozenset({"columns"}), _price_first,
              "unit price printed before quantity, units on half of them"),
    Transform("headers_foreign", frozenset({"headers"}), _headers_foreign,
              "table header words of another language"),
    Transform("headers_abbreviated", frozenset({"headers"}), _set(headers="abbr"),
              "table header words abbreviated (Qty, EP, Qté, À-pris)"),
    Transform("headers_removed", frozenset({"headers"}), _no_units_bare_table,
              "no table header row; units on half of them"),
    Transform("items_prose", frozenset({"items", "columns", "headers", "pages"}),
              _set(items="prose"), "items as sentences, grammar drawn per language"),
    Transform("items_email", frozenset({"items", "columns", "headers", "pages"}),
              _set(items="email"), 'items as an e-mail list "- Widget A: 3 x 12.50 = 37.50"'),
    Transform("labels_after", frozenset({"labels"}), _set(labels="after"),
              "header and total labels after their values"),
    Transform("labels_below", frozenset({"labels"}), _set(labels="below"),
              "header and total labels on the line below their values"),
    Transform("labels_row", frozenset({"labels", "blocks"}), _set(labels="row"),
              "labels in one row, values in the row below"),
    Transform("side_by_side", frozenset({"blocks"}), _set(side_by_side=True),
              "letterhead and header fields side by side"),
    Transform("dates_in_words", frozenset({"issue", "due"}), _dates_in_words,
              "issue and due date in words inside sentences"),
    Transform("due_sentence", frozenset({"due"}), _due_sentence,
              'due date only in a sentence ("payable by 3 March 2026")'),
    Transform("due_term", frozenset({"due"}), _due_term,
              'due date only as a term ("Please pay within 30 days")'),
    Transform("no_due_date", frozenset({"due"}), _no_due, "no due date printed (truth null)"),
    Transform("letter", frozenset({"issue", "due", "labels", "blocks"}), _letter,
              'a letter: place-and-date line ("Lisboa, 3 de março de 2026"), no date label'),
    Transform("number_spaced", frozenset({"number"}), _number_spaced,
              "invoice number with spaces and slashes (the truth changes with it)"),
    Transform("noise", frozenset({"noise"}), _set(noise=True),
              "order/customer numbers, phone, delivery date, founding year, register number"),
    Transform("page_split", frozenset({"pages"}), _set(pages=True),
              "item table split over two pages, header repeated, carried-forward subtotal"),
)  # fmt: skip
BY_NAME = {t.name: t for t in TRANSFORMS}
#: The fuzzer's own rendering with no transformation (the reference every family is
#: compared with) and the generator's text untouched.
PLAIN, GENERATOR = "plain", "generator"
FAMILY_NAMES = (PLAIN, GENERATOR, *BY_NAME)


def compatible(names: Sequence[str]) -> bool:
    """Whether these transformations set disjoint choices (may be applied together)."""
    seen: set[str] = set()
    for name in names:
        slots = BY_NAME[name].slots
        if seen & slots:
            return False
        seen |= slots
    return True


def draw_family(rng: random.Random, first: str, extra: int) -> tuple[str, ...]:
    """``first`` plus up to ``extra`` compatible transformations drawn at random."""
    family = [first]
    pool = [t.name for t in TRANSFORMS if t.name != first]
    rng.shuffle(pool)
    for name in pool:
        if len(family) > extra:
            break
        if compatible([*family, name]):
            family.append(name)
    return tuple(sorted(family, key=list(BY_NAME).index))


def apply_family(facts: Facts, family: Sequence[str], rng: random.Random) -> tuple[Facts, Layout]:
    """The facts and layout of ``family`` (names of :data:`TRANSFORMS`, or ``plain``).

    Raises:
        ValueError: an unknown name, or names that set the same choice.
    """
    names = [n for n in family if n != PLAIN]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(
            f"unknown transformation {', '.join(unknown)}; one of {', '.join(BY_NAME)}"
        )
    if not compatible(names):
        raise ValueError(f"transformations {'+'.join(names)} set the same choice")
    layout = Layout()
    for name in names:
        facts = BY_NAME[name].apply(facts, layout, rng)
    return facts, layout
