"""A step loop that writes TensorRT-LLM iteration lines, slow while a flag file exists.

    python step_log_workload.py LOG FLAG PIDFILE [SECONDS]

Each step of the main thread runs `steady_step` then sleeps 10 ms and logs
`host_step_time = 10.00ms`; while FLAG exists it runs `slow_phase` (50 ms of pure Python)
instead and logs 100 ms. The logged times are the script's own, not measured, so a
threshold test does not depend on the machine's load.
"""

from __future__ import annotations

import os
import sys
import time


def steady_step() -> None:
    sum(i * i for i in range(500))


def slow_phase() -> None:
    until = time.perf_counter() + 0.05
    while time.perf_counter() < until:
        sum(i * i for i in range(500))


def main() -> None:
    log_path, flag, pidfile = sys.argv[1:4]
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 40.0
    with open(log_path, "a", buffering=1) as log:
        with open(pidfile + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)
        end = time.monotonic() + seconds
        iteration = 0
        while time.monotonic() < end:
            if os.path.exists(flag):
                slow_phase()
                host_ms = 100.0
            else:
                steady_step()
                time.sleep(0.01)
                host_ms = 10.0
            log.write(
                f"iter = {iteration}, global_rank = 0, rank = 0, host_step_time = "
                f"{host_ms:.2f}ms, prev_device_step_time = 5.00ms\n"
            )
            iteration += 1


if __name__ == "__main__":
    main()
