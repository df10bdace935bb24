"""Before/after versions of TensorRT-LLM's chunked pickle broadcast (`safe_broadcast`).

Protocol, shared by both versions: the root pickles the object (highest protocol), every rank
takes part in a `Bcast` of an int64 header `[ok_flag, total_size, num_chunks]`, then in
`num_chunks` raw-byte `Bcast`s of at most `chunk_size` bytes each (no pickle-5 out-of-band
buffers). Non-root ranks receive into one preallocated bytearray and unpickle it. A root
that cannot pickle the object sends ok_flag=0, so every rank raises BroadcastError (a
RuntimeError, as upstream raises) instead of waiting for chunks that never come.

The two versions differ only in what the root returns:

- `safe_broadcast_before` (the seed's code): `pickle.loads` of the bytes it just sent, a
  full deep copy of the payload on every call, after a size check that compares a length
  with itself. As upstream, a failure of that root-side unpickle raises
  "Deserialization failed: ...", and a one-rank communicator still goes through the whole
  round trip (pickle, `Bcast`s, unpickle), so the root gets a copy there too.
- `safe_broadcast` (the fix): the original object.

Checked against NVIDIA/TensorRT-LLM `tensorrt_llm/_torch/distributed/communicator.py` at
010028889 (the "before"). Deliberate differences from upstream, in both versions:

- `comm=None` stands for upstream's build without multi-device support: the object is
  returned as is (upstream: `if not ENABLE_MULTI_DEVICE: return obj`).
- `chunk_size <= 0` is a ValueError before the communicator is used, so a bad setting
  fails on a laptop rather than first at scale; a `root` outside the communicator is a
  ValueError too (upstream leaves that to MPI).
- `safe_broadcast` (after) returns the object without pickling it on a one-rank
  communicator: there is no one to send to. Upstream's fixed version still pickles and sends.
- Error messages name the rank and the exception type; they start with upstream's wording
  ("Serialization failed", "Root rank failed during serialization", "Deserialization
  failed").

Every rank must pass the same `root` and `chunk_size`, as with any MPI collective.
mpi4py is imported only when a real broadcast happens.
"""

from __future__ import annotations

import pickle
from array import array
from typing import Any, Protocol

DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024


class BroadcastError(RuntimeError):
    """The object could not be sent (root failed to pickle) or rebuilt (unpickle failed)."""


class Communicator(Protocol):
    """The part of an mpi4py communicator the broadcast uses."""

    def Get_rank(self) -> int: ...

    def Get_size(self) -> int: ...

    def Bcast(self, buf: Any, root: int = 0) -> None: ...


def chunk_count(total_size: int, chunk_size: int) -> int:
    """Number of raw-byte rounds for a payload: 0 for an empty one."""
    return -(-total_size // chunk_size)


def _check(comm: Communicator | None, root: int, chunk_size: int) -> int:
    """Check the arguments; the communicator's size (0 for `comm=None`)."""
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
    if comm is None:
        return 0
    size = comm.Get_size()
    if not 0 <= root < size:
        raise ValueError(f"root {root} is not a rank of a communicator of size {size}")
    return size


def _header(ok_flag: int = 0, total_size: int = 0, num_chunks: int = 0) -> array[int]:
    return array("q", (ok_flag, total_size, num_chunks))


def _send_header(comm: Communicator, header: array[int], root: int) -> None:
    from mpi4py import MPI

    comm.Bcast([header, MPI.INT64_T], root=root)


def send_bytes(comm: Communicator, payload: bytes, root: int, chunk_size: int) -> None:
    """Root side of the transport: header with ok_flag=1, then the payload in chunks."""
    from mpi4py import MPI

    total_size = len(payload)
    _send_header(comm, _header(1, total_size, chunk_count(total_size, chunk_size)), root)
    view = memoryview(payload)
    for start in range(0, total_size, chunk_size):
        comm.Bcast([view[start : start + chunk_size], MPI.BYTE], root=root)


def send_failure(comm: Communicator, root: int) -> None:
    """Root side of a failed send: an all-zero header, so receivers stop instead of waiting."""
    _send_header(comm, _header(), root)


def receive_bytes(comm: Communicator, root: int, chunk_size: int) -> bytearray:
    """Non-root side of the transport: the payload, or BroadcastError if the root failed."""
    from mpi4py import MPI

    header = _header()
    _send_header(comm, header, root)
    ok_flag, total_size, num_chunks = header
    if not ok_flag:
        raise BroadcastError(
            f"Root rank failed during serialization (root {root}); nothing was sent"
        )
    payload = bytearray(total_size)
    view = memoryview(payload)
    for index in range(num_chunks):
        start = index * chunk_size
        comm.Bcast([view[start : start + chunk_size], MPI.BYTE], root=root)
    view.release()
    return payload


def _pickle_at_root(comm: Communicator, obj: Any, root: int) -> bytes:
    try:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        send_failure(comm, root)
        raise BroadcastError(
            f"Serialization failed at root rank {root}: {type(exc).__name__}: {exc}"
        ) from exc


def _receive_object(comm: Communicator, root: int, chunk_size: int) -> Any:
    payload = receive_bytes(comm, root, chunk_size)
    try:
        return pickle.loads(payload)
    except Exception as exc:
        raise BroadcastError(
            f"Deserialization failed on rank {comm.Get_rank()} ({len(payload)} bytes from root "
            f"{root}): {type(exc).__name__}: {exc}"
        ) from exc


def safe_broadcast_before(
    comm: Communicator | None, obj: Any, root: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Any:
    """The seed's broadcast: the root returns a deep copy rebuilt from its own bytes."""
    if not _check(comm, root, chunk_size):
        return obj
    assert comm is not None
    if comm.Get_rank() != root:
        return _receive_object(comm, root, chunk_size)
    serialized = _pickle_at_root(comm, obj, root)
    total_size = len(serialized)
    send_bytes(comm, serialized, root, chunk_size)
    # The seed's dead check, kept so "before" costs what the seed cost: it cannot fail.
    if len(serialized) != total_size:
        raise BroadcastError(f"data size mismatch at root: {total_size} != {len(serialized)}")
    try:
        return pickle.loads(serialized)
    except Exception as exc:
        raise BroadcastError(
            f"Deserialization failed at root rank {root}: {type(exc).__name__}: {exc}"
        ) from exc


def safe_broadcast(
    comm: Communicator | None, obj: Any, root: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Any:
    """The fixed broadcast: non-roots get an unpickled copy, the root its own object back."""
    if _check(comm, root, chunk_size) <= 1:
        return obj
    assert comm is not None
    if comm.Get_rank() != root:
        return _receive_object(comm, root, chunk_size)
    send_bytes(comm, _pickle_at_root(comm, obj, root), root, chunk_size)
    return obj
