"""Threads for the states mode's checks (benchmarks/arm64_check.py): `sleeper` sleeps 250 ms
at a time (idle in clock_nanosleep), `spin-a` and `spin-b` contend for the GIL. Writes the
threads' Linux ids as JSON to argv[1] once they run; kill the process to end it."""

import sys
import time

from workload_threads import start_and_report_ids


def sleeper() -> None:
    while True:
        time.sleep(0.25)


def spin() -> None:
    x = 0
    while True:
        x += 1


start_and_report_ids(sys.argv[1], (("sleeper", sleeper), ("spin-a", spin), ("spin-b", spin)))
