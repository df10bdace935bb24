"""What a contended thread's "native" readings are: the states-mode reader and its native
locator run directly on a target (no py-spy), and every native reading is logged with what
the locator knew when it placed it.

    python benchmarks/native_probe.py --pid PID [--rate 25] [--seconds 15] [--threads a,b]
    python benchmarks/native_probe.py --spawn   # runs sleep_and_spin.py itself

Per thread (or the named ones) it prints the shares held / wait / native / idle and the
native readings by leaf frame, and for the readings placed "woken" or unplaced: what the
kernel's context switches said (the last switch before the reading, how many blocks since
the reader last saw the thread blocked, whether that reading was in the GIL's own wait).
Run as root (or where perf_event_open is allowed); SCHED_FIFO as gilprof's attach does.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from gilprof.model import ThreadState
from gilprof.native_classes import NativeRules, native_class_of
from gilprof.sampling.native.perf import SWITCH_BLOCKED
from gilprof.sampling.threadstate.reader import StateReader
from gilprof.sampling.threadstate.target import open_interpreter

WORKLOAD = Path(__file__).resolve().parents[1] / "tests/integration/workloads/sleep_and_spin.py"


def probe(pid: int, rate: float, seconds: float, realtime: bool) -> dict:
    reader = StateReader(open_interpreter(pid), rate)
    note = reader.locate_native(NativeRules())
    locator = reader.locator
    log: list[dict] = []
    if locator is not None:
        place = locator.place

        def logged(tid: int, at_ns: int, blocked_ns: int | None = None, on_gil: bool = False):
            _first, woken, block_ns = locator._since_last_block(tid, at_ns, blocked_ns)
            st, kinds = locator._switch_times.get(tid, []), locator._switch_kinds.get(tid, [])
            last = bisect.bisect_right(st, at_ns) - 1
            times = locator._times.get(tid, [])
            index = bisect.bisect_left(times, at_ns)
            blocks_since = (
                sum(
                    1
                    for t, k in zip(st, kinds, strict=True)
                    if blocked_ns < t <= at_ns and k == SWITCH_BLOCKED
                )
                if blocked_ns is not None
                else None
            )
            frame = place(tid, at_ns, blocked_ns, on_gil)
            around = []
            for i in (index - 1, index):
                if 0 <= i < len(times):
                    sample = locator._samples[tid][i]
                    row = locator.maps.find(sample.user_ip() or 0)
                    where, cls = locator._cached_place(sample, at_ns)
                    around.append(f"{row[3] if row else '?'}|{where}|{cls}|k={sample.in_kernel}")
            log.append(
                {
                    "tid": tid,
                    "around": around,
                    "leaf": f"{frame.name} {frame.file}",
                    "woken": woken,
                    "on_gil_reader": on_gil,
                    "reader_blocked_age_ms": None
                    if blocked_ns is None
                    else round((at_ns - blocked_ns) / 1e6, 2),
                    "kernel_block_age_ms": None
                    if block_ns is None
                    else round((at_ns - block_ns) / 1e6, 2),
                    "blocks_since_reader": blocks_since,
                    "last_switch": None
                    if last < 0
                    else (kinds[last], round((at_ns - st[last]) / 1e6, 2)),
                    "prev_sample_ms": round((at_ns - times[index - 1]) / 1e6, 2) if index else None,
                    "next_sample_ms": round((times[index] - at_ns) / 1e6, 2)
                    if index < len(times)
                    else None,
                }
            )
            return frame

        locator.place = logged  # type: ignore[method-assign]
    if realtime:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    stop = threading.Event()
    recording = reader.record(stop, time.monotonic() + seconds)
    names = {t.profile_id: str(tid) for tid, t in reader.threads.items()}
    reader.close()
    weights: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float)
    )
    leaves: dict[str, dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float)
    )
    for sample, a, b in recording.spans:
        name = names.get(sample.tid, str(sample.tid))
        weights[name][sample.state.name] += b - a
        leaf = sample.frames[-1] if sample.frames else None
        if leaf is not None and native_class_of(leaf) is not None:
            leaves[name][f"{sample.state.name} {leaf.name} {leaf.file}"] += b - a
    shares = {
        name: {k: round(v / sum(w.values()), 4) for k, v in w.items()}
        for name, w in weights.items()
    }
    native = {
        name: {
            k: round(v / sum(weights[name].values()), 4)
            for k, v in sorted(c.items(), key=lambda kv: -kv[1])
        }
        for name, c in leaves.items()
    }
    return {
        "note": note,
        "ticks": recording.ticks,
        "late_ticks": recording.late_ticks,
        "woken_waiters": recording.woken_waiters,
        "cond_mismatch": recording.cond_mismatch,
        "native_gil": recording.native_gil,
        "shares": shares,
        "native_leaves": native,
        "placements": log,
        "ThreadState": [s.name for s in ThreadState],
    }


def summarize(result: dict, tids: set[int] | None) -> dict:
    rows = [p for p in result["placements"] if tids is None or p["tid"] in tids]
    out: dict = {"readings": len(rows), "by_leaf": collections.Counter(p["leaf"] for p in rows)}
    woken = [p for p in rows if "woken" in p["leaf"] or "unplaced" in p["leaf"]]
    out["woken_or_unplaced"] = len(woken)
    out["on_gil_reader"] = collections.Counter(p["on_gil_reader"] for p in woken)
    out["last_switch_kind"] = collections.Counter(
        p["last_switch"][0] if p["last_switch"] else None for p in woken
    )
    blocks = sorted(p["blocks_since_reader"] for p in woken if p["blocks_since_reader"] is not None)
    ages = sorted(p["kernel_block_age_ms"] for p in woken if p["kernel_block_age_ms"] is not None)
    for label, values in (("blocks_since_reader", blocks), ("kernel_block_age_ms", ages)):
        if values:
            out[label + "_q"] = [
                values[int(q * (len(values) - 1))] for q in (0, 0.25, 0.5, 0.75, 1)
            ]
    out["by_leaf"] = dict(out["by_leaf"].most_common())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int)
    parser.add_argument("--spawn", action="store_true", help="run sleep_and_spin.py")
    parser.add_argument("--python", default=sys.executable, help="the spawned target's python")
    parser.add_argument("--rate", type=float, default=25.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--no-realtime", dest="realtime", action="store_false")
    parser.add_argument("--json", help="write everything here")
    args = parser.parse_args()
    proc = None
    ids: dict[str, int] = {}
    pid = args.pid
    if args.spawn:
        idfile = Path(f"/tmp/native-probe-{os.getpid()}.ids")
        proc = subprocess.Popen([args.python, str(WORKLOAD), str(idfile)])
        while not idfile.exists():
            time.sleep(0.2)
        ids = json.loads(idfile.read_text())
        pid = proc.pid
        time.sleep(1)
    assert pid is not None, "--pid or --spawn"
    try:
        result = probe(pid, args.rate, args.seconds, args.realtime)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
    by_tid = {str(tid): name for name, tid in ids.items()}
    result["shares"] = {by_tid.get(k, k): v for k, v in result["shares"].items()}
    result["native_leaves"] = {by_tid.get(k, k): v for k, v in result["native_leaves"].items()}
    result["summary"] = {
        name: summarize(result, {tid}) for name, tid in ids.items() if name.startswith("spin")
    } or {"all": summarize(result, None)}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "placements"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
