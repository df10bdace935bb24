"""The thread-state reader's sampling loop: at each tick the GIL's holder and every Python
thread's state, with the stack of each thread that holds, waits or runs.

A tick reads the GIL struct once (locked, last_holder), then each Python thread's syscall
file, then the stacks. The reads are microseconds apart, not one snapshot: a thread read as
waiting may have taken the GIL by the time the next thread is read. A thread that the
syscall file shows waiting on the GIL's condition variable is waiting even if it was the
holder a moment before (the later, more specific reading wins).

Ticks fall at random intervals (uniform on 0.5-1.5 periods) so that a loop whose period is a
multiple of the sampling period is not sampled at one phase only; each tick's states cover
the time until the next tick, an interval drawn independently of what the tick read, so the
time-weighted shares are unbiased. A tick that comes late (the reader did not get a CPU in
time) is not made up by a burst: the late reading covers the time since.

Only Python threads are read (the interpreter's own thread list), so a process with 128
OpenMP threads costs what its few Python threads cost. An idle thread's stack ends in a
frame naming the system call it sits in (file SYSCALL_FILE), which is what tells a device
wait or a sleep from I/O (gilprof.analysis.loop).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from dataclasses import dataclass, field

from gilprof.model import Frame, Sample, ThreadState
from gilprof.native_classes import (
    NOT_PLACED,
    NativeClass,
    NativeRules,
    native_class_of,
    native_frame,
)
from gilprof.sampling.blocked import BlockedEvidence
from gilprof.sampling.native.calls import CallSites
from gilprof.sampling.native.locator import NativeLocator
from gilprof.sampling.native.perf import PerfRefused
from gilprof.sampling.threadstate.arch import AARCH64, X86_64, Arch
from gilprof.sampling.threadstate.syscalls import (
    GIL_SWITCH_WAIT,
    GIL_WAIT,
    OUTSIDE_SYSCALL,
    RUNNING,
    Activity,
    SyscallFiles,
    classify,
)
from gilprof.sampling.threadstate.target import (
    Interpreter,
    MemoryReadError,
    PythonThread,
    open_interpreter,
)
from gilprof.wait_classes import SYSCALL_FILE

THREADS_REFRESH_S = 0.5  # how often the interpreter's thread list is walked again
THREADS_RECHECK_S = 0.02  # how soon, when the GIL's holder is a thread not yet listed
MAX_COND_MISMATCH = 0.05  # share of ticks with an impossible condvar count that drops it  # the file of the leaf frame that names an idle thread's syscall


@dataclass
class Recording:
    """One window's readings: per-thread runs of one stack, on the monotonic clock."""

    spans: list[tuple[Sample, float, float]] = field(default_factory=list)
    ticks: int = 0
    late_ticks: int = 0  # ticks read more than a period after they were due
    cpu_s: float = 0.0  # the reader's own CPU time
    thread_reads: int = 0  # thread readings made (ticks x threads)
    holder_unknown: int = 0  # ticks with `locked` set and a holder none of the threads
    gil_waits_seen: int = 0  # thread readings in a futex on the GIL
    stacks_reused: int = 0  # readings of a thread still blocked in the same call: no stack read
    holder_released: int = 0  # holders read blocked that had let the GIL go before the call
    woken_waiters: int = 0  # running readings counted as waiting (inside pthread_cond_wait)
    cond_mismatch: int = 0  # ticks whose condition-variable count could not be right
    cond_check_dropped: bool = False
    native_placed: int = 0  # native readings the locator placed
    native_unplaced: int = 0  # native readings with no place (no sample, or no locator)
    native_gil: int = 0  # native readings placed in the GIL's own code: counted as waiting
    t_first: float = 0.0
    t_last: float = 0.0
    evidence_note: str = ""  # once per capture: evidence the kernel would not show
    # (profile id, stack) -> the ticks that read that thread holding the GIL with that stack:
    # the holders' stacks, counted at the reader's own ticks (what py-spy --gil would count)
    held: dict[tuple[int, tuple[Frame, ...]], int] = field(default_factory=dict)


