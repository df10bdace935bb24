"""A rank of an mpi4py job doing collectives until rank 0 says stop.

Every rank initialises MPI (`from mpi4py import MPI`), so a rank whose PMI connection was
lost fails PMI_Init and the job hangs: what `gilprof exec` must not cause. Writes its PID to
`<pidfile>.<rank>`; rank 0 decides when all stop, so every rank runs the same collectives.
Each round checks the collectives' results and sleeps a little: mpich busy-polls while a
rank waits, and the test machines have 2 cores.
"""

from __future__ import annotations

import argparse
import os
import time

from mpi4py import MPI


def work(n: int) -> int:
    return sum(i * i for i in range(n))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--pidfile", help="write this rank's PID to PIDFILE.<rank>")
    parser.add_argument("--work", type=int, default=20000)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--pause", type=float, default=0.01, help="seconds of sleep per round")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.pidfile:
        with open(f"{args.pidfile}.{rank}", "w") as handle:
            handle.write(str(os.getpid()))
    end = time.monotonic() + args.seconds
    rounds = 0
    while True:
        total = comm.allreduce(rank + 1)
        assert total == size * (size + 1) // 2, total
        payload = comm.bcast({"round": rounds, "items": list(range(100))} if rank == 0 else None)
        assert payload["round"] == rounds
        work(args.work)
        rounds += 1
        if not comm.bcast(time.monotonic() < end if rank == 0 else None):
            break
        time.sleep(args.pause)
    comm.Barrier()
    if rank == 0:
        print(f"rank 0: {rounds} rounds on {size} ranks", flush=True)
    return args.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
