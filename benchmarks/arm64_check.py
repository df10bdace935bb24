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

from arm64_guest import (
    ROOT,
    TARGET,
    _attach_with_truth,
    _gilprof,
    _leaf_share,
    _sample_workload,
    _spawn,
    _states_mode,
    _threads,
)

WORKLOADS = ROOT / "tests" / "integration" / "workloads"
CONTEND = str(WORKLOADS / "sleep_and_spin.py")
NATIVE = str(WORKLOADS / "zlib_beside_spinner.py")


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
    if truth.get("_events") == 0:  # seen twice emulated: bpftrace attached, recorded nothing
        return {"threads": threads, "wrong": [*wrong, "the trace recorded no GIL event: no truth"]}
    ticks = args.rate * args.seconds
    errors = {}
    within: list[str] = []
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
            # the bar is the exact truth; the runnable part says how much of a low reading
            # is the band the x86_64 tests allow (a waiter off every CPU reads native)
            band = exact.get("wait_runnable")
            if band is not None:
                inside = p - band - tolerance <= threads[name]["wait"] <= p + tolerance
                within.append(
                    f"{name}: runnable {band:.3f} of it ({'inside' if inside else 'outside'} the band)"
                )
    return {"threads": threads, "truth": truth, "errors": errors, "wrong": wrong, "band": within}


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
