"""Accuracy evaluation (``fenceline eval``): invoices through an engine, scored against truth.

:mod:`~benchmarks.eval.run` is the command; :mod:`~benchmarks.eval.dataset` reads the
dataset (``docs/eval-dataset.md``), whose truth and master data are
:mod:`~benchmarks.eval.truth`'s and which :mod:`~benchmarks.eval.generated` writes from
generated invoices; :mod:`~benchmarks.eval.engines` are the
engines it can call, :mod:`~benchmarks.eval.oracle` answers as a perfect model would,
:mod:`~benchmarks.eval.scoring` scores one invoice (with
:mod:`~benchmarks.eval.partial_json` for cut answers), :mod:`~benchmarks.eval.report`
aggregates and :mod:`~benchmarks.eval.bounds` bounds the false-accept rate;
:mod:`~benchmarks.eval.long_invoices` writes the long-invoice dataset.
"""
