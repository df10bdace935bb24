"""A step loop that does --host-ms of Python work per step, then blocks ~--wait-ms, in one of
the shapes a CPU-only job blocks in (no GPU anywhere):

--shape queue: a starved server: `queue.get()` until the `ingress` thread puts the next
  request (every --wait-ms);
--shape sleep: a polling loop whose back-off is `time.sleep(--wait-ms)`;
--shape native: a native library's condition wait (`bd_sync` of --lib, the stand-in of a
  driver's blocking sync) until the library's own device thread has slept --wait-ms;
--shape socket: `recv` on a TCP socket from a client process (started here, a child of
  this one and no rank of a job) that sends a request every --wait-ms.

Writes TensorRT-LLM-style iteration lines to --log and `pid=N` to stderr.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import queue
import socket
import subprocess
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


def client(port: int, wait_s: float, duration: float) -> None:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(wait_s)
            conn.sendall(b"r")


def waiter(args: argparse.Namespace):
    """The step's blocking part, set up for the shape."""
    wait_s = args.wait_ms / 1e3
    if args.shape == "sleep":
        return lambda: time.sleep(wait_s)
    if args.shape == "queue":
        requests: queue.Queue[int] = queue.Queue()

        def ingress() -> None:
            n = 0
            while True:
                time.sleep(wait_s)
                requests.put(n)
                n += 1

        threading.Thread(target=ingress, name="ingress", daemon=True).start()
        return requests.get
    if args.shape == "native":
        lib = ctypes.CDLL(args.lib)
        lib.bd_launch.argtypes = [ctypes.c_double]

        def device_step() -> None:
            lib.bd_launch(args.wait_ms)
            lib.bd_sync()

        return device_step
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    subprocess.Popen(
        [sys.executable, __file__, "--client", str(port), "--wait-ms", str(args.wait_ms),
         "--duration", str(args.duration + 5), "--log", os.devnull, "--shape", "socket"]
    )  # fmt: skip
    conn, _ = server.accept()
    return lambda: conn.recv(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=("queue", "sleep", "native", "socket"), required=True)
    parser.add_argument("--lib")
    parser.add_argument("--host-ms", type=float, default=3.0)
    parser.add_argument("--wait-ms", type=float, default=20.0)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args.client, args.wait_ms / 1e3, args.duration)
        return
    block = waiter(args)
    print(f"pid={os.getpid()}", file=sys.stderr, flush=True)

    def loop() -> None:
        deadline = time.perf_counter() + args.duration
        index, prev = 0, time.perf_counter()
        with open(args.log, "w", encoding="utf-8") as log:
            while time.perf_counter() < deadline:
                host_work(args.host_ms / 1e3)
                block()
                top = time.perf_counter()
                log.write(
                    f"iter = {index}, global_rank = 0, rank = 0, host_step_time = "
                    f"{(top - prev) * 1e3:.2f}ms, prev_device_step_time = N/A, "
                    "num_scheduled_requests: 1, states = {}\n"
                )
                log.flush()
                index, prev = index + 1, top

    thread = threading.Thread(target=loop, name="executor")
    thread.start()
    thread.join()


if __name__ == "__main__":
    main()
