"""Threads that contend for the GIL, with ground truth measured inside the target.

`--spinners N` pure-Python threads never sleep, so for each of them wall time is split
between running (holding the GIL: its thread CPU time, while the machine has a core free)
and waiting for the GIL: held = thread_time / wall, wait = 1 - held. `--native` adds a thread
that compresses with zlib (which releases the GIL) to show native time and GIL re-acquisition.
Stdlib only, so it runs on every interpreter under test.
"""

from __future__ import annotations

import os
import threading
import time
import zlib

from workload_threads import arguments, run_for, write_truth


def spin_forever(stop: threading.Event, out: dict[str, float], name: str) -> None:
    start_wall, start_cpu = time.perf_counter(), time.thread_time()
    total = 0
    while not stop.is_set():
        for i in range(2000):
            total += i * i % 7
    out[name] = time.thread_time() - start_cpu
    out["wall:" + name] = time.perf_counter() - start_wall


def compress_forever(stop: threading.Event, out: dict[str, float], name: str) -> None:
    data = os.urandom(1 << 16) * 16
    start_wall, start_cpu = time.perf_counter(), time.thread_time()
    while not stop.is_set():
        zlib.compress(data, 6)
    out[name] = time.thread_time() - start_cpu
    out["wall:" + name] = time.perf_counter() - start_wall


def main() -> int:
    parser = arguments(duration=8.0)
    parser.add_argument("--spinners", type=int, default=2)
    parser.add_argument("--native", action="store_true")
    args = parser.parse_args()
    stop = threading.Event()
    cpu: dict[str, float] = {}
    threads = [
        threading.Thread(target=spin_forever, args=(stop, cpu, f"spin-{i}"), name=f"spin-{i}")
        for i in range(args.spinners)
    ]
    if args.native:
        threads.append(
            threading.Thread(target=compress_forever, args=(stop, cpu, "zlib"), name="zlib")
        )
    run_for(args.duration, stop, threads)
    if args.truth:
        write_truth(
            args.truth,
            {name: cpu[name] / cpu["wall:" + name] for name in cpu if not name.startswith("wall:")},
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
