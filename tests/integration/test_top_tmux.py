"""`gilprof top` in a real terminal (tmux): it draws threads and functions, `q` leaves cleanly."""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid

import psutil
import pytest

from gilprof.profile import Profile

from .conftest import GIL_WORKLOAD, ROOT, require_tool, start_target, wait_for

pytestmark = pytest.mark.integration


def _pane(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=True
    ).stdout


def _samplers_of(pid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "py-spy" in (proc.info["name"] or "") and str(pid) in cmdline:
            found.append(proc)
    return found


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_top_draws_threads_and_functions_and_quits_without_leaving_a_sampler(spawn, tmp_path, key):
    require_tool("tmux")
    truth = str(tmp_path / "truth.json")
    target = start_target(
        spawn, [sys.executable, GIL_WORKLOAD, "--duration", "30", "--truth", truth], 0.8
    )
    out = tmp_path / "top.json"
    session = f"gilprof-top-{uuid.uuid4().hex[:8]}"
    # rich sizes the view from COLUMNS/LINES when set (pytest may export them): use the pane
    command = (
        f"cd {shlex.quote(str(ROOT))} && env -u COLUMNS -u LINES "
        f"{shlex.quote(sys.executable)} -m gilprof top "
        f"--pid {target.pid} --window 1 --lines -o {shlex.quote(str(out))}; echo EXIT=$?; sleep 60"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", command], check=True
    )
    try:
        screen = wait_for(lambda: (s := _pane(session)) and "safe_broadcast" in s and s, 30)
        assert screen, _pane(session)
        assert "executor-loop" in screen and "ingress" in screen
        assert "GIL utilization" in screen and "Functions by GIL share" in screen
        assert wait_for(lambda: _samplers_of(target.pid), 5), "no py-spy while top runs?"
        subprocess.run(["tmux", "send-keys", "-t", session, key], check=True)
        code = wait_for(
            lambda: next(
                (line for line in _pane(session).splitlines() if line.startswith("EXIT=")), None
            ),
            30,
        )
        assert code == ("EXIT=0" if key == "q" else "EXIT=130"), _pane(session)
        assert "wrote" in _pane(session)
        assert wait_for(lambda: not _samplers_of(target.pid), 5), "a sampler outlived top"
        assert target.poll() is None  # the target keeps running
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    profile = Profile.load(out)
    assert profile.windows and profile.sampling.samples > 0
