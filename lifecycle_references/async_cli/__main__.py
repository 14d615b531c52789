"""The tool's command line: ``python -m lifecycle_references.async_cli``, or
this file run by path (``python -S -P .../async_cli/__main__.py``, as the
bundled adapter.yaml does: no ``runpy`` to import, a little faster per call)."""

import sys

from lifecycle_references.async_cli.main import main

sys.exit(main())
