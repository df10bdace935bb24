"""A step loop whose thread runs native code without the GIL for most of each step.

Each step does --host-ms of pure-Python work, then:
--shape wait: "launches" --device-ms of device work on a device thread (a sleep, then it
  sets a flag) and waits for it in `fake_device_wait` of the stand-in library (a spin that
  reads the clock, with the GIL released), as a loop waits in `.item()` while CUDA spins;
--shape compute: runs --device-ms of `fake_compute` in the same library (host work in C).

The library's path is given (--lib): the test builds it. Prints `pid=N` on stderr; writes
TensorRT-LLM-style iteration lines to --log.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time


def host_work(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(200):
            total += i * i
    return total


class Device:
    """Runs one "kernel" at a time on its own thread: a sleep, then the done flag."""

    def __init__(self) -> None:
        self.flag = ctypes.c_int(0)
        self.launched = threading.Event()
        self.seconds = 0.0
        threading.Thread(target=self._run, name="device", daemon=True).start()

    def launch(self, seconds: float) -> None:
        self.flag.value = 0
        self.seconds = seconds
        self.launched.set()

    def _run(self) -> None:
        while True:
            self.launched.wait()
            self.launched.clear()
            time.sleep(self.seconds)
            self.flag.value = 1


def device_step(lib: ctypes.CDLL, device: Device, seconds: float) -> None:
    device.launch(seconds)
    lib.fake_device_wait(ctypes.byref(device.flag))


def compute_step(lib: ctypes.CDLL, seconds: float) -> None:
    lib.fake_compute(ctypes.c_double(seconds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", required=True)
    parser.add_argument("--shape", choices=("wait", "compute"), required=True)
    parser.add_argument("--host-ms", type=float, default=3.0)
    parser.add_argument("--device-ms", type=float, default=25.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.fake_device_wait.restype = ctypes.c_long
    lib.fake_compute.restype = ctypes.c_double
    device = Device()
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)

    def loop() -> None:
        deadline = time.perf_counter() + args.duration
        index, prev = 0, time.perf_counter()
        with open(args.log, "w", encoding="utf-8") as log:
            while time.perf_counter() < deadline:
                host_work(args.host_ms / 1e3)
                if args.shape == "wait":
                    device_step(lib, device, args.device_ms / 1e3)
                else:
                    compute_step(lib, args.device_ms / 1e3)
                top = time.perf_counter()
                device_ms = f"{args.device_ms:.2f}ms" if args.shape == "wait" else "N/A"
                log.write(
                    f"iter = {index}, global_rank = 0, rank = 0, host_step_time = "
                    f"{(top - prev) * 1e3:.2f}ms, prev_device_step_time = {device_ms}, "
                    "num_scheduled_requests: 1, states = {}\n"
                )
                log.flush()
                index, prev = index + 1, top

    thread = threading.Thread(target=loop, name="step-loop")
    thread.start()
    thread.join()


if __name__ == "__main__":
    main()
