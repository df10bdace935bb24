"""The flight recorder beside the example server: one capture per slow phase, flat memory.

    python benchmarks/flight_recorder.py                       # 30 minutes, slow at 10 and 20
    python benchmarks/flight_recorder.py --minutes 3 --json    # a quick run, slow at 2:00

Runs the example server as one process (`python examples/disagg_gen/server.py
--concurrency 384 --log-file steps.log --slow-flag FLAG`: rank 0's host path alone, its
steps about 20 ms on a quiet machine; at nice -10 where allowed, so that other jobs on a
shared machine move its step times less) and beside it
`gilprof watch --pid SERVER -o captures/ --steps-log steps.log --trigger p50>1.5x --over 50 -q`.
At each chosen minute the script creates FLAG for 20 s: while it exists the server's
executor also runs `injected_slow_phase`, 2x its normal step CPU (host work 3x heavier),
and the host step p50 rises from about 20 ms to 33-40 ms. At the end the recorder gets SIGTERM (it writes one
last capture of what it keeps, and exits 143).

Reported:
- the captures, by trigger: `steps` captures must be one per slow phase, each triggered
  inside its phase (from its start to 30 s after its end), and none otherwise;
- per steps capture, `injected_slow_phase`'s GIL share in the windows before the trigger
  and in those after it (gilprof.analysis.attribution);
- the recorder's RSS (psutil, the gilprof process alone) at 1, 10 and 30 minutes (for a
  shorter run: at each third), its CPU seconds per hour, the gilprof process alone and with
  its py-spy children (wait4's rusage, reaped children included).
Exit status: 0 when the captures are as expected, 1 when not, 2 when the run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

import psutil  # noqa: E402

from gilprof.analysis.attribution import attribute  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from gilprof.sampling.recorder import copy_windows  # noqa: E402

SERVER = _common.REPO_ROOT / "examples" / "disagg_gen" / "server.py"
INJECTED = "injected_slow_phase"
SLOW_SECONDS = 20.0
SERVER_NICE = -10
LATE_S = 30.0  # a steps trigger may come this long after its phase ended (the p50 lags)
_TRIGGER_T = re.compile(r"flight recorder: trigger (\w+) at \S+ \(t = ([\d.]+) s")


@dataclass
class CaptureFigures:
    file: str
    trigger: str
    trigger_minute: float  # minutes since the recorder started
    in_phase: int | None  # the slow phase it fell in, if any
    share_before: float | None = None  # percent of GIL time in INJECTED
    share_after: float | None = None


@dataclass
class Report:
    minutes: float
    slow_minutes: list[float]
    settings: dict[str, Any]
    captures: list[CaptureFigures] = field(default_factory=list)
    rss_mb: dict[str, float] = field(default_factory=dict)
    rss_mb_by_minute: list[float] = field(default_factory=list)  # at the end of each minute
    cpu_s_per_hour: float = 0.0
    cpu_s_per_hour_with_pyspy: float = 0.0
    watch_exit: int | None = None
    passed: bool = False
    problems: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    origin: float = 0.0  # wall clock when the slow-phase schedule started


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run")
    parser.add_argument(
        "--slow-at",
        type=float,
        action="append",
        help="minute of a slow phase (repeatable; default 10 and 20, or 2/3 into a short run)",
    )
    parser.add_argument("--trigger", default="p50>1.5x", help="gilprof watch --trigger")
    parser.add_argument("--over", type=int, default=50, help="gilprof watch --over")
    parser.add_argument("--concurrency", type=int, default=384, help="server --concurrency")
    parser.add_argument("--workdir", help="keep the log and captures here (default: a temp dir)")
    _common.output_options(parser)
    options = parser.parse_args(argv)
    if options.slow_at is None:
        m = options.minutes
        options.slow_at = [10.0, 20.0] if m >= 25 else [round(2 * m / 3, 2)]
    return options


def short_run(minutes: float) -> dict[str, str]:
    """watch's --keep/--after/--baseline/--min-gap: the defaults, scaled down for short runs."""
    if minutes >= 25:
        return {"keep": "5m", "after": "1m", "baseline": "2m", "min-gap": "5m"}
    return {"keep": "1m", "after": "20s", "baseline": "30s", "min-gap": "1m"}


