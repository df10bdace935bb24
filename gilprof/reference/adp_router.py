"""Before/after/fast versions of TensorRT-LLM's attention-DP request router.

The router is `DefaultADPRouter._balance_requests_across_ranks`: a min-heap keyed on
(num_tokens, num_requests, rank) over the ranks still below the expected request count;
new requests, sorted by token count descending (stable), each go to the heap's top rank.

Upstream, `request.input_token_ids` is a binding property over a C++ getter that returns the
token vector by value, so every read builds a new Python list with one int per token, all
under the GIL. The seed PR's fix is to read it once per request instead of twice:

- `balance_requests_across_ranks_before`: the seed's code, two reads per request (sort key
  and heap loop).
- `balance_requests_across_ranks`: the fix, one read per request.
- `balance_requests_across_ranks_fast`: the fix plus a caller-supplied `token_count`, so a
  request type with an O(1) length copies nothing.

All three assign the same requests to the same ranks in the same order. Checked against
NVIDIA/TensorRT-LLM `tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py` at 02385f2
(`DefaultADPRouter.route_requests` and `_balance_requests_across_ranks`). Deliberate
differences from upstream:

- When the ranks below the expected count have fewer free slots than there are requests
  (upstream pops an empty heap and raises IndexError), all three raise ValueError before
  reading any request, leaving the dict untouched. With upstream's cap at
  `max_num_active_requests` (see `expected_num_active_requests`) this can happen whenever a
  caller fetches more requests than the ranks have room for.
- Only `_balance_requests_across_ranks` is reproduced: the `attention_dp_rank` pinning that
  `route_requests` does first, and the KV-cache-aware router, are not.
- `cheap_token_count` is the O(1) count of later upstream work (`_num_input_tokens`); the
  seed's two reads are `token_count_by_getter`.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

TokenCount = Callable[[Any], int]
RanksToRequests = dict[int, list[Any]]


@dataclass(frozen=True)
class RequestItem:
    """A queued request as the router sees it: an id and a request that may be None."""

    id: int
    request: Any = None


class CopyingTokenRequest:
    """Stand-in for the executor `Request` binding: `input_token_ids` copies on each read.

    Like the C++ getter, every read builds a fresh list of new Python ints from int32
    storage; `access_count` counts the reads. `num_input_tokens` is the O(1) length that
    later upstream work added. Pickles its token ids as a plain list, as the seed's
    broadcast payload did.
    """

    __slots__ = ("_token_ids", "access_count", "request_id")

    def __init__(self, token_ids: Iterable[int], request_id: int = 0) -> None:
        self._token_ids = array("i", token_ids)
        self.request_id = request_id
        self.access_count = 0

    @property
    def input_token_ids(self) -> list[int]:
        self.access_count += 1
        return self._token_ids.tolist()

    @property
    def num_input_tokens(self) -> int:
        return len(self._token_ids)

    def __getstate__(self) -> tuple[int, list[int]]:
        return (self.request_id, self._token_ids.tolist())

    def __setstate__(self, state: tuple[int, list[int]]) -> None:
        self.request_id, token_ids = state
        self._token_ids = array("i", token_ids)
        self.access_count = 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CopyingTokenRequest):
            return NotImplemented
        return self.request_id == other.request_id and self._token_ids == other._token_ids

    def __hash__(self) -> int:
        return hash(self.request_id)

    def __repr__(self) -> str:
        return f"CopyingTokenRequest(request_id={self.request_id}, tokens={len(self._token_ids)})"


def token_count_by_getter(item: Any) -> int:
    """The seed's count: length of `input_token_ids` (0 for a falsy request or no attribute)."""
    request = item.request
    if not request:
        return 0
    return len(getattr(request, "input_token_ids", ()))


def cheap_token_count(item: Any) -> int:
    """Upstream's `_num_input_tokens`: O(1) when the request carries an int count.

    0 only when the request is None (unlike the seed's count, an empty or falsy request is
    still asked); `num_input_tokens` is used only when it is an `int` (a method, a property
    of another type or a missing attribute fall back to one `input_token_ids` read); a
    request without either counts 0.
    """
    request = item.request
    if request is None:
        return 0
    length = getattr(request, "num_input_tokens", None)
    if isinstance(length, int):
        return length
    return len(getattr(request, "input_token_ids", ()))


