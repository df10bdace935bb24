"""What serving metrics costs the watch: `gilprof watch --ranks local` on the bundled example
server (4 ranks, unfixed), without `--metrics`, and with it scraped every 15 s and every 1 s.

One job runs throughout; the watches take turns on it (off, 15 s, 1 s, repeated --rounds
times, so that drift in the job falls on every variant alike). Each phase starts a watch,
lets it settle --settle seconds, then reads its CPU (user + system, from /proc via psutil)
over --phase-seconds: the watch's own process (its recorder, reader and HTTP threads) and,
apart, its sampler children. Reported per variant: the median over rounds of the watch's
own CPU in percent of one core, and of watch + samplers; `added_pct_of_core` is a metrics
variant's median minus the off variant's.

    python benchmarks/metrics_cost.py --rounds 3 --phase-seconds 30
    python benchmarks/metrics_cost.py --quick --json
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from _common import (
    REPO_ROOT,
    BenchmarkError,
    child_env,
    ensure_gilprof_importable,
    machine_info,
    output_options,
    print_table,
    run_main,
    start_in_session,
    stop_session,
)

ensure_gilprof_importable()

SERVER = REPO_ROOT / "examples" / "disagg_gen" / "server.py"
VARIANTS = {"off": None, "scrape 15s": 15.0, "scrape 1s": 1.0}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(proc: psutil.Process) -> tuple[float, float]:
    """(own, children) CPU seconds of a running process."""
    own = proc.cpu_times()
    kids = 0.0
    for child in proc.children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        kids += t.user + t.system
    return own.user + own.system, kids


def _scraper(url: str, every: float, stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(every):
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            count[0] += 1
        except OSError:
            pass


def phase(options: argparse.Namespace, log: Path, out: Path, every: float | None) -> dict:
    port = _free_port()
    argv = [sys.executable, "-m", "gilprof", "watch", "--ranks", "local", "-q", "-o", str(out)]
    argv += ["--recipe", "disagg-gen-example", "--steps-log", str(log)]
    argv += ["--match", re.escape(str(log))]  # this benchmark's job only
    if every is not None:
        argv += ["--metrics", f"127.0.0.1:{port}"]
    watch = start_in_session(argv, env=child_env())
    stop, scrapes = threading.Event(), [0]
    try:
        time.sleep(options.settle)
        if watch.poll() is not None:
            raise BenchmarkError(f"the watch exited early ({watch.returncode})")
        proc = psutil.Process(watch.pid)
        if every is not None:
            url = f"http://127.0.0.1:{port}/metrics"
            threading.Thread(target=_scraper, args=(url, every, stop, scrapes), daemon=True).start()
        own0, kids0 = _cpu(proc)
        t0 = time.monotonic()
        time.sleep(options.phase_seconds)
        own1, kids1 = _cpu(proc)
        wall = time.monotonic() - t0
    finally:
        stop.set()
        stop_session(watch)
    return {
        "own_pct_of_core": 100 * (own1 - own0) / wall,
        "total_pct_of_core": 100 * (own1 - own0 + kids1 - kids0) / wall,
        "scrapes": scrapes[0],
        "seconds": round(wall, 1),
    }


def run(options: argparse.Namespace) -> dict[str, Any]:
    if options.quick:
        options.rounds, options.phase_seconds, options.settle = 1, 5.0, 4.0
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise BenchmarkError("mpiexec not found (pip install mpi4py mpich)")
    per_phase = options.settle + options.phase_seconds + 3
    seconds = per_phase * len(VARIANTS) * options.rounds + 10
    with tempfile.TemporaryDirectory(prefix="gilprof-metrics-cost-") as tmp:
        log = Path(tmp) / "server.log"
        argv = [mpiexec, "-n", "4", sys.executable, str(SERVER), "--impl", "before"]
        argv += ["--duration", str(seconds), "--warmup", "1", "--log-file", str(log)]
        job = start_in_session(argv, env=child_env())
        phases: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        try:
            time.sleep(5)
            for r in range(options.rounds):
                for name, every in VARIANTS.items():
                    out = Path(tmp) / f"caps-{r}-{name.replace(' ', '')}"
                    phases[name].append(phase(options, log, out, every))
        finally:
            stop_session(job)
    medians = {
        name: {
            "own_pct_of_core": statistics.median(p["own_pct_of_core"] for p in runs),
            "total_pct_of_core": statistics.median(p["total_pct_of_core"] for p in runs),
        }
        for name, runs in phases.items()
    }
    off = medians["off"]
    for name in VARIANTS:
        medians[name]["added_pct_of_core"] = (
            medians[name]["own_pct_of_core"] - off["own_pct_of_core"]
        )
    return {
        "benchmark": "metrics_cost",
        "machine": machine_info(),
        "rounds": options.rounds,
        "phase_seconds": options.phase_seconds,
        "phases": phases,
        "medians": medians,
    }


def print_report(result: dict[str, Any]) -> None:
    rows = [
        [
            name,
            f"{m['own_pct_of_core']:.2f}",
            f"{m['total_pct_of_core']:.2f}",
            f"{m['added_pct_of_core']:+.2f}",
            " ".join(f"{p['own_pct_of_core']:.2f}" for p in result["phases"][name]),
        ]
        for name, m in result["medians"].items()
    ]
    print_table(
        f"watch --ranks local on the example (4 ranks), {result['rounds']} rounds of "
        f"{result['phase_seconds']:g} s",
        ["variant", "watch CPU % core", "+ samplers", "added vs off", "per round"],
        rows,
        [f"load average {result['machine']['load_average']}"],
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--phase-seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=8.0)
    output_options(parser, quick="one short round of each variant")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run_main(None, parse_args, run, print_report))
