"""Real e-invoices as an evaluation set: the public ZUGFeRD/Factur-X corpus.

Each PDF of the corpus prints an invoice and embeds its XML: the XML is the truth
(:mod:`benchmarks.corpus.cii`), the text layer is what Fenceline reads
(:mod:`benchmarks.corpus.pdf`), and :mod:`benchmarks.corpus.holdable` says whether
contract v2 can hold the invoice at all. ``fenceline corpus einvoices``
(:mod:`benchmarks.corpus.command`) writes the whole corpus as a ``fenceline eval
--dataset`` file; docs/real-invoices.md reports it. The corpus is scored, never tuned on.
"""
