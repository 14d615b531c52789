"""``python -m conformance.cli``: the ``conformance`` command."""

from .entry import console_main

console_main()
