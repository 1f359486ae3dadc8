"""``fenceline demo`` (``make demo``): the main job end to end on the embedded default.

:mod:`benchmarks.demo.corpus` picks the invoices and their tenants,
:mod:`benchmarks.demo.documents` turns some into files,
:mod:`benchmarks.demo.provision` sets the tenants up,
:mod:`benchmarks.demo.run` stands the system up and drives it,
:mod:`benchmarks.demo.progress` prints what happens meanwhile,
:mod:`benchmarks.demo.report` gathers the outcome, and :mod:`benchmarks.demo.rows` and
:mod:`benchmarks.demo.view` turn it into one row per invoice (table, summary, PNG).
"""
