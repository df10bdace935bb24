"""A step loop and a request-ingress thread that share the GIL, for accuracy tests.

usage: loop_ingress.py [--seconds S] [--progress FILE]

- `loop`: packs a batch in Python for PACK_S, then waits for the device for DEVICE_S
  (time.sleep: the GIL released), over and over;
- `ingress`: parses a request in Python for PARSE_S every INGRESS_PERIOD_S (asleep between).
When `ingress` wakes during a pack it waits for the GIL (the loop drops it after the 5 ms
switch interval at the latest), and a parse that runs into the loop's wake-up makes the loop
wait: both threads hold and wait in shares of several points, none of them a constant.
Prints `ready PID LOOP_TID INGRESS_TID` once both threads run; ends after --seconds or when
its stdin closes. With --progress the loop writes, after each pack, how many units of Python
work both threads have done so far into FILE (a profiler's cost to the target: fewer units a
second, benchmarks/peers.py). Stdlib only: it runs on every interpreter under test.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import threading
import time

PACK_S = 0.004
DEVICE_S = 0.006
PARSE_S = 0.0007
INGRESS_PERIOD_S = 0.002
STOP = [False]
DONE = [0, 0]  # units of Python work done (one unit: 32 multiply-adds): loop, ingress
PROGRESS_FD = [-1]


def python_work(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    units = 0
    while time.perf_counter() < end:
        for i in range(32):
            total += i * i % 7
        units += 1
    return units


def loop() -> None:
    while not STOP[0]:
        DONE[0] += python_work(PACK_S)  # each thread adds to its own count only
        if PROGRESS_FD[0] >= 0:
            os.pwrite(PROGRESS_FD[0], b"%20d\n" % (DONE[0] + DONE[1]), 0)
        time.sleep(DEVICE_S)


def ingress() -> None:
    while not STOP[0]:
        DONE[1] += python_work(PARSE_S)
        time.sleep(INGRESS_PERIOD_S - PARSE_S)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--progress", default="")
    args = parser.parse_args()
    if args.progress:
        PROGRESS_FD[0] = os.open(args.progress, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    threads = [
        threading.Thread(target=loop, name="loop", daemon=True),
        threading.Thread(target=ingress, name="ingress", daemon=True),
    ]
    for thread in threads:
        thread.start()
    print("ready", os.getpid(), *(t.native_id for t in threads), flush=True)
    select.select([sys.stdin], [], [], args.seconds)  # idle: the main thread never takes the GIL
    STOP[0] = True
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
