"""The engine side of a benchmark: the engine a run stands up and what it measures of it.

:mod:`~benchmarks.engines.bench_engine` starts the scenario's engine (the fake provider
or vLLM behind Ray Serve) and times its calls, :mod:`~benchmarks.engines.metrics` reads
the replicas' engine-core histograms, :mod:`~benchmarks.engines.roofline` bounds decode
by memory bandwidth, and :mod:`~benchmarks.engines.compare` prices the Serve hop against
vLLM called directly (``python -m benchmarks.engines.compare``).
"""
