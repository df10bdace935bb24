"""gilprof's shares next to the truth the target measured: rows, outcomes, the schedule of
runs, and the summaries against the issue's targets.

`run.py` puts this folder and benchmarks/ on sys.path before importing this module.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import accuracy_truth
import uprobe_truth
import workloads
from accuracy_sample import Config, sample

BASELINE_S = 2.0  # unsampled seconds before and after sampling, for the pause overhead
# The targets, points of wall time, per (mode, metric).
TARGETS = {
    ("gil", "held"): 0.02,
    ("gil", "function"): 0.02,
    ("gil", "utilization"): 0.03,
    ("contention", "held"): 0.02,
    ("contention", "wait"): 0.05,
    ("contention", "native"): 0.05,
    ("contention", "blame"): 0.05,
    ("states", "held"): 0.02,
    ("states", "wait"): 0.03,
    ("states", "native"): 0.05,
    ("states", "blame"): 0.05,
}
MODES = ("gil", "contention", "states")
MAIN_RATE = 100
SWEPT = (("spin2", "contention"), ("planted", "gil"))


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
    ticks: float = 0.0  # sampling instants gilprof counted: the n of every SE
    priority: str = ""  # the sampler's scheduling, as the profile records it
    messages: tuple[str, ...] = ()


def _se(share: float, samples: float) -> float:
    return math.sqrt(max(share * (1 - share), 0.0) / samples) if samples > 0 else 0.0


def compare(
    config: Config, report: dict[str, Any], truth: accuracy_truth.Truth, samples: float
) -> tuple[list[Row], dict[str, str]]:
    threads = {t["name"]: t for t in report["gil"]["threads"]}
    contention = config.mode in ("contention", "states")
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
            # a native call's GIL wait is its end minus its native part, which is a band
            unsure_native = max(0.0, th.native_hi - th.native)
            add(
                name,
                "wait",
                max(0.0, th.wait - (band if spinner else th.handoff_before) - unsure_native),
                th.wait,
                seen.get("wait_share") or 0.0,
            )
        if th.idle > 0:
            add(name, "idle", th.idle, th.idle, seen.get("idle_share") or 0.0)
        if th.native > 0:
            hi = max(th.native, th.native_hi)
            add(name, "native", th.native, hi, seen.get("native_share") or 0.0)
        if seen.get("unclassified_share"):
            add(name, "unclassified", 0.0, 0.0, seen["unclassified_share"])
    watch = {w["function"]: w for w in report.get("watch", [])}
    for function, (inside_held, inside) in truth.functions.items():
        measured = watch.get(function, {}).get("total_share", 0.0)
        add(function, "function", inside_held, inside, measured)
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


def compare_exact(
    report: dict[str, Any],
    record: dict[str, Any],
    trace: uprobe_truth.GilTrace,
    windows: list[tuple[float, float]],
    samples: float,
) -> tuple[list[Row], dict[str, str]]:
    """States mode against the uprobe truth: exact held and waiting per thread, blame per
    waiter and holder, and the rest of each thread's time split into native (on a CPU or
    runnable) and idle (blocked in the kernel) by the scheduler's events where the trace
    has them; without them, the rest is native for a thread whose GIL-free calls are
    compiled code (zlib) and idle for the others."""
    seen = {t["name"]: t for t in report["gil"]["threads"]}
    names = {t["native_id"]: t["name"] for t in record["threads"]}
    kinds = {t["name"]: t["nap_kind"] for t in record["threads"]}
    total = sum(b - a for a, b in windows)
    held: dict[int, float] = {}
    waiting: dict[int, float] = {}
    idle: dict[int, float] = {}
    native: dict[int, float] = {}
    runnable: dict[int, float] = {}  # waiting while runnable off a CPU: reads as native
    by_holder: dict[tuple[int, int], float] = {}
    runnable_by_holder: dict[tuple[int, int], float] = {}
    for a, b in windows:
        ran = [
            t["native_id"] for t in record["threads"] if any(s < b and e > a for s, e in t["runs"])
        ]
        truth = trace.truth(a, b, names, ran)
        for tid, th in truth.threads.items():
            held[tid] = held.get(tid, 0.0) + th.held_s / total
            waiting[tid] = waiting.get(tid, 0.0) + th.waiting_s / total
            if th.idle_s is not None and th.native_s is not None:
                idle[tid] = idle.get(tid, 0.0) + th.idle_s / total
                native[tid] = native.get(tid, 0.0) + th.native_s / total
            if th.waiting_runnable_s is not None:
                runnable[tid] = runnable.get(tid, 0.0) + th.waiting_runnable_s / total
            for holder, secs in th.waiting_by_holder.items():
                by_holder[tid, holder] = by_holder.get((tid, holder), 0.0) + secs / total
            for holder, secs in th.waiting_runnable_by_holder.items():
                key = (tid, holder)
                runnable_by_holder[key] = runnable_by_holder.get(key, 0.0) + secs / total
    rows: list[Row] = []

    def add(subject: str, metric: str, truth: float, measured: float, lo: float = 0.0) -> None:
        """A row whose truth band is [truth - lo, truth]."""
        se = _se(measured, samples)
        rows.append(Row(subject, metric, truth - lo, truth, measured, se))

    for tid, name in names.items():
        got = seen.get(name, {})
        rest = max(0.0, 1.0 - held.get(tid, 0.0) - waiting.get(tid, 0.0))
        if tid in native:
            native_truth, idle_truth = native[tid], idle[tid]
        else:
            native_truth = rest if kinds[name] == "native" else 0.0
            idle_truth = rest - native_truth
        add(name, "held", held.get(tid, 0.0), got.get("held_share") or 0.0)
        # A thread waiting for the GIL but runnable off every CPU, in take_gil's user-space
        # code rather than inside pthread_cond_wait, reads "running" in /proc and so native
        # (states_confusion.py): that part is a band, not an error, on an oversubscribed
        # machine; quiet, it is a few microseconds per hand-off.
        ambiguous = runnable.get(tid, 0.0)
        add(name, "wait", waiting.get(tid, 0.0), got.get("wait_share") or 0.0, ambiguous)
        native_measured = got.get("native_share") or 0.0
        add(name, "native", native_truth + ambiguous, native_measured, ambiguous)
        add(name, "idle", idle_truth, got.get("idle_share") or 0.0)
    add("(any thread)", "utilization", sum(held.values()), report["gil"].get("utilization") or 0)
    blamed: dict[tuple[str, str], float] = {}
    for b in report.get("blame", []):
        blamed[b["waiter"], b["holder"]] = blamed.get((b["waiter"], b["holder"]), 0.0) + b["share"]
    top: dict[str, str] = {}
    for waiter, wname in names.items():
        for holder, hname in names.items():
            truth_share = by_holder.get((waiter, holder), 0.0)
            measured = blamed.get((wname, hname), 0.0)
            if holder != waiter and max(truth_share, measured) >= 0.005:
                ambiguous = runnable_by_holder.get((waiter, holder), 0.0)
                add(f"{wname} <- {hname}", "blame", truth_share, measured, ambiguous)
        mine = sorted(((s, h) for (w, h), s in blamed.items() if w == wname), reverse=True)
        if mine:
            top[wname] = mine[0][1]
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
    truth = accuracy_truth.truth_over(got.record, got.sampled)
    seconds = float(got.report["sampling"].get("duration_s") or 0.0)
    # The ticks gilprof divided by (exact from py-spy's --duration windows), not seconds x
    # rate: a window that overran or ended early has fewer, and the SE must say so.
    ticks = float(got.report["sampling"].get("ticks") or seconds * config.rate)
    if got.gil_trace is not None:
        rows, top = compare_exact(got.report, got.record, got.gil_trace, got.sampled, ticks)
    else:
        rows, top = compare(config, got.report, truth, ticks)
    speed = None
    if all(not t["naps"] and not t["calls"] for t in got.record["threads"]):
        # Only free-running loops show the pauses as lost iterations; timed loops do not.
        inside = accuracy_truth.iteration_rate(got.record, got.sampled)
        outside = accuracy_truth.iteration_rate(got.record, got.unsampled)
        speed = inside / outside if inside and outside else None
    return Outcome(
        config,
        got.record["python"],
        got.load_before,
        got.load_after,
        seconds,
        speed,
        rows,
        top,
        ticks,
        got.priority,
        (
            *got.messages,
            *([f"uprobe truth unavailable: {got.gil_trace_note}"] if got.gil_trace_note else []),
        ),
    )


# -- schedule and summaries -----------------------------------------------------------------


def schedule(
    quick: bool,
    only: list[str] | None = None,
    sweeps: bool = True,
    loads: tuple[int, ...] = (0,),
    modes: tuple[str, ...] = ("gil", "contention"),
    seconds: float | None = None,
    realtime: bool = True,
) -> tuple[list[Config], list[Config], list[Config]]:
    """(main table, duration sweep, rate sweep); sweeps reuse main-table runs where they can.

    `loads`: the number of CPU hogs of each scenario (0: quiet); sweeps run quiet only.
    """
    seconds = seconds or (3.0 if quick else 20.0)
    names = only or list(workloads.WORKLOADS)
    main = [
        Config(w, m, MAIN_RATE, seconds, h, realtime) for h in loads for w in names for m in modes
    ]
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
        for mode in MODES:
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
