"""`gilprof demo`'s orchestration. The main job: run the example GEN server before and after the fix, sample rank 0, compare.

Each side launches `examples/disagg_gen/server.py` under the mpich wheel's `mpiexec`, waits for
rank 0, lets it warm up, samples it with py-spy for a fixed window, and keeps its iteration
log. The two profiles and logs are compared with gilprof.analysis.compare.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gilprof.analysis.attribution import DEFAULT_WATCH
from gilprof.analysis.compare import Comparison, compare_profiles
from gilprof.analysis.per_step import compare_costs, side_costs
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.what_if import Prediction, parse_specs, predict
from gilprof.cli._demo_check import prediction_check, speed_control
from gilprof.cli._verdict import VerdictChoice
from gilprof.errors import TargetError, UsageError
from gilprof.model import Mode
from gilprof.profile import Profile, check_folder, write_text_atomic
from gilprof.profile.files import cannot_write
from gilprof.recipes import load_recipe
from gilprof.reference import fixes
from gilprof.renderers import render
from gilprof.renderers.compare import CompareView, demo_summary
from gilprof.sampling.backends import SamplerSettings, get_backend
from gilprof.sampling.capture import make_target
from gilprof.sampling.discover import Selection
from gilprof.sampling.launch import LaunchedJob
from gilprof.sampling.processes import find_binary
from gilprof.sampling.session import SessionOptions, run_session
from gilprof.steps import RankSteps, StepRecord, read_step_logs, summarize

# The simulated device's step (examples/disagg_gen --device-ms), passed to the server
# explicitly: the prediction takes it as the known device step, as a user would take it
# from a trace of the real GPU (report --device-step-ms). 10 ms, under the fixed loop's host
# work: at the server's own 20 ms the unfixed step on this 2-core machine was 22-23 ms
# (2026-12-07), so the device floor hid two thirds of the saving and each after step's
# wake-up latency at the floor (~0.4 ms) read as a 23% error of what was left.
SIMULATED_DEVICE_MS = 10.0


def simulated_device_ms(server_args: Sequence[str]) -> float:
    """The device step the server runs with: the last --device-ms in `server_args`, else
    the demo's own."""
    found = SIMULATED_DEVICE_MS
    for i, arg in enumerate(server_args):
        name, sep, value = arg.partition("=")
        if name != "--device-ms":
            continue
        if not sep:
            value = server_args[i + 1] if i + 1 < len(server_args) else ""
        try:
            found = float(value)
        except ValueError:
            raise UsageError(f"--server-arg --device-ms: not a number of ms: {value!r}") from None
    return found


@dataclass(frozen=True)
class DemoSettings:
    output_dir: Path
    window_s: float = 20.0  # seconds sampled per side
    warmup_s: float = 4.0  # seconds the server runs before sampling starts
    ranks: int = 4
    rate_hz: float = 100.0
    server_args: tuple[str, ...] = ()
    impls: tuple[str, str] = ("before", "after")


@dataclass(frozen=True)
class DemoSide:
    impl: str
    profile_path: Path
    log_path: Path
    profile: Profile
    sampled_steps: tuple[int, int]  # rank 0's log lines [first, last) written while sampled


@dataclass(frozen=True)
class DemoResult:
    sides: tuple[DemoSide, DemoSide]
    comparison: Comparison
    report_path: Path
    verdicts: tuple[Verdict, Verdict]
    summary: str  # the plain-language opening of report.md
    prediction: Prediction  # the host step after the fixes, predicted from the before side
    measured_after_ms: float  # the after side's mean host step
    check: str  # predicted vs measured, and both verdicts with their shares


def example_server() -> Path:
    """The bundled server: packaged alongside gilprof, or the repository's examples/ folder."""
    candidates = [
        Path(str(resources.files("gilprof") / "examples_data" / "disagg_gen" / "server.py")),
        Path(__file__).resolve().parents[2] / "examples" / "disagg_gen" / "server.py",
    ]
    for path in candidates:
        if path.is_file():
            return path
    raise UsageError("the example server (examples/disagg_gen/server.py) is not installed")


