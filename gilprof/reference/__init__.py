"""Before/after/fast implementations of the two rank-0 hot spots of the seed PR.

    impl = implementation("after")
    obj = impl.broadcast(comm, obj, root=0)
    impl.route(new_requests, all_ranks_new_requests, num_active_requests,
               num_active_tokens, expected)

- before: the seed's code (root deep-copies the broadcast payload; the router reads the
  copying `input_token_ids` getter twice per request).
- after: the seed PR's fix (root returns its object; one getter read per request).
- fast: after's broadcast, and a router that takes the token count from an O(1)
  `num_input_tokens` when the request has one, so it copies no token list.
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
from gilprof.reference.broadcast import safe_broadcast, safe_broadcast_before

IMPL_NAMES = ("before", "after", "fast")

BroadcastFunction = Callable[..., Any]
RouteFunction = Callable[..., dict[int, list[Any]]]


@dataclass(frozen=True)
class ReferenceImpl:
    """One variant: `broadcast(comm, obj, root=0)` and `route(...)` with upstream's arguments."""

    name: str
    broadcast: BroadcastFunction
    route: RouteFunction


_IMPLEMENTATIONS = {
    "before": ReferenceImpl("before", safe_broadcast_before, balance_requests_across_ranks_before),
    "after": ReferenceImpl("after", safe_broadcast, balance_requests_across_ranks),
    "fast": ReferenceImpl(
        "fast",
        safe_broadcast,
        functools.partial(balance_requests_across_ranks_fast, token_count=cheap_token_count),
    ),
}


def implementation(name: str) -> ReferenceImpl:
    """The variant called `name` (one of IMPL_NAMES)."""
    try:
        return _IMPLEMENTATIONS[name]
    except KeyError:
        known = ", ".join(IMPL_NAMES)
        raise UsageError(f"unknown implementation {name!r}; known: {known}") from None
