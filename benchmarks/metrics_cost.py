"""What serving metrics costs the watch, and what a bad scraper costs sampling:
`gilprof watch --ranks local` on the bundled example server (4 ranks, unfixed).

Paired design: in each round several watches record the same job *at the same time*, so
machine noise (other work on the host, the job's own drift) falls on all of them alike, and
the per-round difference between them cancels it. Which watch starts first rotates from
round to round. Each round starts fresh watches, lets them settle --settle seconds, then
reads their CPU (user + system from /proc via psutil: the watch's own process, its live
sampler children and the children it has reaped) over --phase-seconds.

- cost: three watches, `off` (no --metrics), `scrape 15s` and `scrape 1s` (--metrics, read
  by a scraper in this script every 15 s / every 1 s). Reported: the mean over rounds of
  (variant - off) CPU in percent of one core, with a 95% t interval.
- faults: two watches, both with --metrics: `baseline` (scraped only at the phase's start
  and end) and `faulted` (the same, plus --hung connections that connect and never send,
  as many that send a request and never read the answer, and bursts of --burst concurrent
  scrapes every 2 s). Reported: each watch's sampler ticks lost over the phase (the
  difference of gilprof_sampler_ticks_lost_total, summed over ranks) and windows sampled,
  and the per-round difference faulted - baseline with a 95% t interval.

    python benchmarks/metrics_cost.py --rounds 12 --phase-seconds 30
    python benchmarks/metrics_cost.py --quick --json
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from _common import (
    REPO_ROOT,
    BenchmarkError,
    child_env,
    ensure_gilprof_importable,
    load_average,
    machine_info,
    output_options,
    print_table,
    run_main,
    start_in_session,
    stop_session,
)

ensure_gilprof_importable()

SERVER = REPO_ROOT / "examples" / "disagg_gen" / "server.py"
COST = {"off": None, "scrape 15s": 15.0, "scrape 1s": 1.0}
FAULTS = ("baseline", "faulted")
# two-sided 95% Student t quantiles by degrees of freedom (1.96 beyond the table)
T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14]
T95 += [2.13, 2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05]


def interval(values: list[float]) -> dict[str, float]:
    """Mean and 95% t interval half-width of paired differences."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "half_width": math.inf, "n": len(values)}
    t = T95[len(values) - 2] if len(values) - 2 < len(T95) else 1.96
    half = t * statistics.stdev(values) / math.sqrt(len(values))
    return {"mean": mean, "half_width": half, "n": len(values)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of the watch: its own, its reaped children's and its live children's."""
    own = proc.cpu_times()
    total = own.user + own.system + own.children_user + own.children_system
    for child in proc.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            t = child.cpu_times()
            total += t.user + t.system
    return total


def _scrape(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode())


def _scraper(url: str, every: float, stop: threading.Event, count: list[int]) -> None:
    while not stop.wait(every):
        with contextlib.suppress(OSError):
            _scrape(url)
            count[0] += 1


def _counters(url: str) -> dict[str, float]:
    """Sampler health summed over the exposition's ranks."""
    from prometheus_client.parser import text_string_to_metric_families

    sums = {"ticks": 0.0, "lost": 0.0, "windows": 0.0}
    names = {
        "gilprof_sampler_ticks_total": "ticks",
        "gilprof_sampler_ticks_lost_total": "lost",
        "gilprof_sampler_windows_total": "windows",
    }
    for family in text_string_to_metric_families(_scrape(url)):
        for sample in family.samples:
            if sample.name in names:
                sums[names[sample.name]] += sample.value
    return sums


class Watch:
    def __init__(self, log: Path, out: Path, metrics: bool) -> None:
        self.port = _free_port() if metrics else None
        argv = [sys.executable, "-m", "gilprof", "watch", "--ranks", "local", "-q"]
        argv += ["-o", str(out), "--recipe", "disagg-gen-example", "--steps-log", str(log)]
        argv += ["--match", re.escape(str(log))]  # this benchmark's job only
        if self.port is not None:
            argv += ["--metrics", f"127.0.0.1:{self.port}"]
        self.proc = start_in_session(argv, env=child_env())
        self.cpu0 = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def check(self) -> psutil.Process:
        if self.proc.poll() is not None:
            raise BenchmarkError(f"a watch exited early ({self.proc.returncode})")
        return psutil.Process(self.proc.pid)


def _hang(port: int, count: int) -> list[socket.socket]:
    """`count` connections that never send, and `count` that ask and never read."""
    held = []
    for i in range(2 * count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # the answer backs up
        s.connect(("127.0.0.1", port))
        if i % 2:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        held.append(s)
    return held


def _bursts(url: str, size: int, stop: threading.Event, tally: dict[str, int]) -> None:
    def one() -> None:
        try:
            body = _scrape(url)
            tally["ok" if "gilprof_rank_up" in body else "bad"] += 1
        except OSError:
            tally["failed"] += 1

    while not stop.wait(2.0):
        threads = [threading.Thread(target=one, daemon=True) for _ in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(40)


def round_of(
    options: argparse.Namespace,
    log: Path,
    tmp: Path,
    r: int,
    variants: list[str],
    metrics: Callable[[str], bool],
    during: Callable[[dict[str, Watch], threading.Event], dict[str, Any]],
) -> dict[str, Any]:
    """Start the variants' watches (rotated order), settle, measure one phase together."""
    order = variants[r % len(variants) :] + variants[: r % len(variants)]
    watches: dict[str, Watch] = {}
    stop = threading.Event()
    try:
        for name in order:
            out = tmp / f"caps-{r}-{name.replace(' ', '')}"
            watches[name] = Watch(log, out, metrics(name))
        time.sleep(options.settle)
        procs = {name: w.check() for name, w in watches.items()}
        for name, w in watches.items():
            w.cpu0 = _cpu(procs[name])
        t0 = time.monotonic()
        extra = during(watches, stop)
        cpu = {name: _cpu(procs[name]) - w.cpu0 for name, w in watches.items()}
        wall = time.monotonic() - t0
        extra.update(extra.pop("after", lambda: {})())
    finally:
        stop.set()
        for w in watches.values():
            stop_session(w.proc)
    pct = {name: 100 * cpu[name] / wall for name in variants}
    return {"order": order, "seconds": round(wall, 1), "cpu_pct_of_core": pct, **extra}


def cost_round(options: argparse.Namespace, log: Path, tmp: Path, r: int) -> dict[str, Any]:
    def during(watches: dict[str, Watch], stop: threading.Event) -> dict[str, Any]:
        counts = {name: [0] for name, every in COST.items() if every is not None}
        for name, every in COST.items():
            if every is not None:
                args = (watches[name].url, every, stop, counts[name])
                threading.Thread(target=_scraper, args=args, daemon=True).start()
        time.sleep(options.phase_seconds)
        return {"scrapes": {name: c[0] for name, c in counts.items()}}

    return round_of(options, log, tmp, r, list(COST), lambda n: COST[n] is not None, during)


def faults_round(options: argparse.Namespace, log: Path, tmp: Path, r: int) -> dict[str, Any]:
    def during(watches: dict[str, Watch], stop: threading.Event) -> dict[str, Any]:
        start = {name: _counters(w.url) for name, w in watches.items()}
        faulted = watches["faulted"]
        assert faulted.port is not None
        held = _hang(faulted.port, options.hung)
        tally = {"ok": 0, "bad": 0, "failed": 0}
        args = (faulted.url, options.burst, stop, tally)
        bursts = threading.Thread(target=_bursts, args=args, daemon=True)
        bursts.start()
        time.sleep(options.phase_seconds)

        def after() -> dict[str, Any]:
            stop.set()
            bursts.join(60)
            end = {name: _counters(w.url) for name, w in watches.items()}
            for s in held:
                s.close()
            health = {
                name: {key: end[name][key] - start[name][key] for key in end[name]}
                for name in watches
            }
            return {"health": health, "burst_scrapes": tally}

        return {"after": after}

    return round_of(options, log, tmp, r, list(FAULTS), lambda _n: True, during)


def _diffs(rounds: list[dict], pick: Callable[[dict, str], float], a: str, b: str) -> dict:
    return interval([pick(x, a) - pick(x, b) for x in rounds])


def run(options: argparse.Namespace) -> dict[str, Any]:
    if options.quick:
        options.rounds, options.phase_seconds, options.settle = 2, 8.0, 6.0
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        raise BenchmarkError("mpiexec not found (pip install mpi4py mpich)")
    parts = ["cost", "faults"] if options.part == "both" else [options.part]
    per_round = options.settle + options.phase_seconds + 8
    seconds = per_round * options.rounds * len(parts) + 20
    result: dict[str, Any] = {"benchmark": "metrics_cost", "machine": machine_info()}
    result.update(rounds=options.rounds, phase_seconds=options.phase_seconds)
    result["load_average"] = {"start": load_average()}
    with tempfile.TemporaryDirectory(prefix="gilprof-metrics-cost-") as tmp:
        log = Path(tmp) / "server.log"
        argv = [mpiexec, "-n", "4", sys.executable, str(SERVER), "--impl", "before"]
        argv += ["--duration", str(seconds), "--warmup", "1", "--log-file", str(log)]
        job = start_in_session(argv, env=child_env())
        try:
            time.sleep(5)
            if "cost" in parts:
                cost = [cost_round(options, log, Path(tmp), r) for r in range(options.rounds)]
                pct = lambda x, n: x["cpu_pct_of_core"][n]  # noqa: E731
                result["cost"] = {
                    "rounds": cost,
                    "cpu_pct_of_core": {n: interval([pct(x, n) for x in cost]) for n in COST},
                    "added_pct_of_core": {
                        n: _diffs(cost, pct, n, "off") for n in COST if n != "off"
                    },
                }
            if "faults" in parts:
                bad = [faults_round(options, log, Path(tmp), r) for r in range(options.rounds)]
                h = lambda key: lambda x, n: x["health"][n][key]  # noqa: E731
                result["faults"] = {
                    "rounds": bad,
                    "hung_connections": 2 * options.hung,
                    "burst": options.burst,
                    "lost": {n: interval([h("lost")(x, n) for x in bad]) for n in FAULTS},
                    "expected": {
                        n: interval([h("ticks")(x, n) + h("lost")(x, n) for x in bad])
                        for n in FAULTS
                    },
                    "added_lost": _diffs(bad, h("lost"), "faulted", "baseline"),
                    "added_windows": _diffs(bad, h("windows"), "faulted", "baseline"),
                    "added_cpu_pct_of_core": _diffs(
                        bad, lambda x, n: x["cpu_pct_of_core"][n], "faulted", "baseline"
                    ),
                }
        finally:
            stop_session(job)
    result["load_average"]["end"] = load_average()
    return result


def _ci(e: dict[str, float], fmt: str = "{:+.2f}") -> str:
    return f"{fmt.format(e['mean'])} ± {e['half_width']:.2f}"


def print_report(result: dict[str, Any]) -> None:
    load = f"load average {result['load_average']['start']} -> {result['load_average']['end']}"
    head = f"{result['rounds']} paired rounds of {result['phase_seconds']:g} s"
    if "cost" in result:
        c = result["cost"]
        rows = [
            [
                name,
                _ci(c["cpu_pct_of_core"][name], "{:.2f}"),
                "-" if name == "off" else _ci(c["added_pct_of_core"][name]),
                " ".join(f"{x['cpu_pct_of_core'][name]:.1f}" for x in c["rounds"]),
            ]
            for name in COST
        ]
        print_table(
            f"cost: watch --ranks local on the example (4 ranks), samplers included, {head}",
            ["variant", "CPU % of a core", "added vs off (95% CI)", "per round"],
            rows,
            [load, f"{result['machine']['cpus']} CPUs"],
        )
    if "faults" in result:
        f = result["faults"]
        rows = [
            [
                name,
                _ci(f["lost"][name], "{:.1f}"),
                _ci(f["expected"][name], "{:.0f}"),
                " ".join(f"{x['health'][name]['lost']:.0f}" for x in f["rounds"]),
            ]
            for name in FAULTS
        ]
        rows.append(["faulted - baseline", _ci(f["added_lost"], "{:+.1f}"), "", ""])
        tallies = [x["burst_scrapes"] for x in f["rounds"]]
        print_table(
            f"faults: {f['hung_connections']} hung connections and bursts of {f['burst']} "
            f"concurrent scrapes every 2 s, {head}",
            ["watch", "ticks lost", "ticks expected", "lost per round"],
            rows,
            [
                f"windows faulted - baseline {_ci(f['added_windows'], '{:+.1f}')}; "
                f"CPU faulted - baseline {_ci(f['added_cpu_pct_of_core'])} % of a core",
                "burst scrapes ok/bad/failed: "
                + " ".join(f"{t['ok']}/{t['bad']}/{t['failed']}" for t in tallies),
                load,
            ],
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["cost", "faults", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--phase-seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--hung", type=int, default=3, help="hung connections of each kind")
    parser.add_argument("--burst", type=int, default=50, help="concurrent scrapes per burst")
    output_options(parser, quick="two short rounds of each part")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(run_main(None, parse_args, run, print_report))
