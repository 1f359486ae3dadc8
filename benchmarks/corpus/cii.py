"""The corpus' truth is read by the pipeline's one CII reader (:mod:`pipeline.extraction`).

Kept as a name for the corpus modules: the reader itself moved into the pipeline, whose
e-invoice fast path reads uploads with it, so truth and production read XML alike.
"""

from pipeline.extraction import (
    CREDIT_NOTE_TYPES,
    InvoiceFacts,
    ItemFacts,
    NotCrossIndustryInvoice,
    TaxFacts,
    due_date_from_terms,
    read_cii,
)

__all__ = [
    "CREDIT_NOTE_TYPES",
    "InvoiceFacts",
    "ItemFacts",
    "NotCrossIndustryInvoice",
    "TaxFacts",
    "due_date_from_terms",
    "read_cii",
]
