"""The native locator and the verdict on a real CUDA GPU: one prepared script for a GPU session.

    python benchmarks/gpu_check.py                 # ~4 min: 6 loops x (warm-up + 8 s attach)
    python benchmarks/gpu_check.py --seconds 5 --json

Each loop does --host-ms of Python per step and ~--device-ms of bf16 matmuls, then waits for
the device one way: `torch.cuda.synchronize()`, `Event.synchronize()`, `.item()`, `.tolist()`
(the driver spin-waits: CUDA's default context), `.item()` with the context's blocking-sync
flag (the thread sleeps in a system call), and a host-shaped mirror (the lengths swapped).
For each it attaches `gilprof attach --pid P` (the default mode), reports with the loop's own
step log, and prints the verdict, the loop's native time by class, the leaf libraries and
NVML's busy share, against what each shape must read: device-bound for the first five,
host-bound for the mirror. Exit status 1 when any verdict is wrong.

Needs torch with CUDA and nvidia-ml-py in the interpreter that runs it (the loops run in
it too), py-spy, and gilprof importable (`python3 -m gilprof` from the source tree works).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOP = r"""
import os, sys, time
blocking = sys.argv[1] == "item-blocking"
if blocking:  # before torch creates the primary context
    from cuda.bindings import driver
    driver.cuInit(0)
    _, dev = driver.cuDeviceGet(0)
    driver.cuDevicePrimaryCtxSetFlags(dev, driver.CUctx_flags.CU_CTX_SCHED_BLOCKING_SYNC)
import torch
wait, host_ms, device_ms, seconds, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
t = time.perf_counter(); n = 0
while time.perf_counter() - t < 0.5:
    out = a @ a; torch.cuda.synchronize(); n += 1
per_mm = 0.5 / n
mms = max(1, round(device_ms / 1e3 / per_mm))
def host_work(s):
    end = time.perf_counter() + s; x = 0
    while time.perf_counter() < end:
        for i in range(200): x += i * i
def device_work():
    out = a
    for _ in range(mms): out = a @ a
    return out
print(f"pid={os.getpid()}", file=sys.stderr, flush=True)
deadline = time.perf_counter() + seconds; prev = time.perf_counter(); i = 0
with open(log, "w") as f:
    while time.perf_counter() < deadline:
        host_work(host_ms / 1e3)
        out = device_work()
        if wait == "synchronize": torch.cuda.synchronize()
        elif wait == "event":
            e = torch.cuda.Event(); e.record(); e.synchronize()
        elif wait in ("item", "item-blocking"): out.sum().item()
        elif wait == "tolist": out[:64, 0].tolist()
        now = time.perf_counter()
        f.write(f"iter = {i}, global_rank = 0, rank = 0, host_step_time = {(now - prev) * 1e3:.2f}ms, "
                f"prev_device_step_time = {device_ms:.2f}ms, num_scheduled_requests: 1, states = {{}}\n")
        f.flush(); prev = now; i += 1
"""

CASES = [  # (name, wait, host ms, device ms, expected bound)
    ("synchronize", "synchronize", 3, 30, "device"),
    ("event", "event", 3, 30, "device"),
    ("item", "item", 3, 30, "device"),
    ("tolist", "tolist", 3, 30, "device"),
    ("item-blocking", "item-blocking", 3, 30, "device"),
    ("host-mirror", "item", 30, 3, "host"),
]


def run_case(name: str, wait: str, host: float, device: float, seconds: float, tmp: Path) -> dict:
    log = tmp / f"{name}.log"
    profile = tmp / f"{name}.json"
    script = tmp / "loop.py"
    script.write_text(LOOP)
    err = tmp / f"{name}.err"
    with open(err, "wb") as handle:
        loop = subprocess.Popen(
            [
                sys.executable,
                str(script),
                wait,
                str(host),
                str(device),
                str(seconds + 15),
                str(log),
            ],
            stderr=handle,
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not re.search(r"pid=\d+", err.read_text()):
            time.sleep(0.2)
        match = re.search(r"pid=(\d+)", err.read_text())
        if match is None:
            return {"case": name, "error": err.read_text()[-500:]}
        time.sleep(3)  # warm-up: the matmul calibration and the first steps
        gilprof = [sys.executable, "-m", "gilprof"]
        subprocess.run(
            [
                *gilprof,
                "attach",
                "--pid",
                match.group(1),
                "-d",
                str(seconds),
                "-q",
                "-o",
                str(profile),
            ],
            check=True,
            timeout=seconds + 120,
        )
        report = subprocess.run(
            [*gilprof, "report", str(profile), "--steps", str(log), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        verdict = json.loads(report.stdout)["verdict"]
    finally:
        loop.kill()
        loop.wait()
    return {
        "case": name,
        "bound": verdict["bound"],
        "native_by_class": verdict.get("native_by_class"),
        "gpu": verdict.get("gpu"),
        "reason": verdict["reason"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    results, wrong = [], 0
    with tempfile.TemporaryDirectory(prefix="gilprof-gpu-") as tmp:
        for name, wait, host, device, expected in CASES:
            result = run_case(name, wait, host, device, args.seconds, Path(tmp))
            result["expected"] = expected
            result["right"] = result.get("bound") == expected
            wrong += not result["right"]
            results.append(result)
            if not args.json:
                print(
                    f"{name:14} {result.get('bound', 'error'):12} (want {expected}) "
                    f"{result.get('native_by_class')} | {result.get('gpu')}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(results, indent=2))
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
