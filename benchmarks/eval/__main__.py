"""``python -m benchmarks.eval``: the same command as ``fenceline eval``."""

from benchmarks.eval.run import main

raise SystemExit(main())
