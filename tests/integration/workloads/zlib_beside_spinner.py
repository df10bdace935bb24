"""Threads for the native locator's check (benchmarks/arm64_check.py): `waiter` waits on an
Event (idle in futex), `spinner` holds the GIL, `zlib` compresses 4 MB at a time (native, in
libz). Writes the threads' Linux ids as JSON to argv[1]; kill the process to end it."""

import os
import sys
import threading
import zlib

from workload_threads import start_and_report_ids

DATA = os.urandom(1 << 21) + bytes(1 << 21)


def waiter() -> None:
    threading.Event().wait()


def spin() -> None:
    x = 0
    while True:
        x += 1


def compress() -> None:
    while True:
        zlib.compress(DATA, 6)


start_and_report_ids(sys.argv[1], (("waiter", waiter), ("spinner", spin), ("zlib", compress)))
