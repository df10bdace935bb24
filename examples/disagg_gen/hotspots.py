"""The watched functions, under upstream's names, and the MPI adapter they run on.

`safe_broadcast`, `broadcast_sample_state` and `DefaultADPRouter._balance_requests_across_ranks`
carry upstream's names so samplers (and gilprof's default watch list) find them in the stacks.
They only time themselves and delegate to `gilprof.reference.implementation(--impl)`.
"""

from __future__ import annotations

import pickle
import time
from array import array
from typing import Any

from gilprof.reference import ReferenceImpl, implementation
from gilprof.reference.adp_router import RequestItem

# Non-root ranks sleep this long between tests of a pending collective: mpich busy-polls in
# blocking collectives, and 4 ranks on 2 cores would otherwise starve rank 0.
POLL_SECONDS = 0.0005
MPI_SUFFIX = ":mpi"
MPI_WALL_SUFFIX = ":mpi-wall"


class CpuLedger:
    """Thread CPU seconds spent inside watched functions, summed over calls.

    Written only by the thread that calls the functions, so it needs no lock. Time spent in
    MPI calls (GIL released, possibly spinning) is kept apart under `name + ":mpi"`.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def snapshot(self) -> dict[str, tuple[float, int]]:
        return {name: (self.seconds[name], self.calls[name]) for name in self.seconds}


LEDGER = CpuLedger()
# The variant the module-level functions delegate to (set once, in main).
_SELECTED: list[ReferenceImpl] = []


def select_implementation(name: str) -> ReferenceImpl:
    impl = implementation(name)
    _SELECTED[:] = [impl]
    return impl


def selected_implementation() -> str:
    return _SELECTED[0].name


def wait_politely(request: Any) -> None:
    while not request.Test():
        time.sleep(POLL_SECONDS)


def polite_barrier(comm: Any) -> None:
    wait_politely(comm.Ibarrier())


class PoliteComm:
    """The communicator the broadcasts see: each `Bcast` is an `Ibcast` plus a wait.

    mpich busy-polls inside blocking calls. A receiver waits in a broadcast's first `Bcast`
    for as long as the root takes to pickle, and 3 receivers spinning there (or through the
    transfer) would burn the 2 cores rank 0 needs, so receivers sleep-poll their request.
    The root `Wait`s: its data is ready when it calls. Every rank goes through this class,
    so the collectives still match. MPI time is booked under the label of the watched
    function that made the call (`labelled`).
    """

    def __init__(self, comm: Any, ledger: CpuLedger, label: str = "safe_broadcast") -> None:
        self._comm = comm
        self._rank = comm.Get_rank()
        self._ledger = ledger
        self.label = label

    def labelled(self, label: str) -> PoliteComm:
        """The same communicator, booking its MPI time under `label`."""
        return PoliteComm(self._comm, self._ledger, label)

    def Get_rank(self) -> int:
        return int(self._rank)

    def Get_size(self) -> int:
        return int(self._comm.Get_size())

    def Bcast(self, buf: Any, root: int = 0) -> None:
        started, started_wall = time.thread_time(), time.perf_counter()
        request = self._comm.Ibcast(buf, root=root)
        if self._rank == root:
            request.Wait()
        else:
            wait_politely(request)
        self._ledger.add(self.label + MPI_SUFFIX, time.thread_time() - started)
        self._ledger.add(self.label + MPI_WALL_SUFFIX, time.perf_counter() - started_wall)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """mpi4py's lowercase `bcast`, polite: every rank, the root included, unpickles.

        Same GIL work as `Comm.bcast` (pickle on the root, unpickle everywhere), sent as a
        size then the bytes through `Bcast`, so receivers sleep-poll instead of spinning.
        """
        from mpi4py import MPI

        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) if self._rank == root else b""
        size = array("q", (len(payload),))
        self.Bcast([size, MPI.INT64_T], root=root)
        buffer = payload if self._rank == root else bytearray(size[0])
        self.Bcast([buffer, MPI.BYTE], root=root)
        return pickle.loads(buffer)


def safe_broadcast(comm: Any, obj: Any, root: int = 0) -> Any:
    """Upstream's name, so samplers see it; delegates to the selected reference variant."""
    started = time.thread_time()
    try:
        return _SELECTED[0].broadcast(comm, obj, root=root)
    finally:
        LEDGER.add("safe_broadcast", time.thread_time() - started)


def broadcast_sample_state(comm: PoliteComm, state: Any, root: int = 0) -> Any:
    """A step's new tokens to every rank with mpi4py's lowercase bcast (selected variant).

    Upstream broadcasts sample state with `Comm.bcast` between pipeline stages; here every
    rank takes part after each step. In `before` the root keeps `bcast`'s result, an
    unpickled copy of its own state; in `after` it keeps its object.
    """
    started = time.thread_time()
    try:
        return _SELECTED[0].bcast(comm.labelled("broadcast_sample_state"), state, root=root)
    finally:
        LEDGER.add("broadcast_sample_state", time.thread_time() - started)


class DefaultADPRouter:
    """Upstream's class and method names around the selected reference router (the variant
    selected when it is called: --after-flag switches it at run time)."""

    def __init__(self, ledger: CpuLedger) -> None:
        self._ledger = ledger

    def _balance_requests_across_ranks(
        self,
        new_requests: list[RequestItem],
        all_ranks_new_requests: dict[int, list[RequestItem]],
        all_ranks_num_active_requests: list[int],
        all_ranks_num_active_tokens: list[int],
        expected_num_active_requests: int,
    ) -> dict[int, list[RequestItem]]:
        started = time.thread_time()
        try:
            return _SELECTED[0].route(
                new_requests,
                all_ranks_new_requests,
                all_ranks_num_active_requests,
                all_ranks_num_active_tokens,
                expected_num_active_requests,
            )
        finally:
            self._ledger.add("_balance_requests_across_ranks", time.thread_time() - started)
