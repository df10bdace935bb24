"""`python -m disagg_gen`: run the example server (see the package docstring)."""

from __future__ import annotations

import sys

from .main import main

if __name__ == "__main__":
    sys.exit(main())
