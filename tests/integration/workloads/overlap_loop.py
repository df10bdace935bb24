"""A step loop with one step in flight whose iteration log reads the same in both shapes.

--shape host: each step does --host-ms of pure-Python work, then launches --device-ms of
"device" work (a sleep on a device thread) and waits for the previous step; the device is
short, so the loop never waits and the host paces it.
--shape device: the same loop with the two lengths swapped: the loop waits for the device.

Each loop top records the previous step's end event and this step's start event on the
device queue, so the logged device step spans two loop tops and is dragged up to the host
step when the host is slow: both shapes log host ~ device ~ max(host-ms, device-ms).

The loop waits for the device by polling (`wait_for_device`: a short sleep per poll), not
in a threading primitive, so wall mode sees the wait only when it is named
(`--device-wait wait_for_device`). A `decoy` thread burns CPU half the time, so the busiest
thread is not the loop. Prints `pid=N` on stderr; writes TensorRT-LLM-style lines to --log.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import threading
import time


class DeviceQueue:
    """Ops run in order on one thread. An op starts when both it was enqueued and the queue
    is free; a kernel then sleeps, an event stamps the queue's clock (a CUDA event's time)."""

    def __init__(self) -> None:
        self._ops: collections.deque[tuple[str, float, float, list[float]]] = collections.deque()
        self._ready = threading.Semaphore(0)
        self._clock = 0.0
        threading.Thread(target=self._run, name="device", daemon=True).start()

    def _put(self, kind: str, seconds: float) -> list[float]:
        out: list[float] = []
        self._ops.append((kind, time.perf_counter(), seconds, out))
        self._ready.release()
        return out

    def kernel(self, seconds: float) -> list[float]:
        return self._put("kernel", seconds)

    def event(self) -> list[float]:
        return self._put("event", 0.0)

    def _run(self) -> None:
        while True:
            self._ready.acquire()
            kind, enqueued, seconds, out = self._ops.popleft()
            self._clock = max(self._clock, enqueued) + seconds
            if kind == "kernel":
                time.sleep(max(0.0, self._clock - time.perf_counter()))
            out.append(self._clock)


def host_work(seconds: float) -> int:
    end = time.perf_counter() + seconds
    total = 0
    while time.perf_counter() < end:
        for i in range(200):
            total += i * i
    return total


def wait_for_device(done: list[float]) -> float:
    while not done:
        time.sleep(0.0005)
    return done[0]


def forward_step(queue: DeviceQueue, host_s: float, device_s: float) -> list[float]:
    host_work(host_s)
    return queue.kernel(device_s)


def decoy(stop: threading.Event) -> None:
    while not stop.is_set():
        host_work(0.004)
        time.sleep(0.004)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=("host", "device"), required=True)
    parser.add_argument("--host-ms", type=float, default=60.0)
    parser.add_argument("--device-ms", type=float, default=15.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    host_s, device_s = args.host_ms / 1e3, args.device_ms / 1e3
    if args.shape == "device":
        host_s, device_s = device_s, host_s
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
    stop = threading.Event()
    threading.Thread(target=decoy, args=(stop,), name="decoy", daemon=True).start()
    queue = DeviceQueue()
    result: dict[str, object] = {}

    def loop() -> None:
        deadline = time.perf_counter() + args.duration
        steps: list[dict[str, list[float]]] = []  # the last two: start, end, done events
        prev_top = 0.0
        index = 0
        with open(args.log, "w", encoding="utf-8") as log:
            while True:
                top = time.perf_counter()
                if steps:
                    steps[-1]["end"] = queue.event()
                    device = "N/A"
                    if len(steps) > 1:
                        prev = steps[-2]
                        seconds = wait_for_device(prev["end"]) - wait_for_device(prev["start"])
                        device = f"{seconds * 1e3:.2f}ms"
                    log.write(
                        f"iter = {index - 1}, global_rank = 0, rank = 0, host_step_time = "
                        f"{(top - prev_top) * 1e3:.2f}ms, prev_device_step_time = {device}, "
                        "num_scheduled_requests: 1, states = {}\n"
                    )
                    log.flush()
                if top >= deadline:
                    break
                step = {"start": queue.event()}
                step["done"] = forward_step(queue, host_s, device_s)
                if steps:
                    wait_for_device(steps[-1]["done"])
                steps = [*steps[-1:], step]
                prev_top = top
                index += 1
        result["steps"] = index

    thread = threading.Thread(target=loop, name="step-loop")
    thread.start()
    thread.join()
    stop.set()
    print(f"steps={result.get('steps')}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
