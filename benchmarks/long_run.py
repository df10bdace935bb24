"""Long runs: does `gilprof attach --ranks all --rate 1000` keep its memory and every sample?

    python benchmarks/long_run.py                        # 4 ranks, 1000 Hz, 10 minutes
    python benchmarks/long_run.py --minutes 2 --json     # shorter, machine-readable
    python benchmarks/long_run.py --mode contention --ranks 1   # per-tick states of every thread

Starts `mpiexec -n RANKS python tests/integration/workloads/gil_workload.py` with light work
(four ranks fit two cores) and samples every rank with
`gilprof attach --job MPIEXEC --ranks all --rate RATE -d SECONDS -q -o DIR`. That gilprof
runs inside this script started again with `--as-gilprof LOG`: the real command line, with
one addition, a wrapper around PySpyBackend.sample_window that appends, for every window,
the pid and what py-spy said it recorded ("Samples: N") to LOG. The profile files do not
keep py-spy's own count, so this is where it comes from.

Once a second the gilprof process's RSS is read with psutil (py-spy runs in its own
processes and is not included). Checks:
- samples written == samples py-spy reported: the i-th window of a rank's profile file
  holds exactly the count py-spy printed for the i-th window it ran on that rank's pid.
- memory is bounded by distinct stacks, not duration: the RSS at 1/4, 1/2, 3/4 and the end
  of sampling, and the growth from the first third of the run to the last third.
- the profile files' size, and that size scaled to 10 minutes of sampling (per rank): the
  profile is streamed (gilprof.profile/2), so the file grows while the run goes on.
Exit status: 0 when both checks pass, 1 when one fails, 2 when the run could not be made.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

import psutil  # noqa: E402

WORKLOAD = _common.REPO_ROOT / "tests" / "integration" / "workloads" / "gil_workload.py"
# About 18% of a core per rank on the reference machine: four ranks and four samplers fit two.
LIGHT_WORK = ["--broadcast-work", "10000", "--route-work", "4000", "--ingress-work", "5000"]
RSS_INTERVAL_S = 1.0


@dataclass
class RankResult:
    rank: int | None
    pid: int
    windows: int
    samples_written: int
    samples_reported: int | None  # None when py-spy printed no count for some window
    windows_mismatched: int
    windows_unreported: int
    distinct_stacks: int
    distinct_frames: int
    sampled_seconds: float
    sampler_errors: int
    file_bytes: int
    file_bytes_per_10_min: int  # file_bytes scaled to 600 s of sampling


@dataclass
class LongRunResult:
    minutes: float
    ranks: int
    rate_hz: int
    mode: str
    gilprof_exit: int
    sampling_seconds: float  # first py-spy start to gilprof's exit
    rss_mb: dict[str, float]  # at 1/4, 1/2, 3/4 and the end of sampling, and the peak
    rss_first_third_mb: float
    rss_last_third_mb: float
    rss_growth_mb: float  # mean over the last third minus mean over the first third
    samples_written: int
    samples_reported: int
    throughput_samples_per_s: float
    all_windows_match: bool
    memory_bounded: bool
    max_growth_mb: float
    per_rank: list[RankResult] = field(default_factory=list)
    rss_series: list[tuple[float, float]] = field(default_factory=list)  # (s, MB)
    machine: dict[str, Any] = field(default_factory=dict)


# -- the instrumented gilprof ---------------------------------------------------------------
def run_as_gilprof(log_path: str, argv: list[str]) -> None:
    """`gilprof ARGV`, recording py-spy's count for every window to `log_path` (JSON lines)."""
    from gilprof.cli.main import cli
    from gilprof.sampling.backends.pyspy import PySpyBackend

    original = PySpyBackend.sample_window
    lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole run

    def recording(
        self: PySpyBackend, pid: int, settings: Any, seconds: float | None, stop: threading.Event
    ) -> Any:
        result = original(self, pid, settings, seconds, stop)
        entry = {
            "pid": pid,
            "reported": result.sampler_samples,
            "errors": result.errors,
            "parsed": sum(s.count for s in result.samples),
        }
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()
        return result

    PySpyBackend.sample_window = recording  # type: ignore[method-assign]  # record each window's cost
    cli.main(args=argv, prog_name="gilprof")


# -- the benchmark ----------------------------------------------------------------------------
def _wait_for_ranks(job: subprocess.Popen[Any], ranks: int, timeout: float = 60.0) -> None:
    from gilprof.errors import GilprofError
    from gilprof.sampling.discover import resolve_ranks

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if job.poll() is not None:
            raise BenchmarkError(f"the {ranks}-rank job exited with code {job.returncode}")
        with contextlib.suppress(GilprofError):
            if len(resolve_ranks("all", job=job.pid)) >= ranks:
                return
        time.sleep(0.2)
    raise BenchmarkError(f"the {ranks} ranks did not start within {timeout:g} s")


