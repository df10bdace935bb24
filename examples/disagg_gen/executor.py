"""Rank 0's executor loop (overlap scheduler, one step in flight) and the other ranks' loop."""

from __future__ import annotations

import argparse
import math
import os
import pickle
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO

from gilprof.reference.adp_router import (
    CopyingTokenRequest,
    RequestItem,
    expected_num_active_requests,
)
from gilprof.reference.broadcast import DEFAULT_CHUNK_SIZE, receive_bytes

from .hotspots import (
    LEDGER,
    DefaultADPRouter,
    PoliteComm,
    broadcast_sample_state,
    safe_broadcast,
    select_implementation,
    selected_implementation,
)
from .network import Ingress, LoadClient
from .simulation import VOCAB_SIZE, SimulatedStream, StreamEvent, TokenizedRequest

# Payloads up to this size are unpickled on every rank: the stop marker is ~20 bytes.
CONTROL_BYTES = 1024
# --slow-flag: how often the flag file is looked for, and how much extra host work a step
# does while it exists: 2x the executor CPU of a normal step (an average taken while the flag
# is absent, so longer steps fetching more requests do not feed back), 3x heavier in all.
SLOW_FLAG_POLL_S = 0.5
SLOW_FACTOR = 2.0


def injected_slow_phase(seconds: float) -> None:
    """Pure-Python busy work holding the GIL for `seconds` of thread CPU (--slow-flag)."""
    until = time.thread_time() + seconds
    spins = 0
    while time.thread_time() < until:
        spins += sum(range(200))


class FileFlag:
    """Whether a flag file (--slow-flag, --after-flag) exists, looked up at most every
    SLOW_FLAG_POLL_S."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._checked_at = 0.0
        self._present = False

    def present(self, now: float) -> bool:
        if self._path is None:
            return False
        if now - self._checked_at >= SLOW_FLAG_POLL_S:
            self._checked_at = now
            self._present = os.path.exists(self._path)
        return self._present


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
        self._slow_flag = FileFlag(getattr(options, "slow_flag", None))
        self._after_flag = FileFlag(getattr(options, "after_flag", None))
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
        step_cpu = time.thread_time()
        normal_step_cpu = 0.0  # moving average of a step's executor CPU without the flag
        while True:
            top = time.perf_counter()
            self._switch_variant(top)
            if self._slow_flag.present(top):
                injected_slow_phase(SLOW_FACTOR * normal_step_cpu)
                top = time.perf_counter()
            elif index:
                cpu = time.thread_time() - step_cpu
                normal_step_cpu = cpu if index == 1 else 0.9 * normal_step_cpu + 0.1 * cpu
            step_cpu = time.thread_time()
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

    def _switch_variant(self, now: float) -> None:
        """--after-flag: the fix on while its file exists, --impl otherwise (between steps)."""
        wanted = "after" if self._after_flag.present(now) else self._options.impl
        if selected_implementation() != wanted:
            select_implementation(wanted)

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
        expected = expected_num_active_requests(num_active, len(items), self._max_active_per_rank)
        routed = self._router._balance_requests_across_ranks(
            items, {}, num_active, num_tokens, expected
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

        The step's new tokens go to every rank (`broadcast_sample_state`); rank 0 appends
        its own requests' tokens from what that returns. Rank 0 keeps the request state of
        every rank (upstream gathers the counts the router needs from all ranks each
        iteration) and the output tokens of its own requests.
        """
        new_tokens = {
            request.request_id: (request.request_id * 7919 + request.remaining - 1) % VOCAB_SIZE
            for request in step.scheduled
        }
        new_tokens = broadcast_sample_state(self._comm, new_tokens)
        finished_ranks: set[int] = set()
        for request in step.scheduled:
            request.remaining -= 1
            if request.rank == 0:
                request.output_token_ids.append(new_tokens[request.request_id])
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
    From the second iteration on, it also receives the previous step's sample state
    (`broadcast_sample_state`, small). Upstream every attention-DP rank also routes the
    requests; only rank 0 does here.
    """
    prev_end = 0.0
    iteration = 0
    while True:
        if unpickle:
            stop = safe_broadcast(comm, None)[0] is None
        else:
            payload = receive_bytes(comm, 0, DEFAULT_CHUNK_SIZE)
            stop = len(payload) <= CONTROL_BYTES and pickle.loads(payload)[0] is None
        if stop:
            return
        if iteration:
            broadcast_sample_state(comm, None)
        iteration += 1
        now = time.perf_counter()
        end = max(prev_end, now) + device_seconds
        if prev_end > now:
            time.sleep(prev_end - now)
        prev_end = end
