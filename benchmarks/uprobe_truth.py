"""Exact GIL truth for one target process from kernel uprobes on CPython's take_gil/drop_gil.

    python benchmarks/uprobe_truth.py --pid PID -d 5        # one process, JSON per thread
    python benchmarks/uprobe_truth.py --check               # three spinners: held + waiting = 1

Why uprobes: every GIL hand-off in CPython goes through two static functions of ceval_gil.c,
so their entry and return times are the GIL's own history, with no assumption about what
the workload does. Per thread (keyed by Linux thread id):

- held: from a `take_gil` return to the next `drop_gil` entry;
- waiting: `take_gil` entry -> return (blocked on the GIL's condition variable, or woken and
  not yet on a core), plus `drop_gil` entry -> return (a forced switch: with a drop request
  pending, the dropper waits on `switch_cond` until the next holder has taken the GIL);
- blame: each waiting interval split by whose hold it overlaps (none: a hand-off).

The functions are local symbols (`t` in `nm`) of libpython (an --enable-shared build, as the
pyenv builds here) or of the python executable (a static build); the library or executable
the target maps is found in /proc/PID/maps. A probe on a shared file fires in every process
that maps it, so the script filters on the target's pid (bpftrace's `pid` is the tgid).

Window edges: the trace starts before the window and each thread's state at the window's
start is the state its last event before it left. A thread with no event before the window
gets its state from its first event inside it (a `drop_gil` entry first: it held the GIL
from the start, which is the case of a thread holding the GIL through the window start
with no switch). A thread with no event at all in the whole trace is reported as `silent`
(it held the GIL all along if it is the only thread that ran, or it never took it): the
caller decides (`ran`: threads known to have run Python code get the time nobody else
held), else the figures count it as neither held nor waiting.

bpftrace's `nsecs` is bpf_ktime_get_ns, CLOCK_MONOTONIC: the same clock as Python's
time.monotonic and time.perf_counter on Linux, so windows are given on that clock.

Needs root and bpftrace (apt-get install bpftrace). Each GIL switch costs the target four
uprobe hits (a few microseconds each); at the benchmark workloads' switch rates (at most a
few thousand a second) that is well under 1% of a core.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

Interval = tuple[float, float]

# Event kinds as bpftrace prints them.
TAKE, TAKEN, DROP, DROPPED = "a", "b", "c", "d"
# scheduler events (sched=True): off a CPU, made runnable, onto a CPU
SWITCHED_OUT, WOKEN, SWITCHED_IN = "s", "w", "i"
HELD, WAITING, OUTSIDE = "held", "waiting", "outside"
# The state each event leaves its thread in, and the state it implies before it.
_AFTER = {TAKE: WAITING, TAKEN: HELD, DROP: WAITING, DROPPED: OUTSIDE}
_BEFORE = {TAKE: OUTSIDE, TAKEN: WAITING, DROP: HELD, DROPPED: WAITING}
READY_TIMEOUT_S = 90.0  # bpftrace compiles its program first: slow on a loaded machine


class TruthError(Exception):
    """bpftrace cannot trace this target (not root, no symbols, bpftrace missing)."""


def _has_gil_symbols(path: str) -> bool:
    nm = shutil.which("nm")
    if nm is None:
        raise TruthError("nm (binutils) is needed to find take_gil/drop_gil")
    out = subprocess.run([nm, path], capture_output=True, text=True, check=False).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return {"take_gil", "drop_gil"} <= names


def gil_binary(pid: int) -> str:
    """The file of `pid`'s interpreter that holds take_gil and drop_gil: its libpython when
    it maps one that has them, else its executable."""
    candidates: list[str] = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and "libpython" in os.path.basename(parts[5].strip()):
                candidates.append(parts[5].strip())
    candidates.append(os.path.realpath(f"/proc/{pid}/exe"))
    for path in dict.fromkeys(candidates):
        if os.path.exists(path) and _has_gil_symbols(path):
            return path
    raise TruthError(f"PID {pid}: no take_gil/drop_gil symbol in {', '.join(candidates)}")


def bpftrace_program(pid: int, binary: str, sched: bool = False) -> str:
    probes = []
    if sched:
        # A thread switched out in a state other than TASK_RUNNING (0) sleeps until it is
        # woken; one switched out runnable (preempted) is waiting for a core. At sched_switch
        # the current task (`pid`, `tid`) is the one leaving; a wake-up names the woken
        # thread only, so the threads seen leaving are remembered in @mine.
        probes += [
            f"tracepoint:sched:sched_switch /pid == {pid}/ {{ @mine[tid] = 1; "
            f'printf("{SWITCHED_OUT} %d %llu %d\\n", tid, nsecs, args->prev_state); }}',
            f"tracepoint:sched:sched_wakeup /@mine[args->pid]/ {{ "
            f'printf("{WOKEN} %d %llu\\n", args->pid, nsecs); }}',
            f"tracepoint:sched:sched_switch /@mine[args->next_pid]/ {{ "
            f'printf("{SWITCHED_IN} %d %llu\\n", args->next_pid, nsecs); }}',
        ]
    for probe, function, kind in (
        ("uprobe", "take_gil", TAKE),
        ("uretprobe", "take_gil", TAKEN),
        ("uprobe", "drop_gil", DROP),
        ("uretprobe", "drop_gil", DROPPED),
    ):
        probes.append(
            f'{probe}:{binary}:{function} /pid == {pid}/ {{ printf("{kind} %d %llu\\n", '
            "tid, nsecs); }"
        )
    begin = 'BEGIN { printf("ready %llu\\n", nsecs); }'
    return "\n".join([begin, *probes])


@dataclass(frozen=True)
class Event:
    t: float  # CLOCK_MONOTONIC seconds
    tid: int
    kind: str
    task_state: int = 0  # SWITCHED_OUT: the state the thread left its CPU in (0: runnable)


@dataclass(frozen=True)
class ThreadTruth:
    tid: int
    held_s: float
    waiting_s: float
    # waiting seconds by the thread that held the GIL meanwhile (0: nobody, a hand-off)
    waiting_by_holder: dict[int, float] = field(default_factory=dict)
    silent: bool = False  # no event in the whole trace: state unknown, counted as neither
    # with scheduler events: the rest (neither held nor waiting) split into asleep (blocked
    # in the kernel: idle) and not (on a CPU or runnable: native code, or woken from a sleep
    # and not yet on a core, which is what the reader calls native)
    idle_s: float | None = None
    native_s: float | None = None
    # waiting while off a CPU but runnable (preempted, or woken and not yet on a core):
    # inside take_gil in user space, such a thread looks like one running native code to
    # anything that reads /proc (the kernel says "running" for every runnable thread)
    waiting_runnable_s: float | None = None
    waiting_runnable_by_holder: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class GilTruth:
    t0: float
    t1: float
    threads: dict[int, ThreadTruth]
    events: int  # events inside the window
    lost: int  # events bpftrace reported lost (the figures are wrong if > 0)

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    def held_share(self, tid: int) -> float:
        return self.threads[tid].held_s / self.seconds if tid in self.threads else 0.0

    def waiting_share(self, tid: int) -> float:
        return self.threads[tid].waiting_s / self.seconds if tid in self.threads else 0.0

    def blame_share(self, waiter: int, holder: int) -> float:
        th = self.threads.get(waiter)
        return th.waiting_by_holder.get(holder, 0.0) / self.seconds if th else 0.0

    def to_dict(self) -> dict[str, Any]:
        def share(x: float | None) -> float | None:
            return None if x is None else x / self.seconds

        return {
            "t0": self.t0,
            "t1": self.t1,
            "seconds": self.seconds,
            "events": self.events,
            "lost": self.lost,
            "threads": [
                {
                    "tid": t.tid,
                    "held_share": t.held_s / self.seconds,
                    "waiting_share": t.waiting_s / self.seconds,
                    "idle_share": share(t.idle_s),
                    "native_share": share(t.native_s),
                    "waiting_runnable_share": share(t.waiting_runnable_s),
                    "waiting_by_holder": {
                        str(h): s / self.seconds for h, s in sorted(t.waiting_by_holder.items())
                    },
                    "silent": t.silent,
                }
                for t in sorted(self.threads.values(), key=lambda t: t.tid)
            ],
        }


def parse_events(lines: Iterable[str]) -> tuple[list[Event], int]:
    """(events sorted by time, events lost) from bpftrace's output; a line that is not one
    whole event (bpftrace's own messages) is skipped."""
    events: list[Event] = []
    lost = 0
    for line in lines:
        parts = line.split()
        try:
            if len(parts) == 3 and parts[0] in (*_AFTER, WOKEN, SWITCHED_IN):
                events.append(Event(int(parts[2]) / 1e9, int(parts[1]), parts[0]))
            elif len(parts) == 4 and parts[0] == SWITCHED_OUT:
                events.append(Event(int(parts[2]) / 1e9, int(parts[1]), parts[0], int(parts[3])))
            elif line.startswith("Lost ") and len(parts) > 1 and parts[1].isdigit():
                lost += int(parts[1])
        except ValueError:
            continue
    events.sort(key=lambda e: e.t)
    return events, lost


def _gil_spans(mine: Sequence[Event], t0: float, t1: float) -> dict[str, list[Interval]]:
    """One thread's held / waiting / outside intervals clipped to [t0, t1]."""
    spans: dict[str, list[Interval]] = {HELD: [], WAITING: [], OUTSIDE: []}
    if not mine:
        return spans
    state, since = _BEFORE[mine[0].kind], t0  # before the first event: what it implies
    for e in mine:
        a, b = max(since, t0), min(e.t, t1)
        if b > a:
            spans[state].append((a, b))
        state, since = _AFTER[e.kind], e.t
    a = max(since, t0)
    if t1 > a:
        spans[state].append((a, t1))
    return spans


def _asleep(mine: Sequence[Event], t0: float, t1: float) -> list[Interval]:
    """When one thread was blocked in the kernel (switched out not runnable, until woken),
    clipped to [t0, t1]; before its first event, what that event implies."""
    out: list[Interval] = []
    asleep = bool(mine) and mine[0].kind == WOKEN
    since = t0
    for e in mine:
        if e.kind == SWITCHED_OUT and e.task_state != 0 and not asleep:
            asleep, since = True, e.t
        elif e.kind == WOKEN and asleep:
            a, b = max(since, t0), min(e.t, t1)
            if b > a:
                out.append((a, b))
            asleep = False
    if asleep and t1 > max(since, t0):
        out.append((max(since, t0), t1))
    return out


def _runnable(mine: Sequence[Event], t0: float, t1: float) -> list[Interval]:
    """When one thread was runnable but off every CPU (switched out runnable, or woken,
    until switched in), clipped to [t0, t1]."""
    out: list[Interval] = []
    since: float | None = None
    for e in mine:
        if (e.kind == SWITCHED_OUT and e.task_state == 0) or e.kind == WOKEN:
            since = e.t if since is None else since
        elif e.kind == SWITCHED_IN and since is not None:
            a, b = max(since, t0), min(e.t, t1)
            if b > a:
                out.append((a, b))
            since = None
        elif e.kind == SWITCHED_OUT:
            since = None
    if since is not None and t1 > max(since, t0):
        out.append((max(since, t0), t1))
    return out


def _intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Where two sorted, disjoint interval lists overlap."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _intersect_s(a: list[Interval], b: list[Interval]) -> float:
    """Seconds where two sorted, disjoint interval lists overlap."""
    return sum(hi - lo for lo, hi in _intersection(a, b))


def thread_intervals(
    events: Sequence[Event], t0: float, t1: float
) -> dict[int, dict[str, list[Interval]]]:
    """Per thread that left a GIL event, its held / waiting / outside intervals in [t0, t1]."""
    by_thread: dict[int, list[Event]] = {}
    for e in events:
        if e.kind in _AFTER:
            by_thread.setdefault(e.tid, []).append(e)
    return {tid: _gil_spans(mine, t0, t1) for tid, mine in by_thread.items()}


def _overlap_by_holder(
    waits: list[Interval], holds: list[tuple[float, float, int]]
) -> dict[int, float]:
    """Seconds of `waits` inside each holder's holds (`holds` sorted, disjoint); 0: nobody."""
    starts = [h[0] for h in holds]
    out: dict[int, float] = {}
    for a, b in waits:
        covered = 0.0
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(holds) and holds[i][0] < b:
            s, e, holder = holds[i]
            lo, hi = max(a, s), min(b, e)
            if hi > lo:
                out[holder] = out.get(holder, 0.0) + hi - lo
                covered += hi - lo
            i += 1
        if b - a > covered:
            out[0] = out.get(0, 0.0) + (b - a - covered)
    return out


def truth_from_events(
    events: Sequence[Event],
    t0: float,
    t1: float,
    tids: Iterable[int] = (),
    lost: int = 0,
    ran: Iterable[int] = (),
) -> GilTruth:
    """Held, waiting and blame per thread over [t0, t1] (idle and native too where the
    events include the scheduler's); `tids`: threads to report even when they left no GIL
    event (as `silent`). `ran`: threads the caller knows ran Python code in the window
    (a workload's own record): one of them that is silent held the GIL whenever no other
    thread did, since a thread that never drops the GIL leaves no event (one spinner alone:
    nobody asks it to drop)."""
    spans = thread_intervals(events, t0, t1)
    sched: dict[int, list[Event]] = {}
    for e in events:
        if e.kind in (SWITCHED_OUT, WOKEN, SWITCHED_IN):
            sched.setdefault(e.tid, []).append(e)
    holds = sorted((a, b, tid) for tid, s in spans.items() for a, b in s[HELD])
    threads: dict[int, ThreadTruth] = {}
    for tid, s in spans.items():
        idle = native = waiting_runnable = None
        others = [h for h in holds if h[2] != tid]
        runnable_by_holder: dict[int, float] = {}
        if sched:
            outside = s[OUTSIDE]
            idle = _intersect_s(outside, _asleep(sched.get(tid, []), t0, t1))
            native = sum(b - a for a, b in outside) - idle
            ambiguous = _intersection(s[WAITING], _runnable(sched.get(tid, []), t0, t1))
            waiting_runnable = sum(b - a for a, b in ambiguous)
            runnable_by_holder = _overlap_by_holder(ambiguous, others)
        threads[tid] = ThreadTruth(
            tid,
            sum(b - a for a, b in s[HELD]),
            sum(b - a for a, b in s[WAITING]),
            _overlap_by_holder(s[WAITING], others),
            idle_s=idle,
            native_s=native,
            waiting_runnable_s=waiting_runnable,
            waiting_runnable_by_holder=runnable_by_holder,
        )
    others_held = sum(b - a for a, b, _ in holds)
    ran = set(ran)
    for tid in tids:
        if tid not in threads:
            held = max(0.0, (t1 - t0) - others_held) if tid in ran else 0.0
            threads[tid] = ThreadTruth(tid, held, 0.0, {}, silent=True)
    inside = sum(1 for e in events if t0 <= e.t <= t1 and e.kind in _AFTER)
    return GilTruth(t0, t1, threads, inside, lost)


class GilTrace:
    """bpftrace on one target's take_gil/drop_gil while the block runs.

    with GilTrace(pid) as trace:
        t0 = time.monotonic(); ...; t1 = time.monotonic()
    truth = trace.truth(t0, t1)
    """

    def __init__(self, pid: int, binary: str | None = None, sched: bool = False) -> None:
        if shutil.which("bpftrace") is None:
            raise TruthError("bpftrace is not installed (apt-get install bpftrace)")
        if os.geteuid() != 0:
            raise TruthError("uprobes need root")
        self.pid = pid
        self.sched = sched
        self.binary = binary or gil_binary(pid)
        self._out: IO[str] | None = None
        self._proc: subprocess.Popen[str] | None = None
        self.events: list[Event] = []
        self.lost = 0
        self.stderr = ""

    def __enter__(self) -> GilTrace:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        # O_APPEND: bpftrace shares this file's offset, which the ready check moves to read
        self._out = tempfile.TemporaryFile("a+")  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            ["bpftrace", "-e", bpftrace_program(self.pid, self.binary, self.sched)],
            stdout=self._out,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C of the caller is ours to pass on
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:  # BEGIN fires once every probe is attached
            self._out.seek(0)
            if any(line.startswith("ready") for line in self._out):
                return
            if self._proc.poll() is not None:
                err = self._proc.stderr.read() if self._proc.stderr else ""
                raise TruthError(f"bpftrace exited: {err.strip()[-300:]}")
            time.sleep(0.05)
        self.stop()
        raise TruthError("bpftrace did not attach its probes in time")

    def stop(self) -> None:
        proc, out = self._proc, self._out
        if proc is None or out is None:
            return
        self._proc = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # bpftrace flushes its buffers, then exits
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.stderr = proc.stderr.read() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        out.seek(0)
        self.events, self.lost = parse_events(out)
        out.close()
        self._out = None

    def truth(
        self, t0: float, t1: float, tids: Iterable[int] = (), ran: Iterable[int] = ()
    ) -> GilTruth:
        return truth_from_events(self.events, t0, t1, tids, self.lost, ran)


TRACEFS = "/sys/kernel/tracing"


def start_trace(pid: int) -> GilTrace:
    """A started trace of `pid` with the scheduler's events where the kernel's tracefs is
    mounted, else of the GIL's alone. bpftrace finds tracepoints in tracefs; a machine
    that does not mount it (this one) gets it mounted (`mount -t tracefs nodev
    /sys/kernel/tracing`, root: the trace needs root anyway)."""
    switch = f"{TRACEFS}/events/sched/sched_switch"
    if not os.path.exists(switch) and os.path.isdir(TRACEFS) and shutil.which("mount"):
        subprocess.run(
            ["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, check=False
        )
    sched = os.path.exists(switch)
    trace = GilTrace(pid, sched=sched)
    trace.start()
    return trace


# -- the command line and the three-spinner check --------------------------------------------

SPINNERS = """
import sys, threading
def spin():
    x = 0
    while True:
        x += 1
threads = [threading.Thread(target=spin, daemon=True) for _ in range(3)]
for t in threads: t.start()
print(" ".join(str(t.native_id) for t in threads), flush=True)
sys.stdin.read()
"""


def check_spinners(python: str, seconds: float) -> dict[str, Any]:
    """Three contending spinners: each thread's held + waiting must fill the window."""
    proc = subprocess.Popen(
        [python, "-c", SPINNERS], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        tids = [int(t) for t in proc.stdout.readline().split()]
        with GilTrace(proc.pid) as trace:
            time.sleep(0.3)
            t0 = time.monotonic()
            time.sleep(seconds)
            t1 = time.monotonic()
            time.sleep(0.2)
        truth = trace.truth(t0, t1, tids)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    rows = []
    for tid in tids:
        th = truth.threads[tid]
        rows.append(
            {
                "tid": tid,
                "held": th.held_s / truth.seconds,
                "waiting": th.waiting_s / truth.seconds,
                "sum": (th.held_s + th.waiting_s) / truth.seconds,
            }
        )
    worst = max(abs(r["sum"] - 1.0) for r in rows)
    return {
        "python": python,
        "seconds": truth.seconds,
        "events": truth.events,
        "lost": truth.lost,
        "threads": rows,
        "worst_sum_error": worst,
        "within_1pct": worst <= 0.01,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pid", type=int, help="trace this process")
    parser.add_argument("-d", "--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--check", action="store_true", help="the three-spinner check")
    parser.add_argument("--python", default=sys.executable, help="interpreter for --check")
    args = parser.parse_args(argv)
    try:
        if args.check:
            result = check_spinners(args.python, args.duration)
            print(json.dumps(result, indent=1))
            return 0 if result["within_1pct"] else 1
        if args.pid is None:
            parser.error("--pid or --check")
        with GilTrace(args.pid) as trace:
            t0 = time.monotonic()
            time.sleep(args.duration)
            t1 = time.monotonic()
        print(json.dumps(trace.truth(t0, t1).to_dict(), indent=1))
    except (TruthError, OSError) as exc:
        print(f"uprobe_truth: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
