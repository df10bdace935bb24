"""Contention mode tick by tick: what py-spy read at each tick against what the target did.

    python benchmarks/accuracy/accuracy_ticks.py duo                    # 5 windows x 2 s, 100 Hz
    python benchmarks/accuracy/accuracy_ticks.py zlib --hogs 2 --json

Root only. A `workloads.py` target runs; `py-spy record --native --idle -f speedscope` samples
it in windows of `--seconds` as gilprof does; ftrace (clock `mono`, which `perf_counter`
reads too) records every `ptrace` call py-spy makes on the target's threads. Each tick is
then one lock round: PTRACE_SEIZE + PTRACE_INTERRUPT per thread, in /proc/PID/task order,
then PTRACE_DETACH per thread. The k-th round after the first of each py-spy process (its
start-up check, `retry_new`, which is no tick) is the k-th sample of every thread in the
speedscope file. For each thread and tick this prints three states:

- *first stop*: the truth (workloads.py's runs and naps) when py-spy interrupted the
  target's first thread, the instant the tick stands for;
- *own stop*: the truth when py-spy interrupted this thread, which it samples;
- *read*: gilprof's classification of the stack py-spy recorded (native.classify).

`read` against `own stop` is the classifier's error, `own stop` against `first stop` is the
lock's (threads are stopped one at a time and the others run meanwhile), and `first stop`
against the wall-time truth (accuracy_truth.truth_over) is where ticks land: not inside a
pause, and after a late one several back to back ("catch-up"). Measured figures and what
they mean: docs/accuracy.md, "Contention mode tick by tick".
"""

from __future__ import annotations

import argparse
import bisect
import collections
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent)]

from accuracy_truth import truth_over  # noqa: E402

from gilprof.model import Frame  # noqa: E402
from gilprof.sampling.backends.native import classify  # noqa: E402

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 0x11, 0x4206, 0x4207
CATCH_UP_S = 250e-6  # a tick this soon after the previous resume was due during the pause
HOG = "while True: pass"
_EVENT = re.compile(
    r"-(?P<tracer>\d+)\s+\[\d+\].*?\s(?P<ts>\d+\.\d+): sys_ptrace\(request: 0x(?P<req>[0-9a-f]+), "
    r"pid: 0x(?P<tid>[0-9a-f]+)"
)
Round = dict[str, dict[int, float]]  # "int" / "det": tid -> time of PTRACE_INTERRUPT / DETACH


@contextlib.contextmanager
def ptrace_trace(tids: list[int]) -> Iterator[Path]:
    """An ftrace instance recording sys_enter_ptrace on `tids`; yields its folder."""
    root = Path("/sys/kernel/tracing")
    mounted = None
    if not (root / "instances").is_dir():
        mounted = Path(tempfile.mkdtemp(prefix="tracefs-"))
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(mounted)], check=True)
        root = mounted
    inst = root / "instances" / f"gilprof-ticks-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "trace_clock").write_text("mono")
        (inst / "buffer_size_kb").write_text("65536")
        event = inst / "events" / "syscalls" / "sys_enter_ptrace"
        (event / "filter").write_text(" || ".join(f"pid == {t}" for t in tids))
        (event / "enable").write_text("1")
        (inst / "tracing_on").write_text("1")
        yield inst
    finally:
        (inst / "tracing_on").write_text("0")
        inst.rmdir()
        if mounted is not None:
            subprocess.run(["umount", str(mounted)], check=False)
            mounted.rmdir()


def lock_rounds(trace: str) -> list[list[Round]]:
    """The lock rounds of each py-spy process (by its sampling thread), in time order."""
    by_tracer: dict[int, list[Round]] = {}
    for match in _EVENT.finditer(trace):
        req, tid = int(match["req"], 16), int(match["tid"], 16)
        rounds = by_tracer.setdefault(int(match["tracer"]), [])
        if req == PTRACE_SEIZE and (not rounds or rounds[-1]["det"] or tid in rounds[-1]["int"]):
            rounds.append({"int": {}, "det": {}})
        if rounds and req == PTRACE_INTERRUPT:
            rounds[-1]["int"][tid] = float(match["ts"])
        elif rounds and req == PTRACE_DETACH:
            rounds[-1]["det"][tid] = float(match["ts"])
    return [r for r in by_tracer.values() if len(r) > 2]


