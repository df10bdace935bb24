"""A step loop whose device work is launched by another Python thread, which needs the GIL.

Each iteration of the loop thread (`step-loop`) does --host-ms of pure-Python work
(`prepare_batch`), then --removable-ms more in `removable_work` (0 switches it off), hands
the step to the `launcher` thread and waits for the previous step's event (`Event.wait`, a
device wait: one step in flight, as under an overlap scheduler). The launcher launches
--kernels "kernels" per step: each a short Python launch (`launch_kernel`, --launch-ms of
work holding the GIL), then --kernel-ms of "device" time (a sleep, the GIL released). After
each kernel it needs the GIL back to launch the next; while the loop holds it, the launcher
waits (up to the interpreter's switch interval), and the device chain, which paces the step,
grows. So removing loop work shortens a device-paced step: the step's critical path runs
through the launcher's GIL waits (as with SGLang's overlap scheduler's forward thread).

The work spins on the clock, so its length holds on a busy machine. Prints `pid=N` on
stderr; writes TensorRT-LLM-style iteration lines to --log. With --switch-file, the same
process measures the loop without `removable_work` once that file exists, for --off-seconds
more: in blocks of --block steps, off and on in turn (off-block lines to --log-off, on-block
lines go on in --log after a line "# interleaved from here"), so a drift of the shared machine's load falls on both alike. The
first --settle steps of each block are not logged: the step in flight then was launched in
the other block.
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

# the launcher's queue: (event set when the step's kernels are done, [start, end]); None stops
Steps = queue.Queue[tuple[threading.Event, list[float]] | None]


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


def launch_kernel(seconds: float) -> int:
    return spin(seconds)


def launcher(steps: Steps, kernels: int, launch_s: float, kernel_s: float) -> None:
    while (item := steps.get()) is not None:
        done, stamps = item
        start = time.perf_counter()
        for _ in range(kernels):
            launch_kernel(launch_s)
            time.sleep(kernel_s)  # the device runs the kernel; the GIL is released
        stamps.extend((start, time.perf_counter()))
        done.set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host-ms", type=float, default=8.0)
    parser.add_argument("--removable-ms", type=float, default=10.0)
    parser.add_argument("--kernels", type=int, default=20)
    parser.add_argument("--launch-ms", type=float, default=0.2)
    parser.add_argument("--kernel-ms", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--switch-file", help="once this file exists: removable_work off")
    parser.add_argument("--log-off", help="iteration log once switched off")
    parser.add_argument("--off-seconds", type=float, default=3.0)
    parser.add_argument("--block", type=int, default=8, help="steps per off/on block")
    parser.add_argument("--settle", type=int, default=2, help="unlogged steps per block")
    args = parser.parse_args()
    steps: Steps = queue.Queue()
    threading.Thread(
        target=launcher,
        args=(steps, args.kernels, args.launch_ms / 1e3, args.kernel_ms / 1e3),
        name="launcher",
        daemon=True,
    ).start()
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
    last_device: float | None = None
    logs = {True: log}  # removable_work on: --log; off: --log-off
    counts = {True: 0, False: 0}
    on, settled, since_toggle = True, True, 0
    while True:
        top = time.perf_counter()
        if since_toggle and settled:
            device_ms = "N/A" if last_device is None else f"{last_device * 1e3:.2f}ms"
            stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
            logs[on].write(
                f"iter = {counts[on]}, global_rank = 0, rank = 0, host_step_time = "
                f"{(top - prev_top) * 1e3:.2f}ms, prev_device_step_time = {device_ms}, "
                f"timestamp = {stamp}, num_scheduled_requests: 8\n"
            )
            logs[on].flush()
            counts[on] += 1
        if top >= deadline:
            return
        if args.switch_file and not switched and os.path.exists(args.switch_file):
            switched, deadline = True, top + args.off_seconds
            logs[False] = open(args.log_off, "w")  # noqa: SIM115  # closed at exit
            log.write("# interleaved from here\n")
            since_toggle = args.block  # toggles to off just below
        if switched and since_toggle >= args.block:
            on, since_toggle = not on, 0
            removable = args.removable_ms / 1e3 if on else 0.0
        since_toggle += 1
        settled = since_toggle > args.settle or not switched
        prev_top = top
        prepare_batch(args.host_ms / 1e3)
        if removable > 0:
            removable_work(removable)
        done, stamps = threading.Event(), list[float]()
        steps.put((done, stamps))
        if previous is not None:
            previous[0].wait()
            last_device = previous[1][1] - previous[1][0]
        previous = (done, stamps)


if __name__ == "__main__":
    main()
