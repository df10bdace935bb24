"""Checks of gilprof.reference.bcast on every rank; run under `mpiexec -n N`.

Prints one `rank=R check=NAME ok|FAIL detail` line per check and per rank, then
`rank=R size=N done failures=K`; exits 1 if any check failed on this rank. Payloads come
from seeded generators, so every rank builds the root's object locally and compares.
"""

from __future__ import annotations

import sys

from broadcast_check import (
    check_receiver_failure,
    check_root_failure,
    comm,
    finish,
    random_payload,
    rank,
    report,
    size,
)
from mpi4py import MPI

from gilprof.reference import IMPL_NAMES, implementation
from gilprof.reference.adp_router import CopyingTokenRequest, RequestItem
from gilprof.reference.bcast import BcastError, bcast_after, bcast_before


def check_equivalent(cases: int) -> None:
    """Off the root both variants return equal objects; on it, a copy vs the object itself."""
    problems: list[str] = []
    for case in range(cases):
        expected = random_payload(case)
        root = case % size
        sent = expected if rank == root else None
        before = bcast_before(comm, sent, root=root)
        after = bcast_after(comm, sent, root=root)
        if before != expected or after != expected:
            problems.append(f"case {case}: result differs from the root's object")
        if rank == root:
            if before is sent:
                problems.append(f"case {case}: before's root got the original, not a copy")
            if after is not sent:
                problems.append(f"case {case}: after's root got a different object")
        elif after is before:
            problems.append(f"case {case}: two calls returned one object")
    report("equivalent", problems, f"cases={cases}")


def check_shapes() -> None:
    """Empty and falsy objects, and a payload over 4 MiB (one Bcast of the whole thing)."""
    problems: list[str] = []
    big = [RequestItem(i, CopyingTokenRequest(range(i, i + 40_000), i)) for i in range(16)]
    for label, expected in (
        ("none", None),
        ("empty", []),
        ("zero", 0),
        ("bytes", b"\x00" * 3),
        ("big", (big, {"n": len(big)})),
    ):
        for variant, bcast in (("before", bcast_before), ("after", bcast_after)):
            got = bcast(comm, expected if rank == 0 else None, root=0)
            if got != expected:
                problems.append(f"{variant}/{label}: differs")
    report("shapes", problems)


def check_single_rank_and_impls() -> None:
    problems: list[str] = []
    token = {"tokens": [1, 2, 3]}
    copied = bcast_before(MPI.COMM_SELF, token)
    if copied is token or copied != token:
        problems.append("before on COMM_SELF did not round-trip")
    if bcast_after(MPI.COMM_SELF, token) is not token or bcast_after(None, token) is not token:
        problems.append("after on one rank copied the object")
    try:
        bcast_after(comm, token, root=size)
        problems.append("after: root out of range accepted")
    except ValueError:
        pass
    for name in IMPL_NAMES:
        sent = {"impl": name} if rank == 0 else None
        got = implementation(name).bcast(comm, sent, root=0)
        if got != {"impl": name} or (rank == 0 and (got is sent) != (name != "before")):
            problems.append(f"implementation({name!r}).bcast: wrong result")
    report("single_rank_and_impls", problems)


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    check_single_rank_and_impls()
    check_shapes()
    # after only: before (mpi4py's bcast) fails on the root alone, leaving the receivers waiting
    check_root_failure({"after": bcast_after}, BcastError, "failed during serialization")
    # before (mpi4py's bcast) raises the unpickler's own error off the root
    check_receiver_failure({"before": bcast_before, "after": bcast_after}, BcastError, ("after",))
    check_equivalent(cases)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
