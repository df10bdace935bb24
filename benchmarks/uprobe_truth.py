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
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gil_truth_events, run by path

from gil_truth_events import (
    DROP,
    DROPPED,
    SWITCHED_IN,
    SWITCHED_OUT,
    TAKE,
    TAKEN,
    WOKEN,
    Event,
    GilTruth,
    ThreadTruth,
    parse_events,
    truth_from_events,
)

from gilprof.sampling.native.symbols import find_debug_file
from gilprof.sampling.threadstate.namespaces import parse_maps, readable_path

__all__ = ["Event", "GilTrace", "GilTruth", "ThreadTruth", "TruthError", "start_trace"]

READY_TIMEOUT_S = 90.0  # bpftrace compiles its program first: slow on a loaded machine


class TruthError(Exception):
    """bpftrace cannot trace this target (not root, no symbols, bpftrace missing)."""


def gil_symbols(path: str) -> dict[str, str] | None:
    """take_gil's and drop_gil's names in `path`'s symbol table, or in its separate debug
    file (a distribution's stripped binary with its debug-symbol package installed:
    Debian's python3.11-dbg holds /usr/bin/python3.11's, found by build id, where bpftrace
    looks too). An LTO build names them with a suffix (`take_gil.lto_priv.0`, Debian's
    3.11): the name as the table has it. None when neither file has both."""
    nm = shutil.which("nm")
    if nm is None:
        raise TruthError("nm (binutils) is needed to find take_gil/drop_gil")
    for candidate in (path, find_debug_file(path)):
        if not candidate:
            continue
        out = subprocess.run([nm, candidate], capture_output=True, text=True, check=False)
        found: dict[str, str] = {}
        for line in out.stdout.splitlines():
            name = line.split()[-1] if line.strip() else ""
            base = name.split(".", 1)[0]
            if base in ("take_gil", "drop_gil") and (base not in found or name == base):
                found[base] = name
        if len(found) == 2:
            return found
    return None


def inlined_drops(names: dict[str, str]) -> tuple[str, ...]:
    """The functions to trace as drop_gil besides it, in a build whose names say it was
    optimized across functions (`drop_gil.constprop.0`: LTO). There drop_gil is inlined into
    PyEval_SaveThread, which every Py_BEGIN_ALLOW_THREADS of an extension module or of a
    module not inlining it calls (time.sleep, zlib, locks, select): measured on Debian sid's
    3.14.10 and 3.15.2, whose untraced releases read a sleeping thread as holding the GIL
    46% of the time and the duo workload's threads 99.9%. PyEval_SaveThread returns once the
    GIL is released, so its entry and return bound the drop as drop_gil's do; where it calls
    drop_gil instead (nested events), the state between the two returns is a few
    instructions. Not traced: the same code inlined again into a few file-I/O functions of
    the interpreter itself (`_Py_read`, `os.stat`, `os.listdir`, `os.scandir`; FileIO.readall
    on 3.14; found by their calls of pthread_cond_signal), whose entry and return bound a
    release and a re-take: a release there is missed, so the I/O reads as held, then as
    waiting from the re-take's take_gil. None of benchmarks/accuracy's or the tests'
    workloads releases the GIL there while measured."""
    drop = names.get("drop_gil", "drop_gil")
    return ("PyEval_SaveThread",) if drop != "drop_gil" else ()


def _has_gil_symbols(path: str) -> bool:
    return gil_symbols(path) is not None


def gil_binary(pid: int) -> str:
    """The file of `pid`'s interpreter that holds take_gil and drop_gil: its libpython when
    it maps one that has them, else its executable. Each is opened where this process can
    reach it (gilprof's own rule, `readable_path`): a target in a mount namespace of its own
    (benchmarks/sid-python3.X, a container) names its files by paths that exist only there.
    A uprobe is set on the file (its inode), so it fires in the target whatever the path."""
    with open(f"/proc/{pid}/maps") as maps:
        mapped = parse_maps(maps.read())
    exe = os.readlink(f"/proc/{pid}/exe")
    names = [p for p in mapped if "libpython" in os.path.basename(p)]
    names += [exe] if exe in mapped else []
    tried = []
    for name in names:
        path = readable_path(pid, mapped[name])
        tried.append(path)
        if os.path.exists(path) and _has_gil_symbols(path):
            return path
    raise TruthError(f"PID {pid}: no take_gil/drop_gil symbol in {', '.join(tried) or exe}")


