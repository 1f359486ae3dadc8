"""Leave-one-transformation-out for the pools' adapter (``fenceline loto``, docs/fuzzer.md)."""
