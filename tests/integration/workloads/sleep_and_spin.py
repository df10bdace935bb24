"""Threads for the states mode's checks (benchmarks/arm64_check.py): `sleeper` sleeps 250 ms
at a time (idle in clock_nanosleep), `spin-a` and `spin-b` contend for the GIL. Writes the
threads' Linux ids as JSON to argv[1] once they run; kill the process to end it."""

import json
import os
import sys
import threading
import time


def sleeper() -> None:
    while True:
        time.sleep(0.25)


def spin() -> None:
    x = 0
    while True:
        x += 1


for name, fn in (("sleeper", sleeper), ("spin-a", spin), ("spin-b", spin)):
    threading.Thread(target=fn, name=name, daemon=True).start()
time.sleep(0.5)
ids = {t.name: t.native_id for t in threading.enumerate() if t.name != "MainThread"}
with open(sys.argv[1] + ".tmp", "w") as handle:
    handle.write(json.dumps(ids))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
threading.Event().wait()
