"""Compatibility entry point: `python examples/disagg_gen/server.py ARGS` = `python -m disagg_gen ARGS`.

Kept so existing commands keep working; the server itself is the `disagg_gen` package in this
folder (run `python -m disagg_gen` from `examples/`).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Run as a script, this folder is sys.path[0]: swap it for its parent, so the package
    # is imported as `disagg_gen` and its modules do not shadow top-level names.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parent))
    from disagg_gen.main import main

    sys.exit(main())
