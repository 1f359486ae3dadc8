"""``python -m cluster.cli``: the ``fenceline`` command line."""

from cluster.cli.entry import main

raise SystemExit(main())
