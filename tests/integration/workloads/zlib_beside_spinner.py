"""Threads for the native locator's check (benchmarks/arm64_check.py): `waiter` waits on an
Event (idle in futex), `spinner` holds the GIL, `zlib` compresses 4 MB at a time (native, in
libz). Writes the threads' Linux ids as JSON to argv[1]; kill the process to end it."""

import json
import os
import sys
import threading
import time
import zlib

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


for name, fn in (("waiter", waiter), ("spinner", spin), ("zlib", compress)):
    threading.Thread(target=fn, name=name, daemon=True).start()
time.sleep(0.5)
ids = {t.name: t.native_id for t in threading.enumerate() if t.name != "MainThread"}
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(json.dumps(ids))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
threading.Event().wait()