def _samplers_running(pid: int) -> bool:
    with contextlib.suppress(psutil.Error):
        return any(c.name() == "py-spy" for c in psutil.Process(pid).children(recursive=True))
    return False


def _watch_rss(
    proc: subprocess.Popen[Any], timeout: float
) -> tuple[list[tuple[float, int]], float]:
    """RSS samples (seconds since the first py-spy started, bytes) until `proc` exits."""
    series: list[tuple[float, int]] = []
    started: float | None = None
    deadline = time.monotonic() + timeout
    process = psutil.Process(proc.pid)
    while proc.poll() is None:
        now = time.monotonic()
        if now > deadline:
            raise BenchmarkError(f"gilprof did not finish within {timeout:g} s")
        if started is None and _samplers_running(proc.pid):
            started = now
        if started is not None:
            with contextlib.suppress(psutil.Error):
                series.append((now - started, process.memory_info().rss))
        time.sleep(RSS_INTERVAL_S if started is not None else 0.05)
    if started is None:
        raise BenchmarkError("gilprof exited before any sampler started")
    return series, time.monotonic() - started


def _rank_results(out_dir: Path, log_path: Path) -> list[RankResult]:
    from gilprof.profile import Profile

    reported: dict[int, list[dict[str, Any]]] = {}
    for line in log_path.read_text().splitlines():
        entry = json.loads(line)
        reported.setdefault(entry["pid"], []).append(entry)
    results = []
    for path in sorted(out_dir.glob("rank*.json")):
        profile = Profile.load(path)
        written = [sum(w.counts.values()) for w in profile.windows]
        windows = reported.get(profile.target.pid, [])
        counts = [w["reported"] for w in windows]
        unreported = sum(1 for c in counts if c is None)
        mismatched = sum(
            1
            for got, said in zip(written, counts, strict=False)
            if said is not None and got != said
        ) + abs(len(written) - len(counts))
        results.append(
            RankResult(
                rank=profile.target.rank,
                pid=profile.target.pid,
                windows=len(written),
                samples_written=sum(written),
                samples_reported=None if unreported else sum(c for c in counts if c is not None),
                windows_mismatched=mismatched,
                windows_unreported=unreported,
                distinct_stacks=len(profile.stacks),
                distinct_frames=len(profile.frames),
                sampled_seconds=round(profile.sampling.duration_s, 2),
                sampler_errors=sum(w["errors"] for w in windows),
                file_bytes=path.stat().st_size,
                file_bytes_per_10_min=round(
                    path.stat().st_size * 600 / max(profile.sampling.duration_s, 1e-9)
                ),
            )
        )
    return results


def _rss_at(series: list[tuple[float, int]], t: float) -> float:
    return round(min(series, key=lambda point: abs(point[0] - t))[1] / 1e6, 1)


def _mean_mb(points: list[tuple[float, int]]) -> float:
    return sum(rss for _, rss in points) / len(points) / 1e6 if points else 0.0


def run(
    minutes: float, ranks: int, rate: int, max_growth_mb: float, workdir: Path, mode: str = "gil"
) -> LongRunResult:
    from gilprof.sampling.processes import find_binary

    seconds = max(1.0, minutes * 60)
    out_dir, log_path = workdir / "profiles", workdir / "windows.jsonl"
    log_path.touch()
    job = _common.start_in_session(
        [
            find_binary("mpiexec"),
            "-n",
            str(ranks),
            sys.executable,
            str(WORKLOAD),
            "--duration",
            str(seconds + 90),
            *LIGHT_WORK,
        ]
    )
    gilprof: subprocess.Popen[Any] | None = None
    try:
        _wait_for_ranks(job, ranks)
        gilprof = _common.start_in_session(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--as-gilprof",
                str(log_path),
                "--",
                "attach",
                "--job",
                str(job.pid),
                "--ranks",
                "all",
                "--rate",
                str(rate),
                "--mode",
                mode,
                "-d",
                f"{seconds:g}",
                "-q",
                "-o",
                str(out_dir),
            ],
            env=_common.child_env(),
            stderr=open(workdir / "gilprof.err", "wb"),  # noqa: SIM115
        )
        series, sampling_s = _watch_rss(gilprof, timeout=seconds + 120)
        exit_code = gilprof.wait()
    finally:
        if gilprof is not None:
            _common.stop_session(gilprof)
        _common.stop_session(job)
    if exit_code != 0:
        err = (workdir / "gilprof.err").read_text(errors="replace").strip().splitlines()
        raise BenchmarkError(f"gilprof exited with {exit_code}: {err[-1] if err else 'no output'}")
    per_rank = _rank_results(out_dir, log_path)
    if len(per_rank) != ranks:
        raise BenchmarkError(f"expected {ranks} profiles, found {len(per_rank)} in {out_dir}")
    third = sampling_s / 3
    first = _mean_mb([p for p in series if p[0] <= third])
    last = _mean_mb([p for p in series if p[0] >= 2 * third])
    written = sum(r.samples_written for r in per_rank)
    return LongRunResult(
        minutes=minutes,
        ranks=ranks,
        rate_hz=rate,
        mode=mode,
        gilprof_exit=exit_code,
        sampling_seconds=round(sampling_s, 1),
        rss_mb={
            "q1": _rss_at(series, sampling_s / 4),
            "q2": _rss_at(series, sampling_s / 2),
            "q3": _rss_at(series, 3 * sampling_s / 4),
            "end": round(series[-1][1] / 1e6, 1),
            "peak": round(max(rss for _, rss in series) / 1e6, 1),
        },
        rss_first_third_mb=round(first, 1),
        rss_last_third_mb=round(last, 1),
        rss_growth_mb=round(last - first, 2),
        samples_written=written,
        samples_reported=sum(r.samples_reported or 0 for r in per_rank),
        throughput_samples_per_s=round(written / sampling_s, 1),
        all_windows_match=all(
            r.windows and not r.windows_mismatched and not r.windows_unreported for r in per_rank
        ),
        memory_bounded=last - first < max_growth_mb,
        max_growth_mb=max_growth_mb,
        per_rank=per_rank,
        rss_series=[(round(t, 1), round(rss / 1e6, 2)) for t, rss in series],
        machine=_common.machine_info(),
    )


