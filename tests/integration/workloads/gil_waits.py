"""GIL waits of shapes nobody tuned the reader to, for accuracy runs against the kernel's truth.

usage: gil_waits.py --shape {short,reacquire,preempted,three} [--seconds S] [--seed N]

- `short`: two threads, each running Python for a random 0.2-2 ms and then asleep for a
  random 0.2-2 ms: many waits, each shorter than the 5 ms switch interval;
- `reacquire`: `releaser` runs Python for 0.3 ms and calls time.sleep(0), which drops the
  GIL and takes it straight back, beside `bursty` (Python 1 ms, asleep 1 ms): the releaser
  waits right after its own release, whenever bursty got in;
- `preempted`: a `loop` (Python 4 ms, asleep 6 ms) and an `ingress` (Python 0.7 ms every
  2 ms) beside two `hash` threads hashing 1 MiB buffers (native code, the GIL released):
  on two cores a waiter that is woken has to wait for a core too;
- `three`: `spin` (Python always), `burst` (Python 1 ms, asleep 2 ms) and `tick` (Python
  0.3 ms, asleep 0.7 ms) contend for one GIL.

Prints `ready PID NAME=TID ...` once every thread runs; ends after --seconds or when its stdin
closes. Stdlib only: it runs on every interpreter under test.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import select
import sys
import threading
import time
from collections.abc import Callable

STOP = [False]
MS = 0.001


def python_work(seconds: float) -> None:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(32):
            total += i * i % 7


def duty(work_s: float, sleep_s: float) -> Callable[[random.Random], None]:
    def run(_rng: random.Random) -> None:
        while not STOP[0]:
            python_work(work_s)
            time.sleep(sleep_s)

    return run


def random_duty(rng: random.Random) -> None:
    while not STOP[0]:
        python_work(rng.uniform(0.2, 2.0) * MS)
        time.sleep(rng.uniform(0.2, 2.0) * MS)


def releaser(_rng: random.Random) -> None:
    while not STOP[0]:
        python_work(0.3 * MS)
        time.sleep(0)  # drops the GIL and asks for it again at once


def spin(_rng: random.Random) -> None:
    while not STOP[0]:
        python_work(0.01)


def hasher(_rng: random.Random) -> None:
    data = os.urandom(1 << 20)
    while not STOP[0]:
        hashlib.sha256(data).digest()  # the GIL is released while it hashes


SHAPES: dict[str, list[tuple[str, Callable[[random.Random], None]]]] = {
    "short": [("a", random_duty), ("b", random_duty)],
    "reacquire": [("releaser", releaser), ("bursty", duty(1 * MS, 1 * MS))],
    "preempted": [
        ("loop", duty(4 * MS, 6 * MS)),
        ("ingress", duty(0.7 * MS, 1.3 * MS)),
        ("hash-0", hasher),
        ("hash-1", hasher),
    ],
    "three": [("spin", spin), ("burst", duty(1 * MS, 2 * MS)), ("tick", duty(0.3 * MS, 0.7 * MS))],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=sorted(SHAPES), required=True)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    threads = [
        threading.Thread(
            target=body, args=(random.Random(args.seed * 100 + i),), name=name, daemon=True
        )
        for i, (name, body) in enumerate(SHAPES[args.shape])
    ]
    for thread in threads:
        thread.start()
    named = [f"{t.name}={t.native_id}" for t in threads]
    print("ready", os.getpid(), *named, flush=True)
    select.select([sys.stdin], [], [], args.seconds)  # idle: the main thread never takes the GIL
    STOP[0] = True
    for thread in threads:
        thread.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
