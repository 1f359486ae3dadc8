"""The chaos scenario (issue 17): faults at every boundary while invoices flow, and the oracle
that checks the end state against what clients saw (:mod:`benchmarks.chaos.oracle`)."""
