# ruff: noqa  -- kept in the upstream style it follows
"""Lint fixture (never imported or run): TensorRT-LLM's `safe_broadcast` after the fix.

Follows NVIDIA/TensorRT-LLM tensorrt_llm/_torch/distributed/communicator.py as changed by
the rank-0 GIL change: the root returns the object it was given and the dead check is gone.
"""

import math
import pickle  # nosec B403

import numpy as np

try:
    from mpi4py import MPI
except Exception:
    MPI = None

ENABLE_MULTI_DEVICE = True


def safe_broadcast(comm, obj, root=0, chunk_size: int = 4 * 1024 * 1024):
    if not ENABLE_MULTI_DEVICE:
        return obj
    if ENABLE_MULTI_DEVICE and MPI is None:
        raise RuntimeError("mpi4py is required when ENABLE_MULTI_DEVICE is True")
    if chunk_size <= 0:
        raise ValueError("chunk_size must be > 0")
    rank = comm.Get_rank()

    # Header layout: [ok_flag, total_size, num_chunks] as int64
    header = np.zeros(3, dtype=np.int64)
    if rank == root:
        try:
            serialized = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            total_size = len(serialized)
            num_chunks = math.ceil(total_size / chunk_size) if total_size > 0 else 0
            header[:] = (1, total_size, num_chunks)
        except Exception as e:
            header[:] = (0, 0, 0)
            comm.Bcast([header, MPI.INT64_T], root=root)
            raise RuntimeError(f"Serialization failed: {str(e)}") from e
    else:
        serialized = None

    comm.Bcast([header, MPI.INT64_T], root=root)
    ok_flag, total_size, num_chunks = int(header[0]), int(header[1]), int(header[2])
    if not ok_flag:
        raise RuntimeError("Root rank failed during serialization")

    if rank == root:
        src_view = memoryview(serialized)
        dst_buf = None
        dst_view = None
    else:
        dst_buf = bytearray(total_size)
        dst_view = memoryview(dst_buf)
        src_view = None

    offset = 0
    for i in range(num_chunks):
        cur = min(chunk_size, total_size - offset)
        if cur <= 0:
            break
        if rank == root:
            part = src_view[offset : offset + cur]
            comm.Bcast([part, MPI.BYTE], root=root)
        else:
            part = dst_view[offset : offset + cur]
            comm.Bcast([part, MPI.BYTE], root=root)
        offset += cur

    if rank == root:
        return obj
    else:
        if len(dst_buf) != total_size:
            raise RuntimeError(
                f"Data size mismatch at rank {rank}: expected {total_size}, got {len(dst_buf)}"
            )
        try:
            return pickle.loads(dst_buf)  # nosec B301
        except Exception as e:
            raise RuntimeError(f"Deserialization failed: {str(e)}") from e
