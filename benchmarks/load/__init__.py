"""Load: the open-loop generator, the scenario run, and the throughput benches.

:mod:`~benchmarks.load.generator` fixes the arrival schedule before the first send
(:mod:`~benchmarks.load.client_process` and :mod:`~benchmarks.load.raw_http` send it);
:mod:`~benchmarks.load.suite` runs one scenario (``python -m benchmarks SCENARIO``):
:mod:`~benchmarks.load.runner`'s main run, measured by :mod:`~benchmarks.load.collect`,
then :mod:`~benchmarks.load.baselines`, drawn by :mod:`~benchmarks.load.plots` and
:mod:`~benchmarks.load.summary`. Each ``*_bench`` module measures one part on its own
(``python -m benchmarks.load.store_bench``, ``intake_bench``, ``broker_bench``,
``key_cache_bench``, ``admission_bench``, ``autoscale_bench``, ``overhead_bench``,
``retention_bench`` with its data set :mod:`~benchmarks.load.retention_data`).
"""