def expected_num_active_requests(
    all_ranks_num_active_requests: Sequence[int],
    num_new_requests: int,
    max_num_active_requests: int,
) -> int:
    """Upstream's per-rank target for `route_requests`.

    The ceiling of the even share of active plus new requests, at least the current maximum,
    capped at `max_num_active_requests` so no rank is asked for more than it can schedule.
    Because of the cap, the ranks may have room for fewer than `num_new_requests`: callers
    must cap the fetch (the routers raise ValueError otherwise).
    """
    num_ranks = len(all_ranks_num_active_requests)
    total = sum(all_ranks_num_active_requests) + num_new_requests
    even_share = max(-(-total // num_ranks), max(all_ranks_num_active_requests))
    return min(even_share, max_num_active_requests)


class _RankLoad(NamedTuple):
    num_tokens: int
    num_requests: int
    rank: int
    assigned: list[Any]  # never compared: ranks are unique, so ties end at `rank`


def _open_ranks(
    num_new_requests: int,
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
    expected_num_active_requests: int,
) -> list[int]:
    """Ranks below the expected count; ValueError when they cannot take every request."""
    if len(all_ranks_num_active_requests) != len(all_ranks_num_active_tokens):
        raise ValueError(
            f"got request counts for {len(all_ranks_num_active_requests)} ranks but token "
            f"counts for {len(all_ranks_num_active_tokens)}"
        )
    open_ranks = [
        rank
        for rank, num_requests in enumerate(all_ranks_num_active_requests)
        if num_requests < expected_num_active_requests
    ]
    free_slots = sum(
        expected_num_active_requests - all_ranks_num_active_requests[rank] for rank in open_ranks
    )
    if num_new_requests > free_slots:
        raise ValueError(
            f"cannot route {num_new_requests} requests: ranks below "
            f"expected_num_active_requests={expected_num_active_requests} have only "
            f"{free_slots} free slots (callers must cap the fetch)"
        )
    return open_ranks


def _merge(all_ranks_new_requests: RanksToRequests, assigned: RanksToRequests) -> RanksToRequests:
    for rank, items in assigned.items():
        if items:
            all_ranks_new_requests.setdefault(rank, []).extend(items)
    return all_ranks_new_requests


def _load_heap(
    open_ranks: list[int],
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
) -> tuple[list[_RankLoad], RanksToRequests]:
    heap = [
        _RankLoad(all_ranks_num_active_tokens[rank], all_ranks_num_active_requests[rank], rank, [])
        for rank in open_ranks
    ]
    assigned = {load.rank: load.assigned for load in heap}
    heapq.heapify(heap)
    return heap, assigned


def _rank_heap(
    count: int,
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
    expected_num_active_requests: int,
) -> tuple[list[_RankLoad], RanksToRequests]:
    """The open ranks' loads as a heap, and each one's list of assigned requests."""
    open_ranks = _open_ranks(
        count,
        all_ranks_num_active_requests,
        all_ranks_num_active_tokens,
        expected_num_active_requests,
    )
    return _load_heap(open_ranks, all_ranks_num_active_requests, all_ranks_num_active_tokens)


def _place(
    heap: list[_RankLoad], item: Any, tokens: int, expected_num_active_requests: int
) -> None:
    """Give `item` (`tokens` tokens) to the least loaded rank; a full rank leaves the heap."""
    load = heapq.heappop(heap)
    load = load._replace(num_tokens=load.num_tokens + tokens, num_requests=load.num_requests + 1)
    load.assigned.append(item)
    if load.num_requests < expected_num_active_requests:
        heapq.heappush(heap, load)


def balance_requests_across_ranks_before(
    new_requests: Sequence[Any],
    all_ranks_new_requests: RanksToRequests,
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
    expected_num_active_requests: int,
) -> RanksToRequests:
    """The seed's router: reads `input_token_ids` twice per request (sort key, then loop)."""
    if not new_requests:
        return all_ranks_new_requests
    heap, assigned = _rank_heap(
        len(new_requests),
        all_ranks_num_active_requests,
        all_ranks_num_active_tokens,
        expected_num_active_requests,
    )
    for item in sorted(new_requests, key=token_count_by_getter, reverse=True):
        tokens = token_count_by_getter(item)  # the second read (reference.fixes names it)
        _place(heap, item, tokens, expected_num_active_requests)
    return _merge(all_ranks_new_requests, assigned)


def balance_requests_across_ranks(
    new_requests: Sequence[Any],
    all_ranks_new_requests: RanksToRequests,
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
    expected_num_active_requests: int,
) -> RanksToRequests:
    """The fixed router: reads `input_token_ids` exactly once per request."""
    if not new_requests:
        return all_ranks_new_requests
    heap, assigned = _rank_heap(
        len(new_requests),
        all_ranks_num_active_requests,
        all_ranks_num_active_tokens,
        expected_num_active_requests,
    )
    counted = [(item, token_count_by_getter(item)) for item in new_requests]
    # reverse=True keeps equal counts in input order, exactly like the seed's sorted().
    counted.sort(key=itemgetter(1), reverse=True)
    for item, token_count in counted:
        _place(heap, item, token_count, expected_num_active_requests)
    return _merge(all_ranks_new_requests, assigned)


def balance_requests_across_ranks_fast(
    new_requests: Sequence[Any],
    all_ranks_new_requests: RanksToRequests,
    all_ranks_num_active_requests: Sequence[int],
    all_ranks_num_active_tokens: Sequence[int],
    expected_num_active_requests: int,
    token_count: TokenCount | None = None,
) -> RanksToRequests:
    """The fixed router with a pluggable `token_count(item) -> int` and plain-tuple heap.

    Without `token_count` it counts as `balance_requests_across_ranks` does (one getter
    read per request); with a cheap one it copies no token list at all. Replacing the top
    in place gives the same assignment as pop-then-push: heap keys are unique (rank breaks
    every tie), so each pop returns the minimum of the same set either way.
    """
    if not new_requests:
        return all_ranks_new_requests
    open_ranks = _open_ranks(
        len(new_requests),
        all_ranks_num_active_requests,
        all_ranks_num_active_tokens,
        expected_num_active_requests,
    )
    count = token_count if token_count is not None else token_count_by_getter
    heap = [
        (all_ranks_num_active_tokens[rank], all_ranks_num_active_requests[rank], rank)
        for rank in open_ranks
    ]
    heapq.heapify(heap)
    assigned: RanksToRequests = {rank: [] for rank in open_ranks}
    counted = [(item, count(item)) for item in new_requests]
    counted.sort(key=itemgetter(1), reverse=True)
    for item, tokens in counted:
        num_tokens, num_requests, rank = heap[0]
        assigned[rank].append(item)
        if num_requests + 1 < expected_num_active_requests:
            heapq.heapreplace(heap, (num_tokens + tokens, num_requests + 1, rank))
        else:
            heapq.heappop(heap)
    return _merge(all_ranks_new_requests, assigned)
