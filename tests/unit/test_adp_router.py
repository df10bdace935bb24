"""The before/after/fast routers assign identically; they differ only in getter reads."""

from __future__ import annotations

import dataclasses
import functools
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gilprof.errors import UsageError
from gilprof.reference import IMPL_NAMES, implementation
from gilprof.reference.adp_router import (
    CopyingTokenRequest,
    RequestItem,
    balance_requests_across_ranks,
    balance_requests_across_ranks_before,
    balance_requests_across_ranks_fast,
    cheap_token_count,
    expected_num_active_requests,
    token_count_by_getter,
)
from gilprof.reference.bcast import bcast_after, bcast_before


class NoTokenAttribute:
    """A request without `input_token_ids`: upstream counts it as 0 tokens."""

    def __repr__(self) -> str:
        return "NoTokenAttribute()"


def _num_tokens(item: RequestItem) -> int:
    request = item.request
    return request.num_input_tokens if isinstance(request, CopyingTokenRequest) else 0


VARIANTS: dict[str, Any] = {
    "before": balance_requests_across_ranks_before,
    "after": balance_requests_across_ranks,
    "fast": balance_requests_across_ranks_fast,
    "fast_cheap": functools.partial(balance_requests_across_ranks_fast, token_count=_num_tokens),
    "impl_fast": implementation("fast").route,
}
# Getter reads per request with a CopyingTokenRequest, when routing succeeds.
READS_PER_REQUEST = {"before": 2, "after": 1, "fast": 1, "fast_cheap": 0, "impl_fast": 0}


@st.composite
def routing_problems(draw: st.DrawFn) -> dict[str, Any]:
    num_ranks = draw(st.integers(1, 6))
    active_requests = draw(st.lists(st.integers(0, 5), min_size=num_ranks, max_size=num_ranks))
    # Few distinct token counts, so ties in the sort and in the heap are common.
    active_tokens = draw(
        st.lists(st.sampled_from([0, 3, 5, 10]), min_size=num_ranks, max_size=num_ranks)
    )
    kinds = draw(
        st.lists(
            st.one_of(st.none(), st.just("missing"), st.integers(0, 6)), min_size=0, max_size=25
        )
    )
    items = []
    for index, kind in enumerate(kinds):
        if isinstance(kind, int):
            request: Any = CopyingTokenRequest(range(100, 100 + kind), request_id=index)
        elif kind == "missing":
            request = NoTokenAttribute()
        else:
            request = None
        items.append(RequestItem(index, request))
    max_active = draw(st.integers(1, 12))
    fair = expected_num_active_requests(active_requests, len(items), max_active)
    # Sometimes a cap below the fair share: some ranks full, maybe too little room overall.
    expected = draw(st.one_of(st.just(fair), st.integers(0, fair + 1)))
    prefilled = draw(st.lists(st.integers(0, num_ranks - 1), max_size=3))
    return {
        "items": items,
        "active_requests": active_requests,
        "active_tokens": active_tokens,
        "expected": expected,
        "prefilled": {rank: [f"earlier-{rank}"] for rank in prefilled},
    }


def _run(name: str, problem: dict[str, Any]) -> tuple[str, Any, dict[int, int]]:
    """(outcome kind, ids per rank or error message, getter reads per request id)."""
    for item in problem["items"]:
        if isinstance(item.request, CopyingTokenRequest):
            item.request.access_count = 0
    routed = {rank: list(items) for rank, items in problem["prefilled"].items()}
    try:
        result = VARIANTS[name](
            problem["items"],
            routed,
            list(problem["active_requests"]),
            list(problem["active_tokens"]),
            problem["expected"],
        )
        assert result is routed
        outcome: tuple[str, Any] = (
            "ok",
            {r: [getattr(i, "id", i) for i in items] for r, items in result.items()},
        )
    except ValueError as exc:
        assert routed == problem["prefilled"], "a failed call must leave the dict untouched"
        outcome = ("error", str(exc))
    reads = {
        item.id: item.request.access_count
        for item in problem["items"]
        if isinstance(item.request, CopyingTokenRequest)
    }
    return outcome[0], outcome[1], reads


