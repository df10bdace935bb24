"""`gilprof demo` end to end on a short window: real mpiexec, real py-spy, the bundled server."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from gilprof.steps import summarize_logs

from .conftest import ROOT, gilprof_cmd, kill_tree, report_json, require_tool

pytestmark = pytest.mark.integration

WATCHED = ("safe_broadcast", "_balance_requests_across_ranks")
DEMO_TIMEOUT_S = 180


def _watch(profile: Path) -> dict[str, dict]:
    return {w["function"]: w for w in report_json(profile)["watch"]}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory) -> tuple[Path, str, str]:
    """One demo run shared by the tests below: it is the slowest thing in the suite.

    Run without -o from an empty working folder, with TMPDIR pointing elsewhere: the demo
    must write under the temp dir and leave the working folder alone.
    """
    require_tool("mpiexec")
    base = tmp_path_factory.mktemp("demo")
    cwd, tmp = base / "cwd", base / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        gilprof_cmd("demo", "--window", "6", "--warmup", "2"),
        cwd=str(cwd),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=DEMO_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        pytest.fail(f"gilprof demo did not finish within {DEMO_TIMEOUT_S} s")
    finally:
        if proc.poll() is None:
            kill_tree(proc)
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert list(cwd.iterdir()) == [], "the demo wrote into the current directory"
    match = re.search(r"^wrote, in (.+):$", stdout, re.MULTILINE)
    assert match, stdout
    out = Path(match.group(1))
    assert out.parent == tmp.resolve() and out.name.startswith("gilprof-demo-"), out
    return out, stdout, stderr


def test_demo_leaves_profiles_logs_and_report(demo_run):
    out, stdout, stderr = demo_run
    for name in ("before.json", "after.json", "before.log", "after.log", "report.md"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert "sampling rank 0" in stderr
    assert str(out / "report.md") in stdout


def test_demo_report_and_stdout_show_the_watched_function_and_host_step(demo_run):
    out, stdout, _ = demo_run
    report = (out / "report.md").read_text()
    for text in (stdout, report):
        assert "safe_broadcast" in text
        assert "host step p50" in text
        # gil mode: each side's verdict from the loop thread, never the log's ratio alone
        assert "loop thread executor-loop" in text


def test_demo_report_opens_with_a_plain_language_summary(demo_run):
    out, _, _ = demo_run
    report = (out / "report.md").read_text()
    # it leads with ms per step: the host step predicted from the before profile, measured
    assert report.startswith("## Milliseconds per step")
    lead = report.split("## What the demo found", 1)[0]
    for part in ("predicted after", "measured after", "before  ", "after   "):
        assert part in lead, part
    # the lines are wrapped at 100 columns, so a phrase may cross a line break
    assert max(len(line) for line in lead.splitlines()) <= 104, lead  # report.md indents by 4
    # the measured saving carries its own interval, and the verdict on the prediction one bar
    assert re.search(
        r"measured after\s+[\d.]+ ms\s+\(saving\s+-?[\d.]+\s+ms,\s+95%\s+CI\s+-?[\d.]+--?[\d.]+",
        lead,
    )
    assert re.search(r"of\s+the\s+saving:\s+(agrees|undetermined|DISAGREES)", lead)
    # the control for the two runs' host speed: code both variants run alike, read on both
    control = re.search(
        r"control\s+_pickle_at_root,\s+which\s+both\s+variants\s+run\s+alike:\s+[\d.]+\s+->\s+"
        r"[\d.]+\s+ms\s+per\s+step.*?:\s+(the\s+runs'\s+host\s+speed\s+differed|the\s+same)",
        lead,
        re.S,
    )
    assert control, lead
    if "differed" in control.group(1):
        assert re.search(r"undetermined,\s+the\s+runs'\s+host\s+speed\s+differed", lead), lead
    assert re.search(
        r"before\s+\w+-bound:\s+loop\s+thread\s+executor-loop\s+busy\s+on\s+the\s+host", lead
    )
    summary = report.split("### gilprof compare", 1)[0]
    for part in (
        "**What held the GIL.**",
        "**What changed.**",
        "**Host- or device-bound.**",
        "gilprof.reference.broadcast.safe_broadcast",
        "gilprof lint",
        "GP001",
        "**Next commands.**",
        f"gilprof report {out / 'before.json'}",
    ):
        assert part in summary, part
    assert "### gilprof compare" in report  # the comparison follows


def _readme_gate_commands() -> list[list[str]]:
    """The gate commands the docs show: the CI example (docs/ci.md) and the README's session."""
    ci = re.search(
        r"gilprof gate after\.json --steps after\.log(?:[^\n]*\\\n)+[^\n]*",
        (ROOT / "docs" / "ci.md").read_text(),
    )
    assert ci, "docs/ci.md's CI gate example moved"
    text = (ROOT / "README.md").read_text()
    session = re.search(
        r"^ *(gilprof gate after\.json --steps after\.log --max-share [^\n#]*)", text, re.MULTILINE
    )
    assert session, "the README's typical-session gate line moved"
    return [shlex.split(ci.group(0).replace("\\\n", " ")), shlex.split(session.group(1))]


