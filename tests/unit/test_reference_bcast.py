"""gilprof.reference.bcast without MPI: what each variant returns on the root, and its guards.

The wire protocol of `bcast_after` and the equivalence on non-root ranks are checked under real
`mpiexec` in tests/integration/test_broadcast_mpi.py.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from gilprof.reference.adp_router import CopyingTokenRequest, RequestItem
from gilprof.reference.bcast import bcast_after, bcast_before


class LoopbackComm:
    """One rank of `size`; `bcast` behaves as mpi4py's does on the root: a pickled round trip.

    `Bcast` must never be reached in these tests (it would need other ranks).
    """

    def __init__(self, size: int = 1, rank: int = 0) -> None:
        self.size, self.rank = size, rank
        self.bcast_calls = 0

    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return self.size

    def bcast(self, obj: Any, root: int = 0) -> Any:
        self.bcast_calls += 1
        return pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def Bcast(self, buf: Any, root: int = 0) -> None:
        raise AssertionError("no other rank to talk to")


def _payload() -> tuple[list[RequestItem], dict[str, list[int]]]:
    items = [RequestItem(i, CopyingTokenRequest(range(i, i + 50), i)) for i in range(3)]
    return items, {"num_active_requests": [1, 2]}


def test_before_hands_the_root_a_copy_of_what_it_sent() -> None:
    comm = LoopbackComm()
    payload = _payload()
    got = bcast_before(comm, payload)
    assert got == payload and got is not payload
    assert got[0][0].request is not payload[0][0].request
    assert comm.bcast_calls == 1


def test_after_keeps_the_root_object_on_one_rank_and_without_a_communicator() -> None:
    comm = LoopbackComm()
    payload = _payload()
    assert bcast_after(comm, payload) is payload
    assert bcast_after(None, payload) is payload
    assert comm.bcast_calls == 0


@pytest.mark.parametrize("root", [-1, 2, 5])
def test_after_rejects_a_root_outside_the_communicator(root: int) -> None:
    with pytest.raises(ValueError, match=f"root {root} is not a rank"):
        bcast_after(LoopbackComm(size=2), [1], root=root)
