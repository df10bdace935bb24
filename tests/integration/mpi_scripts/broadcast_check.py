"""Checks of gilprof.reference.broadcast on every rank; run under `mpiexec -n N`.

Prints one `rank=R check=NAME ok|FAIL detail` line per check and per rank, then
`rank=R done failures=K`; exits 1 if any check failed on this rank. Payloads come from
seeded generators, so every rank builds the root's object locally and compares.
"""

from __future__ import annotations

import os
import pickle
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from mpi4py import MPI

from gilprof.reference import implementation
from gilprof.reference.adp_router import CopyingTokenRequest, RequestItem
from gilprof.reference.broadcast import (
    DEFAULT_CHUNK_SIZE,
    BroadcastError,
    chunk_count,
    receive_bytes,
    safe_broadcast,
    safe_broadcast_before,
    send_bytes,
)

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
failures: list[str] = []
VARIANTS: dict[str, Callable[..., Any]] = {"before": safe_broadcast_before, "after": safe_broadcast}


def emit(line: str) -> None:
    # One write per line: mpiexec merges the ranks' pipes, and print's separate write of
    # the newline lets another rank's output land in the middle.
    os.write(sys.stdout.fileno(), (line + "\n").encode())


def report(name: str, problems: list[str], detail: str = "") -> None:
    status = "ok" if not problems else "FAIL"
    shown = "; ".join(problems[:3])
    emit(f"rank={rank} check={name} {status} {detail} {shown}".rstrip())
    if problems:
        failures.append(name)


def finish() -> int:
    """The last line of this rank, once every rank ran every check; the exit status."""
    comm.Barrier()
    emit(f"rank={rank} size={size} done failures={len(failures)}")
    return 1 if failures else 0


def random_value(rng: random.Random, depth: int) -> Any:
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**70), 2**70)
    if kind == 2:
        return rng.uniform(-1e6, 1e6)
    if kind == 3:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(40)))
    if kind == 4:
        return rng.randbytes(rng.randrange(300))
    if kind == 5:
        return [rng.randrange(130_000) for _ in range(rng.randrange(3000))]
    if kind == 6:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    if kind == 7:
        return tuple(random_value(rng, depth + 1) for _ in range(rng.randrange(6)))
    if kind == 8:
        return {f"k{i}": random_value(rng, depth + 1) for i in range(rng.randrange(6))}
    tokens = [rng.randrange(130_000) for _ in range(rng.randrange(1, 2000))]
    request = CopyingTokenRequest(tokens, request_id=depth) if rng.random() < 0.8 else None
    return RequestItem(rng.randrange(10**6), request)


def random_payload(seed: int) -> Any:
    """A fresh top-level container, so a deep copy is never the same object."""
    rng = random.Random(seed)
    items = [random_value(rng, 1) for _ in range(rng.randrange(1, 12))]
    return (items, None) if seed % 2 else {"new_requests": items, "py_objects": None}


