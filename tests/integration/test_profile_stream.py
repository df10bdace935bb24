"""gilprof.profile/2 for real: a capture streams its profile window by window, standard tools
read it, and merge/report take it alongside gilprof.profile/1 files."""

from __future__ import annotations

import json
import subprocess

import pytest

from gilprof.errors import InputError
from gilprof.profile import SCHEMA, Profile, load_profiles

from .conftest import (
    assert_exits,
    attach,
    light_workload,
    require_tool,
    run_gilprof,
    start_target,
    wait_for,
)

pytestmark = pytest.mark.integration


def _windows_on_disk(path) -> int:
    try:
        return len(Profile.load(path).windows)
    except InputError:  # not created yet, or the header not yet written
        return -1


def test_capture_is_on_disk_window_by_window_and_zcat_reads_it(tmp_path, spawn):
    target = start_target(spawn, light_workload(20))
    out = tmp_path / "c.json"
    run = attach(
        spawn, target.pid, out, "--mode", "contention", "--rate", "500", "--window", "1", "-d", "4"
    )
    assert wait_for(lambda: _windows_on_disk(out) >= 1, timeout=30), run.stderr.read().decode()
    during = Profile.load(out)  # while gilprof still samples: what is there, marked partial
    assert run.poll() is None and during.sampling.partial
    assert_exits(run, timeout=30)
    done = Profile.load(out)
    assert not done.sampling.partial and len(done.windows) > len(during.windows)
    # -d 4 in 1 s windows: the session starts windows until 4 s have passed since the first
    # one began, and stops there. Not a fixed total: py-spy takes whole seconds, and one
    # fresh-clone run at 500 Hz on a loaded machine summed to 4.86 s (its windows ran long, or
    # a fifth began: that run's windows were not kept).
    ends = [w.t1 for w in done.windows]
    assert ends[-1] >= 3.5 and (len(ends) == 1 or ends[-2] < 4.0), ends
    assert done.sampling.duration_s == pytest.approx(sum(w.seconds for w in done.windows))

    zcat = require_tool("zcat")
    lines = subprocess.run([zcat, str(out)], capture_output=True, text=True, check=True).stdout
    records = [json.loads(line) for line in lines.splitlines()]
    assert records[0]["schema"] == SCHEMA and "end" in records[-1]
    assert [r["window"] for r in records[1:-1]] == list(range(len(done.windows)))
    assert all(r["runs"] for r in records[1:-1])  # per-tick states in contention mode
    # thread ids appear once per thread in a window's runs, never per tick
    assert all(len({run[0] for run in r["runs"]}) == len(r["runs"]) for r in records[1:-1])

    # the same capture as a v1 document holds the same profile
    old = tmp_path / "c-v1.json"
    done.save(old)
    assert Profile.load(old).to_dict() == done.to_dict()

    # merge takes both schemas and writes a v2 bundle; report reads it
    bundle = tmp_path / "job.gilprof"
    merged = run_gilprof("merge", str(out), str(old), "-o", str(bundle))
    assert merged.returncode == 0, merged.stderr
    [joined] = load_profiles(bundle)  # same pid and host: one process, windows end to end
    assert len(joined.windows) == 2 * len(done.windows)
    assert joined.sampling.samples == 2 * done.sampling.samples
    report = run_gilprof("report", str(bundle), "--format", "json")
    assert report.returncode == 0, report.stderr
