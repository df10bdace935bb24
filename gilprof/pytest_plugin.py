"""pytest plugin: GIL budgets for tests (registered through the pytest11 entry point).

    @pytest.mark.gil_budget(max_share={"safe_broadcast": 5}, max_wait={"executor": 10},
                            host_p50_ms=40)
    def test_server_stays_within_budget(gil_profile):
        gil_profile.launch([sys.executable, "server.py", "--duration", "8"])

`gil_profile.launch(argv)` runs the workload under `gilprof attach` (launch mode: sampled
from when its rank appears until it exits or `duration` ends); `gil_profile.attach(pid=...)`
samples a process the test started. The budgets of the test's `gil_budget` marker, or those
given to `gil_profile.check(run, ...)`, are checked by gilprof.analysis.gate, the rules of
`gilprof gate`. On failure the profile, the job's output and a report.html stay in the
test's tmp_path (or under --gilprof-keep DIR) and the failure names each budget that went
over, by how much, and where the files are.

Loaded in every pytest run of a project with gilprof installed, so this module imports only
pytest at load time; tests that use neither the marker nor the fixture never touch gilprof.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER = "gil_budget"
GILPROF = (sys.executable, "-m", "gilprof")
# the marker's keywords -> what they budget (GateBudgets fields, plus the steps options)
BUDGET_KEYWORDS = (
    "max_share",
    "max_wait",
    "max_blame",
    "max_utilization",
    "host_p50_ms",
    "steps_rank",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gilprof", "GIL budgets (gilprof)")
    group.addoption(
        "--gilprof-keep",
        metavar="DIR",
        help="Copy the profile and report.html of each test over its GIL budget into DIR/<test>.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(max_share={{FUNC: PCT}}, max_wait={{THREAD: PCT}}, max_blame={{FUNC: PCT}}, "
        "max_utilization=PCT, host_p50_ms=MS, steps_rank=R): GIL budgets for the workload "
        "the test runs with the gil_profile fixture, checked as `gilprof gate` checks them",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test with the marker gets the fixture, which fails it if it ran no workload."""
    for item in items:
        fixtures = getattr(item, "fixturenames", None)
        marked = item.get_closest_marker(MARKER) is not None
        if marked and fixtures is not None and "gil_profile" not in fixtures:
            fixtures.append("gil_profile")


@dataclass(frozen=True)
class GilRun:
    """One workload run under gilprof: where its files are and how it ended."""

    folder: Path
    profile: Path
    output: Path  # the job's stdout and stderr (launch mode); the iteration log by default
    exit_code: int


class BudgetExceeded(AssertionError):
    """A workload went over its GIL budget (the test fails with this message)."""


