"""Several ranks at once, SIGTERM with --ranks all, and gathering per-node profiles."""

from __future__ import annotations

import json
import signal
import sys
import time

import psutil
import pytest

from gilprof.profile import Profile, load_profiles

from .conftest import (
    gilprof_cmd,
    light_workload,
    pyspy_children,
    require_tool,
    run_gilprof,
    running,
    wait_for,
)

pytestmark = pytest.mark.integration


def test_ranks_all_writes_one_profile_per_rank_and_sigterm_leaves_no_sampler(tmp_path, spawn):
    mpiexec = require_tool("mpiexec")
    job = spawn([mpiexec, "-n", "4", *light_workload(30)])
    out = tmp_path / "prof"
    run = spawn(
        gilprof_cmd(
            *("attach", "--job", str(job.pid), "--ranks", "all", "--lines", "-q", "-o", str(out))
        )
    )  # --lines: a py-spy child per rank each window, none of which may outlive gilprof
    samplers = wait_for(
        lambda: (lambda s: s if len(s) == 4 else None)(pyspy_children(run.pid)), timeout=30
    )
    assert samplers, "expected one py-spy per rank"
    time.sleep(2.5)  # at least one full window per rank
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=30) == 130, run.stderr.read().decode()
    leftovers = [p for p in samplers if running(p)]
    assert not leftovers, f"py-spy survived gilprof: {leftovers}"
    files = sorted(out.glob("rank*.json"))
    assert [f.name.split("-")[0] for f in files] == ["rank0", "rank1", "rank2", "rank3"]
    for f in files:
        profile = Profile.load(f)
        assert profile.sampling.partial is True
        assert profile.windows, f.name

    report = run_gilprof("report", *map(str, files), "--format", "json")
    assert report.returncode == 0, report.stderr
    ranks = json.loads(report.stdout)
    assert [c["rank"] for c in ranks["columns"]] == [0, 1, 2, 3]
    watched = {w["function"]: w for w in ranks["watch"]}
    assert len(watched["safe_broadcast"]["total_share"]) == 4
    assert watched["safe_broadcast"]["rank0_excess"] is not None


def test_one_gilprof_per_node_via_mpiexec_then_merge(tmp_path, spawn):
    """Two jobs stand in for two nodes; `mpiexec -n 2` runs one gilprof per "node"."""
    mpiexec = require_tool("mpiexec")
    jobs = [spawn([mpiexec, "-n", "2", *light_workload(20)]) for _ in range(2)]
    wait_for(
        lambda: all(len(psutil.Process(j.pid).children(recursive=True)) >= 3 for j in jobs),
        timeout=30,
    )
    time.sleep(1.0)
    script = (
        f"import os, sys, subprocess; jobs = {[j.pid for j in jobs]!r}; "
        "node = int(os.environ['PMI_RANK']); "
        f"sys.exit(subprocess.call([{sys.executable!r}, '-m', 'gilprof', 'attach', '--ranks', 'local', "
        "'--job', str(jobs[node]), '-d', '2', '-q', '-o', "
        f"os.path.join({str(tmp_path)!r}, 'node%d' % node)]))"
    )
    gather = spawn([mpiexec, "-n", "2", sys.executable, "-c", script])
    assert gather.wait(timeout=90) == 0, gather.stderr.read().decode()
    merged = tmp_path / "job.json"
    result = run_gilprof(
        "merge", str(tmp_path / "node0"), str(tmp_path / "node1"), "-o", str(merged)
    )
    assert result.returncode == 0, result.stderr
    bundle = load_profiles(str(merged))
    pids = {p.target.pid for p in bundle}
    assert len(bundle) == len(pids) == 4  # 2 "nodes" x 2 ranks, each once
    report = run_gilprof("report", str(merged), "--format", "json")
    assert report.returncode == 0, report.stderr
    assert len(json.loads(report.stdout)["columns"]) == 4
