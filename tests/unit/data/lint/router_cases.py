"""Lint fixture (never imported or run): request-routing shapes for GP002.

A line that a rule must flag ends with `# expect: GPxxx`; every other line must stay clean.
`input_token_ids` stands for a binding property that copies the whole token list per access.
"""

import heapq
from collections import namedtuple

RankLoad = namedtuple("RankLoad", ["num_tokens", "num_requests", "rank", "assigned"])


def balance_before(new_requests, active_tokens, active_requests, cap):
    """The seed's shape: the sort key and the heap loop each copy the token list."""
    if not new_requests:
        return {}
    heap = [
        RankLoad(active_tokens[rank], count, rank, [])
        for rank, count in enumerate(active_requests)
        if count < cap
    ]
    assigned = {load.rank: load.assigned for load in heap}
    heapq.heapify(heap)
    new_requests = sorted(
        new_requests,
        key=lambda item: len(getattr(item.request, "input_token_ids", [])) if item.request else 0,
        reverse=True,
    )
    for req_item in new_requests:
        load = heapq.heappop(heap)
        tokens = (
            len(getattr(req_item.request, "input_token_ids", []))  # expect: GP002
            if req_item.request
            else 0
        )
        load = load._replace(
            num_tokens=load.num_tokens + tokens, num_requests=load.num_requests + 1
        )
        load.assigned.append(req_item)
        if load.num_requests < cap:
            heapq.heappush(heap, load)
    return assigned


def balance_after(new_requests, active_tokens, active_requests, cap):
    """The fix: one read per request, the length carried alongside it."""
    heap = [RankLoad(active_tokens[r], n, r, []) for r, n in enumerate(active_requests) if n < cap]
    assigned = {load.rank: load.assigned for load in heap}
    heapq.heapify(heap)
    sized = [
        (len(item.request.input_token_ids) if item.request else 0, item) for item in new_requests
    ]
    sized.sort(key=lambda pair: pair[0], reverse=True)
    for tokens, req_item in sized:
        load = heapq.heappop(heap)
        load = load._replace(
            num_tokens=load.num_tokens + tokens, num_requests=load.num_requests + 1
        )
        load.assigned.append(req_item)
        if load.num_requests < cap:
            heapq.heappush(heap, load)
    return assigned


class PrefixRouter:
    """A named key function and a loop over its sorted result, through a local alias."""

    @staticmethod
    def _fingerprint(tokens):
        return tuple(tokens[:64])

    def _sort_key(self, req_item):
        tokens = getattr(req_item.request, "input_token_ids", []) if req_item.request else []
        return (self._fingerprint(tokens), -len(tokens))

    def route(self, pending):
        ordered = sorted(pending, key=self._sort_key)
        placed = []
        for req_item in ordered:
            request = req_item.request
            placed.append(len(request.input_token_ids))  # expect: GP002
        return placed

    def route_single_read(self, pending):
        """Near miss: the loop reads the getter, but the key does not."""
        ordered = sorted(pending, key=lambda item: item.priority)
        return [len(item.request.input_token_ids) for item in ordered]


def in_place_sort_then_loop(requests):
    requests.sort(key=lambda r: len(r.output_token_ids))
    return [r.output_token_ids[:8] for r in requests]  # expect: GP002


def not_a_getter(requests):
    """Near miss: `prompt_token_ids` is on no getter list (a plain attribute in vLLM, SGLang)."""
    requests.sort(key=lambda r: len(r.prompt_token_ids))
    return [r.prompt_token_ids[:8] for r in requests]


def nlargest_named_key(requests, count):
    def by_length(request):
        return len(request.get_input_token_ids())

    largest = heapq.nlargest(count, requests, key=by_length)
    total = 0
    for position, request in enumerate(largest):
        total += position * len(request.get_input_token_ids())  # expect: GP002
    return total


def twice_in_one_body(requests):
    """Merging shape: the same request's token list copied three times per iteration."""
    merged = []
    for item in requests:
        executor_request = item.request
        context_length = len(executor_request.input_token_ids)
        blocks = [executor_request.input_token_ids]  # expect: GP002
        blocks.append(executor_request.input_token_ids[context_length:])  # expect: GP002
        merged.append(blocks)
    return merged


def twice_in_one_key(requests):
    return sorted(
        requests,
        key=lambda r: len(r.output_token_ids) + r.output_token_ids[-1],  # expect: GP002
    )


def near_misses(requests, others, beams):
    """Different variables, a single read, a getter not on the list."""
    ordered = sorted(requests, key=lambda r: len(r.input_token_ids))
    for other in others:
        print(other.input_token_ids)
    for left, right in zip(ordered, others, strict=True):
        print(left.num_input_tokens, right.input_token_ids)
    for beam in beams:
        print(beam.get_tokens(0), beam.output_token_ids)
    return [(a.input_token_ids, b.input_token_ids) for a, b in zip(others, beams, strict=True)]


def exclusive_branches(requests):
    """Near miss: two reads, but only one of the branches runs per item."""
    for request in requests:
        if request.is_context:
            print(request.input_token_ids)
        else:
            print(len(request.input_token_ids))
        match request.kind:
            case "context":
                print(request.output_token_ids)
            case _:
                print(request.output_token_ids[-1:])


def rebound_between_reads(requests):
    """Near miss: the base is rebound between the two reads, so they read different objects."""
    for request in requests:
        head = request.input_token_ids[:1]
        request = request.child
        print(head, request.input_token_ids)


def _token_count(item):
    request = item.request
    return len(request.input_token_ids) if request else 0


def balance_through_helper(requests):
    """The key and the loop call one helper that reads the getter: two reads per item."""
    ordered = sorted(requests, key=_token_count, reverse=True)
    return [(item, _token_count(item)) for item in ordered]  # expect: GP002


def balance_through_helper_once(requests):
    counted = [(item, _token_count(item)) for item in requests]
    counted.sort(key=lambda pair: pair[1], reverse=True)
    return counted
