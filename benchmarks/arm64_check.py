"""The states mode and the native locator on aarch64: gilprof's real-process checks, run in
the emulated arm64 Debian machine (../shared/tools/arm64-vm; qemu TCG, ~20x slower).

    python benchmarks/arm64_check.py                      # start the VM if needed, install, check
    python benchmarks/arm64_check.py --rate 25 --seconds 15 --json out.json
    python benchmarks/arm64_check.py --inside ...         # what runs in the guest (as root)

On the host it packs the working tree (tracked and untracked, not ignored files), copies it
into the guest, `pip install`s it into a venv there (py-spy's aarch64 wheel comes from
PyPI), installs binutils and python3.11-dbg (the debug symbols of Debian's stripped
/usr/bin/python3.11, for the uprobe truth) with apt, and runs this script with `--inside`.
Inside, each check runs a workload on Debian's python3.11 and `gilprof attach --pid P` in
the default (states) mode at --rate Hz for --seconds, and fails when the profile fell back
to another mode:

- pthread: where this glibc's struct pthread keeps a thread's Linux id (how 3.10 targets
  are read), measured on a 3.11 target by scanning each thread's struct pthread for its id,
  against the architecture's table;
- holds: gil_states.py (tests/integration/workloads): `holder` in one C call holds the
  GIL, `spinner` waits for it, `sleeper` waits on an Event (the x86_64 test's thresholds);
  holds-dbg: the same on Debian's debug build /usr/bin/python3.11d (from python3.11-dbg);
- contend: a time.sleep loop (idle in clock_nanosleep), two spinners (each holds and waits,
  about half and half), against the exact truth from bpftrace uprobes on take_gil/drop_gil
  (benchmarks/uprobe_truth.py) taken over the same run;
- native: a spinner (holds), a zlib.compress loop (native, placed in libz by the native
  locator), an Event waiter (idle in futex);
- host, device: overlap_loop.py --shape host|device, reported with --steps LOG
  --device-wait wait_for_device: the verdicts host and device;
- waits-short, waits-reacquire, waits-preempted, waits-three (not in the default --checks):
  gil_waits.py's held-out shapes against the uprobe truth, each thread's waiting share within
  5 points or 3 binomial SE where wider (issue 34's aarch64 bar).

Exit status 1 when a check fails. CI does not run it (it needs the VM: root, ~8 min to
build, ~30 s to boot).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "/usr/bin/python3.11"  # Debian's python3 in the guest

WORKLOADS = ROOT / "tests" / "integration" / "workloads"
CONTEND = str(WORKLOADS / "sleep_and_spin.py")
NATIVE = str(WORKLOADS / "zlib_beside_spinner.py")


# -- inside the guest ---------------------------------------------------------------------


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
    return {
        "report": data,
        "leaves": _leaves(out),
        "native": _native_leaves(out),
        "stderr": run.stderr,
        "attach_s": attach_s,
    }


def _leaves(path: Path) -> dict[str, dict[str, float]]:
    """Per thread name: its leaf frames ('name file') -> share of its readings."""
    from gilprof.profile import Profile

    profile = Profile.load(str(path))
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


def _native_leaves(path: Path) -> dict[str, dict[str, float]]:
    """Per thread name: the share of its readings per native leaf frame ('STATE place
    [native:CLASS]'): what its native readings were, and those counted waiting."""
    from gilprof.native_classes import native_class_of
    from gilprof.profile import Profile

    profile = Profile.load(str(path))
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


def check_holds(tmp: Path, args: argparse.Namespace, python: str = TARGET) -> dict:
    result = _sample_workload(str(WORKLOADS / "gil_states.py"), tmp, "holds", args, python)
    threads = _threads(result["report"])
    wrong = _states_mode(result)
    wrong += [f"holder held {threads['holder']['held']}"] * (threads["holder"]["held"] <= 0.9)
    wrong += [f"spinner wait {threads['spinner']['wait']}"] * (threads["spinner"]["wait"] <= 0.9)
    wrong += [f"sleeper idle {threads['sleeper']['idle']}"] * (threads["sleeper"]["idle"] <= 0.95)
    return {
        "threads": threads,
        "leaves": result["leaves"],
        "attach_s": result["attach_s"],
        "wrong": wrong,
    }


def _attach_with_truth(
    pid: int, ids: dict[str, int], tmp: Path, name: str, args: argparse.Namespace
) -> tuple[dict, dict]:
    """One attach, and the uprobe truth per thread name over its whole run (the workloads are
    stationary), or {"error": why} / {} without it."""
    truth: dict = {}
    trace = None
    if args.truth:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import uprobe_truth
        from uprobe_truth import GilTrace, TruthError

        uprobe_truth.READY_TIMEOUT_S = 600.0  # bpftrace compiles its program emulated

        try:
            # Debian's LTO build inlines drop_gil into PyEval_SaveThread (gdb: its code
            # calls pthread_cond_signal itself), which time.sleep and zlib release by
            trace = GilTrace(pid, also_drop=("PyEval_SaveThread",))
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
        gil = trace.truth(t0, t1, ids.values())
        truth = {
            thread: {
                "held": round(gil.threads[tid].held_s / gil.seconds, 4),
                "wait": round(gil.threads[tid].waiting_s / gil.seconds, 4),
            }
            for thread, tid in ids.items()
            if tid in gil.threads
        }
        truth["_window_s"] = round(gil.seconds, 2)
        truth["_events"] = gil.events
    return result, truth


def check_waits(shape: str, tmp: Path, args: argparse.Namespace) -> dict:
    """gil_waits.py --shape SHAPE (the held-out workloads of issue 34) against the truth:
    each thread's waiting share within 5 points, or 3 binomial SE where that is wider."""
    proc = subprocess.Popen(
        [TARGET, str(WORKLOADS / "gil_waits.py"), "--shape", shape, "--seconds", "900"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        ready = proc.stdout.readline().split() if proc.stdout else []
        if ready[:1] != ["ready"]:
            return {"wrong": [f"gil_waits.py --shape {shape} did not start: {ready}"]}
        ids = {name: int(tid) for name, tid in (word.split("=") for word in ready[2:])}
        time.sleep(2)
        result, truth = _attach_with_truth(proc.pid, ids, tmp, f"waits-{shape}", args)
    finally:
        proc.kill()
        proc.wait()
    threads = _threads(result["report"])
    wrong = _states_mode(result)
    ticks = args.rate * args.seconds
    errors = {}
    for name in ids:
        exact = truth.get(name)
        if not isinstance(exact, dict) or name not in threads:
            wrong.append(f"{name}: no truth or no reading ({truth.get('error', '')})")
            continue
        p = exact["wait"]
        tolerance = max(0.05, 3 * math.sqrt(max(p * (1 - p), 0.01) / ticks))
        errors[name] = {key: round(threads[name][key] - exact[key], 4) for key in ("held", "wait")}
        if abs(errors[name]["wait"]) > tolerance:
            wrong.append(f"{name} wait {threads[name]['wait']} vs truth {p} (> {tolerance:.3f})")
    return {"threads": threads, "truth": truth, "errors": errors, "wrong": wrong}


def check_contend(tmp: Path, args: argparse.Namespace) -> dict:
    proc, ids = _spawn(CONTEND, tmp, "contend")
    try:
        result, truth = _attach_with_truth(proc.pid, ids, tmp, "contend", args)
    finally:
        proc.kill()
        proc.wait()
    threads = _threads(result["report"])
    wrong = _states_mode(result)
    sleeper_leaf = _leaf_share(result, "sleeper", "clock_nanosleep [syscall]")
    # after each sleep it waits for the GIL (a spinner holds it up to the 5 ms interval)
    idle = threads["sleeper"]["idle"]
    wrong += [f"sleeper idle {idle}"] * (idle <= 0.8)
    wrong += [f"sleeper idle in clock_nanosleep {sleeper_leaf:.2f}"] * (sleeper_leaf <= 0.95 * idle)
    ticks = args.rate * args.seconds
    for name in ("spin-a", "spin-b"):
        held, wait = threads[name]["held"], threads[name]["wait"]
        if not (0.25 <= held <= 0.75 and 0.25 <= wait <= 0.75 and held + wait > 0.85):
            wrong.append(f"{name} held {held} wait {wait}")
        exact = truth.get(name)
        if isinstance(exact, dict):
            for key in ("held", "wait"):
                p = exact[key]
                tolerance = max(0.05, 3 * math.sqrt(max(p * (1 - p), 0.01) / ticks))
                if abs(threads[name][key] - p) > tolerance:
                    wrong.append(
                        f"{name} {key} {threads[name][key]} vs truth {p} (> {tolerance:.3f})"
                    )
    if args.truth and not any(isinstance(v, dict) and "held" in v for v in truth.values()):
        wrong.append(f"no truth: {truth}")
    return {
        "threads": threads,
        "truth": truth,
        "leaves": result["leaves"],
        "native_leaves": {k: v for k, v in result["native"].items() if k.startswith("spin")},
        "native_notes": [ln[:300] for ln in result["stderr"].splitlines() if "native" in ln][:2],
        "attach_s": result["attach_s"],
        "wrong": wrong,
    }


def check_native(tmp: Path, args: argparse.Namespace) -> dict:
    result = _sample_workload(NATIVE, tmp, "native", args)
    threads = _threads(result["report"])
    wrong = _states_mode(result)
    in_libz = _leaf_share(result, "zlib", "libz")
    futex = _leaf_share(result, "waiter", "futex [syscall]")
    wrong += [f"spinner held {threads['spinner']['held']}"] * (threads["spinner"]["held"] <= 0.6)
    wrong += [f"zlib native {threads['zlib']['native']}"] * (threads["zlib"]["native"] <= 0.5)
    # of its native readings, the share the locator placed in libz
    libz = in_libz / max(threads["zlib"]["native"], 1e-9)
    wrong += [f"zlib's native readings in libz {libz:.2f}"] * (libz <= 0.6)
    wrong += [f"waiter in futex {futex:.2f}"] * (futex <= 0.9)
    placed = [line for line in result["stderr"].splitlines() if "native" in line.lower()]
    return {
        "threads": threads,
        "leaves": result["leaves"],
        "native_notes": placed[:3],
        "attach_s": result["attach_s"],
        "wrong": wrong,
    }


def check_loop(shape: str, tmp: Path, args: argparse.Namespace) -> dict:
    log, err = tmp / f"{shape}.log", tmp / f"{shape}.err"
    workload = WORKLOADS / "overlap_loop.py"
    with open(err, "wb") as handle:
        proc = subprocess.Popen(
            [
                TARGET,
                str(workload),
                "--shape",
                shape,
                "--duration",
                str(args.seconds + 60),
                "--log",
                str(log),
            ],
            stderr=handle,
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            log.exists() and log.read_text().count("iter =") >= 3
        ):
            time.sleep(0.5)
        out = tmp / f"{shape}.json"
        run = _gilprof(
            *("attach", "--pid", str(proc.pid), "-d", str(args.seconds), "-r", str(args.rate)),
            *args.extra,
            *("-o", str(out)),
            timeout=args.seconds + 600,
        )
    finally:
        proc.kill()
        proc.wait()
    if run.returncode != 0:
        return {"wrong": [f"attach exited {run.returncode}: {run.stderr.strip()[-300:]}"]}
    report = _gilprof(
        *("report", str(out), "--steps", str(log), "--device-wait", "wait_for_device"),
        *("--loop-thread", "step-loop"),
        *("--format", "json"),
        timeout=600,
    )
    data = json.loads(report.stdout)
    verdict = data["verdict"]
    wrong = [] if data["sampling"]["mode"] == "states" else [f"mode {data['sampling']['mode']}"]
    wrong += [f"verdict {verdict['bound']}, want {shape}"] * (verdict["bound"] != shape)
    return {"bound": verdict["bound"], "reason": verdict["reason"], "wrong": wrong}


def check_pthread_tid(tmp: Path, args: argparse.Namespace) -> dict:
    """Where this glibc's struct pthread keeps the thread's Linux id (what 3.10 targets are
    read by): measured on a 3.11 target, whose thread states hold both the pthread_t and
    the Linux id, by scanning each thread's struct pthread for its id."""
    from gilprof.sampling.threadstate.target import open_interpreter

    proc, _ = _spawn(CONTEND, tmp, "pthread")
    found: dict[int, list[int]] = {}
    try:
        interpreter = open_interpreter(proc.pid)
        for tid, thread in interpreter.threads().items():
            raw = interpreter.memory.read(thread.pthread_id, 0x800)
            found[tid] = [
                at
                for at in range(0, len(raw) - 3, 4)
                if int.from_bytes(raw[at : at + 4], "little") == tid
            ]
        table = interpreter.located.arch.pthread_tid
        arch = interpreter.located.arch.name
        interpreter.memory.close()
    finally:
        proc.kill()
        proc.wait()
    common = set.intersection(*(set(v) for v in found.values())) if found else set()
    wrong = [] if common == {table} else [f"tid found at {sorted(common)}, table says {table:#x}"]
    return {
        "arch": arch,
        "offsets": sorted(hex(a) for a in common),
        "table": hex(table),
        "wrong": wrong,
    }


def inside(args: argparse.Namespace) -> int:
    import platform

    results: dict = {
        "machine": platform.machine(),
        "python": TARGET,
        "rate": args.rate,
        "seconds": args.seconds,
    }
    checks = {
        "pthread": check_pthread_tid,
        "holds": check_holds,
        # the same on Debian's debug build (python3.11-dbg's python3.11d), another build
        "holds-dbg": lambda tmp, a: check_holds(tmp, a, "/usr/bin/python3.11d"),
        "contend": check_contend,
        "native": check_native,
        "host": lambda tmp, a: check_loop("host", tmp, a),
        "device": lambda tmp, a: check_loop("device", tmp, a),
    }
    for shape in ("short", "reacquire", "preempted", "three"):
        checks[f"waits-{shape}"] = functools.partial(check_waits, shape)
    with tempfile.TemporaryDirectory(prefix="gilprof-arm64-") as tmp:
        for name in args.checks.split(","):
            started = time.monotonic()
            try:
                result = checks[name](Path(tmp), args)
            except Exception as exc:  # one check's failure is its result, not the run's
                result = {"wrong": [f"{type(exc).__name__}: {exc}"]}
            result["wall_s"] = round(time.monotonic() - started, 1)
            results[name] = result
            status = "ok" if not result["wrong"] else "FAILED " + "; ".join(result["wrong"])
            print(f"[arm64-check] {name}: {status} ({result['wall_s']} s)", flush=True)
            print(json.dumps({k: v for k, v in result.items() if k != "wrong"}), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    return (
        1
        if any(r["wrong"] for k, r in results.items() if isinstance(r, dict) and "wrong" in r)
        else 0
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=25, help="Hz (default 25: emulation)")
    parser.add_argument("--seconds", type=float, default=15.0, help="per attach")
    parser.add_argument("--checks", default="pthread,holds,holds-dbg,contend,native,host,device")
    parser.add_argument("--no-truth", dest="truth", action="store_false",
                        help="skip the uprobe truth (and the apt install it needs)")  # fmt: skip
    parser.add_argument("--json", help="host: write the guest's results here")
    parser.add_argument("--no-realtime", dest="extra", action="store_const", default=[],
                        const=["--no-realtime"], help="pass --no-realtime to the attaches")  # fmt: skip
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="/root/arm64-check.json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(args)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from arm64_install import host

    return host(args)


if __name__ == "__main__":
    raise SystemExit(main())
