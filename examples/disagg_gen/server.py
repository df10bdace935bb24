"""A miniature of a TensorRT-LLM disaggregated GEN server's rank-0 host path.

    mpiexec -n 4 python examples/disagg_gen/server.py --impl before --duration 20
    mpiexec -n 4 python examples/disagg_gen/server.py --impl after --duration 20 \\
        --log-file after.log --ground-truth after.json

Rank 0 runs four Python threads on one GIL, as the real leader process does:

- `client`: a closed-loop load generator that keeps `--concurrency` requests in flight and
  sends them as JSON lines over a socketpair.
- `ingress`: parses the JSON and tokenizes each prompt (pure Python), then queues it.
- `executor-loop`: the overlap-scheduler loop. Each iteration fetches queued requests
  (`_fetch_new_requests`), broadcasts them to every rank (`safe_broadcast`), routes them
  across the attention-DP ranks (`DefaultADPRouter._balance_requests_across_ranks`),
  launches the step on the simulated device, then waits for the previous step and handles
  its responses. It prints TensorRT-LLM's iteration log line for every step.
- `device`: a simulated CUDA stream; kernels are sleeps, so the device never needs the GIL
  to make progress.

The two watched functions delegate to `gilprof.reference` (`--impl before|after|fast`), so
the same job shows the seed PR's regression and fix. Other ranks receive each broadcast and
sleep through their device step. See README.md for the timing model and measured figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import queue
import random
import socket
import statistics
import string
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

try:
    from gilprof.reference import IMPL_NAMES, implementation
except ImportError:  # running from a checkout without gilprof installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from gilprof.reference import IMPL_NAMES, implementation
from gilprof.reference import ReferenceImpl
from gilprof.reference.adp_router import (
    CopyingTokenRequest,
    RequestItem,
    expected_num_active_requests,
)
from gilprof.reference.broadcast import DEFAULT_CHUNK_SIZE, receive_bytes

# Non-root ranks sleep this long between tests of a pending collective: mpich busy-polls in
# blocking collectives, and 4 ranks on 2 cores would otherwise starve rank 0.
POLL_SECONDS = 0.0005
MIN_DECODE_STEPS, MAX_DECODE_STEPS = 5, 30
PROMPT_POOL_SIZE = 64
VOCAB_SIZE = 32000
NUM_WORDS = 8000
MAX_PIECES = 9
# A few requests per read, as a server reading its connections would. Each read releases
# the GIL, which bounds how long ingress holds it at a stretch.
RECV_BYTES = 8192
# Payloads up to this size are unpickled on every rank: the stop marker is ~20 bytes.
CONTROL_BYTES = 1024
MPI_SUFFIX = ":mpi"
MPI_WALL_SUFFIX = ":mpi-wall"


class CpuLedger:
    """Thread CPU seconds spent inside watched functions, summed over calls.

    Written only by the thread that calls the functions, so it needs no lock. Time spent in
    MPI calls (GIL released, possibly spinning) is kept apart under `name + ":mpi"`.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self.calls[name] = self.calls.get(name, 0) + 1

    def snapshot(self) -> dict[str, tuple[float, int]]:
        return {name: (self.seconds[name], self.calls[name]) for name in self.seconds}


LEDGER = CpuLedger()
# The variant the module-level `safe_broadcast` delegates to (set once, in main).
_SELECTED: list[ReferenceImpl] = []


def select_implementation(name: str) -> ReferenceImpl:
    impl = implementation(name)
    _SELECTED[:] = [impl]
    return impl


def wait_politely(request: Any) -> None:
    while not request.Test():
        time.sleep(POLL_SECONDS)


class PoliteComm:
    """The communicator `safe_broadcast` sees: each `Bcast` is an `Ibcast` plus a wait.

    mpich busy-polls inside blocking calls. A receiver waits in a broadcast's first `Bcast`
    for as long as the root takes to pickle, and 3 receivers spinning there (or through the
    transfer) would burn the 2 cores rank 0 needs, so receivers sleep-poll their request.
    The root `Wait`s: its data is ready when it calls. Every rank goes through this class,
    so the collectives still match.
    """

    def __init__(self, comm: Any, ledger: CpuLedger) -> None:
        self._comm = comm
        self._rank = comm.Get_rank()
        self._ledger = ledger

    def Get_rank(self) -> int:
        return int(self._rank)

    def Get_size(self) -> int:
        return int(self._comm.Get_size())

    def Bcast(self, buf: Any, root: int = 0) -> None:
        started, started_wall = time.thread_time(), time.perf_counter()
        request = self._comm.Ibcast(buf, root=root)
        if self._rank == root:
            request.Wait()
        else:
            wait_politely(request)
        self._ledger.add("safe_broadcast" + MPI_SUFFIX, time.thread_time() - started)
        self._ledger.add("safe_broadcast" + MPI_WALL_SUFFIX, time.perf_counter() - started_wall)