def demo_folder(output_dir: str | None) -> Path:
    """The demo's output folder, made now and checked writable (it gets several files): -o, or
    a new gilprof-demo-* folder under the system temp dir."""
    if output_dir is not None:
        check_folder(output_dir, create=True)
        return Path(output_dir)
    try:
        return Path(tempfile.mkdtemp(prefix="gilprof-demo-"))
    except OSError as exc:
        raise UsageError(
            f"cannot make a gilprof-demo-* folder in the temp dir: {exc.strerror or exc}; "
            "give -o DIR"
        ) from None


def _require_mpi4py() -> None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        raise UsageError(
            "the demo needs mpi4py and the mpich wheel: pip install 'gilprof[mpi]'"
        ) from None


def run_side(
    impl: str, settings: DemoSettings, stop: threading.Event, say: Callable[[str], None]
) -> DemoSide:
    out = settings.output_dir
    log_path = out / f"{impl}.log"
    profile_path = out / f"{impl}.json"
    server_duration = settings.warmup_s + settings.window_s + 3.0
    argv = [
        find_binary("mpiexec"),
        "-n",
        str(settings.ranks),
        sys.executable,
        str(example_server()),
        "--impl",
        impl,
        "--duration",
        f"{server_duration:g}",
        f"--device-ms={SIMULATED_DEVICE_MS:g}",
        *settings.server_args,
    ]
    say(
        f"[{impl}] launching {settings.ranks} ranks: mpiexec -n {settings.ranks} ... server.py --impl {impl}"
    )
    try:
        log = open(log_path, "wb")  # noqa: SIM115  # closed below, after the job ends
    except OSError as exc:
        raise cannot_write(str(log_path), exc) from None
    with log:
        job = LaunchedJob(argv, stdout=log.fileno(), stderr=log.fileno())
        try:
            info = job.wait_for_rank(0, Selection(), timeout=90, stop=stop)
            started = time.monotonic()
            while time.monotonic() - started < settings.warmup_s and not stop.is_set():
                if job.proc.poll() is not None:
                    raise TargetError(
                        f"[{impl}] the example server exited early "
                        f"(code {job.proc.returncode}); see {log_path}"
                    )
                stop.wait(0.1)
            say(f"[{impl}] sampling rank 0 (pid {info.pid}) for {settings.window_s:g} s")
            first_step = _logged_steps(log_path)
            # 1 s windows: more batches for the intervals, at ~8% of time lost to restarts;
            # py-spy's stacks (lines=True): the prediction removes one line of the function
            options = SessionOptions(
                SamplerSettings(Mode.STATES, settings.rate_hz, lines=True),
                duration=settings.window_s,
                window_s=1.0,
            )
            profile = run_session(
                make_target(info, keep_cmdline=False), get_backend("py-spy"), options, stop
            )
            sampled = (first_step, _logged_steps(log_path))
            profile.save(profile_path)
            if not stop.is_set():
                job.wait(timeout=server_duration + 60)
        finally:
            code = job.shutdown(grace=10)
    if stop.is_set():
        raise KeyboardInterrupt
    if code != 0:
        raise TargetError(
            f"[{impl}] the example server failed with exit code {code}; see {log_path}"
        )
    return DemoSide(impl, profile_path, log_path, profile, sampled)


def rank0_records(log_path: Path) -> list[StepRecord]:
    """Rank 0's iteration lines in the log so far (the job may still be writing it)."""
    return [record for record in read_step_logs([log_path]) if record.rank == 0]


def _logged_steps(log_path: Path) -> int:
    return len(rank0_records(log_path))