Readings = dict[int, tuple[ThreadState, tuple[Frame, ...]]]  # profile id -> (state, stack)


def _idle_frames(activity: Activity) -> tuple[Frame, ...]:
    name = activity.syscall or (
        "not in a system call" if activity.kind == OUTSIDE_SYSCALL else activity.kind
    )
    return (Frame(name, SYSCALL_FILE, 0),)


class StateReader:
    arch: Arch = X86_64  # the target's system call numbers and GIL struct

    def __init__(self, interpreter: Interpreter, rate_hz: float, seed: int | None = None) -> None:
        self.interpreter = interpreter
        self.arch = interpreter.located.arch
        self.period = 1.0 / rate_hz
        self.files = SyscallFiles(interpreter.pid)
        self.random = random.Random(seed)
        self.threads: dict[int, PythonThread] = {}
        self._threads_at = -1e9
        self._last: dict[int, ThreadState] = {}
        # tid -> (its /proc syscall line, its stack) of a thread read blocked: see tick()
        self._blocked_stacks: dict[int, tuple[bytes, tuple[Frame, ...]]] = {}
        # profile id -> (Linux id, its last blocked reading) of the threads native at this tick
        self._native_tids: dict[int, tuple[int, tuple[float, bool] | None]] = {}
        # Linux id -> (when it was last read blocked, whether in the GIL's own wait)
        self._blocked_at: dict[int, tuple[float, bool]] = {}
        # glibc's condvar count of its waiters (target.Interpreter.gil_state); switched off
        # for the capture when it reads impossible values (see merge in backends.states)
        self.cond_check = True
        # where native readings run (None: perf_event_open refused; they stay unplaced)
        self.locator: NativeLocator | None = None
        self.native_note = ""  # how native time is placed, or why it is not
        self._unplaced = native_frame(NativeClass.UNPLACED, "unplaced (not located)")
        # why a blocked thread waits: its native caller, descriptors, waker (sampling.blocked)
        self.evidence = BlockedEvidence(
            interpreter.pid, interpreter.memory, self.arch is AARCH64, interpreter.located.path
        )

    def locate_native(self, rules: NativeRules) -> str:
        """Start placing native readings; '' or, when the kernel refuses, one line why."""
        self.evidence.rules = rules
        interpreter = self.interpreter
        calls = CallSites(interpreter.memory, checked=self.arch is X86_64)
        locator = NativeLocator(interpreter.pid, interpreter.located.path, rules, calls)
        self._refresh_threads(time.monotonic())
        try:
            locator.follow(self.threads)
        except PerfRefused as exc:
            locator.close()
            self._unplaced = native_frame(NativeClass.UNPLACED, f"unplaced ({exc})")
            self.native_note = (
                f"{NOT_PLACED}: {exc}; a thread running without the GIL reads "
                "'native, unplaced', and no verdict calls that host work"
            )
            return self.native_note
        self.locator = locator
        self.evidence.callers.share(locator.maps, locator.symbols)
        stripped = locator.interpreter_note()
        self.native_note = f"{stripped}; {rules.describe()}" if stripped else rules.describe()
        return ""

    @classmethod
    def open(cls, pid: int, rate_hz: float) -> StateReader:
        return cls(open_interpreter(pid), rate_hz)

    def close(self) -> None:
        if self.locator is not None:
            self.locator.close()
        self.evidence.close()
        self.files.close()
        self.interpreter.memory.close()

    def _refresh_threads(self, now: float, soon: bool = False) -> None:
        """Walk the thread list again every THREADS_REFRESH_S, or after THREADS_RECHECK_S
        when `soon` (a holder that is none of the known threads: one just started)."""
        if now - self._threads_at < (THREADS_RECHECK_S if soon else THREADS_REFRESH_S):
            return
        try:
            self.threads = self.interpreter.threads()
        except MemoryReadError:
            return  # the list was being changed: keep the last one
        self._threads_at = now
        self.files.keep_only(set(self.threads))
        self.evidence.follow(set(self.threads))
        if self.locator is not None:
            # a thread that cannot be followed reads unplaced: it has no samples
            with contextlib.suppress(PerfRefused):
                self.locator.follow(self.threads)

    def record(self, stop: threading.Event, deadline: float | None = None) -> Recording:
        """Read ticks until `stop` is set (or the monotonic `deadline`)."""
        out = Recording()
        runs: dict[int, tuple[tuple[ThreadState, tuple[Frame, ...]], float]] = {}

        def add(readings: dict[int, tuple[ThreadState, tuple[Frame, ...]]], at: float) -> None:
            for tid, key in readings.items():
                run = runs.get(tid)
                if run is not None and run[0] == key:
                    continue
                if run is not None:
                    out.spans.append((_sample(tid, run[0]), run[1], at))
                runs[tid] = (key, at)
            for tid in [p for p in runs if p not in readings]:  # a thread that ended
                key, start = runs.pop(tid)
                out.spans.append((_sample(tid, key), start, at))

        # A tick's native readings are placed at the next tick, once the on-CPU samples
        # that follow them are in: the readings go into the runs one tick late.
        pending: tuple[Readings, float, dict[int, tuple[int, tuple[float, bool] | None]]] | None = (
            None
        )
        cpu0 = time.thread_time()
        due = time.monotonic()
        out.t_first = due
        last_tick = due
        while not stop.is_set() and (deadline is None or due < deadline):
            now = time.monotonic()
            if now < due:
                stop.wait(due - now)
                if stop.is_set():
                    break
                now = time.monotonic()
            if now - due > self.period:
                out.late_ticks += 1
            readings = self.tick(now, out)
            held = out.held
            for profile_id, (state, frames) in readings.items():
                if state is ThreadState.HELD:
                    # Python frames only, as py-spy --gil gives them: a holder caught in a
                    # system call (about to drop the GIL) carries a cached blocked reading's
                    # call and evidence frames
                    stack = (profile_id, tuple(f for f in frames if f.is_python))
                    held[stack] = held.get(stack, 0) + 1
            if pending is not None:
                add(self._place_native(*pending, out), pending[1])
            pending = (readings, now, self._native_tids)
            last_tick = now
            due = now + self.period * self.random.uniform(0.5, 1.5)
        if pending is not None:
            add(self._place_native(*pending, out), pending[1])
        end = min(time.monotonic(), last_tick + self.period)
        for tid, (key, start) in runs.items():
            out.spans.append((_sample(tid, key), start, end))
        out.t_last = end
        out.evidence_note = self.evidence.new_note()
        out.cpu_s = time.thread_time() - cpu0
        if self.cond_check and out.cond_mismatch > MAX_COND_MISMATCH * max(1, out.ticks):
            self.cond_check = False  # from the next window on: running means native
            out.cond_check_dropped = True
        return out

    def tick(self, now: float, out: Recording) -> dict[int, tuple[ThreadState, tuple[Frame, ...]]]:
        """Each Python thread's (state, stack) now, keyed by the id py-spy's output gives
        it (PythonThread.profile_id), and so the profile's."""
        self._refresh_threads(now)
        self.evidence.drain()
        now_ns = int(now * 1e9)
        interpreter = self.interpreter
        try:
            locked, holder, in_cond_wait = interpreter.gil_state()
        except MemoryReadError:
            locked, holder, in_cond_wait = 0, None, 0
        if locked == 1 and holder not in self.threads:
            self._refresh_threads(now, soon=True)
            if holder not in self.threads:
                out.holder_unknown += 1
        gil, arch = interpreter.gil, self.arch
        states: dict[int, ThreadState] = {}
        activities: dict[int, Activity] = {}
        running: list[int] = []
        blocked_in_cond = 0
        texts: dict[int, bytes] = {}
        for tid in self.threads:
            text = self.files.read(tid)
            if text is None:
                continue
            texts[tid] = text
            activity = activities[tid] = classify(text, gil, arch)
            if activity.kind in (GIL_WAIT, GIL_SWITCH_WAIT):
                states[tid] = ThreadState.WAITING
                out.gil_waits_seen += 1
                blocked_in_cond += activity.syscall == "cond"
            elif tid == holder:
                states[tid] = ThreadState.HELD
            elif activity.kind == RUNNING:
                states[tid] = ThreadState.NATIVE
                running.append(tid)
            else:
                states[tid] = ThreadState.IDLE
        # the holder read blocked in a system call other than the GIL's: it may hold the GIL
        # there, or have dropped it after the GIL was read and then blocked
        blocked_holder = (
            holder
            if holder in texts and states.get(holder) is ThreadState.HELD
            and activities[holder].kind != RUNNING
            else None
        )  # fmt: skip
        if running or blocked_holder is not None:
            # The GIL may have changed hands while the threads were read. A running thread
            # that did not hold it at the tick's first read and holds it by the re-read took
            # it in between: at the tick's instant (the first read, where every reading is
            # dated) it was on its way into the GIL, waiting. It read held until 2026-12-08,
            # which counted the hand-off to the taker: the reacquire workload's releaser read
            # held +2.7 and waiting -3.6 points against the kernel's truth, +0.8 and -1.3 now
            # (docs/accuracy.md, "the re-read's taker").
            reread = True
            try:
                _, holder_after, _ = interpreter.gil_state()
            except MemoryReadError:
                holder_after, reread = None, False
            if holder_after in running:
                states[holder_after] = ThreadState.WAITING
                running.remove(holder_after)
            # It has let go of the GIL by now. Still in the very call it was read in (the same
            # number, arguments, stack and instruction pointers): a thread blocked in a call
            # cannot drop the GIL, so it did not hold it there (the same call made again from
            # the same stack depth would have to be made once holding the GIL and once not).
            # Left that call since: undetermined, read held as the GIL said. It matters where
            # a tick takes milliseconds (the emulated arm64 reader read a sleeper held 21
            # points too often without it, 16 with it).
            if (
                reread
                and blocked_holder is not None
                and holder_after != blocked_holder
                and self.files.read(blocked_holder) == texts[blocked_holder]
            ):
                states[blocked_holder] = ThreadState.IDLE
                out.holder_released += 1
        if running and self.cond_check:
            extra = in_cond_wait - blocked_in_cond
            self._waiting_while_running(running, extra, states, out, now_ns)
        readings: dict[int, tuple[ThreadState, tuple[Frame, ...]]] = {}
        self._native_tids = {}
        blocked: dict[int, tuple[bytes, tuple[Frame, ...]]] = {}
        for tid, state in states.items():
            thread = self.threads[tid]
            activity = activities[tid]
            cached = self._blocked_stacks.get(tid)
            if cached is not None and activity.kind != RUNNING and cached[0] == texts[tid]:
                # Blocked in the same system call as at the last tick, with the same
                # arguments, stack pointer and program counter: it has not run Python code
                # since (or came back to the very same call), so its stack is the one read
                # then. Most threads of an engine rank sit blocked, and a stack read is the
                # reader's largest cost per thread.
                frames = cached[1]
                out.stacks_reused += 1
            else:
                try:
                    frames = interpreter.stack(thread.tstate)
                except MemoryReadError:
                    frames = ()  # the stack changed under the read: the state still counts
                if state is ThreadState.IDLE:  # where it waits, and the evidence of why
                    frames += _idle_frames(activity)
                    frames += self.evidence.frames(activity.syscall, texts[tid], now_ns)
            if activity.kind != RUNNING and frames:
                blocked[tid] = (texts[tid], frames)
            if state is ThreadState.IDLE:  # who ended its last wait here (not cached)
                waker = self.evidence.blocked_at(tid, texts[tid], now_ns)
                if waker is not None:
                    frames += (waker,)
            readings[thread.profile_id] = (state, frames)
            if state is ThreadState.NATIVE:
                self._native_tids[thread.profile_id] = (tid, self._blocked_at.get(tid))
            elif state is ThreadState.IDLE:
                self._blocked_at[tid] = (now, False)
            elif activity.kind in (GIL_WAIT, GIL_SWITCH_WAIT):
                self._blocked_at[tid] = (now, True)
        self._blocked_stacks = blocked
        self._last = states
        out.ticks += 1
        out.thread_reads += len(readings)
        return readings

    def _place_native(
        self,
        readings: Readings,
        at: float,
        natives: dict[int, tuple[int, tuple[float, bool] | None]],
        out: Recording,
    ) -> Readings:
        """The readings of the tick at `at` with each native one's place as its leaf frame;
        one placed in the interpreter's own code is taking or handing over the GIL, which
        is waiting (as the kernel's truth counts it: all of take_gil and drop_gil)."""
        locator = self.locator
        if locator is not None:  # every tick: a buffer left alone for long fills and drops
            locator.collect(int(time.monotonic() * 1e9), [tid for tid, _b in natives.values()])
        if not natives:
            return readings
        placed = dict(readings)
        for profile_id, (tid, blocked) in natives.items():
            state, frames = readings[profile_id]
            if locator is None:
                leaf = self._unplaced
            elif blocked is None:
                leaf = locator.place(tid, int(at * 1e9))
            else:
                leaf = locator.place(tid, int(at * 1e9), int(blocked[0] * 1e9), blocked[1])
            cls = native_class_of(leaf)
            if cls is NativeClass.UNPLACED:
                out.native_unplaced += 1
            else:
                out.native_placed += 1
            if cls is NativeClass.GIL:
                out.native_gil += 1
                state = ThreadState.WAITING
            placed[profile_id] = (state, (*frames, leaf))
        return placed

    def _waiting_while_running(
        self,
        running: list[int],
        extra: int,
        states: dict[int, ThreadState],
        out: Recording,
        now_ns: int,
    ) -> None:
        """A thread on a CPU (or runnable) that is not the holder runs native code, or is
        still inside take_gil: woken from the GIL's condition variable and not yet back
        (waiting for a core, or between two timed waits). The condition variable's own
        count of the threads inside pthread_cond_wait tells how many are the latter: the
        count less those seen blocked on it. Which of the running threads they are: first
        those whose last context switch the kernel sampled in the GIL's code (the native
        locator's switch samples), never one it sampled elsewhere or that is on its CPU;
        then those waiting at the previous tick (a thread does not leave a wait for native
        code and come back between two reads as often as a waiter wakes)."""
        if extra < 0 or extra > len(self.threads):
            out.cond_mismatch += 1  # a count that cannot be: read mid-update, or not glibc
            return
        if extra == 0:
            return
        evidence: dict[int, bool | None] = {}
        if self.locator is not None and len(running) > extra:
            self.locator.collect(now_ns, running)  # the context switches up to now
            evidence = {tid: self.locator.in_gil_wait(tid, now_ns) for tid in running}
        last = self._last
        # never one the kernel's switch sample places elsewhere (or on its CPU now)
        candidates = [tid for tid in running if evidence.get(tid) is not False]
        ordered = sorted(
            candidates,
            key=lambda tid: (
                evidence.get(tid) is not True,
                last.get(tid) is not ThreadState.WAITING,
            ),
        )
        for tid in ordered[:extra]:
            states[tid] = ThreadState.WAITING
            out.woken_waiters += 1


def _sample(tid: int, key: tuple[ThreadState, tuple[Frame, ...]]) -> Sample:
    return Sample(tid, "", key[1], 1, key[0])