def safe_broadcast(comm: Any, obj: Any, root: int = 0) -> Any:
    """Upstream's name, so samplers see it; delegates to the selected reference variant."""
    started = time.thread_time()
    try:
        return _SELECTED[0].broadcast(comm, obj, root=root)
    finally:
        LEDGER.add("safe_broadcast", time.thread_time() - started)


class DefaultADPRouter:
    """Upstream's class and method names around the selected reference router."""

    def __init__(self, impl: ReferenceImpl, ledger: CpuLedger) -> None:
        self._impl = impl
        self._ledger = ledger

    def _balance_requests_across_ranks(
        self,
        new_requests: list[RequestItem],
        all_ranks_new_requests: dict[int, list[RequestItem]],
        all_ranks_num_active_requests: list[int],
        all_ranks_num_active_tokens: list[int],
        expected_num_active_requests: int,
    ) -> dict[int, list[RequestItem]]:
        started = time.thread_time()
        try:
            return self._impl.route(
                new_requests,
                all_ranks_new_requests,
                all_ranks_num_active_requests,
                all_ranks_num_active_tokens,
                expected_num_active_requests,
            )
        finally:
            self._ledger.add("_balance_requests_across_ranks", time.thread_time() - started)


class StreamEvent:
    """A CUDA-event stand-in: `time` is the stream clock when the event was reached."""

    __slots__ = ("_reached", "time")

    def __init__(self) -> None:
        self._reached = threading.Event()
        self.time = 0.0

    def synchronize(self) -> float:
        self._reached.wait()
        return self.time


class SimulatedStream:
    """A FIFO of device ops run by the `device` thread; kernels are sleeps (no GIL needed).

    The stream keeps its own clock: an op starts at max(clock, time it was enqueued), so an
    event's time is what a real stream would report even when this thread is late to get the
    GIL back after a kernel. Only the wake-up of a waiting host thread can be late.
    """

    def __init__(self) -> None:
        self._ops: queue.SimpleQueue[tuple[str, float, Any]] = queue.SimpleQueue()
        self._clock = 0.0
        self._thread = threading.Thread(target=self._run, name="device", daemon=True)
        self._thread.start()

    def record(self, event: StreamEvent) -> None:
        self._ops.put(("event", time.perf_counter(), event))

    def launch(self, seconds: float) -> None:
        self._ops.put(("kernel", time.perf_counter(), seconds))

    def close(self) -> None:
        self._ops.put(("stop", 0.0, None))
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            kind, enqueued_at, arg = self._ops.get()
            if kind == "stop":
                return
            self._clock = max(self._clock, enqueued_at)
            if kind == "kernel":
                self._clock += arg
                delay = self._clock - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            else:
                arg.time = self._clock
                arg._reached.set()


@dataclass(frozen=True)
class TokenizedRequest:
    request_id: int
    token_ids: list[int]
    max_tokens: int


class Workload:
    """Seeded prompts and a word-piece tokenizer.

    Each vocabulary word maps to 1-9 token ids (a tokenizer with its word cache warm), so
    tokenizing costs one dictionary lookup and one list extend per word, all under the GIL.
    """

    def __init__(self, seed: int, tokens: int) -> None:
        rng = random.Random(seed)
        words: set[str] = set()
        while len(words) < NUM_WORDS:
            words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))))
        vocabulary = sorted(words)
        self.pieces = {
            word: tuple(rng.randrange(VOCAB_SIZE) for _ in range(rng.randint(1, MAX_PIECES)))
            for word in vocabulary
        }
        self.prompts = [self._prompt(rng, vocabulary, tokens) for _ in range(PROMPT_POOL_SIZE)]

    def _prompt(self, rng: random.Random, vocabulary: list[str], tokens: int) -> str:
        """A prompt of about `tokens` (+-25%) token ids, JSON-encoded once up front."""
        target = max(1, round(tokens * rng.uniform(0.75, 1.25)))
        words: list[str] = []
        count = 0
        while count < target:
            word = rng.choice(vocabulary)
            words.append(word)
            count += len(self.pieces[word])
        return json.dumps(" ".join(words))

    def tokenize(self, prompt: str) -> list[int]:
        pieces = self.pieces
        token_ids: list[int] = []
        for word in prompt.split():
            token_ids += pieces[word]
        return token_ids