def sampled_steps(side: DemoSide, skip_warmup: int) -> RankSteps:
    """Rank 0's steps logged while its profile was taken: the prediction scales the
    profile's shares by these steps, and the server's steps drift over a run (before the
    fixes, ~26 ms at its start and ~32 ms 15 s later on a 2-core machine), so steps from
    outside the sampled window would not be the steps the shares describe. Falls back to
    the whole log, less `skip_warmup`, when too few were logged while sampling."""
    first, last = side.sampled_steps
    records = rank0_records(side.log_path)
    if last - first >= max(10, skip_warmup):
        steps = summarize(records[first:last], rank=0).rank(0)
    else:
        steps = summarize(records, rank=0, skip_warmup=skip_warmup).rank(0)
    if steps is None:
        raise TargetError(f"[{side.impl}] no iteration lines for rank 0 in {side.log_path}")
    return steps


def predict_fixes(
    profile: Profile, verdict: Verdict, steps: RankSteps, device_ms: float
) -> Prediction:
    """From the before side alone: the host step once the reference fixes take their call
    sites out of the loop, each step at least the simulated device's (none when 0)."""
    return predict(
        profile,
        verdict,
        steps,
        parse_specs(fixes.removed_by_fix()),
        device_step_ms=device_ms if device_ms > 0 else None,
    )


def run_demo(
    settings: DemoSettings, stop: threading.Event, say: Callable[[str], None] = lambda _: None
) -> DemoResult:
    _require_mpi4py()
    check_folder(settings.output_dir, create=True)
    before = run_side(settings.impls[0], settings, stop, say)
    after = run_side(settings.impls[1], settings, stop, say)
    warmup_iterations = 3
    steps_b = sampled_steps(before, warmup_iterations)
    steps_a = sampled_steps(after, warmup_iterations)
    recipe = load_recipe("disagg-gen-example")
    watch = DEFAULT_WATCH + recipe.watch_names()
    judge = VerdictChoice(skip_warmup=warmup_iterations).judge
    verdicts = (
        judge(before.profile, steps_b, recipe, watch),
        judge(after.profile, steps_a, recipe, watch),
    )
    prediction = predict_fixes(
        before.profile, verdicts[0], steps_b, simulated_device_ms(settings.server_args)
    )
    costs = compare_costs(
        side_costs(before.profile, verdicts[0].loop.thread.tid, steps_b, fixes.RENAMES),
        side_costs(after.profile, verdicts[1].loop.thread.tid, steps_a, fixes.RENAMES),
    )
    comparison = compare_profiles(
        before.profile,
        after.profile,
        steps_before=steps_b,
        steps_after=steps_a,
        by_thread=False,
        watch=watch,
        renames=fixes.RENAMES,
        costs=costs,
    )
    check = prediction_check(prediction, steps_b, steps_a, verdicts, speed_control(costs))
    summary = demo_summary(
        comparison,
        verdicts,
        {w.function: (w.why, w.fix) for w in recipe.watch},
        (before.profile_path, after.profile_path),
        (before.log_path, after.log_path),
    )
    report_path = settings.output_dir / "report.md"
    write_text_atomic(
        report_path,
        "## Milliseconds per step\n\n"
        + "\n".join(f"    {line}" for line in check.splitlines())
        + "\n\n"
        + summary
        + "\n"
        + render("compare", "markdown", CompareView(comparison, verdicts)),
    )
    from gilprof.analysis.attribution import attribute  # the pictures: report.html, diff.html
    from gilprof.renderers.report import ReportData

    write_text_atomic(
        settings.output_dir / "report.html",
        render(
            "report",
            "html",
            ReportData(before.profile, attribute(before.profile, watch=watch), verdict=verdicts[0]),
        ),
    )
    write_text_atomic(
        settings.output_dir / "diff.html",
        render(
            "compare",
            "html",
            CompareView(
                comparison, profiles=(before.profile, after.profile), steps=(steps_b, steps_a)
            ),
        ),
    )
    return DemoResult(
        (before, after),
        comparison,
        report_path,
        verdicts,
        summary,
        prediction,
        steps_a.host_step_ms.mean,
        check,
    )
