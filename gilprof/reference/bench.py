"""Timings of the before/after/fast reference implementations at production-like sizes.

Three benchmarks, each a median over repeats per implementation:

- router: `implementation(name).route` for thousands of `CopyingTokenRequest`s across
  attention-DP ranks, in this process.
- broadcast: the root-side cost of `implementation(name).broadcast` (the chunked
  `safe_broadcast`) for payloads shaped like the executor's `(new_requests, py_objects)`,
  under `mpiexec -n RANKS`.
- bcast: the root-side cost of `implementation(name).bcast` (mpi4py's lowercase
  `Comm.bcast`, whose root unpickles its own bytes, against the root keeping its object)
  for the same payloads, under the same `mpiexec`.

This module is also the MPI worker (`python -m gilprof.reference.bench ...`); rank 0 times
each call and prints its raw timings as one JSON line that the launching process reads.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import pickle
import random
import statistics
import subprocess
import sys
import time
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gilprof.errors import GilprofError, UsageError
from gilprof.reference import IMPL_NAMES, implementation
from gilprof.reference.adp_router import (
    CopyingTokenRequest,
    RequestItem,
    expected_num_active_requests,
)
from gilprof.sampling.processes import child_process, find_binary

RESULT_MARKER = "GILPROF_BENCH_RESULT "
RATIOS = (("before", "after"), ("before", "fast"))
MPI_BENCHMARKS = ("broadcast", "bcast")
BENCHMARKS = ("router", *MPI_BENCHMARKS)


class BenchFailed(GilprofError):
    """The MPI part of the benchmark did not run to completion."""


@dataclass(frozen=True)
class BenchPlan:
    """Sizes of one run; `full()` are production-like, `quick()` small ones for tests."""

    router_requests: int
    router_ranks: int
    router_tokens: tuple[int, int]
    broadcast_requests: tuple[int, ...]
    broadcast_tokens: tuple[int, int]
    repeats: int
    ranks: int = 4
    seed: int = 0

    @classmethod
    def full(cls, **overrides: Any) -> BenchPlan:
        plan = cls(2880, 8, (1000, 8000), (32, 128, 512), (1000, 8000), repeats=7)
        return _with_overrides(plan, overrides)

    @classmethod
    def quick(cls, **overrides: Any) -> BenchPlan:
        plan = cls(480, 8, (1000, 2000), (4, 16), (100, 500), repeats=5)
        return _with_overrides(plan, overrides)


def _with_overrides(plan: BenchPlan, overrides: dict[str, Any]) -> BenchPlan:
    values = asdict(plan)
    values.update({key: value for key, value in overrides.items() if value is not None})
    return BenchPlan(**values)


@dataclass(frozen=True)
class BenchRow:
    """One benchmark at one size: median milliseconds per implementation."""

    benchmark: str
    params: dict[str, int]
    median_ms: dict[str, float]
    samples: int
    getter_reads_per_request: dict[str, float] = field(default_factory=dict)

    @property
    def ratios(self) -> dict[str, float]:
        return {
            f"{slow}/{fast}": self.median_ms[slow] / self.median_ms[fast]
            for slow, fast in RATIOS
            if self.median_ms.get(fast, 0.0) > 0.0 and slow in self.median_ms
        }

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratios": self.ratios}


@dataclass(frozen=True)
class BenchResult:
    settings: dict[str, Any]
    router: BenchRow | None
    broadcast: list[BenchRow]

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "router": self.router.to_dict() if self.router else None,
            "broadcast": [row.to_dict() for row in self.broadcast],
        }


def make_requests(
    count: int, tokens: tuple[int, int], rng: random.Random, first_id: int = 0
) -> list[RequestItem]:
    """`count` requests with a uniform number of token ids in `tokens` (ids below 65,536)."""
    items = []
    for offset in range(count):
        length = rng.randint(*tokens)
        token_ids = array("H", rng.randbytes(2 * length))
        request_id = first_id + offset
        items.append(RequestItem(request_id, CopyingTokenRequest(token_ids, request_id)))
    return items


def bench_router(plan: BenchPlan) -> BenchRow:
    rng = random.Random(plan.seed)
    items = make_requests(plan.router_requests, plan.router_tokens, rng)
    active_requests = [0] * plan.router_ranks
    active_tokens = [0] * plan.router_ranks
    # A cap of every request is never binding: the ranks take all of them.
    expected = expected_num_active_requests(active_requests, len(items), len(items))
    times: dict[str, list[float]] = {name: [] for name in IMPL_NAMES}
    reads: dict[str, float] = {}
    for _ in range(plan.repeats):
        for name in IMPL_NAMES:  # interleaved, so drift in machine load hits all alike
            for item in items:
                item.request.access_count = 0
            routed: dict[int, list[Any]] = {rank: [] for rank in range(plan.router_ranks)}
            route = implementation(name).route
            gc.collect()
            started = time.perf_counter()
            route(items, routed, active_requests, active_tokens, expected)
            times[name].append((time.perf_counter() - started) * 1000.0)
            reads[name] = sum(item.request.access_count for item in items) / len(items)
    low, high = plan.router_tokens
    return BenchRow(
        benchmark="router",
        params={
            "requests": len(items),
            "ranks": plan.router_ranks,
            "min_tokens": low,
            "max_tokens": high,
        },
        median_ms={name: statistics.median(values) for name, values in times.items()},
        samples=plan.repeats,
        getter_reads_per_request=reads,
    )


def _worker_command(plan: BenchPlan, benchmarks: Sequence[str]) -> list[str]:
    return [
        find_binary("mpiexec"),
        "-n",
        str(plan.ranks),
        sys.executable,
        "-m",
        "gilprof.reference.bench",
        "--benchmarks",
        ",".join(benchmarks),
        "--requests",
        ",".join(str(n) for n in plan.broadcast_requests),
        "--tokens",
        f"{plan.broadcast_tokens[0]},{plan.broadcast_tokens[1]}",
        "--repeats",
        str(plan.repeats),
        "--seed",
        str(plan.seed),
    ]


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    return env


def _run_workers(plan: BenchPlan, benchmarks: Sequence[str], timeout: float) -> dict[str, Any]:
    with child_process(
        _worker_command(plan, benchmarks),
        group="session",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_worker_env(),
    ) as child:
        try:
            out, err = child.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BenchFailed(
                f"broadcast benchmark under mpiexec took over {timeout:.0f}s"
            ) from None
        returncode = child.proc.returncode
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
            return result
    last = (stderr.strip().splitlines() or ["no output"])[-1]
    raise BenchFailed(f"mpiexec exited {returncode} without timings: {last}")


def bench_broadcast(
    plan: BenchPlan, timeout: float = 900.0, benchmarks: Sequence[str] = MPI_BENCHMARKS
) -> list[BenchRow]:
    """The MPI benchmarks named in `benchmarks` ("broadcast", "bcast"), one row per size."""
    unknown = set(benchmarks) - set(MPI_BENCHMARKS)
    if unknown or not benchmarks:
        raise UsageError(f"unknown MPI benchmarks {sorted(unknown)}; known: {MPI_BENCHMARKS}")
    if plan.ranks < 2:
        raise UsageError("the broadcast benchmarks need --ranks of at least 2")
    if importlib.util.find_spec("mpi4py") is None:
        raise UsageError("the broadcast benchmarks need mpi4py: pip install 'gilprof[mpi]'")
    raw = _run_workers(plan, benchmarks, timeout)
    low, high = plan.broadcast_tokens
    return [
        BenchRow(
            benchmark=case["benchmark"],
            params={
                "requests": case["requests"],
                "payload_bytes": case["payload_bytes"],
                "ranks": plan.ranks,
                "min_tokens": low,
                "max_tokens": high,
            },
            median_ms={name: statistics.median(ms) for name, ms in case["times_ms"].items()},
            samples=plan.repeats,
        )
        for case in raw["cases"]
    ]


def run_bench(plan: BenchPlan, only: str | None = None, timeout: float = 900.0) -> BenchResult:
    """All benchmarks, or the one named by `only` ("router", "broadcast" or "bcast").

    `timeout` bounds the MPI part; on expiry its whole process group is killed.
    """
    if only is not None and only not in BENCHMARKS:
        raise UsageError(f"unknown benchmark {only!r}; known: {', '.join(BENCHMARKS)}")
    settings = {
        **asdict(plan),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "only": only,
    }
    router = bench_router(plan) if only in (None, "router") else None
    mpi_benchmarks = MPI_BENCHMARKS if only is None else tuple(b for b in (only,) if b != "router")
    broadcast = bench_broadcast(plan, timeout, mpi_benchmarks) if mpi_benchmarks else []
    return BenchResult(settings=settings, router=router, broadcast=broadcast)


def _time_broadcasts(
    comm: Any,
    benchmarks: Sequence[str],
    sizes: Sequence[int],
    tokens: tuple[int, int],
    repeats: int,
    seed: int,
) -> list[dict[str, Any]]:
    is_root = comm.Get_rank() == 0
    cases = []
    for benchmark in benchmarks:
        for size in sizes:
            payload: Any = None
            payload_bytes = 0
            if is_root:
                payload = (make_requests(size, tokens, random.Random(seed + size)), None)
                payload_bytes = len(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            times: dict[str, list[float]] = {name: [] for name in IMPL_NAMES}
            for repeat in range(repeats + 1):  # the first round warms up and is dropped
                for name in IMPL_NAMES:
                    send = getattr(implementation(name), benchmark)
                    gc.collect()
                    comm.Barrier()
                    started = time.perf_counter()
                    send(comm, payload, root=0)
                    elapsed = (time.perf_counter() - started) * 1000.0
                    if repeat:
                        times[name].append(elapsed)
            cases.append(
                {
                    "benchmark": benchmark,
                    "requests": size,
                    "payload_bytes": payload_bytes,
                    "times_ms": times,
                }
            )
    return cases


def _worker_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MPI worker of `gilprof bench-reference`.")
    parser.add_argument("--benchmarks", default=",".join(MPI_BENCHMARKS), help="broadcast,bcast")
    parser.add_argument("--requests", required=True, help="comma-separated request counts")
    parser.add_argument("--tokens", required=True, help="min,max token ids per request")
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    low, high = (int(part) for part in args.tokens.split(","))
    sizes = [int(part) for part in args.requests.split(",")]
    benchmarks = [name for name in args.benchmarks.split(",") if name]
    cases = _time_broadcasts(comm, benchmarks, sizes, (low, high), args.repeats, args.seed)
    if comm.Get_rank() == 0:
        print(RESULT_MARKER + json.dumps({"cases": cases}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main())