class LoadClient:
    """Closed-loop client (`client` thread): a new request as soon as one completes."""

    def __init__(
        self, workload: Workload, concurrency: int, sock: socket.socket, seed: int
    ) -> None:
        self._workload = workload
        self._rng = random.Random(seed)
        self._slots = threading.Semaphore(concurrency)
        self._sock = sock
        self._next_id = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="client", daemon=True)
        self._thread.start()

    def completed(self, count: int) -> None:
        if count:
            self._slots.release(count)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _request_line(self) -> str:
        prompt = self._rng.choice(self._workload.prompts)
        max_tokens = self._rng.randint(MIN_DECODE_STEPS, MAX_DECODE_STEPS)
        self._next_id += 1
        return f'{{"id": {self._next_id}, "prompt": {prompt}, "max_tokens": {max_tokens}}}\n'

    def _run(self) -> None:
        while not self._stopping.is_set():
            if not self._slots.acquire(timeout=0.05):
                continue
            count = 1
            # One send per burst: every socket call releases the GIL and must win it back.
            while count < 512 and self._slots.acquire(blocking=False):
                count += 1
            lines = "".join(self._request_line() for _ in range(count))
            try:
                self._sock.sendall(lines.encode())
            except OSError:
                return


class Ingress:
    """Request ingress (`ingress` thread): JSON lines -> tokenized requests on the queue."""

    def __init__(
        self, workload: Workload, sock: socket.socket, requests: queue.Queue[TokenizedRequest]
    ) -> None:
        self._workload = workload
        self._sock = sock
        self._requests = requests
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ingress", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._sock.close()
        self.thread.join(timeout=5)

    def _admit(self, line: bytes) -> None:
        body = json.loads(line)
        token_ids = self._workload.tokenize(body["prompt"])
        self._requests.put(TokenizedRequest(body["id"], token_ids, body["max_tokens"]))

    def _run(self) -> None:
        pending = b""
        while not self._stopping.is_set():
            try:
                chunk = self._sock.recv(RECV_BYTES)
            except OSError:
                return
            if not chunk:
                return
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if self._stopping.is_set():
                    return
                self._admit(line)


@dataclass
class ActiveRequest:
    request_id: int
    rank: int
    num_tokens: int
    remaining: int
    output_token_ids: list[int] = field(default_factory=list)


@dataclass
class Step:
    index: int
    start: StreamEvent
    end: StreamEvent
    done: StreamEvent
    scheduled: list[ActiveRequest] = field(default_factory=list)
    num_scheduled_requests: int = 0


def thread_cpu_seconds(thread: threading.Thread) -> float:
    if thread.ident is None:
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (OSError, ProcessLookupError):
        return 0.0


@dataclass
class Window:
    """The measured window for the ground truth: from the first loop top after warm-up."""

    first_iter: int = -1
    started_at: float = 0.0
    executor_cpu: float = 0.0
    ingress_cpu: float = 0.0
    requests: int = 0
    ledger: dict[str, tuple[float, int]] = field(default_factory=dict)
    host_ms: list[float] = field(default_factory=list)
    device_ms: list[float] = field(default_factory=list)


