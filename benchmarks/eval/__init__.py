"""Accuracy evaluation (``fenceline eval``): invoices through an engine, scored against truth.

:mod:`~benchmarks.eval.run` is the command; :mod:`~benchmarks.eval.dataset` reads and
writes the dataset (``docs/eval-dataset.md``), :mod:`~benchmarks.eval.engines` are the
engines it can call, :mod:`~benchmarks.eval.oracle` answers as a perfect model would,
:mod:`~benchmarks.eval.scoring` scores one invoice (with
:mod:`~benchmarks.eval.partial_json` for cut answers), :mod:`~benchmarks.eval.report`
aggregates and :mod:`~benchmarks.eval.bounds` bounds the false-accept rate;
:mod:`~benchmarks.eval.long_invoices` writes the long-invoice dataset.
"""
