# ruff: noqa  -- kept in the upstream style it follows
"""Lint fixture (never imported or run): TensorRT-LLM's attention-DP routing before the fix.

Follows NVIDIA/TensorRT-LLM `DefaultADPRouter._balance_requests_across_ranks`
(tensorrt_llm/_torch/pyexecutor/scheduler/adp_router.py) statement by statement, docstring
shortened: `input_token_ids` (a binding getter that copies the token list per access) is read
in the sort key and again in the heap loop.
"""

import heapq
from collections import namedtuple
from typing import Dict, List

HeapVal = namedtuple("HeapVal", ["num_tokens", "num_requests", "rank", "request_list"])


class DefaultADPRouter:
    def _balance_requests_across_ranks(
        self,
        new_requests: List,
        all_ranks_new_requests: Dict[int, List],
        all_ranks_num_active_requests: List[int],
        all_ranks_num_active_tokens: List[int],
        expected_num_active_requests: int,
    ) -> Dict[int, List]:
        """Balance requests across ranks for attention DP (heap on fewest tokens)."""
        if not new_requests:
            return all_ranks_new_requests

        all_ranks_new_requests_heap = [
            HeapVal(all_ranks_num_active_tokens[tp_rank], val, tp_rank, [])
            for tp_rank, val in enumerate(all_ranks_num_active_requests)
        ]

        all_ranks_new_requests_heap = [
            val
            for val in all_ranks_new_requests_heap
            if val.num_requests < expected_num_active_requests
        ]

        all_ranks_new_scheduled_requests = {
            val.rank: val.request_list for val in all_ranks_new_requests_heap
        }

        heapq.heapify(all_ranks_new_requests_heap)

        new_requests = sorted(
            new_requests,
            key=lambda x: len(getattr(x.request, "input_token_ids", [])) if x.request else 0,
            reverse=True,
        )

        for req_item in new_requests:
            val = heapq.heappop(all_ranks_new_requests_heap)
            token_count = (
                len(getattr(req_item.request, "input_token_ids", []))  # expect: GP002
                if req_item.request
                else 0
            )
            val = val._replace(
                num_tokens=val.num_tokens + token_count,
                num_requests=val.num_requests + 1,
            )

            val.request_list.append(req_item)
            if val.num_requests < expected_num_active_requests:
                heapq.heappush(all_ranks_new_requests_heap, val)

        for rank, reqs in all_ranks_new_scheduled_requests.items():
            all_ranks_new_requests[rank].extend(reqs)

        return all_ranks_new_requests