def test_readme_gate_examples_pass_on_after_and_fail_on_before(demo_run, tmp_path):
    """The README's gate commands, run as written on the demo's files: after passes, before fails."""
    out, _, _ = demo_run
    ci, session = _readme_gate_commands()

    def gate(argv: list[str], current: str, other: str) -> subprocess.CompletedProcess[str]:
        swap = {
            "after.json": str(out / f"{current}.json"),
            "after.log": str(out / f"{current}.log"),
            "before.json": str(out / f"{other}.json"),
            "gil-gate.xml": str(tmp_path / "g.xml"),
        }
        args = [swap.get(a, a) for a in argv[1:]]
        return subprocess.run(gilprof_cmd(*args), capture_output=True, text=True, timeout=120)

    for argv in (ci, session):
        passed = gate(argv, "after", "before")
        assert passed.returncode == 0, (argv, passed.stdout, passed.stderr)
        failed = gate(argv, "before", "after")
        assert failed.returncode == 1, (argv, failed.stdout, failed.stderr)
        assert "FAIL" in failed.stdout


def test_demo_logs_have_rank_0_iterations(demo_run):
    out, _, _ = demo_run
    for side in ("before", "after"):
        steps = summarize_logs([out / f"{side}.log"], rank=0, skip_warmup=3).rank(0)
        assert steps is not None and steps.iterations >= 5, side
        assert steps.device_iterations > 0


def test_demo_before_profile_finds_the_watched_functions(demo_run):
    out, _, _ = demo_run
    watch = _watch(out / "before.json")
    for name in WATCHED:
        assert watch[name]["found"], (name, watch[name])
        assert watch[name]["total_share"] > 0


def test_demo_after_spends_less_gil_time_in_safe_broadcast(demo_run):
    out, _, _ = demo_run
    before = _watch(out / "before.json")["safe_broadcast"]["total_share"]
    after = _watch(out / "after.json")["safe_broadcast"]["total_share"]
    assert after < before, (before, after)


@pytest.mark.parametrize("side", ["before", "after"])
def test_demo_no_function_costs_more_than_the_step(demo_run, side):
    """One accounting: a tick is the loop's own time or a wait blamed on another thread's
    function, never both, so no function's cost per step exceeds the step itself."""
    out, _, _ = demo_run
    cmd = gilprof_cmd(
        "report", str(out / f"{side}.json"), "--steps", str(out / f"{side}.log"), "--format", "json"
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    per_step = json.loads(done.stdout)["per_step"]
    step = per_step["host_step_mean_ms"]
    assert per_step["blame"] and per_step["functions"]
    for row in per_step["functions"]:
        assert row["own_share"] + row["blamed_share"] <= 1.0 + 1e-9, row
        assert row["ms_per_step"]["value"] <= step * (1 + 1e-9), (row, step)
