# ruff: noqa  -- kept in the upstream style it follows
"""Lint fixture (never imported or run): TensorRT-LLM's request broadcast over mpi4py `bcast`.

Follows older NVIDIA/TensorRT-LLM sources, shortened to the path the executor loop takes:
`mpi_broadcast` (tensorrt_llm/_utils.py), `MPIDist.broadcast` (_torch/distributed/
communicator.py) and `PyExecutor._executor_loop` -> `_fetch_new_requests` ->
`_broadcast_new_requests` (_torch/pyexecutor/py_executor.py). Every iteration the root gets
back an unpickled copy of the requests it broadcast, and keeps using it.
"""

from typing import List, Optional


def mpi_broadcast(obj, root=0):
    return mpi_comm().bcast(obj, root) if global_mpi_size() > 1 else obj


class MPIDist:
    def broadcast(self, obj, root=0):
        return mpi_broadcast(obj, root)


class PyExecutor:
    def _executor_loop(self):
        with self._profiler() as profile_step:
            while not self.is_shutdown or len(self.active_requests) > 0:
                profile_step()
                new_requests = self._fetch_new_requests()
                if self.is_shutdown and len(self.active_requests) == 0:
                    break
                scheduled_batch = self._schedule()
                self._forward_step(scheduled_batch, new_requests)

    def _broadcast_new_requests(
        self, new_requests: List, py_request_objects: Optional[tuple] = None
    ):
        payloads = (new_requests, py_request_objects)
        if not self.dist.has_pp:
            return self.dist.broadcast(payloads, root=0)
        raise NotImplementedError("pipeline parallel path left out of this excerpt")

    def _fetch_new_requests(self):
        if self.dist.rank == 0:
            new_requests = self._fetch_from_queue()
            py_request_objects = self._collect_py_objects(new_requests)
        else:
            new_requests, py_request_objects = [], None
        new_requests, py_request_objects = self._broadcast_new_requests(  # expect: GP004
            new_requests, py_request_objects
        )
        self._merge_requests(new_requests, py_request_objects)
        return new_requests
