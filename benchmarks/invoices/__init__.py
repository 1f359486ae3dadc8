"""The synthetic invoice generator (benchmarks, eval, the demo, adapter training).

It stands outside the protocol core: nothing in ``pipeline`` calls it at run time.
The surface is :mod:`benchmarks.invoices.generator`'s.
"""

from benchmarks.invoices.generator import (
    DEFAULT_INJECTION_URL,
    EXPECTED_CODES,
    INJECTION_CORPUS,
    LANGUAGES,
    LAYOUTS,
    GeneratedInvoice,
    Variant,
    generate_corpus,
    generate_invoice,
)

__all__ = [
    "DEFAULT_INJECTION_URL",
    "EXPECTED_CODES",
    "INJECTION_CORPUS",
    "LANGUAGES",
    "LAYOUTS",
    "GeneratedInvoice",
    "Variant",
    "generate_corpus",
    "generate_invoice",
]
