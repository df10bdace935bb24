"""Before/after versions of a per-iteration mpi4py lowercase `Comm.bcast`.

mpi4py's lowercase `comm.bcast(obj, root)` pickles `obj` on the root and unpickles the bytes
on every rank, the root included: the root gets back a new object equal to the one it sent
(`out is obj` is False on rank 0 with mpi4py 4.1), not the object itself. A loop whose root
uses that return value pays a deep copy of the payload on every call, the same cost as the
unfixed `safe_broadcast`.

- `bcast_before(comm, obj, root=0)`: `comm.bcast` on every rank, the root keeps the result.
- `bcast_after(comm, obj, root=0)`: the root pickles once, sends an int64 size header then the
  bytes with two uppercase `Bcast`s, and returns `obj` itself; the other ranks receive into a
  preallocated buffer and unpickle. On those ranks the result equals `bcast_before`'s.

Every rank of a call must use the same variant: `bcast_after` speaks its own two-message
protocol, not mpi4py's internal one. Differences from plain `comm.bcast`, all deliberate:

- A root that cannot pickle `obj` sends size -1, so every rank raises `BcastError` instead of
  the other ranks waiting forever (`comm.bcast` raises on the root only).
- With one rank (or `comm=None`) `bcast_after` returns `obj` without pickling it;
  `bcast_before` keeps `comm.bcast`'s round trip there too.

mpi4py is imported only when `bcast_after` sends or receives.
"""

from __future__ import annotations

import pickle
from array import array
from typing import Any, Protocol

FAILED_SIZE = -1


class BcastError(RuntimeError):
    """The root could not pickle the object, or a rank could not unpickle it."""


class BcastComm(Protocol):
    """The part of an mpi4py communicator the two variants use."""

    def Get_rank(self) -> int: ...

    def Get_size(self) -> int: ...

    def bcast(self, obj: Any, root: int = 0) -> Any: ...

    def Bcast(self, buf: Any, root: int = 0) -> None: ...


def bcast_before(comm: BcastComm, obj: Any, root: int = 0) -> Any:
    """mpi4py's lowercase bcast: on the root too, the result is an unpickled copy of `obj`."""
    return comm.bcast(obj, root=root)


def _size_header(size: int = 0) -> array[int]:
    return array("q", (size,))


def _bcast_size(comm: BcastComm, header: array[int], root: int) -> None:
    from mpi4py import MPI

    comm.Bcast([header, MPI.INT64_T], root=root)


def _send(comm: BcastComm, obj: Any, root: int) -> None:
    from mpi4py import MPI

    try:
        payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        _bcast_size(comm, _size_header(FAILED_SIZE), root)
        raise BcastError(
            f"Serialization failed at root rank {root}: {type(exc).__name__}: {exc}"
        ) from exc
    _bcast_size(comm, _size_header(len(payload)), root)
    if payload:
        comm.Bcast([payload, MPI.BYTE], root=root)


def _receive(comm: BcastComm, root: int) -> Any:
    from mpi4py import MPI

    header = _size_header()
    _bcast_size(comm, header, root)
    size = header[0]
    if size == FAILED_SIZE:
        raise BcastError(f"Root rank {root} failed during serialization; nothing was sent")
    payload = bytearray(size)
    if size:
        comm.Bcast([payload, MPI.BYTE], root=root)
    try:
        return pickle.loads(payload)
    except Exception as exc:
        raise BcastError(
            f"Deserialization failed on rank {comm.Get_rank()} ({size} bytes from root "
            f"{root}): {type(exc).__name__}: {exc}"
        ) from exc


def bcast_after(comm: BcastComm | None, obj: Any, root: int = 0) -> Any:
    """The fix: the root sends `obj` and returns it; the other ranks return an unpickled copy."""
    if comm is None:
        return obj
    size = comm.Get_size()
    if not 0 <= root < size:
        raise ValueError(f"root {root} is not a rank of a communicator of size {size}")
    if size == 1:
        return obj
    if comm.Get_rank() == root:
        _send(comm, obj, root)
        return obj
    return _receive(comm, root)