def run(options: argparse.Namespace) -> Report:
    with tempfile.TemporaryDirectory(prefix="gilprof-flight-") as tmp:
        work = Path(options.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        return _run(options, work)


def _run(options: argparse.Namespace, work: Path) -> Report:
    log, flag, captures = work / "steps.log", work / "slow.flag", work / "captures"
    flag.unlink(missing_ok=True)
    windows = short_run(options.minutes)
    report = Report(
        options.minutes,
        list(options.slow_at),
        {"trigger": options.trigger, "over": options.over, **windows},
        machine=_common.machine_info(),
    )
    server = _common.start_in_session(
        [
            sys.executable,
            str(SERVER),
            "--concurrency",
            str(options.concurrency),
            "--duration",
            str(options.minutes * 60 + 120),
            "--log-file",
            str(log),
            "--slow-flag",
            str(flag),
        ],
        env=_common.child_env(),
    )
    report.settings["server_nice"] = _raise_priority(server.pid)
    watch = None
    try:
        _wait_for(lambda: log.exists() and log.stat().st_size > 0, 60, "the server's log")
        settings = [f"--{name}={value}" for name, value in windows.items()]
        argv = [sys.executable, "-m", "gilprof", "watch", "--pid", str(server.pid)]
        argv += ["-o", str(captures), "--steps-log", str(log), "--trigger", options.trigger]
        argv += ["--over", str(options.over), *settings, "-q"]
        watch = _common.start_in_session(
            argv,
            stderr=open(work / "watch.err", "wb"),  # noqa: SIM115 - the child owns it
            env=_common.child_env(),
        )
        _drive(options, report, watch, flag)
        watch.terminate()
        code, usage = _common.wait_with_rusage(watch, 120)
        report.watch_exit = code
        report.cpu_s_per_hour_with_pyspy = round(
            (usage.ru_utime + usage.ru_stime) * 60 / options.minutes, 1
        )
    finally:
        if watch is not None:
            _common.stop_session(watch)
        _common.stop_session(server)
        flag.unlink(missing_ok=True)
    _judge(report, captures)
    return report


def _raise_priority(pid: int) -> int:
    """The server at nice SERVER_NICE when allowed (root): on a shared machine other jobs'
    load otherwise moves its step times by 2-5x, as much as the injected phases do."""
    process = psutil.Process(pid)
    with contextlib.suppress(psutil.AccessDenied):
        process.nice(SERVER_NICE)
    # With autogroup scheduling a process's nice only weighs against its own session's
    # processes; the session's group has a nice of its own (the server has a session).
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(SERVER_NICE))
    return int(process.nice())