def _print_table(result: LongRunResult) -> None:
    rows = [
        [
            f"rank {r.rank}",
            str(r.windows),
            str(r.samples_written),
            "?" if r.samples_reported is None else str(r.samples_reported),
            str(r.windows_mismatched + r.windows_unreported),
            str(r.distinct_stacks),
            str(r.sampler_errors),
            _common.megabytes(r.file_bytes),
            _common.megabytes(r.file_bytes_per_10_min),
        ]
        for r in result.per_rank
    ]
    rss = result.rss_mb
    _common.print_table(
        f"gilprof attach --ranks all --mode {result.mode} --rate {result.rate_hz}: {result.ranks} ranks, "
        f"{result.sampling_seconds:g} s",
        [
            "rank",
            "windows",
            "written",
            "py-spy said",
            "windows off",
            "stacks",
            "py-spy errors",
            "file",
            "file / 10 min",
        ],
        rows,
        notes=[
            f"RSS of gilprof (MB): 1/4 {rss['q1']:.1f}, 1/2 {rss['q2']:.1f}, "
            f"3/4 {rss['q3']:.1f}, end {rss['end']:.1f}, peak {rss['peak']:.1f}; "
            f"first third {result.rss_first_third_mb:.1f} -> last third "
            f"{result.rss_last_third_mb:.1f} ({result.rss_growth_mb:+.2f} MB)",
            f"throughput: {result.throughput_samples_per_s:.0f} samples/s written "
            f"({result.samples_written} in total)",
            f"samples written == py-spy's count in every window: "
            f"{'yes' if result.all_windows_match else 'NO'}; memory bounded "
            f"(growth < {result.max_growth_mb:g} MB): {'yes' if result.memory_bounded else 'NO'}",
        ],
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--as-gilprof":
        argv = sys.argv[3:]
        run_as_gilprof(sys.argv[2], argv[1:] if argv[:1] == ["--"] else argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="sampling time (default 10)")
    parser.add_argument("--ranks", type=int, default=4, help="ranks of the job (default 4)")
    parser.add_argument("--rate", type=int, default=1000, help="samples per second (default 1000)")
    parser.add_argument(
        "--mode",
        default="gil",
        choices=["gil", "wall", "cpu", "contention"],
        help="sampling mode (default gil)",
    )
    parser.add_argument(
        "--max-growth-mb",
        type=float,
        default=20.0,
        help="RSS growth, first third to last third, that still counts as bounded",
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the profiles and logs in DIR")
    _common.output_options(parser)
    args = parser.parse_args()
    if args.minutes <= 0 or args.ranks < 1 or args.rate < 1:
        _common.fail("--minutes, --ranks and --rate must be positive")
    try:
        with tempfile.TemporaryDirectory(prefix="gilprof-long-run-") as tmp:
            workdir = Path(args.keep) if args.keep else Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            result = run(
                args.minutes, args.ranks, args.rate, args.max_growth_mb, workdir, args.mode
            )
    except BenchmarkError as exc:
        _common.fail(str(exc))
    if args.json:
        _common.print_json(asdict(result))
    else:
        _print_table(result)
    sys.exit(0 if result.all_windows_match and result.memory_bounded else 1)


if __name__ == "__main__":
    main()