def object_with_pickled_size(target: int) -> Any:
    pattern = bytes(range(256)) * (target // 256 + 1)
    for make in (lambda n: pattern[:n], lambda n: (pattern[:n],), lambda n: [pattern[:n], 0]):
        for length in range(target, max(-1, target - 64), -1):
            candidate = make(length)
            if len(pickle.dumps(candidate, protocol=pickle.HIGHEST_PROTOCOL)) == target:
                return candidate
    raise ValueError(f"no object pickles to {target} bytes")


def check_random_payloads(cases: int) -> None:
    problems: list[str] = []
    for case in range(cases):
        expected = random_payload(case)
        root = case % size
        chunk_size = (64, 4096, DEFAULT_CHUNK_SIZE)[case % 3]
        for variant, broadcast in VARIANTS.items():
            sent = expected if rank == root else None
            got = broadcast(comm, sent, root=root, chunk_size=chunk_size)
            if got != expected:
                problems.append(f"case {case} {variant}: result differs")
            if rank == root and variant == "after" and got is not sent:
                problems.append(f"case {case} after: root got a different object")
            if rank == root and variant == "before" and got is sent:
                problems.append(f"case {case} before: root got the original, not a copy")
    report("random_payloads", problems, f"cases={cases}")


def check_chunk_boundaries() -> None:
    problems: list[str] = []
    plan = [(64, t) for t in (63, 64, 65, 127, 128, 129, 5 * 64 - 1, 5 * 64, 5 * 64 + 3)]
    plan += [(DEFAULT_CHUNK_SIZE, DEFAULT_CHUNK_SIZE + d) for d in (-1, 0, 1)]
    for chunk_size, target in plan:
        expected = object_with_pickled_size(target)
        for variant, broadcast in VARIANTS.items():
            sent = expected if rank == 0 else None
            got = broadcast(comm, sent, root=0, chunk_size=chunk_size)
            if got != expected:
                problems.append(f"{variant} size={target} chunk={chunk_size}: differs")
            if rank == 0 and (got is sent) != (variant == "after"):
                problems.append(f"{variant} size={target}: wrong identity at root")
    report("chunk_boundaries", problems, f"sizes={len(plan)}")


def check_raw_transport() -> None:
    problems: list[str] = []
    for total in (0, 1, 63, 64, 65, 128, 200):
        payload = random.Random(total).randbytes(total)
        if rank == 0:
            send_bytes(comm, payload, 0, 64)
        else:
            got = receive_bytes(comm, 0, 64)
            if bytes(got) != payload:
                problems.append(f"size={total}: received {len(got)} bytes that differ")
        if chunk_count(total, 64) != -(-total // 64):
            problems.append(f"chunk_count({total}, 64) wrong")
    report("raw_transport", problems)


def check_root_failure(
    variants: dict[str, Callable[..., Any]] = VARIANTS,
    error: type[Exception] = BroadcastError,
    receivers_wording: str = "Root rank failed during",
) -> None:
    """A root that cannot pickle makes every rank raise, at once, and the next call works."""
    problems: list[str] = []
    unpicklables = {"lambda": lambda: None, "lock": threading.Lock()}
    for variant, broadcast in variants.items():
        for what, bad in unpicklables.items():
            started = time.monotonic()
            try:
                broadcast(comm, bad if rank == 0 else None, root=0)
                problems.append(f"{variant}/{what}: no error")
            except error as exc:
                # Upstream's wording: the root's own error, or the receivers' one.
                wanted = "Serialization failed" if rank == 0 else receivers_wording
                if not isinstance(exc, RuntimeError) or wanted not in str(exc):
                    problems.append(f"{variant}/{what}: unclear message {exc}")
            elapsed = time.monotonic() - started
            if elapsed > 10:
                problems.append(f"{variant}/{what}: took {elapsed:.1f}s")
            # The communicator must still be in step: a normal broadcast right after works.
            if broadcast(comm, [what] if rank == 0 else None, root=0) != [what]:
                problems.append(f"{variant}/{what}: next broadcast out of step")
    report("root_failure", problems)


def _rebuild(only_on: int | None) -> str:
    if only_on is None or MPI.COMM_WORLD.Get_rank() != only_on:
        raise KeyError("class not importable on this rank")
    return "rebuilt"


class Unpicklable:
    """Pickles anywhere, unpickles only on rank `only_on` (None: nowhere), as an object of a
    class that only some ranks can import."""

    def __init__(self, only_on: int | None = None) -> None:
        self.only_on = only_on

    def __reduce__(self) -> tuple[Any, tuple[int | None]]:
        return (_rebuild, (self.only_on,))


def in_step_per_variant(
    name: str,
    variants: dict[str, Callable[..., Any]],
    check: Callable[[str, Callable[..., Any]], str | None],
) -> None:
    """`check(variant, broadcast)` for each variant, with a barrier after each so that a rank
    that raised stays in step; reports its problems (None: none) as check NAME."""
    problems: list[str] = []
    for variant, broadcast in variants.items():
        problem = check(variant, broadcast)
        if problem:
            problems.append(f"{variant}: {problem}")
        comm.Barrier()
    report(name, problems)


def check_receiver_failure(
    variants: dict[str, Callable[..., Any]] = VARIANTS,
    error: type[Exception] = BroadcastError,
    wrapped: tuple[str, ...] = ("before", "after"),
) -> None:
    """An object that unpickles only on the root: the root gets it (before: rebuilt), every
    other rank raises; `wrapped` variants raise `error` saying "Deserialization failed"."""

    def one(variant: str, broadcast: Callable[..., Any]) -> str | None:
        try:
            got = broadcast(comm, Unpicklable(only_on=0) if rank == 0 else None, root=0)
        except Exception as exc:  # an unwrapped variant raises the unpickler's own error
            if rank == 0:
                return f"root raised {exc!r}"
            if variant in wrapped and not (
                isinstance(exc, error) and "Deserialization failed" in str(exc)
            ):
                return repr(exc)
            return None
        if rank != 0:
            return "no error off root"
        if variant == "before" and got != "rebuilt":
            return f"root got {got!r}"
        return None

    in_step_per_variant("receiver_failure", variants, one)


def check_root_unpickle_failure() -> None:
    """before's root unpickles its own bytes, so it fails like upstream; after's root cannot."""

    def one(variant: str, broadcast: Callable[..., Any]) -> str | None:
        sent = Unpicklable() if rank == 0 else None
        try:
            got = broadcast(comm, sent, root=0)
        except RuntimeError as exc:
            if rank == 0 and variant == "after":
                return f"root raised {exc}"
            if not str(exc).startswith("Deserialization failed"):
                return f"unclear message {exc}"
            return None
        if rank != 0 or variant == "before":
            return "no error"
        if got is not sent:
            return "root got a different object"
        return None

    in_step_per_variant("root_unpickle_failure", VARIANTS, one)


def check_guards() -> None:
    problems: list[str] = []
    for variant, broadcast in VARIANTS.items():
        for kwargs in ({"chunk_size": 0}, {"chunk_size": -5}, {"root": size}):
            try:
                broadcast(comm, [1], **kwargs)
                problems.append(f"{variant} {kwargs}: no ValueError")
            except ValueError:
                pass
        token = {"tokens": [1, 2, 3]}
        if broadcast(None, token) is not token:
            problems.append(f"{variant}: comm=None copied the object")
        # As upstream, before round-trips even on one rank; after has no one to send to.
        alone = broadcast(MPI.COMM_SELF, token)
        if alone != token or (alone is token) != (variant == "after"):
            problems.append(f"{variant}: wrong identity on a one-rank communicator")
    for name in ("before", "after", "fast"):
        got = implementation(name).broadcast(comm, {"impl": name} if rank == 0 else None, root=0)
        if got != {"impl": name}:
            problems.append(f"implementation({name!r}).broadcast: differs")
    report("guards", problems)


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    for check in (
        check_guards,
        check_raw_transport,
        check_chunk_boundaries,
        check_root_failure,
        check_receiver_failure,
        check_root_unpickle_failure,
    ):
        check()
    check_random_payloads(cases)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