def _wait_for(ready: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise BenchmarkError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _drive(options: argparse.Namespace, report: Report, watch: Any, flag: Path) -> None:
    """Run for --minutes: toggle the flag, sample the recorder's RSS and CPU once a second."""
    started = time.monotonic()
    report.origin = time.time()
    process = psutil.Process(watch.pid)
    marks = (
        [1.0, 10.0, 30.0] if options.minutes >= 30 else [options.minutes * k / 3 for k in (1, 2, 3)]
    )
    phases = [(60 * m, 60 * m + SLOW_SECONDS) for m in options.slow_at]
    cpu = 0.0
    while (elapsed := time.monotonic() - started) < options.minutes * 60:
        if watch.poll() is not None:
            raise BenchmarkError(f"gilprof watch exited early ({watch.returncode})")
        slow = any(a <= elapsed < b for a, b in phases)
        if slow and not flag.exists():
            flag.touch()
        elif not slow and flag.exists():
            flag.unlink()
        rss = process.memory_info().rss / 1e6
        times = process.cpu_times()
        cpu = times.user + times.system
        for mark in marks:
            key = f"{mark:g} min"
            if key not in report.rss_mb and elapsed >= mark * 60 - 1:
                report.rss_mb[key] = round(rss, 1)
        if elapsed >= 60 * (len(report.rss_mb_by_minute) + 1):  # whether it grows, and when
            report.rss_mb_by_minute.append(round(rss, 1))
        time.sleep(1.0)
    report.cpu_s_per_hour = round(cpu * 60 / options.minutes, 1)


def _judge(report: Report, folder: Path) -> None:
    phases = [(m, m + SLOW_SECONDS / 60) for m in report.slow_minutes]
    seen: dict[int, int] = {}
    files = sorted(folder.glob("capture-*.json"), key=lambda p: int(p.name.split("-")[1]))
    for path in files:
        profile = Profile.load(path)
        kind, t_in_profile = _trigger_of(profile)
        figures = CaptureFigures(path.name, kind, 0.0, None)
        started = _started_minutes(profile, report)
        figures.trigger_minute = round(started + t_in_profile / 60, 2)
        for index, (a, b) in enumerate(phases):
            if a <= figures.trigger_minute <= b + LATE_S / 60:
                figures.in_phase = index
        if kind == "steps":
            before = [w for w in profile.windows if w.t1 <= t_in_profile]
            after = [w for w in profile.windows if w.t0 >= t_in_profile]
            figures.share_before = _share(profile, before)
            figures.share_after = _share(profile, after)
            if figures.in_phase is None:
                report.problems.append(f"{path.name}: a steps trigger outside every slow phase")
            else:
                seen[figures.in_phase] = seen.get(figures.in_phase, 0) + 1
        report.captures.append(figures)
    for index, minute in enumerate(report.slow_minutes):
        if seen.get(index, 0) != 1:
            report.problems.append(
                f"slow phase at minute {minute:g}: {seen.get(index, 0)} steps captures, not 1"
            )
    report.passed = not report.problems


def _trigger_of(profile: Profile) -> tuple[str, float]:
    for message in profile.sampling.messages:
        match = _TRIGGER_T.search(message)
        if match:
            return match.group(1), float(match.group(2))
    raise BenchmarkError("a capture without its trigger message")


def _started_minutes(profile: Profile, report: Report) -> float:
    """Minutes from the run's start to the capture's first window (wall clock, 1 s steps)."""
    started = datetime.fromisoformat(profile.sampling.started_at).timestamp()
    return (started - report.origin) / 60


def _share(profile: Profile, windows: list[Any]) -> float | None:
    if not windows:
        return None
    part = copy_windows(profile, windows, 0.0)
    part.finish()
    watched = attribute(part, watch=(INJECTED,)).watch[0]
    return round(100 * watched.total_share, 1)


def print_report(report: Report) -> None:
    rows = [
        [
            c.file,
            c.trigger,
            f"{c.trigger_minute:.2f}",
            "-" if c.in_phase is None else f"{report.slow_minutes[c.in_phase]:g}",
            "-" if c.share_before is None else f"{c.share_before:.1f}%",
            "-" if c.share_after is None else f"{c.share_after:.1f}%",
        ]
        for c in report.captures
    ]
    notes = [
        f"RSS of gilprof watch: {', '.join(f'{k} {v} MB' for k, v in report.rss_mb.items())}",
        f"RSS at the end of each minute (MB): {' '.join(f'{v:g}' for v in report.rss_mb_by_minute)}",
        f"CPU: {report.cpu_s_per_hour} s/hour (gilprof), {report.cpu_s_per_hour_with_pyspy} "
        "s/hour with its py-spy processes",
        f"watch exit status {report.watch_exit}; settings {report.settings}",
        "PASS" if report.passed else "FAIL: " + "; ".join(report.problems),
    ]
    _common.print_table(
        f"flight recorder, {report.minutes:g} minutes, slow phases at {report.slow_minutes}",
        ["capture", "trigger", "at min", "phase", f"{INJECTED} before", "after"],
        rows,
        notes,
    )


def main(argv: list[str] | None = None) -> int:
    outcome: list[Report] = []

    def measured(options: argparse.Namespace) -> dict[str, Any]:
        outcome.append(run(options))
        return asdict(outcome[0])

    _common.run_main(argv, parse_args, measured, lambda _data: print_report(outcome[0]))
    return 0 if outcome[0].passed else 1


if __name__ == "__main__":
    sys.exit(main())