class PyExecutor:
    """Rank 0's executor loop with the overlap scheduler (one step in flight)."""

    def __init__(
        self,
        options: argparse.Namespace,
        comm: PoliteComm,
        router: DefaultADPRouter,
        requests: queue.Queue[TokenizedRequest],
        client: LoadClient,
        ingress: Ingress,
        log: IO[str],
    ) -> None:
        self._options = options
        self._comm = comm
        self._router = router
        self._requests = requests
        self._client = client
        self._ingress = ingress
        self._log = log
        self._world = comm.Get_size()
        self._stream = SimulatedStream()
        self._active: list[list[ActiveRequest]] = [[] for _ in range(self._world)]
        self._active_tokens = [0] * self._world
        self._max_active_per_rank = math.ceil(1.25 * options.concurrency / self._world)
        self._num_fetch_requests = 0
        self._num_fetch_requests_cur_rank = 0
        self.window = Window()
        self.wall_seconds = 0.0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="executor-loop", daemon=True)

    def _run(self) -> None:
        try:
            self._executor_loop()
        except BaseException as exc:  # reported by the main thread, which aborts MPI
            self.error = exc
        finally:
            self._stream.close()

    def _executor_loop(self) -> None:
        """Upstream's profiling order: each loop top records the previous step's end event
        and this step's start event on the stream, so a step's device time spans two loop
        tops when the stream idles in between, and a host-bound loop drags it up to the host
        step time. The previous step is waited for only after this one is launched.
        """
        started = time.perf_counter()
        deadline = started + self._options.duration
        warm_until = started + self._options.warmup
        steps: list[Step] = []
        prev_top = 0.0
        index = 0
        while True:
            top = time.perf_counter()
            if steps:
                self._stream.record(steps[-1].end)
                self._log_step(steps, (top - prev_top) * 1e3)
            if top >= deadline:
                self._close_window()
                self.wall_seconds = top - self.window.started_at
                safe_broadcast(self._comm, (None, {}))
                return
            if self.window.first_iter < 0 and top >= warm_until:
                self._open_window(index, top)
            step = Step(index, StreamEvent(), StreamEvent(), StreamEvent())
            self._stream.record(step.start)
            new_requests = self._fetch_new_requests()
            self._activate(new_requests)
            self._launch(step)
            if steps:
                steps[-1].done.synchronize()
                self._handle_responses(steps[-1])
            steps = [*steps[-1:], step]
            prev_top = top
            index += 1

    def _log_step(self, steps: list[Step], host_ms: float) -> None:
        step = steps[-1]
        device = "N/A"
        if len(steps) > 1:
            prev = steps[-2]
            device_ms = (prev.end.synchronize() - prev.start.synchronize()) * 1e3
            device = f"{device_ms:.2f}ms"
            if self.window.first_iter >= 0 and prev.index >= self.window.first_iter:
                self.window.device_ms.append(device_ms)
        if self.window.first_iter >= 0 and step.index >= self.window.first_iter:
            self.window.host_ms.append(host_ms)
        count = step.num_scheduled_requests
        stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
        states = {"num_ctx_requests": 0, "num_ctx_tokens": 0, "num_generation_tokens": count}
        self._log.write(
            f"iter = {step.index}, global_rank = 0, rank = 0, currank_total_requests = "
            f"{self._num_fetch_requests_cur_rank}/{self._num_fetch_requests}, "
            f"host_step_time = {host_ms:.2f}ms, prev_device_step_time = {device}, "
            f"timestamp = {stamp}, num_scheduled_requests: {count}, states = {states}\n"
        )
        self._log.flush()

    def _open_window(self, index: int, top: float) -> None:
        self.window.first_iter = index
        self.window.started_at = top
        self.window.executor_cpu = time.thread_time()
        self.window.ingress_cpu = thread_cpu_seconds(self._ingress.thread)
        self.window.requests = self._num_fetch_requests
        self.window.ledger = LEDGER.snapshot()

    def _close_window(self) -> None:
        if self.window.first_iter < 0:
            self._open_window(-1, time.perf_counter())
        self.window.executor_cpu = time.thread_time() - self.window.executor_cpu
        self.window.ingress_cpu = thread_cpu_seconds(self._ingress.thread) - self.window.ingress_cpu
        self.window.requests = self._num_fetch_requests - self.window.requests
        before = self.window.ledger
        self.window.ledger = {
            name: (seconds - before.get(name, (0.0, 0))[0], calls - before.get(name, (0.0, 0))[1])
            for name, (seconds, calls) in LEDGER.snapshot().items()
        }

    def _fetch_new_requests(self) -> tuple[dict[int, list[RequestItem]], dict[int, int]]:
        capacity = self._max_active_per_rank * self._world - sum(map(len, self._active))
        fetched: list[TokenizedRequest] = []
        while len(fetched) < capacity:
            try:
                fetched.append(self._requests.get_nowait())
            except queue.Empty:
                break
        items = [
            RequestItem(
                id=r.request_id, request=CopyingTokenRequest(r.token_ids, request_id=r.request_id)
            )
            for r in fetched
        ]
        num_active = [len(requests) for requests in self._active]
        num_tokens = list(self._active_tokens)
        py_objects = {"num_active_requests": num_active, "num_active_tokens": num_tokens}
        # Upstream's rank 0 ignores what the broadcast returns: it already holds the items.
        safe_broadcast(self._comm, (items, py_objects))
        routed = self._router._balance_requests_across_ranks(
            items, {}, num_active, num_tokens, expected_num_active_requests(num_active, len(items))
        )
        self._num_fetch_requests += len(items)
        self._num_fetch_requests_cur_rank += len(routed.get(0, ()))
        return routed, {r.request_id: r.max_tokens for r in fetched}

    def _activate(self, new_requests: tuple[dict[int, list[RequestItem]], dict[int, int]]) -> None:
        routed, max_tokens = new_requests
        for rank, items in routed.items():
            for item in items:
                num_tokens = item.request.num_input_tokens
                self._active[rank].append(
                    ActiveRequest(item.id, rank, num_tokens, max_tokens[item.id])
                )
                self._active_tokens[rank] += num_tokens

    def _launch(self, step: Step) -> None:
        step.scheduled = [request for requests in self._active for request in requests]
        step.num_scheduled_requests = len(self._active[0])
        self._stream.launch(self._options.device_ms / 1e3)
        self._stream.record(step.done)

    def _handle_responses(self, step: Step) -> None:
        """Every request of the step decoded one token; finished ones free a client slot.

        Rank 0 keeps the request state of every rank (upstream gathers the counts the router
        needs from all ranks each iteration) and the output tokens of its own requests.
        """
        finished_ranks: set[int] = set()
        for request in step.scheduled:
            request.remaining -= 1
            if request.rank == 0:
                request.output_token_ids.append(
                    (request.request_id * 7919 + request.remaining) % VOCAB_SIZE
                )
            if request.remaining == 0:
                finished_ranks.add(request.rank)
                self._active_tokens[request.rank] -= request.num_tokens
        finished = 0
        for rank in finished_ranks:
            still_active = [request for request in self._active[rank] if request.remaining > 0]
            finished += len(self._active[rank]) - len(still_active)
            self._active[rank] = still_active
        self._client.completed(finished)


