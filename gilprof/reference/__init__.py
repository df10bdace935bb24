"""Before/after/fast implementations of known rank-0 hot spots.

The first two are those of the TensorRT-LLM change that reduced rank-0 GIL contention in
disaggregated generation (`safe_broadcast` and the attention-DP router); the third is the
same root-side copy in mpi4py's lowercase `Comm.bcast`.

    impl = implementation("after")
    obj = impl.broadcast(comm, obj, root=0)      # chunked pickle broadcast (safe_broadcast)
    obj = impl.bcast(comm, obj, root=0)          # mpi4py lowercase bcast
    impl.route(new_requests, all_ranks_new_requests, num_active_requests,
               num_active_tokens, expected)

- before: the unfixed code (the root deep-copies the broadcast payload in both broadcasts;
  the router reads the copying `input_token_ids` getter twice per request).
- after: the fix (the root returns its object; one getter read per request).
- fast: after's broadcasts, and a router that takes the token count from an O(1)
  `num_input_tokens` when the request has one, so it copies no token list.

Every rank of a broadcast must use the same variant.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gilprof.errors import UsageError
from gilprof.reference.adp_router import (
    balance_requests_across_ranks,
    balance_requests_across_ranks_before,
    balance_requests_across_ranks_fast,
    cheap_token_count,
)
from gilprof.reference.bcast import bcast_after, bcast_before
from gilprof.reference.broadcast import safe_broadcast, safe_broadcast_before

IMPL_NAMES = ("before", "after", "fast")

BroadcastFunction = Callable[..., Any]
RouteFunction = Callable[..., dict[int, list[Any]]]


@dataclass(frozen=True)
class ReferenceImpl:
    """One variant: `broadcast` and `bcast` (`(comm, obj, root=0)`) and `route(...)`."""

    name: str
    broadcast: BroadcastFunction
    route: RouteFunction
    bcast: BroadcastFunction


_IMPLEMENTATIONS = {
    "before": ReferenceImpl(
        "before", safe_broadcast_before, balance_requests_across_ranks_before, bcast_before
    ),
    "after": ReferenceImpl("after", safe_broadcast, balance_requests_across_ranks, bcast_after),
    "fast": ReferenceImpl(
        "fast",
        safe_broadcast,
        functools.partial(balance_requests_across_ranks_fast, token_count=cheap_token_count),
        bcast_after,
    ),
}


def implementation(name: str) -> ReferenceImpl:
    """The variant called `name` (one of IMPL_NAMES)."""
    try:
        return _IMPLEMENTATIONS[name]
    except KeyError:
        known = ", ".join(IMPL_NAMES)
        raise UsageError(f"unknown implementation {name!r}; known: {known}") from None
