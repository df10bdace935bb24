"""A real torch.distributed job (gloo, CPU, 2 ranks under `torchrun --standalone`).

One job serves every test (importing torch takes seconds per rank): gilprof launches it with
`--start-on` and samples rank 0 from its first warm step; while the job runs on, the module
fixture lists it with `gilprof ps` and samples both workers with `--ranks all`, then stops it.

torch is in the test extra for Python 3.11 (the CI python): without it these tests fail, they
do not skip.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from .conftest import (
    WORKLOADS,
    gilprof_cmd,
    gilprof_ps,
    kill_tree,
    report_json,
    run_gilprof,
    wait_for,
)

APP = str(WORKLOADS / "torch_dist_app.py")
WINDOW = 2.0
TRIGGER = "^step 1 "


@dataclass(frozen=True)
class TorchJob:
    agent_pid: int  # the torchrun process (torchelastic's agent)
    workers: dict[int, int]  # rank -> PID
    stdout: str  # the job's output, as gilprof passed it through
    started: Path  # rank 0's profile, taken with --start-on
    ps_rows: list[dict]
    ranks_all: list[Path]


def torchrun() -> list[str]:
    if importlib.util.find_spec("torch") is None:
        pytest.fail(
            f"torch is not installed for {sys.executable}: the test extra installs it on "
            "Python 3.11 (pip install -e '.[test]'); these tests need it"
        )
    script = Path(sysconfig.get_path("scripts")) / "torchrun"
    return [str(script)] if script.exists() else [sys.executable, "-m", "torch.distributed.run"]


def workers_of(agent: psutil.Process) -> dict[int, int]:
    found = {}
    for child in agent.children():
        env = child.environ()
        if "RANK" in env:
            found[int(env["RANK"])] = child.pid
    return found


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("torchrun")
    stop, started = folder / "stop", folder / "rank0.json"
    out, err = (folder / "stdout").open("wb"), (folder / "stderr").open("wb")
    gilprof = subprocess.Popen(
        gilprof_cmd(
            *("attach", "--rank", "0", "--start-on", TRIGGER, "-d", "2.5"),
            *("--window", str(WINDOW), "-o", str(started), "--"),
            *torchrun(),
            *("--standalone", "--nproc-per-node", "2", APP, "--stop-file", str(stop)),
        ),
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
    )
    try:
        wrote = wait_for(lambda: b"gilprof: wrote" in (folder / "stderr").read_bytes(), 120, 0.2)
        errors = (folder / "stderr").read_bytes().decode(errors="replace")
        assert wrote, "gilprof wrote no profile of rank 0:\n" + errors[-3000:]
        agent = next(
            c
            for c in psutil.Process(gilprof.pid).children()
            if "torchrun" in " ".join(c.cmdline())
            or "torch.distributed.run" in " ".join(c.cmdline())
        )
        workers = workers_of(agent)
        ps_rows = gilprof_ps()
        ranks_folder = folder / "ranks"
        sampled = run_gilprof(
            *("attach", "--ranks", "all", "--job", str(agent.pid), "-d", "1.5", "-q"),
            *("-o", str(ranks_folder)),
        )
        assert sampled.returncode == 0, sampled.stderr
        stop.touch()
        assert gilprof.wait(timeout=60) == 0, (folder / "stderr").read_text(errors="replace")
        yield TorchJob(
            agent_pid=agent.pid,
            workers=workers,
            stdout=(folder / "stdout").read_text(errors="replace"),
            started=started,
            ps_rows=ps_rows,
            ranks_all=sorted(ranks_folder.glob("*.json")),
        )
    finally:
        stop.touch()
        if gilprof.poll() is None:
            kill_tree(gilprof)
        out.close()
        err.close()


def test_ps_finds_both_ranks_and_names_the_torchrun_launcher(job: TorchJob) -> None:
    assert sorted(job.workers) == [0, 1]
    rows = {row["pid"]: row for row in job.ps_rows}
    for rank, pid in job.workers.items():
        row = rows[pid]
        assert row["rank"] == rank and row["world_size"] == 2, row
        assert row["launcher_pid"] == job.agent_pid, row
        assert "torchrun" in row["launcher"] or "torch.distributed" in row["launcher"], row
    agent_row = rows.get(job.agent_pid)
    assert agent_row is None or agent_row["rank"] is None, agent_row  # the agent is no rank


def test_the_torchrun_agent_is_never_sampled(job: TorchJob) -> None:
    rank0 = report_json(job.started)["target"]
    assert rank0["pid"] == job.workers[0] != job.agent_pid
    sampled = {report_json(path)["target"]["pid"] for path in job.ranks_all}
    assert job.agent_pid not in sampled


def test_ranks_all_samples_both_workers(job: TorchJob) -> None:
    targets = [report_json(path)["target"] for path in job.ranks_all]
    assert {(t["rank"], t["pid"]) for t in targets} == set(job.workers.items())
    for path in job.ranks_all:  # every rank takes part in the broadcast
        assert "broadcast_object_list" in {f["function"] for f in report_json(path)["functions"]}


def test_start_on_skips_the_imports_and_starts_within_a_window(job: TorchJob) -> None:
    report = report_json(job.started)
    functions = sorted(report["functions"], key=lambda f: (-f["self_samples"], -f["total_samples"]))
    top = functions[:20]
    assert top and not [f for f in top if "importlib" in f["file"]], top
    trigger = report["sampling"]["start_trigger"]
    assert trigger["kind"] == "output" and trigger["line"].startswith("step 1 t=")
    printed = float(trigger["line"].split("t=")[1])  # the job's own clock at the step line
    first_window = (
        datetime.fromisoformat(trigger["fired_at"]).timestamp() + trigger["first_window_after_s"]
    )
    assert printed <= first_window <= printed + WINDOW, trigger
    assert f"step 1 t={printed:.3f}" in job.stdout  # the line went through to gilprof's stdout


def test_the_broadcast_loop_and_the_ingress_thread_are_attributed(job: TorchJob) -> None:
    result = run_gilprof("report", str(job.started), "--by-thread", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["functions"]
    by_thread: dict[str, set[str]] = {}
    for row in rows:
        by_thread.setdefault(row["thread"], set()).add(row["function"])
    assert {"step_loop", "broadcast_object_list", "_object_to_tensor"} <= by_thread["MainThread"]
    assert {"ingress", "parse_request"} <= by_thread["ingress"], by_thread.get("ingress")
    threads = {t["name"] for t in report_json(job.started)["gil"]["threads"]}
    assert {"MainThread", "ingress"} <= threads
