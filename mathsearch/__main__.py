"""``python -m mathsearch ARGS`` = the ``mathsearch`` command."""

from __future__ import annotations

import sys

from mathsearch.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
