"""Each reading of gilprof's thread-state reader next to the kernel's truth at that instant.

    python benchmarks/accuracy/states_confusion.py                    # loop_ingress, 5 s
    python benchmarks/accuracy/states_confusion.py --workload spin2 --hogs 2
    python benchmarks/accuracy/states_confusion.py --python /root/.pyenv/versions/3.13.0/bin/python3

Runs the reader (gilprof.sampling.threadstate.StateReader.tick) in this process at ~200 Hz
on a target while uprobes on take_gil/drop_gil (benchmarks/uprobe_truth.py) record the
target's GIL history, then counts, per thread, the reader's state (held / waiting / native /
idle) against the true state when the tick began and when it ended (held: between a
take_gil return and the next drop_gil entry; waiting: inside take_gil or drop_gil; asleep:
neither, and blocked in the kernel (sched_switch out not runnable, until sched_wakeup);
running: neither, on a CPU or runnable). A reading that matches the truth at neither end is a misreading, not a race.
The reader's errors are the off-diagonal cells; where they come from is the question this
answers (docs/accuracy.md, "states mode against the kernel's truth").
"""

from __future__ import annotations

import argparse
import bisect
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _common  # noqa: E402

_common.ensure_gilprof_importable()

import gil_truth_events as events  # noqa: E402
import uprobe_truth  # noqa: E402
from accuracy_sample import hogs  # noqa: E402

from gilprof.native_classes import NativeRules, native_class_of  # noqa: E402
from gilprof.sampling.threadstate.reader import Recording, StateReader  # noqa: E402

WORKLOADS_DIR = HERE.parents[1] / "tests" / "integration" / "workloads"
LOOP_INGRESS = WORKLOADS_DIR / "loop_ingress.py"
SHAPES = ("short", "reacquire", "preempted", "three")  # gil_waits.py --shape


def truth_state(mine: list[events.Event], times: list[float], t: float) -> str:
    i = bisect.bisect_right(times, t)
    if i == 0:
        return events.BEFORE[mine[0].kind] if mine else "?"
    return events.AFTER[mine[i - 1].kind]


def run(python: str, workload: str, seconds: float, hog_count: int, native: bool = True) -> None:
    if workload == "loop_ingress":
        cmd = [python, str(LOOP_INGRESS), "--seconds", str(seconds + 60)]
    elif workload in SHAPES:
        cmd = [python, str(WORKLOADS_DIR / "gil_waits.py"), "--shape", workload]
        cmd += ["--seconds", str(seconds + 60)]
    else:
        cmd = [python, str(HERE / "workloads.py"), workload, "--max-seconds", str(seconds + 60)]
    with hogs(hog_count):
        target = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert target.stdout is not None
            target.stdout.readline()
            time.sleep(0.5)
            reader = StateReader.open(target.pid, 200)
            if native:
                print(reader.locate_native(NativeRules()) or "native locator on")
            ticks: list[tuple[float, float, dict[int, str]]] = []
            with uprobe_truth.GilTrace(target.pid, sched=True) as trace:
                out = Recording()
                end = time.monotonic() + seconds
                pending = None
                while time.monotonic() < end:
                    t0 = time.monotonic()
                    readings = reader.tick(t0, out)
                    t1 = time.monotonic()
                    tids = {p.profile_id: tid for tid, p in reader.threads.items()}
                    if native:
                        # the locator places a tick's native readings at the next tick
                        if pending is not None:
                            p_t0, p_t1, p_readings, p_natives = pending
                            placed = reader._place_native(p_readings, p_t0, p_natives, out)
                            ticks.append(
                                (p_t0, p_t1, {tids.get(k, k): _label(v) for k, v in placed.items()})
                            )
                        pending = (t0, t1, readings, reader._native_tids)
                    else:
                        ticks.append(
                            (t0, t1, {tids.get(k, k): v[0].value for k, v in readings.items()})
                        )
                    time.sleep(0.005 * random.uniform(0.5, 1.5))
            reader.close()
        finally:
            target.kill()
            target.wait(timeout=10)
    by_thread: dict[int, list[events.Event]] = {}
    sched: dict[int, list[events.Event]] = {}
    for e in trace.events:
        (by_thread if e.kind in events.AFTER else sched).setdefault(e.tid, []).append(e)
    first, last = trace.events[0].t, trace.events[-1].t
    asleep = {tid: events.asleep_spans(evs, first, last) for tid, evs in sched.items()}
    runnable = {tid: events.runnable_spans(evs, first, last) for tid, evs in sched.items()}

    def inside(spans: list[tuple[float, float]], t: float) -> bool:
        i = bisect.bisect_right([a for a, _ in spans], t) - 1
        return i >= 0 and spans[i][1] > t

    times = {tid: [e.t for e in evs] for tid, evs in by_thread.items()}

    def state_at(tid: int, t: float) -> str:
        state = truth_state(by_thread.get(tid, []), times.get(tid, []), t)
        if state == events.WAITING:
            if inside(runnable.get(tid, []), t):
                return "waiting/runnable"
            return "waiting/asleep" if inside(asleep.get(tid, []), t) else "waiting/on-cpu"
        if state != events.OUTSIDE:
            return state
        if inside(runnable.get(tid, []), t):
            return "runnable"
        return "asleep" if inside(asleep.get(tid, []), t) else "running"

    cells: dict[tuple[int, str, str], int] = {}
    for t0, t1, states in ticks:
        for tid, state in states.items():
            a, b = state_at(tid, t0), state_at(tid, t1)
            truth = a if a == b else f"{a}->{b}"
            cells[tid, state, truth] = cells.get((tid, state, truth), 0) + 1
    print(f"{len(ticks)} ticks, {len(trace.events)} GIL events, lost {trace.lost}")
    for tid in sorted({c[0] for c in cells}):
        total = sum(n for (t, _, _), n in cells.items() if t == tid)
        print(f"thread {tid}: {total} readings")
        for (t, state, truth), n in sorted(cells.items(), key=lambda kv: -kv[1]):
            if t == tid:
                print(f"  reader {state:8} truth {truth:18} {n:6} {100 * n / total:5.1f}%")


def _label(reading) -> str:
    """The reading's state, with the native locator's class where it placed one."""
    state, frames = reading
    cls = native_class_of(frames[-1]) if frames else None
    return state.value if cls is None else f"{state.value}:{cls.value}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--workload", default="loop_ingress")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--hogs", type=int, default=0)
    parser.add_argument(
        "--no-native", action="store_true", help="the reader alone, native readings unplaced"
    )
    args = parser.parse_args()
    run(args.python, args.workload, args.seconds, args.hogs, not args.no_native)
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "confusion"
    raise SystemExit(main())
