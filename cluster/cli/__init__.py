"""The ``fenceline`` command line (``fenceline = cluster.cli:main``): :mod:`cluster.cli.entry`."""

from cluster.cli.entry import build_parser, main

__all__ = ["build_parser", "main"]
