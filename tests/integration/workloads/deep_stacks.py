"""Threads whose Python stacks are known and do not change, for the reader's stack reads.

`deep` recurses 60 frames through two alternating functions, with a generator's frame (which
3.11+ keeps in the generator object, off the thread's data stack) a third of the way down;
`deeper` recurses 200 frames, past the reader's MAX_DEPTH. Both then sleep in the innermost
frame. Prints "ready <deep tid> <deeper tid>" once both are parked.
"""

from __future__ import annotations

import threading
import time

parked = threading.Barrier(3)


def park() -> None:
    parked.wait()
    while True:
        time.sleep(1)


def down_even(n: int, through_generator_at: int) -> None:
    if n == through_generator_at:
        for _ in through_generator(n - 1, through_generator_at):
            pass
    elif n == 0:
        park()
    else:
        down_odd(n - 1, through_generator_at)


def down_odd(n: int, through_generator_at: int) -> None:
    if n == 0:
        park()
    else:
        down_even(n - 1, through_generator_at)


def through_generator(n: int, through_generator_at: int):
    down_odd(n, through_generator_at)
    yield


def main() -> None:
    ids: dict[str, int] = {}

    def run(name: str, depth: int, generator_at: int) -> None:
        ids[name] = threading.get_native_id()
        down_even(depth, generator_at)

    for name, depth, generator_at in (("deep", 60, 40), ("deeper", 200, -1)):
        threading.Thread(target=run, args=(name, depth, generator_at), daemon=True).start()
    parked.wait()
    print("ready", ids["deep"], ids["deeper"], flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
