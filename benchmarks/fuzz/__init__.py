"""The metamorphic layout fuzzer (issue 41): generated invoices printed again under named
transformations that keep the truth (or change it with the print), answered perfectly
or with decoys, and judged by the property SUCCEEDED ⇒ every field equals the truth.

The surface is :func:`~benchmarks.fuzz.cases.fuzz_case` (one transformed invoice and its
truth), :data:`~benchmarks.fuzz.transforms.TRANSFORMS`, the answers
(:mod:`benchmarks.fuzz.answers`), the run (:mod:`benchmarks.fuzz.campaign`) and its
report (:mod:`benchmarks.fuzz.report`); ``fenceline fuzz`` is :mod:`benchmarks.fuzz.command`.
docs/fuzzer.md describes each transformation.
"""
