"""Options, the ground truth and the entry point of the example server."""

from __future__ import annotations

import argparse
import json
import os
import queue
import socket
import statistics
import sys
from pathlib import Path
from typing import IO, Any

from gilprof.reference import IMPL_NAMES

from . import __doc__ as PACKAGE_DOC
from .executor import PyExecutor, run_worker
from .hotspots import (
    LEDGER,
    MPI_SUFFIX,
    MPI_WALL_SUFFIX,
    DefaultADPRouter,
    PoliteComm,
    polite_barrier,
    select_implementation,
)
from .network import Ingress, LoadClient
from .simulation import TokenizedRequest, Workload

# The two hot spots of the TensorRT-LLM change; `watched` in the ground truth sums these.
WATCHED = ("safe_broadcast", "_balance_requests_across_ranks")
# Also measured, outside `watched`: a small lowercase bcast per step.
MEASURED = (*WATCHED, "broadcast_sample_state")


def ground_truth(options: argparse.Namespace, executor: PyExecutor) -> dict[str, Any]:
    """Thread CPU over the measured window. `gil_cpu_s` leaves out the CPU spent inside MPI
    calls, which run with the GIL released (the root spins in `Wait`)."""
    window = executor.window
    wall = executor.wall_seconds

    def share(seconds: float) -> float:
        return seconds / wall if wall > 0 else 0.0

    functions = {}
    for name in MEASURED:
        cpu, calls = window.ledger.get(name, (0.0, 0))
        mpi_cpu = window.ledger.get(name + MPI_SUFFIX, (0.0, 0))[0]
        functions[name] = {
            "calls": calls,
            "cpu_s": cpu,
            "mpi_cpu_s": mpi_cpu,
            "mpi_wall_s": window.ledger.get(name + MPI_WALL_SUFFIX, (0.0, 0))[0],
            "gil_cpu_s": cpu - mpi_cpu,
            "share_of_wall": share(cpu - mpi_cpu),
        }
    watched = sum(functions[name]["gil_cpu_s"] for name in WATCHED)
    executor_gil_cpu = window.executor_cpu - sum(entry["mpi_cpu_s"] for entry in functions.values())
    host, device = window.host_ms, window.device_ms
    return {
        "impl": options.impl,
        "settings": {key: getattr(options, key) for key in SETTINGS},
        "window": {
            "first_iter": window.first_iter,
            "iterations": len(host),
            "requests": window.requests,
            "wall_s": wall,
        },
        "executor_thread": {
            "cpu_s": window.executor_cpu,
            "gil_cpu_s": executor_gil_cpu,
            "share_of_wall": share(executor_gil_cpu),
        },
        "ingress_thread": {"cpu_s": window.ingress_cpu, "share_of_wall": share(window.ingress_cpu)},
        "functions": functions,
        "watched": {
            "gil_cpu_s": watched,
            "share_of_wall": share(watched),
            "share_of_executor_cpu": watched / executor_gil_cpu if executor_gil_cpu > 0 else 0.0,
        },
        "steps": {
            "host_step_ms_p50": statistics.median(host) if host else None,
            "device_step_ms_p50": statistics.median(device) if device else None,
        },
    }


def run_leader(options: argparse.Namespace, comm: PoliteComm, router: DefaultADPRouter) -> None:
    print(f"rank0 pid={os.getpid()}", file=sys.stderr, flush=True)
    workload = Workload(options.seed, options.tokens)
    requests: queue.Queue[TokenizedRequest] = queue.Queue()
    client_end, server_end = socket.socketpair()
    client = LoadClient(workload, options.concurrency, client_end, options.seed + 1)
    ingress = Ingress(workload, server_end, requests)
    log: IO[str] = open(options.log_file, "w") if options.log_file else sys.stdout  # noqa: SIM115
    try:
        executor = PyExecutor(options, comm, router, requests, client, ingress, log)
        executor.thread.start()
        executor.thread.join()
    finally:
        client.stop()
        ingress.stop()
        if log is not sys.stdout:
            log.close()
    if executor.error is not None:
        raise executor.error
    summary = ground_truth(options, executor)
    if options.ground_truth:
        Path(options.ground_truth).write_text(json.dumps(summary, indent=2) + "\n")
    steps = summary["steps"]
    print(
        f"rank0 done: impl={options.impl} iterations={summary['window']['iterations']} "
        f"host_p50={steps['host_step_ms_p50']} device_p50={steps['device_step_ms_p50']} "
        f"watched_share={summary['watched']['share_of_wall']:.3f}",
        file=sys.stderr,
        flush=True,
    )


SETTINGS = (
    "concurrency",
    "tokens",
    "device_ms",
    "duration",
    "warmup",
    "seed",
    "worker_nice",
    "worker_unpickle",
)
OPTIONS: tuple[tuple[str, type, Any, str], ...] = (
    ("--concurrency", int, 1280, "requests the client keeps in flight"),
    ("--tokens", int, 2048, "mean prompt length in tokens (+-25%%)"),
    ("--duration", float, 20.0, "seconds the executor loop runs"),
    ("--warmup", float, 1.0, "seconds left out of the ground truth"),
    ("--device-ms", float, 20.0, "simulated device time per step"),
    ("--seed", int, 0, "seed for prompts and decode lengths"),
    ("--worker-nice", int, 10, "niceness added on ranks other than 0"),
    ("--log-file", str, None, "iteration log destination (default: stdout)"),
    ("--ground-truth", str, None, "rank 0 writes its measured thread CPU here (JSON)"),
    (
        "--after-flag",
        str,
        None,
        "while this file exists, rank 0 runs the `after` variant: the fix switched at run "
        "time (every difference between the variants is on rank 0)",
    ),
    (
        "--slow-flag",
        str,
        None,
        "while this file exists, each step's host work is 3x heavier (injected_slow_phase)",
    ),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="disagg_gen",
        description=PACKAGE_DOC,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--impl", choices=IMPL_NAMES, default="before", help="hot-spot variant")
    for flag, kind, default, text in OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--worker-unpickle",
        action="store_true",
        help="ranks other than 0 unpickle every payload (full safe_broadcast)",
    )
    options = parser.parse_args(argv)
    if options.concurrency < 1 or options.tokens < 1:
        parser.error("--concurrency and --tokens must be >= 1")
    if options.duration <= 0 or options.device_ms < 0 or options.warmup < 0:
        parser.error("--duration must be > 0; --device-ms and --warmup must be >= 0")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    from mpi4py import MPI  # importing initializes MPI, which --help does not need

    world = MPI.COMM_WORLD
    select_implementation(options.impl)
    comm = PoliteComm(world, LEDGER)
    router = DefaultADPRouter(LEDGER)
    try:
        if world.Get_rank() == 0:
            run_leader(options, comm, router)
        else:
            # Upstream each rank has its own cores; here they share rank 0's, so they yield.
            os.nice(options.worker_nice)
            run_worker(comm, options.device_ms / 1e3, options.worker_unpickle)
        polite_barrier(world)
    except KeyboardInterrupt:
        os._exit(130)  # skip MPI finalization: the other ranks are being interrupted too
    except Exception as exc:
        print(f"rank {world.Get_rank()}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        world.Abort(1)
    return 0
