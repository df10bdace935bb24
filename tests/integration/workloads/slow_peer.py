"""Two or more mpi4py ranks; every rank but 0 is slow, so rank 0 waits in the collective.

Each step: --fast-ms of pure-Python work on rank 0 (--slow-ms on the others), then an
`allreduce` of a small payload. mpi4py releases the GIL in the collective and MPICH spins in
its progress loop, so rank 0 runs native code without the GIL for most of its step, waiting
for its peers. Rank 0 writes TensorRT-LLM-style iteration lines to --log and its PID to
--pidfile; rank 0 decides when all stop.
"""

from __future__ import annotations

import argparse
import os
import time

from mpi4py import MPI


def host_work(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(200):
            total += i * i
    return total


def step(comm: MPI.Comm, seconds: float, asleep: bool) -> int:
    if asleep:
        time.sleep(seconds)
    else:
        host_work(seconds)
    return comm.allreduce(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fast-ms", type=float, default=2.0)
    parser.add_argument("--slow-ms", type=float, default=15.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--pidfile", required=True)
    parser.add_argument(
        "--slow-by",
        choices=("sleep", "work"),
        default="work",
        help="how the slow ranks spend their time: Python work, or asleep (frees a core)",
    )
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    seconds = (args.fast_ms if rank == 0 else args.slow_ms) / 1e3
    log = None
    if rank == 0:
        log = open(args.log, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        with open(args.pidfile + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.replace(args.pidfile + ".tmp", args.pidfile)
    end = time.monotonic() + args.duration
    index, prev = 0, time.perf_counter()
    while True:
        step(comm, seconds, rank != 0 and args.slow_by == "sleep")
        if log is not None:
            top = time.perf_counter()
            log.write(
                f"iter = {index}, global_rank = 0, rank = 0, host_step_time = "
                f"{(top - prev) * 1e3:.2f}ms, prev_device_step_time = N/A, "
                "num_scheduled_requests: 1, states = {}\n"
            )
            log.flush()
            index, prev = index + 1, top
        if not comm.bcast(time.monotonic() < end if rank == 0 else None):
            break
    if log is not None:
        log.close()


if __name__ == "__main__":
    main()
