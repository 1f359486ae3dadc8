"""``fenceline demo`` (``make demo``): the main job end to end on the embedded default.

:mod:`benchmarks.demo.run` stands the system up and drives it,
:mod:`benchmarks.demo.progress` prints what happens meanwhile,
:mod:`benchmarks.demo.rows` and :mod:`benchmarks.demo.view` turn the outcome into
one row per invoice (table, summary, PNG).
"""
