"""``python -m bench`` is ``python -m bench.run`` (see bench/README.md)."""

from bench.run import main

main()
