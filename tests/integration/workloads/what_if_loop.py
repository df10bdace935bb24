"""A step loop with one step in flight and a function that can be switched off.

Each iteration does --host-ms of pure-Python work (`prepare_batch`), then --removable-ms
more in `removable_work` (0 switches it off), launches a --device-ms "device" step (a sleep
on a device thread that then sets the step's event) and waits for the previous step's event
(`Event.wait`, a device wait). Under this overlap the step is max(host, device): host-bound
when --device-ms is short, device-bound when it is long. The work spins on the clock, so
its length holds on a busy machine. Prints `pid=N` on stderr; writes TensorRT-LLM-style
iteration lines to --log.

With --switch-file, the same process measures the loop without the function: once that
file exists, `removable_work` is off, the lines go to --log-off, and the loop runs
--off-seconds more. Both phases then run close in time, under the same machine load.
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import threading
import time
from datetime import datetime
from typing import IO

# the device's queue: (seconds, event set when done, [start, end] stamps); None stops it
Steps = queue.Queue[tuple[float, threading.Event, list[float]] | None]


def spin(seconds: float) -> int:
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def prepare_batch(seconds: float) -> int:
    return spin(seconds)


def removable_work(seconds: float) -> int:
    return spin(seconds)


def device(steps: Steps) -> None:
    clock = 0.0
    while (item := steps.get()) is not None:
        seconds, done, stamps = item
        start = max(clock, time.perf_counter())
        clock = start + seconds
        time.sleep(max(0.0, clock - time.perf_counter()))
        stamps.extend((start, clock))
        done.set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host-ms", type=float, default=8.0)
    parser.add_argument("--removable-ms", type=float, default=6.0)
    parser.add_argument("--device-ms", type=float, default=2.0)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--switch-file", help="once this file exists: removable_work off")
    parser.add_argument("--log-off", help="iteration log once switched off")
    parser.add_argument("--off-seconds", type=float, default=3.0)
    args = parser.parse_args()
    steps: Steps = queue.Queue()
    threading.Thread(target=device, args=(steps,), name="device", daemon=True).start()
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    with open(args.log, "w") as log:
        loop = threading.Thread(target=run_loop, args=(args, steps, log), name="step-loop")
        loop.start()
        loop.join()
    steps.put(None)


def run_loop(args: argparse.Namespace, steps: Steps, log: IO[str]) -> None:
    deadline = time.perf_counter() + args.duration
    removable = args.removable_ms / 1e3
    switched = False
    previous: tuple[threading.Event, list[float]] | None = None
    prev_top = time.perf_counter()
    last_device: float | None = None  # the device time of the last step waited for
    index = 0
    while True:
        top = time.perf_counter()
        if index:
            device_ms = "N/A" if last_device is None else f"{last_device * 1e3:.2f}ms"
            stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
            log.write(
                f"iter = {index - 1}, global_rank = 0, rank = 0, host_step_time = "
                f"{(top - prev_top) * 1e3:.2f}ms, prev_device_step_time = {device_ms}, "
                f"timestamp = {stamp}, num_scheduled_requests: 8\n"
            )
            log.flush()
        if top >= deadline:
            return
        if args.switch_file and not switched and os.path.exists(args.switch_file):
            switched, removable, deadline = True, 0.0, top + args.off_seconds
            log = open(args.log_off, "w")  # noqa: SIM115  # closed when the process exits
            index = 0
        prev_top = top
        prepare_batch(args.host_ms / 1e3)
        if removable > 0:
            removable_work(removable)
        done, stamps = threading.Event(), list[float]()
        steps.put((args.device_ms / 1e3, done, stamps))
        if previous is not None:
            previous[0].wait()
            last_device = previous[1][1] - previous[1][0]
        previous = (done, stamps)
        index += 1


if __name__ == "__main__":
    main()