@settings(max_examples=100, deadline=None)
@given(routing_problems())
def test_all_variants_assign_identically_and_read_as_documented(problem: dict[str, Any]) -> None:
    runs = {name: _run(name, problem) for name in VARIANTS}
    kind, assignment, _ = runs["before"]
    for name, (other_kind, other_assignment, reads) in runs.items():
        assert (other_kind, other_assignment) == (kind, assignment), name
        per_request = READS_PER_REQUEST[name] if kind == "ok" else 0
        assert all(count == per_request for count in reads.values()), (name, reads)
    if kind == "ok":
        placed = [i for items in assignment.values() for i in items if isinstance(i, int)]
        assert sorted(placed) == [item.id for item in problem["items"]]
        for rank, items in assignment.items():
            before = (
                problem["active_requests"][rank] if rank < len(problem["active_requests"]) else 0
            )
            new = [i for i in items if isinstance(i, int)]
            assert not new or before + len(new) <= problem["expected"]


def test_hand_computed_assignment() -> None:
    def item(item_id: int, tokens: int | None) -> RequestItem:
        request = None if tokens is None else CopyingTokenRequest([7] * tokens, request_id=item_id)
        return RequestItem(item_id, request)

    # Heap starts (0,2,r2) (10,1,r0) (50,0,r1). 30 tokens -> r2, which reaches 3 and leaves;
    # the two 20s tie and keep input order: both -> r0 (10 then 30 tokens), which leaves;
    # the rest -> r1.
    items = [item(1, 5), item(2, 20), item(3, 30), item(4, None), item(5, 20)]
    for name, route in VARIANTS.items():
        routed: dict[int, list[Any]] = {0: ["earlier"], 1: [], 2: []}
        route(items, routed, [1, 0, 2], [10, 50, 0], 3)
        ids = {rank: [getattr(i, "id", i) for i in got] for rank, got in routed.items()}
        assert ids == {0: ["earlier", 2, 5], 1: [1, 4], 2: [3]}, name


def test_ties_go_to_fewer_requests_then_lower_rank() -> None:
    items = [RequestItem(i, CopyingTokenRequest([1, 2], request_id=i)) for i in range(3)]
    for name, route in VARIANTS.items():
        routed: dict[int, list[Any]] = {0: [], 1: [], 2: []}
        # Equal tokens everywhere; rank 1 has fewer requests, then ranks 0 and 2 tie on both.
        route(items, routed, [1, 0, 1], [4, 4, 4], 5)
        assert {r: [i.id for i in got] for r, got in routed.items()} == {
            0: [1],
            1: [0],
            2: [2],
        }, name


def test_empty_input_returns_dict_unchanged() -> None:
    for route in VARIANTS.values():
        routed: dict[int, list[Any]] = {0: ["x"]}
        assert route([], routed, [9], [9], 0) is routed
        assert routed == {0: ["x"]}


def test_too_many_requests_is_a_clear_value_error() -> None:
    items = [RequestItem(i, CopyingTokenRequest([1], request_id=i)) for i in range(4)]
    messages = set()
    for route in VARIANTS.values():
        with pytest.raises(ValueError, match="cannot route 4 requests") as info:
            route(items, {0: [], 1: []}, [1, 3], [0, 0], 3)
        messages.add(str(info.value))
    assert len(messages) == 1
    assert "2 free slots" in messages.pop()


def test_mismatched_rank_lists_are_rejected() -> None:
    items = [RequestItem(0, None)]
    for route in VARIANTS.values():
        with pytest.raises(ValueError, match="2 ranks but token counts for 1"):
            route(items, {}, [0, 0], [0], 1)