def bpftrace_program(
    pid: int,
    binary: str,
    sched: bool = False,
    names: dict[str, str] | None = None,
    also_drop: tuple[str, ...] = (),
) -> str:
    """`names`: take_gil's and drop_gil's names in the binary's symbols, where they differ
    (gil_symbols); a name with a dot is quoted for bpftrace. `also_drop`: functions that
    contain drop_gil inlined (an LTO build: Debian's 3.11 inlines it into
    PyEval_SaveThread, which every Py_BEGIN_ALLOW_THREADS calls), traced as drop_gil."""
    names = names or {}
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
        *((p, f, k) for f in also_drop for p, k in (("uprobe", DROP), ("uretprobe", DROPPED))),
        ("uprobe", "take_gil", TAKE),
        ("uretprobe", "take_gil", TAKEN),
        ("uprobe", "drop_gil", DROP),
        ("uretprobe", "drop_gil", DROPPED),
    ):
        symbol = names.get(function, function)
        symbol = f'"{symbol}"' if "." in symbol else symbol
        probes.append(
            f'{probe}:{binary}:{symbol} /pid == {pid}/ {{ printf("{kind} %d %llu\\n", '
            "tid, nsecs); }"
        )
    begin = 'BEGIN { printf("ready %llu\\n", nsecs); }'
    return "\n".join([begin, *probes])


class GilTrace:
    """bpftrace on one target's take_gil/drop_gil while the block runs.

    with GilTrace(pid) as trace:
        t0 = time.monotonic(); ...; t1 = time.monotonic()
    truth = trace.truth(t0, t1)
    """

    def __init__(
        self,
        pid: int,
        binary: str | None = None,
        sched: bool = False,
        also_drop: tuple[str, ...] | None = None,
    ) -> None:
        if shutil.which("bpftrace") is None:
            raise TruthError("bpftrace is not installed (apt-get install bpftrace)")
        if os.geteuid() != 0:
            raise TruthError("uprobes need root")
        self.pid = pid
        self.sched = sched
        self.binary = binary or gil_binary(pid)
        self.names = gil_symbols(self.binary) or {}
        self.also_drop = inlined_drops(self.names) if also_drop is None else also_drop
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
        """Start bpftrace and wait until its probes are attached. A start that hangs (seen
        twice in a row on this machine, then not again: bpftrace printed nothing) is
        retried once; the error says what bpftrace printed."""
        try:
            self._start_once(READY_TIMEOUT_S / 2)
        except TruthError as exc:
            if "in time" not in str(exc):
                raise
            self._start_once(READY_TIMEOUT_S / 2)

    def _start_once(self, timeout: float) -> None:
        # O_APPEND: bpftrace shares this file's offset, which the ready check moves to read
        self._out = tempfile.TemporaryFile("a+")  # noqa: SIM115 (closed in stop)
        self._proc = subprocess.Popen(
            [
                "bpftrace",
                "-e",
                bpftrace_program(self.pid, self.binary, self.sched, self.names, self.also_drop),
            ],
            stdout=self._out,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C of the caller is ours to pass on
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # BEGIN fires once every probe is attached
            self._out.seek(0)
            if any(line.startswith("ready") for line in self._out):
                return
            if self._proc.poll() is not None:
                err = self._proc.stderr.read() if self._proc.stderr else ""
                raise TruthError(f"bpftrace exited: {err.strip()[-300:]}")
            time.sleep(0.05)
        self.stop()
        said = " ".join(self.stderr.split())[-300:] or "nothing on stderr"
        raise TruthError(f"bpftrace did not attach its probes in time ({timeout:.0f} s; {said})")

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
    trace = GilTrace(pid, sched=sched_tracepoints())
    trace.start()
    return trace


def sched_tracepoints() -> bool:
    """Whether bpftrace can take the scheduler's tracepoints: tracefs mounted, here if it is
    not yet (root: the trace needs root anyway)."""
    switch = f"{TRACEFS}/events/sched/sched_switch"
    if not os.path.exists(switch) and os.path.isdir(TRACEFS) and shutil.which("mount"):
        subprocess.run(
            ["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True, check=False
        )
    return os.path.exists(switch)


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
