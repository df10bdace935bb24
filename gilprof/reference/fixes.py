"""What the reference fixes change, declared for tools that line the two runs up.

- RENAMES: an unfixed function -> the fixed one that replaces it, so compare shows one row
  per hot spot (`safe_broadcast_before` -> `safe_broadcast`);
- RUN_ALIKE: code both variants run alike, a control for two runs' host speed;
- removed_by_fix(): what each fix takes out of the loop, as what-if specs (`FUNC:LINE`, a
  call site in the unfixed function), for gilprof's prediction of the host step after the
  fixes. Lines are found in the source, so an edit of the reference code moves them along.

Left out: the root-side unpickle of `bcast_before` happens inside the communicator's
lowercase `bcast` (mpi4py's, or the example's PoliteComm), not in reference code; it is
about 0.6% of the example's rank-0 GIL time.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from gilprof.reference.adp_router import balance_requests_across_ranks_before
from gilprof.reference.broadcast import safe_broadcast_before

# Code that the unfixed and the fixed variants run alike, on the same objects: both
# `safe_broadcast` variants pickle at the root through `_pickle_at_root` (the fix drops the
# root's unpickle, not the pickle). Its cost per step moves only with the machine's speed, so
# the demo reads it as a control for the host speed of its two runs.
RUN_ALIKE = ("_pickle_at_root",)

RENAMES = {
    "safe_broadcast_before": "safe_broadcast",
    "balance_requests_across_ranks_before": "balance_requests_across_ranks",
    "bcast_before": "bcast_after",
}


def _line_of(function: Callable[..., Any], marker: str) -> int:
    lines, first = inspect.getsourcelines(function)
    for offset, text in enumerate(lines):
        if marker in text:
            return first + offset
    raise LookupError(f"{marker!r} not found in {function.__qualname__}")


def removed_by_fix() -> tuple[str, ...]:
    """The call sites the fixes remove from rank 0's loop, as `FUNC:LINE` what-if specs:
    the root's unpickle of its own bytes, and the router's second getter read."""
    return (
        f"safe_broadcast_before:{_line_of(safe_broadcast_before, 'return pickle.loads(serialized)')}",
        "balance_requests_across_ranks_before:"
        f"{_line_of(balance_requests_across_ranks_before, 'tokens = token_count_by_getter(item)')}",
    )