def test_expected_num_active_requests_matches_upstream_formula() -> None:
    assert expected_num_active_requests([0, 0, 0], 7, 100) == 3
    assert expected_num_active_requests([5, 0, 0], 1, 100) == 5
    assert expected_num_active_requests([2, 2], 0, 100) == 2
    # Upstream caps the target at max_num_active_requests, even below the current maximum.
    assert expected_num_active_requests([0, 0, 0], 7, 2) == 2
    assert expected_num_active_requests([5, 0, 0], 1, 4) == 4
    assert expected_num_active_requests([3, 3], 10, 8) == 8


def test_capped_target_can_leave_too_little_room() -> None:
    """With the cap the ranks may not take every request: callers must cap their fetch."""
    active = [3, 3]
    items = [RequestItem(i, CopyingTokenRequest([1], request_id=i)) for i in range(5)]
    expected = expected_num_active_requests(active, len(items), 5)
    assert expected == 5
    for route in VARIANTS.values():
        with pytest.raises(ValueError, match="cannot route 5 requests"):
            route(items, {}, list(active), [0, 0], expected)
        routed = route(items[:4], {}, list(active), [0, 0], expected)
        assert sorted(len(got) for got in routed.values()) == [2, 2]


class _Counted:
    """A request whose `num_input_tokens` may be anything, with a copying getter."""

    def __init__(self, num_input_tokens: Any, tokens: int = 4, falsy: bool = False) -> None:
        self.num_input_tokens = num_input_tokens
        self._tokens = tokens
        self._falsy = falsy
        self.reads = 0

    @property
    def input_token_ids(self) -> list[int]:
        self.reads += 1
        return [0] * self._tokens

    def __bool__(self) -> bool:
        return not self._falsy


def test_cheap_token_count_follows_upstream_num_input_tokens() -> None:
    assert cheap_token_count(RequestItem(0, None)) == 0
    # An int count is taken as is, without reading the getter, even on a falsy request
    # (the seed's getter count says 0 for a falsy one).
    falsy = _Counted(7, falsy=True)
    assert cheap_token_count(RequestItem(0, falsy)) == 7 and falsy.reads == 0
    assert token_count_by_getter(RequestItem(0, falsy)) == 0
    # Anything but an int (a method, a float, None) falls back to one getter read.
    for odd in (lambda: 9, 9.0, None, "9"):
        request = _Counted(odd, tokens=4)
        assert cheap_token_count(RequestItem(0, request)) == 4
        assert request.reads == 1
    assert cheap_token_count(RequestItem(0, NoTokenAttribute())) == 0
    copying = CopyingTokenRequest([1, 2, 3])
    assert cheap_token_count(RequestItem(0, copying)) == 3 and copying.access_count == 0


def test_copying_request_copies_and_counts_every_read() -> None:
    request = CopyingTokenRequest([5, 6, 7], request_id=9)
    first, second = request.input_token_ids, request.input_token_ids
    assert first == second == [5, 6, 7]
    assert first is not second
    first.append(8)
    assert request.input_token_ids == [5, 6, 7]
    assert request.access_count == 3
    assert request.num_input_tokens == 3
    assert request.access_count == 3
    clone = pickle.loads(pickle.dumps(request))
    assert clone == request
    assert clone.access_count == 0
    assert clone != CopyingTokenRequest([5, 6, 7], request_id=8)


def test_request_item_is_frozen() -> None:
    item = RequestItem(3, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.id = 4  # type: ignore[misc]


def test_implementation_lookup() -> None:
    assert IMPL_NAMES == ("before", "after", "fast")
    for name in IMPL_NAMES:
        impl = implementation(name)
        assert impl.name == name
        assert callable(impl.broadcast) and callable(impl.route) and callable(impl.bcast)
    assert implementation("after").route is balance_requests_across_ranks
    assert implementation("before").bcast is bcast_before
    assert implementation("after").bcast is implementation("fast").bcast is bcast_after
    with pytest.raises(UsageError, match="unknown implementation 'slow'; known: before"):
        implementation("slow")
    with pytest.raises(dataclasses.FrozenInstanceError):
        implementation("after").name = "x"  # type: ignore[misc]
