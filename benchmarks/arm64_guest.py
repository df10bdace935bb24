"""The guest side's shared helpers for benchmarks/arm64_check.py: attaching gilprof, reading
its reports, starting workloads, and the uprobe truth over an attach."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gilprof.profile import Profile

ROOT = Path(__file__).resolve().parents[1]
TARGET = "/usr/bin/python3.11"  # Debian's python3 in the guest


def _gilprof(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """The installed gilprof (run from /tmp, so no source tree shadows it)."""
    return subprocess.run(
        [sys.executable, "-m", "gilprof", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/tmp",
        check=False,
    )


def _wait_file(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        time.sleep(0.2)
    raise RuntimeError(f"{path} did not appear in {timeout:.0f} s")


def _attach(pid: int, tmp: Path, name: str, args: argparse.Namespace) -> dict:
    """`gilprof attach --pid P` in the default mode; the report's JSON, the leaves per
    thread and what the attach printed."""
    out = tmp / f"{name}.json"
    started = time.monotonic()
    run = _gilprof(
        *("attach", "--pid", str(pid), "-d", str(args.seconds), "-r", str(args.rate), *args.extra),
        *("-o", str(out)),
        timeout=args.seconds + 600,
    )
    attach_s = time.monotonic() - started
    if run.returncode != 0:
        raise RuntimeError(f"attach exited {run.returncode}: {run.stderr.strip()[-400:]}")
    report = _gilprof("report", str(out), "--format", "json", timeout=600)
    data = json.loads(report.stdout)
    from gilprof.profile import Profile  # the guest's venv has it

    profile = Profile.load(str(out))
    origin = profile.sampling.origin_monotonic
    return {
        "report": data,
        # the profile's windows on CLOCK_MONOTONIC: the truth is cut to them (emulated, the
        # attach's start-up alone takes tens of seconds, with the target beside it)
        "windows": []
        if origin is None
        else [(origin + w.t0, origin + w.t1) for w in profile.windows],
        "leaves": _leaves(profile),
        "native": _native_leaves(profile),
        "stderr": run.stderr,
        "attach_s": attach_s,
    }


def _leaves(profile: Profile) -> dict[str, dict[str, float]]:
    """Per thread name: its leaf frames ('name file') -> share of its readings."""
    out: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for index, count in profile.state_totals().items():
        name = profile.threads.get(profile.stacks[index].tid, "?")
        frames = profile.stack_frames(index)
        key = f"{frames[-1].name} {frames[-1].file}" if frames else "(none)"
        out.setdefault(name, {})
        out[name][key] = out[name].get(key, 0.0) + count
        totals[name] = totals.get(name, 0.0) + count
    return {
        name: dict(
            sorted(((k, v / totals[name]) for k, v in leaves.items()), key=lambda kv: -kv[1])[:4]
        )
        for name, leaves in out.items()
    }


def _native_leaves(profile: Profile) -> dict[str, dict[str, float]]:
    """Per thread name: the share of its readings per native leaf frame ('STATE place
    [native:CLASS]'): what its native readings were, and those counted waiting."""
    from gilprof.native_classes import native_class_of

    out: dict[str, dict[str, float]] = {}
    totals: dict[str, float] = {}
    for index, count in profile.state_totals().items():
        stack = profile.stacks[index]
        name = profile.threads.get(stack.tid, "?")
        totals[name] = totals.get(name, 0.0) + count
        frames = profile.stack_frames(index)
        if frames and native_class_of(frames[-1]) is not None:
            key = f"{stack.state.name} {frames[-1].name} {frames[-1].file}"
            out.setdefault(name, {})
            out[name][key] = out[name].get(key, 0.0) + count
    return {
        name: {k: round(v / totals[name], 4) for k, v in sorted(c.items(), key=lambda kv: -kv[1])}
        for name, c in out.items()
    }


def _threads(data: dict) -> dict[str, dict[str, float]]:
    return {
        t["name"]: {
            k: round(t.get(f"{k}_share", 0.0), 4) for k in ("held", "wait", "native", "idle")
        }
        for t in data["gil"]["threads"]
    }


def _states_mode(result: dict) -> list[str]:
    mode = result["report"]["sampling"]["mode"]
    fell_back = [line for line in result["stderr"].splitlines() if "unavailable" in line]
    return [] if mode == "states" else [f"mode {mode}, not states: {fell_back[:1]}"]


def _leaf_share(result: dict, thread: str, needle: str) -> float:
    return sum(v for k, v in result["leaves"].get(thread, {}).items() if needle in k)


def _spawn(
    code_or_path: str, tmp: Path, name: str, python: str = TARGET
) -> tuple[subprocess.Popen[bytes], dict]:
    idfile = tmp / f"{name}.ids"
    proc = subprocess.Popen([python, code_or_path, str(idfile)])
    text = _wait_file(idfile, 120)
    ids = json.loads(text) if text.strip().startswith("{") else {}
    return proc, ids


def _sample_workload(
    workload: str, tmp: Path, name: str, args: argparse.Namespace, python: str = TARGET
) -> dict:
    """Start the workload, let its threads settle, attach, and end it."""
    proc, _ = _spawn(workload, tmp, name, python)
    try:
        time.sleep(2)
        return _attach(proc.pid, tmp, name, args)
    finally:
        proc.kill()
        proc.wait()


def _runnable_share(cuts: list, tid: int, seconds: float) -> float | None:
    parts = [gil.threads[tid].waiting_runnable_s for gil in cuts]
    return None if None in parts else round(sum(parts) / seconds, 4)


def _attach_with_truth(
    pid: int, ids: dict[str, int], tmp: Path, name: str, args: argparse.Namespace
) -> tuple[dict, dict]:
    """One attach, and the uprobe truth per thread name over the profile's windows (its whole
    run where it has none), or {"error": why} / {} without it."""
    truth: dict = {}
    trace = None
    if args.truth:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import uprobe_truth
        from uprobe_truth import GilTrace, TruthError, sched_tracepoints

        uprobe_truth.READY_TIMEOUT_S = 600.0  # bpftrace compiles its program emulated

        try:
            # Debian's LTO build inlines drop_gil into PyEval_SaveThread (gdb: its code
            # calls pthread_cond_signal itself), which time.sleep and zlib release by
            trace = GilTrace(pid, sched=sched_tracepoints(), also_drop=("PyEval_SaveThread",))
            trace.start()
        except TruthError as exc:
            truth = {"error": str(exc)}
    t0 = time.monotonic()
    try:
        result = _attach(pid, tmp, name, args)
    finally:
        if trace is not None:
            trace.stop()
    t1 = time.monotonic()
    if trace is not None:
        cuts = [trace.truth(a, b, ids.values()) for a, b in result["windows"] or [(t0, t1)]]
        seconds = sum(gil.seconds for gil in cuts)
        truth = {
            thread: {
                "held": round(sum(gil.threads[tid].held_s for gil in cuts) / seconds, 4),
                "wait": round(sum(gil.threads[tid].waiting_s for gil in cuts) / seconds, 4),
                # of the wait, runnable but off every CPU (the scheduler's events; None
                # without them): where the reader sees "running" and reads native
                "wait_runnable": _runnable_share(cuts, tid, seconds),
            }
            for thread, tid in ids.items()
            if all(tid in gil.threads for gil in cuts)
        }
        truth["_window_s"] = round(seconds, 2)
        truth["_events"] = sum(gil.events for gil in cuts)
    return result, truth
