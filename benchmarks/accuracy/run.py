"""Accuracy of gilprof's held and wait shares against ground truth measured inside the target.

    python benchmarks/accuracy/run.py              # 100 Hz x 20 s per workload + sweeps, ~10 min
    python benchmarks/accuracy/run.py --quick      # 3 s runs, ~3 min
    python benchmarks/accuracy/run.py --quick --no-sweeps --scenario both   # quiet + loaded
    python benchmarks/accuracy/run.py --hogs 2 --only burst --only planted  # loaded only
    python benchmarks/accuracy/run.py --json       # the same, as JSON
    python benchmarks/accuracy/run.py --python /root/.pyenv/versions/3.13.0/bin/python3

Each measurement starts one target (`workloads.py NAME`), lets it run unsampled, runs
`python -m gilprof attach --pid P -d S -r R --mode gil|contention -q -o F`, lets the target
run unsampled again, then stops it and reads what it recorded. The loaded scenario runs
`--hogs N` CPU-bound processes (default: one per core), each in a session of its own like
another user's job, beside the target for the whole measurement. Truth is computed over the
lifetimes of the `py-spy record` processes (polled every 20 ms), and compared with
`python -m gilprof report F --format json [--contention]`. Truth is a band [lo, hi]: GIL
hand-offs are counted as held by nobody (lo) or by the threads on either side (hi); the error
is the distance from gilprof's figure to the band (0 inside it). The target's speed while
sampled over its speed unsampled (iterations per second of its compute loops) is the
sampler's pause overhead. The 1-minute load average is printed with every result: above
the core count, the machine is oversubscribed and truths based on CPU time are wrong (see
workloads.py), which is why the truths here are built from timestamps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import _common  # noqa: E402
from _common import BenchmarkError  # noqa: E402

_common.ensure_gilprof_importable()

import psutil  # noqa: E402
import workloads  # noqa: E402

BASELINE_S = 2.0  # unsampled seconds before and after sampling, for the pause overhead
POLL_S = 0.02
HELD_TARGET, WAIT_TARGET = 0.02, 0.05
# The targets, points of wall time, per (mode, metric).
TARGETS = {
    ("gil", "held"): 0.02,
    ("gil", "function"): 0.02,
    ("gil", "utilization"): 0.03,
    ("contention", "held"): 0.02,
    ("contention", "wait"): 0.05,
    ("contention", "native"): 0.05,
    ("contention", "blame"): 0.05,
}
HOG = "while True: pass"
MAIN_RATE = 100
SWEPT = (("spin2", "contention"), ("planted", "gil"))


@dataclass(frozen=True)
class Config:
    workload: str
    mode: str  # gil | contention
    rate: int
    seconds: float
    hogs: int = 0  # CPU-bound processes beside the target (the loaded scenario)

    @property
    def scenario(self) -> str:
        return f"loaded ({self.hogs} hogs)" if self.hogs else "quiet"


@dataclass
class Row:
    subject: str  # thread name, function name, or "waiter <- holder"
    metric: str  # held | wait | idle | native | unclassified | function | utilization | blame
    truth_lo: float
    truth_hi: float
    measured: float
    se: float  # binomial sampling error of the measured share
    cpu_truth: float | None = None  # thread CPU time / wall: right only with a free core

    @property
    def error(self) -> float:
        return max(0.0, self.truth_lo - self.measured, self.measured - self.truth_hi)


@dataclass
class Outcome:
    config: Config
    python: str
    load_before: float
    load_after: float
    sampled_s: float
    speed: float | None  # target speed sampled / unsampled
    rows: list[Row] = field(default_factory=list)
    top_holder: dict[str, str] = field(
        default_factory=dict
    )  # waiter -> holder of its top blame row


class SamplerWatch(threading.Thread):
    """Lifetimes of the `py-spy record` processes started by one gilprof process."""

    def __init__(self, pid: int, nice: int | None) -> None:
        super().__init__(name="sampler-watch", daemon=True)
        self.pid = pid
        self.nice = nice
        self.windows: dict[int, list[float]] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            now = time.monotonic()
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                return
            for child in children:
                try:
                    if child.pid not in self.windows and "record" not in child.cmdline():
                        continue
                except psutil.Error:
                    continue
                if child.pid not in self.windows and self.nice is not None:
                    boost(child.pid, self.nice)  # py-spy runs in a session of its own
                self.windows.setdefault(child.pid, [now, now])[1] = now
            self.done.wait(POLL_S)

    def intervals(self) -> list[tuple[float, float]]:
        return sorted((a, b) for a, b in self.windows.values() if b > a)


def _gilprof(*args: str) -> list[str]:
    return [sys.executable, "-m", "gilprof", *args]


def _read_ready(proc: subprocess.Popen[bytes], timeout: float) -> None:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("ready"):
        raise BenchmarkError(f"target did not start: {line.strip() or 'no output'}")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def boost(pid: int, nice: int) -> bool:
    """Raise the priority of the target's session (autogroup) over every other session.

    Linux schedules sessions fairly against each other (autogroup), so a plain `nice` does
    nothing against other users' jobs; the autogroup's own nice does. Root only.
    """
    try:
        with open(f"/proc/{pid}/autogroup", "w") as handle:
            handle.write(str(nice))
        return True
    except OSError:
        return False


@dataclass
class Sampled:
    report: dict[str, Any]  # `gilprof report --format json`
    record: dict[str, Any]  # what the target recorded
    sampled: list[tuple[float, float]]  # lifetimes of the py-spy record processes
    unsampled: list[tuple[float, float]]  # target running, no gilprof process
    load_before: float
    load_after: float


def sample(
    config: Config, python: str, workdir: Path, nice: int | None, baseline_s: float
) -> Sampled:
    """Run one target and one `gilprof attach`, then `gilprof report` on the profile."""
    with hogs(config.hogs):
        return _sample(config, python, workdir, nice, baseline_s)


@contextlib.contextmanager
def hogs(count: int) -> Iterator[None]:
    """`count` CPU-bound processes, each in a session of its own (another user's job: Linux
    autogroups share the CPU between sessions), for the duration of the block."""
    started = [
        subprocess.Popen(
            [sys.executable, "-c", HOG], start_new_session=True, stdin=subprocess.DEVNULL
        )
        for _ in range(count)
    ]
    try:
        if started:
            time.sleep(0.5)  # let the scheduler see them busy
        yield
    finally:
        for proc in started:
            _kill(proc)


def _sample(
    config: Config, python: str, workdir: Path, nice: int | None, baseline_s: float
) -> Sampled:
    target = subprocess.Popen(
        [
            python,
            str(HERE / "workloads.py"),
            config.workload,
            "--max-seconds",
            str(config.seconds + 300),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    attach: subprocess.Popen[bytes] | None = None
    try:
        if nice is not None and not boost(target.pid, nice):
            raise BenchmarkError("--boost needs root and kernel.sched_autogroup_enabled=1")
        _read_ready(target, 30)
        ready = time.monotonic()
        time.sleep(baseline_s)
        load_before = os.getloadavg()[0]
        output = workdir / (
            f"{config.workload}-{config.mode}-{config.rate}-{config.seconds:g}-{config.hogs}.json"
        )
        launched = time.monotonic()
        attach = subprocess.Popen(
            _gilprof(
                "attach",
                "--pid",
                str(target.pid),
                "-d",
                f"{config.seconds:g}",
                "-r",
                str(config.rate),
                "--mode",
                config.mode,
                "-q",
                "-o",
                str(output),
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=_common.child_env(),
        )
        watch = SamplerWatch(attach.pid, nice)
        watch.start()
        _, err = attach.communicate(timeout=config.seconds + 120)
        watch.done.set()
        watch.join()
        finished = time.monotonic()
        load_after = os.getloadavg()[0]
        if attach.returncode != 0:
            raise BenchmarkError(f"gilprof attach failed: {err.decode().strip()[-300:]}")
        time.sleep(baseline_s)
        stopped = time.monotonic()
        out, err = target.communicate(timeout=60)  # closes stdin: the target stops and reports
        record = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        for proc in (attach, target):
            if proc is not None:
                _kill(proc)
    report_args = ["report", str(output), "--format", "json", "--no-default-watch"]
    for function in workloads.WATCHED:
        report_args += ["--watch", function]
    if config.mode == "contention":
        report_args.append("--contention")
    report = subprocess.run(
        _gilprof(*report_args), capture_output=True, env=_common.child_env(), timeout=120
    )
    if report.returncode != 0:
        raise BenchmarkError(f"gilprof report failed: {report.stderr.decode().strip()[-300:]}")
    sampled = watch.intervals()
    if not sampled:
        raise BenchmarkError("no py-spy record process was seen")
    unsampled = [(ready + 0.2, launched), (finished + 0.1, stopped)]
    return Sampled(json.loads(report.stdout), record, sampled, unsampled, load_before, load_after)


def _se(share: float, samples: float) -> float:
    return math.sqrt(max(share * (1 - share), 0.0) / samples) if samples > 0 else 0.0


def compare(
    config: Config, report: dict[str, Any], truth: workloads.Truth, samples: float
) -> tuple[list[Row], dict[str, str]]:
    threads = {t["name"]: t for t in report["gil"]["threads"]}
    contention = config.mode == "contention"
    rows: list[Row] = []

    def add(
        subject: str, metric: str, lo: float, hi: float, measured: float, cpu: float | None = None
    ) -> None:
        rows.append(Row(subject, metric, lo, hi, measured, _se(measured, samples), cpu))

    for name, th in truth.threads.items():
        seen = threads.get(name, {})
        band = th.handoff_before + th.handoff_after
        add(name, "held", th.held, th.held + band, seen.get("held_share") or 0.0, th.cpu)
        if not contention:
            continue
        if th.wait is not None:
            spinner = th.idle == 0 and th.native == 0
            add(
                name,
                "wait",
                th.wait - (band if spinner else th.handoff_before),
                th.wait,
                seen.get("wait_share") or 0.0,
            )
        if th.idle > 0:
            add(name, "idle", th.idle, th.idle, seen.get("idle_share") or 0.0)
        if th.native > 0:
            add(name, "native", th.native, th.native, seen.get("native_share") or 0.0)
        if seen.get("unclassified_share"):
            add(name, "unclassified", 0.0, 0.0, seen["unclassified_share"])
    watch = {w["function"]: w for w in report.get("watch", [])}
    for function, share in truth.functions.items():
        add(function, "function", share, share, watch.get(function, {}).get("total_share", 0.0))
    add(
        "(any thread)",
        "utilization",
        truth.utilization,
        truth.utilization + truth.handoff,
        report["gil"].get("utilization") or 0.0,
    )
    top: dict[str, str] = {}
    if contention:
        blamed: dict[tuple[str, str], float] = {}
        for b in report.get("blame", []):
            key = (b["waiter"], b["holder"])
            blamed[key] = blamed.get(key, 0.0) + b["share"]
        for (waiter, holder), _ in truth.blame.items():
            th = truth.threads[holder]
            add(
                f"{waiter} <- {holder}",
                "blame",
                th.held,
                th.held + th.handoff_before + th.handoff_after,
                blamed.get((waiter, holder), 0.0),
            )
        for waiter in {w for w, _ in truth.blame}:
            mine = sorted(((s, h) for (w, h), s in blamed.items() if w == waiter), reverse=True)
            top[waiter] = mine[0][1] if mine else "-"
    return rows, top


def measure(
    config: Config,
    python: str,
    workdir: Path,
    nice: int | None = None,
    baseline_s: float = BASELINE_S,
) -> Outcome:
    """One target, one `gilprof attach`; gilprof's shares next to the truth.

    `nice`: boost target and sampler (see `boost`); `baseline_s`: unsampled seconds before
    and after sampling, for the speed ratio (None when too short to measure).
    """
    got = sample(config, python, workdir, nice, baseline_s)
    truth = workloads.truth_over(got.record, got.sampled)
    seconds = float(got.report["sampling"].get("duration_s") or 0.0)
    rows, top = compare(config, got.report, truth, seconds * config.rate)
    speed = None
    if all(not t["naps"] and not t["calls"] for t in got.record["threads"]):
        # Only free-running loops show the pauses as lost iterations; timed loops do not.
        inside = workloads.iteration_rate(got.record, got.sampled)
        outside = workloads.iteration_rate(got.record, got.unsampled)
        speed = inside / outside if inside and outside else None
    return Outcome(
        config, got.record["python"], got.load_before, got.load_after, seconds, speed, rows, top
    )


# -- schedule and summaries -----------------------------------------------------------------


def schedule(
    quick: bool,
    only: list[str] | None = None,
    sweeps: bool = True,
    loads: tuple[int, ...] = (0,),
    modes: tuple[str, ...] = ("gil", "contention"),
    seconds: float | None = None,
) -> tuple[list[Config], list[Config], list[Config]]:
    """(main table, duration sweep, rate sweep); sweeps reuse main-table runs where they can.

    `loads`: the number of CPU hogs of each scenario (0: quiet); sweeps run quiet only.
    """
    seconds = seconds or (3.0 if quick else 20.0)
    names = only or list(workloads.WORKLOADS)
    main = [Config(w, m, MAIN_RATE, seconds, h) for h in loads for w in names for m in modes]
    swept = [(w, m) for w, m in SWEPT if w in names] if sweeps else []
    # Every duration gets the same total sampling time, spread over repeats.
    durations = [1.5] if quick else [5.0, 10.0]
    by_duration = [
        Config(w, m, MAIN_RATE, d)
        for w, m in swept
        for d in durations
        for _ in range(round(seconds / d))
    ]
    rates = [50, 200] if quick else [50, 200, 500]
    by_rate = [Config(w, m, r, seconds) for w, m in swept for r in rates]
    return main, by_duration, by_rate


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def sweep_rows(outcomes: list[Outcome], key: str) -> list[dict[str, Any]]:
    """Mean |error| per metric for each duration or rate, over subjects and repeats."""
    groups: dict[tuple[str, str, float], list[Outcome]] = {}
    for o in outcomes:
        if (o.config.workload, o.config.mode) in SWEPT:
            value = o.config.seconds if key == "seconds" else o.config.rate
            groups.setdefault((o.config.workload, o.config.mode, value), []).append(o)
    out = []
    for (workload, mode, value), group in sorted(groups.items()):
        errors: dict[str, list[float]] = {}
        for o in group:
            for r in o.rows:
                errors.setdefault(r.metric, []).append(r.error)
        speeds = [o.speed for o in group if o.speed is not None]
        out.append(
            {
                "workload": workload,
                "mode": mode,
                key: value,
                "runs": len(group),
                "mean_error": {m: _mean(v) for m, v in errors.items()},
                "max_error": {m: max(v) for m, v in errors.items()},
                "speed": _mean(speeds),
                "load": _mean([(o.load_before + o.load_after) / 2 for o in group]),
            }
        )
    return out


def summary(main: list[Outcome]) -> dict[str, Any]:
    """Per scenario, mode and metric: absolute errors, the truth band, and the target met or not.

    A row meets its target when its distance to the truth band is within it. "met" is "yes"
    when every row does; "NO" when one does not; "unclear" when every row met it but only
    because the truth band is wider than the target (a loaded machine preempts GIL holders
    around hand-offs, and a band that wide cannot show a miss).
    """
    out: dict[str, Any] = {}
    scenarios = sorted({o.config.scenario for o in main}, key=lambda x: (x != "quiet", x))
    for scenario in scenarios:
        for mode in ("gil", "contention"):
            for metric in (
                "held",
                "wait",
                "function",
                "idle",
                "native",
                "blame",
                "utilization",
                "unclassified",
            ):
                rows = [
                    r
                    for o in main
                    if o.config.mode == mode and o.config.scenario == scenario
                    for r in o.rows
                    if r.metric == metric
                ]
                if not rows:
                    continue
                errors = [r.error for r in rows]
                bands = [r.truth_hi - r.truth_lo for r in rows]
                target = TARGETS.get((mode, metric))
                met: str | None = None
                if target is not None:
                    if max(errors) > target:
                        met = "NO"
                    else:
                        met = "unclear" if any(b > target for b in bands) else "yes"
                load = [
                    (o.load_before + o.load_after) / 2
                    for o in main
                    if o.config.mode == mode and o.config.scenario == scenario
                ]
                out[f"{scenario}/{mode}/{metric}"] = {
                    "scenario": scenario,
                    "mode": mode,
                    "metric": metric,
                    "max": max(errors),
                    "mean": statistics.fmean(errors),
                    "n": len(errors),
                    "band": statistics.fmean(bands),
                    "max_band": max(bands),
                    "target": target,
                    "met": met,
                    "load": statistics.fmean(load) if load else None,
                    "worst": max(rows, key=lambda r: r.error).subject,
                }
    return out


# -- output -----------------------------------------------------------------------------------


def pts(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def print_report(result: dict[str, Any]) -> None:
    m = result["machine"]
    print(
        f"gilprof accuracy: {m['cpus']} cores, runner Python {m['python']}, target Python "
        f"{result['target_python']}; load average at start {m['load_average']}"
    )
    rows = []
    for o in result["main"]:
        c = o["config"]
        for r in o["rows"]:
            if r["metric"] in ("utilization", "blame"):
                continue
            band = (
                pts(r["truth_lo"])
                if abs(r["truth_hi"] - r["truth_lo"]) < 5e-4
                else f"{pts(r['truth_lo'])}-{pts(r['truth_hi'])}"
            )
            rows.append(
                [
                    _scenario(c),
                    c["workload"],
                    c["mode"],
                    r["subject"],
                    r["metric"],
                    band,
                    pts(r["measured"]),
                    pts(r["error"]),
                    pts(r["se"]),
                    f"{o['load_before']:.1f}/{o['load_after']:.1f}",
                ]
            )
    first = result["main"][0]["config"] if result["main"] else {"rate": MAIN_RATE, "seconds": 0}
    _common.print_table(
        f"Shares (points of wall time) at {first['rate']} Hz over {first['seconds']:g} s",
        [
            "scenario",
            "workload",
            "mode",
            "subject",
            "metric",
            "truth",
            "gilprof",
            "|err|",
            "SE",
            "load 1m",
        ],
        rows,
        notes=[
            "truth: from timestamps inside the target, a band lo-hi where GIL hand-offs could "
            "belong to either side; |err|: distance from gilprof to the band; SE: binomial "
            "sampling error; load 1m: before/after the run (the machine is shared)"
        ],
    )
    blame_rows = []
    for o in result["main"]:
        for r in o["rows"]:
            if r["metric"] == "blame":
                waiter = r["subject"].split(" <- ")[0]
                blame_rows.append(
                    [
                        o["config"]["workload"],
                        r["subject"],
                        o["top_holder"].get(waiter, "-"),
                        f"{pts(r['truth_lo'])}-{pts(r['truth_hi'])}",
                        pts(r["measured"]),
                        pts(r["error"]),
                    ]
                )
    _common.print_table(
        "Blame matrix (contention mode): while waiter waits, holder holds",
        ["workload", "waiter <- holder", "top holder named", "truth", "gilprof", "|err|"],
        blame_rows,
    )
    summary_rows = [
        [
            v["scenario"],
            v["mode"],
            v["metric"],
            pts(v["max"]),
            v["worst"],
            pts(v["mean"]),
            str(v["n"]),
            pts(v["band"]),
            pts(v["target"]),
            v["met"] or "-",
            "-" if v["load"] is None else f"{v['load']:.1f}",
        ]
        for v in result["summary"].values()
    ]
    _common.print_table(
        "Absolute error by scenario/mode/metric (points of wall time)",
        [
            "scenario",
            "mode",
            "metric",
            "max",
            "worst subject",
            "mean",
            "n",
            "mean band",
            "target",
            "met",
            "load",
        ],
        summary_rows,
        notes=[
            "met: yes = every row within the target of its truth band; NO = "
            "one is not; unclear = all within, but some truth band is wider "
            "than the target (hand-offs under load), so a miss could hide"
        ],
    )
    for key, title in (("seconds", "duration (s)"), ("rate", "rate (Hz)")):
        sweep = [
            [
                s["workload"],
                s["mode"],
                f"{s[key]:g}",
                str(s["runs"]),
                pts(s["mean_error"].get("held")),
                pts(s["mean_error"].get("wait")),
                pts(s["mean_error"].get("function")),
                pts(s["max_error"].get("held")),
                "-" if s["speed"] is None else f"{s['speed']:.2f}",
                f"{s['load']:.1f}",
            ]
            for s in result["sweeps"][key]
        ]
        _common.print_table(
            f"Error by {title}: mean |err| over threads/functions and runs",
            [
                "workload",
                "mode",
                title,
                "runs",
                "held",
                "wait",
                "function",
                "max held",
                "speed",
                "load",
            ],
            sweep,
            notes=[
                "speed: target iterations/s while sampled over unsampled (1.00 = no pause overhead)"
            ],
        )


def _scenario(config: dict[str, Any]) -> str:
    return f"loaded ({config['hogs']} hogs)" if config.get("hogs") else "quiet"


def run(options: argparse.Namespace) -> dict[str, Any]:
    hog_count = options.hogs if options.hogs is not None else os.cpu_count() or 2
    loads = {"quiet": (0,), "loaded": (hog_count,), "both": (0, hog_count)}[options.scenario]
    if options.hogs is not None and options.scenario == "quiet":
        loads = (options.hogs,)
    modes = tuple(options.mode) if options.mode else ("gil", "contention")
    main, by_duration, by_rate = schedule(
        options.quick, options.only, not options.no_sweeps, loads, modes, options.seconds
    )
    outcomes: dict[Config, list[Outcome]] = {}
    machine = _common.machine_info()
    with tempfile.TemporaryDirectory(prefix="gilprof-accuracy-") as tmp:
        todo = [*main, *by_duration, *[c for c in by_rate if c not in main]]
        for index, config in enumerate(todo, 1):
            if not options.json:
                print(
                    f"[{index}/{len(todo)}] {config.scenario} {config.workload} {config.mode} "
                    f"{config.rate} Hz {config.seconds:g} s (load {os.getloadavg()[0]:.1f})",
                    file=sys.stderr,
                )
            outcomes.setdefault(config, []).append(
                measure(config, options.python, Path(tmp), -20 if options.boost else None)
            )
    main_out = [outcomes[c][0] for c in main]
    with_main = [o for c in main if (c.workload, c.mode) in SWEPT for o in outcomes[c]]
    duration_out = with_main + [o for c in dict.fromkeys(by_duration) for o in outcomes[c]]
    rate_out = with_main + [o for c in by_rate for o in outcomes[c]]

    def as_dict(o: Outcome) -> dict[str, Any]:
        d = asdict(o)
        for row, r in zip(d["rows"], o.rows, strict=True):
            row["error"] = r.error
        return d

    return {
        "machine": machine,
        "boost": options.boost,
        "target_python": main_out[0].python if main_out else "",
        "load_average_end": _common.load_average(),
        "main": [as_dict(o) for o in main_out],
        "summary": summary(main_out),
        "sweeps": {
            "seconds": sweep_rows(duration_out, "seconds"),
            "rate": sweep_rows(rate_out, "rate"),
        },
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Accuracy of gilprof's GIL held and wait shares against in-target ground truth.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    parser.add_argument("--quick", action="store_true", help="3 s runs and short sweeps")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the targets")
    parser.add_argument(
        "--only",
        action="append",
        choices=sorted(workloads.WORKLOADS),
        help="run only this workload (repeatable)",
    )
    parser.add_argument(
        "--boost",
        action="store_true",
        help="run targets at autogroup nice -20 (root): a loaded machine then "
        "preempts them rarely, which sharpens the truth band",
    )
    parser.add_argument(
        "--no-sweeps", action="store_true", help="skip the duration and rate sweeps"
    )
    parser.add_argument(
        "--scenario",
        choices=("quiet", "loaded", "both"),
        default="quiet",
        help="quiet: the target alone; loaded: with --hogs CPU hogs beside it",
    )
    parser.add_argument(
        "--hogs",
        type=int,
        default=None,
        help="CPU-bound processes beside the target in the loaded scenario "
        "(default: one per core); alone, runs only that scenario",
    )
    parser.add_argument(
        "--mode",
        action="append",
        choices=("gil", "contention"),
        help="run only this mode (repeatable)",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="sampled seconds per run (default 20, --quick 3)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return _common.run_main(argv, parse_args, run, print_report)


if __name__ == "__main__":
    raise SystemExit(main())