class Timeline:
    """A thread's truth at an instant, by the rules of workloads.py's docstring."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.threads = {t["name"]: t for t in record["threads"]}
        self.runs = {n: sorted(map(tuple, t["runs"])) for n, t in self.threads.items()}
        self.naps = {n: sorted(map(tuple, t["naps"])) for n, t in self.threads.items()}
        self.all_runs = sorted((s, e, n) for n, runs in self.runs.items() for s, e in runs)
        self.all_starts = [s for s, _, _ in self.all_runs]

    def state(self, name: str, t: float) -> str:
        naps = self.naps[name]
        i = bisect.bisect_right(naps, (t, float("inf"), float("inf"))) - 1
        if i >= 0 and naps[i][0] <= t < naps[i][2]:
            if t < naps[i][1]:
                return "idle" if self.threads[name]["nap_kind"] == "idle" else "native"
            return "wait"  # the native part is over: taking the GIL back
        runs = self.runs[name]
        j = bisect.bisect_right(runs, (t, float("inf"))) - 1
        if j >= 0 and t <= runs[j][1]:
            return "held"
        if j < 0 or j + 1 >= len(runs):
            return "?"
        a, b = runs[j][1], runs[j + 1][0]
        k = bisect.bisect_left(self.all_starts, a)
        others = [
            r
            for r in self.all_runs[max(0, k - 3) : k + 50]
            if r[2] != name and r[1] > a and r[0] < b
        ]
        if not others:
            return "held"  # preempted or paused with the GIL in hand
        return "handoff" if t < others[0][0] else "wait"


def run_windows(args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], str, float, float]:
    """Target, hogs, py-spy windows under ftrace: (target record, trace text, t0, t1)."""
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    target = subprocess.Popen(
        [args.python, str(HERE / "workloads.py"), args.workload, "--max-seconds", "600"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert target.stdout is not None and target.stdin is not None
    try:
        pid = int(target.stdout.readline().split()[1])
        time.sleep(args.warmup)
        tids = sorted(int(x) for x in os.listdir(f"/proc/{pid}/task"))
        with ptrace_trace(tids) as inst:
            t0 = time.perf_counter()
            for window in range(args.windows):
                cmd = ["py-spy", "record", "--pid", str(pid), "--rate", str(args.rate)]
                cmd += ["--format", "speedscope", "-o", str(out / f"window{window}.json")]
                cmd += ["--full-filenames", "--native", "--idle", "--duration", str(args.seconds)]
                if args.fifo:
                    cmd = ["chrt", "-f", str(args.fifo), *cmd]
                subprocess.run(cmd, capture_output=True, check=True)
            t1 = time.perf_counter()
            trace = (inst / "trace").read_text()
        target.stdin.close()
        record = json.loads(target.stdout.read())
    finally:
        for hog in hogs:
            hog.kill()
        target.kill()
    return record, trace, t0, t1


def window_samples(path: Path) -> tuple[dict[str, int], dict[str, list[tuple[Frame, ...]]]]:
    """(thread name -> tid, thread name -> its stacks in tick order) of one speedscope file."""
    doc = json.loads(path.read_text())
    frames = [
        Frame(f.get("name", "?"), f.get("file") or "", f.get("line") or 0)
        for f in doc["shared"]["frames"]
    ]
    tids, stacks = {}, {}
    for profile in doc["profiles"]:
        match = re.match(r'Thread (\d+) "(.*)"', profile["name"])
        if match:
            tids[match[2]] = int(match[1])
            stacks[match[2]] = [tuple(frames[i] for i in s) for s in profile["samples"]]
    return tids, stacks


def analyze(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    record, trace, t0, t1 = run_windows(args, out)
    windows = lock_rounds(trace)
    timeline = Timeline(record)
    names = list(timeline.threads)
    counts: dict[str, dict[str, collections.Counter[str]]] = {
        n: {k: collections.Counter() for k in ("first", "own", "read", "read|own")} for n in names
    }
    spread: dict[str, dict[str, list[float]]] = {n: collections.defaultdict(list) for n in names}
    pause_by_state: dict[str, dict[str, list[float]]] = {
        n: collections.defaultdict(list) for n in names
    }
    catch_up = ticks = 0
    spans = []
    for number, rounds in enumerate(windows):
        tids, stacks = window_samples(out / f"window{number}.json")
        n_ticks = max(len(s) for s in stacks.values())
        used = rounds[1 : 1 + n_ticks]  # rounds[0]: py-spy's start-up check, no sample
        spans.append((min(used[0]["int"].values()), max(used[-1]["det"].values())))
        previous = rounds[0]
        for k, r in enumerate(used):
            first = min(r["int"].values())
            pause = max(r["det"].values()) - first
            catch_up += first - max(previous["det"].values()) < CATCH_UP_S
            ticks += 1
            previous = r
            for name in names:
                tid = tids.get(name)
                if tid not in r["int"] or k >= len(stacks[name]):
                    continue
                at_first = timeline.state(name, first)
                own = timeline.state(name, r["int"][tid])
                read = classify(stacks[name][k]).name.lower()
                c = counts[name]
                c["first"][at_first] += 1
                c["own"][own] += 1
                c["read"][read] += 1
                c["read|own"][f"{own}->{read}"] += 1
                spread[name][at_first].append(max(r["int"].values()) - first)
                pause_by_state[name][at_first].append(pause)
    truth = truth_over(record, spans)
    paused = sum(
        max(r["det"].values()) - min(r["int"].values()) for rs in windows for r in rs if r["det"]
    )
    result: dict[str, Any] = {
        "workload": args.workload,
        "rate": args.rate,
        "hogs": args.hogs,
        "ticks": ticks,
        "paused_share": paused / (t1 - t0),
        "catch_up_share": catch_up / max(ticks, 1),
        "threads": {},
    }
    for name in names:
        c, t = counts[name], truth.threads[name]
        total = max(sum(c["read"].values()), 1)
        result["threads"][name] = {
            "wall": {
                "held": [t.held, t.held + t.handoff_before + t.handoff_after],
                "wait": t.wait,
                "idle": t.idle,
                "native": [t.native, t.native_hi],
            },
            **{k: {s: v / total for s, v in c[k].most_common()} for k in ("first", "own", "read")},
            "read_given_own": dict(c["read|own"].most_common()),
            "lock_spread_ms": {s: 1e3 * statistics.mean(v) for s, v in spread[name].items()},
            "pause_ms": {s: 1e3 * statistics.mean(v) for s, v in pause_by_state[name].items()},
        }
    return result


def print_text(result: dict[str, Any]) -> None:
    print(
        f"{result['workload']}, {result['rate']} Hz, {result['hogs']} hogs: {result['ticks']} ticks, "
        f"target paused {100 * result['paused_share']:.1f}% of wall, "
        f"{100 * result['catch_up_share']:.1f}% of ticks were catch-ups"
    )
    for name, th in result["threads"].items():
        wall = th["wall"]
        held = wall["held"]
        print(f"\n{name}  wall truth: held {100 * held[0]:.1f}-{100 * held[1]:.1f}", end="")
        for key in ("wait", "idle"):
            if wall[key]:
                print(f", {key} {100 * wall[key]:.1f}", end="")
        if wall["native"][1]:
            print(f", native {100 * wall['native'][0]:.1f}-{100 * wall['native'][1]:.1f}", end="")
        print()
        for key in ("first", "own", "read"):
            label = {"first": "at the tick's first stop", "own": "at its own stop", "read": "read"}[
                key
            ]
            shares = ", ".join(f"{s} {100 * v:.1f}" for s, v in th[key].items())
            print(f"  {label:26s} {shares}")
        wrong = {
            k: v for k, v in th["read_given_own"].items() if k.split("->")[0] != k.split("->")[1]
        }
        print(f"  misread (own stop -> read) {wrong or 'none'}")
        print(
            "  lock spread ms by state at first stop:",
            {s: round(v, 3) for s, v in th["lock_spread_ms"].items()},
        )
        print(
            "  pause ms by state at first stop:      ",
            {s: round(v, 3) for s, v in th["pause_ms"].items()},
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("workload")
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=2, help="per py-spy window (gilprof: 2)")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside the target")
    parser.add_argument("--warmup", type=float, default=2.0, help="unsampled seconds first")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the target")
    parser.add_argument(
        "--fifo", type=int, default=0, help="run py-spy at SCHED_FIFO this priority"
    )
    parser.add_argument("--keep", help="folder to keep the speedscope files in")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or shutil.which("py-spy") is None:
        parser.error("needs root (ftrace, ptrace) and py-spy on PATH")
    with tempfile.TemporaryDirectory(prefix="gilprof-ticks-") as tmp:
        out = Path(args.keep or tmp)
        out.mkdir(parents=True, exist_ok=True)
        result = analyze(args, out)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_text(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
