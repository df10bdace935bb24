"""A target with known GIL ground truth, measured inside it with thread CPU time.

Threads: `executor-loop` calls safe_broadcast (pure Python), _balance_requests_across_ranks
(pure Python) and sleeps; `ingress` computes in bursts and sleeps. For pure-Python work, a
thread's CPU time inside a function divided by wall time is its GIL-held share, but only
while the machine has a core free: a thread the OS preempts while holding the GIL still
holds it. So the threads take turns through `WORK_LOCK` (waiting on a lock releases the
GIL): while one computes, no other Python thread runs, and wall time inside a function is
its GIL-held time even on a loaded machine. Both truths are written: `<name>` (wall) and
`cpu:<name>` (thread CPU time).

Usage: gil_workload.py --duration S --truth FILE [--exit-code N] [--pidfile FILE]
Stationary, so any sampling window inside the run sees the same shares in expectation.
"""

from __future__ import annotations

import os
import threading
import time

# stdlib only: the target runs on several interpreters without gilprof installed.
from workload_threads import arguments, run_for, write_truth


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


WORK_LOCK = threading.Lock()
TOTALS: dict[str, float] = {}
# --ingress-unlocked: ingress computes without the work lock, so it waits for the GIL
# whenever the loop computes (a target for the waiters' pictures; its truth is not kept)
UNLOCKED = False


def measured(name: str, work: int) -> None:
    """Run `spin(work)` holding the work lock; add its wall and CPU time under `name`."""
    with WORK_LOCK:
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        spin(work)
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    for key, value in ((name, wall), ("cpu:" + name, cpu)):
        TOTALS[key] = TOTALS.get(key, 0.0) + value


def safe_broadcast(work: int) -> None:
    measured("safe_broadcast", work)


def _balance_requests_across_ranks(work: int) -> None:
    measured("_balance_requests_across_ranks", work)


def ingress_work(work: int) -> None:
    if UNLOCKED:  # contends for the GIL itself (no truth kept for it)
        spin(work)
        return
    measured("thread:ingress", work)


def executor_loop(
    stop: threading.Event, broadcast_work: int, route_work: int, sleep_s: float
) -> None:
    while not stop.is_set():
        safe_broadcast(broadcast_work)
        _balance_requests_across_ranks(route_work)
        time.sleep(sleep_s)


def ingress(stop: threading.Event, work: int, sleep_s: float) -> None:
    while not stop.is_set():
        ingress_work(work)
        time.sleep(sleep_s)


def main() -> int:
    parser = arguments(duration=10.0)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--pidfile", default="")
    parser.add_argument("--broadcast-work", type=int, default=40_000)
    parser.add_argument("--route-work", type=int, default=15_000)
    parser.add_argument("--ingress-work", type=int, default=20_000)
    parser.add_argument("--ingress-unlocked", action="store_true")
    args = parser.parse_args()
    global UNLOCKED
    UNLOCKED = args.ingress_unlocked
    if args.pidfile:
        rank = os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-"))
        with open(f"{args.pidfile}.{rank}", "w") as handle:
            handle.write(str(os.getpid()))
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=executor_loop,
            name="executor-loop",
            args=(stop, args.broadcast_work, args.route_work, 0.004),
        ),
        threading.Thread(target=ingress, name="ingress", args=(stop, args.ingress_work, 0.006)),
    ]
    wall_start = time.perf_counter()
    run_for(args.duration, stop, threads)
    wall = time.perf_counter() - wall_start
    if args.truth:
        truth = {name: seconds / wall for name, seconds in TOTALS.items()}
        for prefix in ("", "cpu:"):
            truth[prefix + "thread:executor-loop"] = truth.get(
                prefix + "safe_broadcast", 0.0
            ) + truth.get(prefix + "_balance_requests_across_ranks", 0.0)
        truth["wall_s"] = wall
        write_truth(args.truth, truth)
    return args.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