class GilProfile:
    """The `gil_profile` fixture: runs workloads under `gilprof attach` and checks budgets."""

    def __init__(self, node: pytest.Item, folder: Path, keep: str | None) -> None:
        self._node = node
        self._folder = folder
        self._keep = keep
        self.runs: list[GilRun] = []

    def launch(
        self,
        argv: Sequence[str],
        *,
        duration: float | None = None,
        rank: int | None = None,
        options: Sequence[str] = (),
        timeout: float = 300.0,
        check: bool = True,
    ) -> GilRun:
        """Run `argv` (a job, MPI launchers included) under `gilprof attach`, sampling its
        rank (`rank`, default 0 or the only Python process) until it exits or `duration`
        ends; then check the marker's budgets unless `check` is False."""
        extra = [*options, *(["--rank", str(rank)] if rank is not None else [])]
        return self._run([*extra, "--", *argv], duration, timeout, check)

    def attach(
        self,
        *,
        pid: int | None = None,
        rank: int | None = None,
        duration: float,
        options: Sequence[str] = (),
        timeout: float = 300.0,
        check: bool = True,
    ) -> GilRun:
        """Sample a running process (`pid`, or `rank` of a job on this host) for `duration`."""
        target = [*(["--pid", str(pid)] if pid else []), *(["--rank", str(rank)] if rank else [])]
        return self._run([*target, *options], duration, timeout, check)

    def _run(self, args: list[str], duration: float | None, timeout: float, check: bool) -> GilRun:
        folder = self._folder / f"run{len(self.runs) + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        profile, output = folder / "profile.json", folder / "job.log"
        argv = [*GILPROF, "attach", "-q", "-o", str(profile)]
        if duration is not None:
            argv += ["-d", str(duration)]
        with open(output, "wb") as log:
            try:
                done = subprocess.run(
                    [*argv, *args], stdout=log, stderr=subprocess.STDOUT, timeout=timeout
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"gilprof attach did not finish in {timeout:g} s; output: {output}")
        run = GilRun(folder, profile, output, done.returncode)
        self.runs.append(run)
        if not profile.exists():
            tail = output.read_text(errors="replace")[-2000:]
            pytest.fail(f"gilprof wrote no profile (exit {done.returncode}):\n{tail}")
        marker = self._node.get_closest_marker(MARKER)
        if check and marker is not None:
            self.check(run, **marker.kwargs)
        return run

    def check(
        self,
        run: GilRun,
        *,
        max_share: Mapping[str, float] | None = None,
        max_wait: Mapping[str, float] | None = None,
        max_blame: Mapping[str, float] | None = None,
        max_utilization: float | None = None,
        host_p50_ms: float | None = None,
        steps_log: str | os.PathLike[str] | None = None,
        steps_rank: int | None = None,
    ) -> None:
        """Check budgets on `run` with gilprof gate's rules; fail the test if one is over."""
        from gilprof.analysis.gate import GateBudgets, evaluate
        from gilprof.profile import Profile
        from gilprof.steps import DEFAULT_SKIP_WARMUP, rank_steps

        budgets = GateBudgets(
            max_share=dict(max_share or {}),
            max_wait=dict(max_wait or {}),
            max_blame=dict(max_blame or {}),
            max_utilization=max_utilization,
            max_host_step_p50_ms=host_p50_ms,
        )
        loaded = Profile.load(run.profile)
        steps = None
        if host_p50_ms is not None:
            rank = steps_rank if steps_rank is not None else (loaded.target.rank or 0)
            steps = rank_steps(str(steps_log or run.output), rank, DEFAULT_SKIP_WARMUP)
        result = evaluate(loaded, budgets, steps=steps)
        if result.passed:
            return
        folder = self._kept(run)
        lines = [f"GIL budget exceeded: {len(result.failed)} of {len(result.results)} budgets"]
        lines += [f"  {_over(r)}" for r in result.failed]
        lines += [
            f"profile: {folder / 'profile.json'}",
            f"report:  {folder / 'report.html'}",
            f"output:  {folder / 'job.log'}",
        ]
        raise BudgetExceeded("\n".join(lines))

    def _kept(self, run: GilRun) -> Path:
        """Where the failed run's files stay: report.html rendered, copied to --gilprof-keep."""
        html = run.folder / "report.html"
        subprocess.run(
            [*GILPROF, "report", str(run.profile), "-o", str(html), "--format", "html"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
            check=False,
        )
        if not self._keep:
            return run.folder
        name = self._node.nodeid.replace("/", "_").replace("::", "-")
        target = Path(self._keep) / "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        target = target / run.folder.name
        shutil.copytree(run.folder, target, dirs_exist_ok=True)
        return target


def _over(result: Any) -> str:
    """`max-share:f: total GIL share of f 23.4% > 5% (over by 18.4 points)`."""
    if result.measured is None:
        return f"{result.name}: {result.description}: not measured ({result.detail})"
    excess = result.measured - result.limit
    unit = " points" if result.unit == "%" else f" {result.unit}"
    detail = f"; {result.detail}" if result.detail else ""
    return (
        f"{result.name}: {result.description} {result.measured:.1f}{result.unit} > "
        f"{result.limit:g}{result.unit} (over by {excess:.1f}{unit}{detail})"
    )


@pytest.fixture
def gil_profile(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Runs a workload under gilprof; the test's gil_budget marker is checked on each run."""
    profiler = GilProfile(
        request.node, tmp_path / "gilprof", request.config.getoption("gilprof_keep")
    )
    yield profiler
    if request.node.get_closest_marker(MARKER) is not None and not profiler.runs:
        pytest.fail(f"@pytest.mark.{MARKER}: the test ran no workload with gil_profile")
