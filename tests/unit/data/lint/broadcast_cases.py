"""Lint fixture (never imported or run): chunked-broadcast shapes for GP001 and GP003.

A line that a rule must flag ends with `# expect: GPxxx`; every other line must stay clean.
"""

import math
import pickle

import numpy as np

try:
    from mpi4py import MPI
except ImportError:
    MPI = None

CHUNK = 4 << 20


def broadcast_before(comm, obj, root=0, chunk_size=CHUNK):
    """The seed's shape: the root unpickles its own bytes after a size check that cannot fail."""
    if chunk_size <= 0:
        raise ValueError("chunk_size must be > 0")
    rank = comm.Get_rank()
    header = np.zeros(3, dtype=np.int64)
    if rank == root:
        try:
            payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            total_size = len(payload)
            header[:] = (1, total_size, math.ceil(total_size / chunk_size))
        except Exception as exc:
            header[:] = (0, 0, 0)
            comm.Bcast([header, MPI.INT64_T], root=root)
            raise RuntimeError(f"cannot serialize: {exc}") from exc
    else:
        payload = None
    comm.Bcast([header, MPI.INT64_T], root=root)
    if not header[0]:
        raise RuntimeError("root failed to serialize")
    if rank == root:
        view = memoryview(payload)
        received = None
    else:
        total_size = int(header[1])
        received = bytearray(total_size)
        view = memoryview(received)
    for start in range(0, total_size, chunk_size):
        comm.Bcast([view[start : start + chunk_size], MPI.BYTE], root=root)
    if rank == root:
        if len(payload) != total_size:  # expect: GP003
            raise RuntimeError("size mismatch on the root")
        return pickle.loads(payload)  # expect: GP001
    return pickle.loads(received)


def broadcast_size_from_header(comm, obj, root=0):
    """Upstream re-reads the size from the header; on the root that is its own len(): GP003."""
    rank = comm.Get_rank()
    header = np.zeros(2, dtype=np.int64)
    serialized = pickle.dumps(obj) if rank == root else None
    if rank == root:
        total_size = len(serialized)
        header[:] = (1, total_size)
    comm.Bcast([header, MPI.INT64_T], root=root)
    ok_flag, total_size = int(header[0]), int(header[1])
    if not ok_flag:
        raise RuntimeError("root failed to serialize")
    if rank == root:
        comm.Bcast([serialized, MPI.BYTE], root=root)
        if len(serialized) != total_size:  # expect: GP003
            raise RuntimeError("size mismatch")
        try:
            return pickle.loads(serialized)  # expect: GP001
        except Exception as exc:
            raise RuntimeError("cannot deserialize") from exc
    buffer = bytearray(total_size)
    comm.Bcast([buffer, MPI.BYTE], root=root)
    return pickle.loads(buffer)


def broadcast_after(comm, obj, root=0):
    """The fix: the root returns what it was given; only receivers unpickle (their own buffer)."""
    rank = comm.Get_rank()
    header = np.zeros(1, dtype=np.int64)
    if rank == root:
        serialized = pickle.dumps(obj)
        header[0] = len(serialized)
    comm.Bcast([header, MPI.INT64_T], root=root)
    if rank == root:
        comm.Bcast([serialized, MPI.BYTE], root=root)
        return obj
    incoming = bytearray(int(header[0]))
    comm.Bcast([incoming, MPI.BYTE], root=root)
    return pickle.loads(incoming)


def receive_into_other_variable(comm, obj):
    """Near miss: the loads reads bytes received from elsewhere, not the ones just pickled."""
    blob = pickle.dumps(obj)
    comm.send(blob, dest=1)
    reply = comm.recv(source=1)
    return pickle.loads(reply)


def reassigned_before_loads(comm, obj):
    """Near miss: the name is rebound to received bytes before the loads."""
    blob = pickle.dumps(obj)
    comm.send(blob, dest=1)
    blob = comm.recv(source=1)
    return pickle.loads(blob)


def deep_copy_through_views(obj):
    """Views and copies of the pickled bytes are still the same payload."""
    blob = pickle.dumps(obj)
    view = memoryview(blob)
    first = pickle.loads(view[: len(blob)])  # expect: GP001
    second = pickle.loads(bytes(view))  # expect: GP001
    return first, second


def walrus_and_loop(obj, attempts):
    results = []
    for _ in range(attempts):
        if (data := pickle.dumps(obj)) is not None:
            results.append(pickle.loads(data))  # expect: GP001
    return results


def shadowed_by_comprehension(obj, chunks):
    """Near miss: the comprehension's own `data` is not the pickled one."""
    data = pickle.dumps(obj)
    return data, [pickle.loads(data) for data in chunks]


def lengths_that_can_differ(items, more):
    """Near misses for GP003: the container changes, or the length is recomputed elsewhere."""
    count = len(items)
    items.extend(more)
    assert len(items) >= count
    size = len(more)
    grow(more)
    if size != len(more):
        raise RuntimeError("grew")
    other = len(items)
    while other == len(items):
        items.append(None)
    return count


def grow(values):
    values.append(None)


def lengths_that_cannot_differ(data, parts):
    """GP003: no rebinding or resizing between the len() and the comparison."""
    expected = len(data)
    view = memoryview(data)
    print(len(view), expected)
    assert expected == len(data), "lost bytes"  # expect: GP003
    if len(parts) != len(parts):  # expect: GP003
        raise AssertionError
    return expected


def _pickled(obj):
    try:
        return pickle.dumps(obj)
    except pickle.PicklingError as exc:
        raise RuntimeError("cannot pickle") from exc


def broadcast_through_helper(comm, obj):
    """The pickling happens in a helper; its result is still the sender's own bytes."""
    blob = _pickled(obj)
    size = len(blob)
    comm.send(blob, dest=1)  # handing bytes on cannot change their length
    if len(blob) != size:  # expect: GP003
        raise RuntimeError("size changed")
    return pickle.loads(blob)  # expect: GP001