def run_worker(comm: PoliteComm, device_seconds: float, unpickle: bool) -> None:
    """A non-root rank: take part in each broadcast, then sleep through its own step.

    By default it runs the receiving half of the same wire protocol (header, then chunks)
    and unpickles only control-sized payloads, which is enough to see the stop marker.
    Upstream each rank unpickles on its own cores; here 3 ranks unpickling every step would
    take over half of the 2 cores rank 0 runs on. `unpickle` runs the full `safe_broadcast`.
    Upstream every attention-DP rank also routes the requests; only rank 0 does here.
    """
    prev_end = 0.0
    while True:
        if unpickle:
            stop = safe_broadcast(comm, None)[0] is None
        else:
            payload = receive_bytes(comm, 0, DEFAULT_CHUNK_SIZE)
            stop = len(payload) <= CONTROL_BYTES and pickle.loads(payload)[0] is None
        if stop:
            return
        now = time.perf_counter()
        end = max(prev_end, now) + device_seconds
        if prev_end > now:
            time.sleep(prev_end - now)
        prev_end = end


def ground_truth(options: argparse.Namespace, executor: PyExecutor) -> dict[str, Any]:
    """Thread CPU over the measured window. `gil_cpu_s` leaves out the CPU spent inside MPI
    calls, which run with the GIL released (the root spins in `Wait`)."""
    window = executor.window
    wall = executor.wall_seconds

    def share(seconds: float) -> float:
        return seconds / wall if wall > 0 else 0.0

    functions = {}
    for name in ("safe_broadcast", "_balance_requests_across_ranks"):
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
    watched = sum(entry["gil_cpu_s"] for entry in functions.values())
    executor_gil_cpu = window.executor_cpu - functions["safe_broadcast"]["mpi_cpu_s"]
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
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
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


def polite_barrier(comm: Any) -> None:
    wait_politely(comm.Ibarrier())


def main(argv: list[str] | None = None) -> int:
    options = parse_args(argv)
    from mpi4py import MPI  # importing initializes MPI, which --help does not need

    world = MPI.COMM_WORLD
    impl = select_implementation(options.impl)
    comm = PoliteComm(world, LEDGER)
    router = DefaultADPRouter(impl, LEDGER)
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


if __name__ == "__main__":
    sys.exit(main())
