"""`gilprof watch --ranks local --metrics` scraped by a real Prometheus server (Debian's
`prometheus`, on a loopback port, with a config this test writes) on the bundled example
server (4 ranks, unfixed): the PromQL answers for rank 0's held share, loop split and
verdict agree with `gilprof report` on the capture of the same seconds; rank 0 reads
host-bound; a hung scraper and 50 concurrent scrapes leave sampling going; a new job's rank 0
shows under its new pid, and one rank killed and started again alone under its new pid,
while the old series go stale; SIGTERM leaves every rank's capture complete."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from gilprof.profile import Profile

from .conftest import ROOT, gilprof_cmd, kill_tree, repo_pythonpath, require_mpi, run_cli, wait_for

pytestmark = pytest.mark.integration

SERVER = ROOT / "examples" / "disagg_gen" / "server.py"
PROMETHEUS = shutil.which("prometheus")
SCRAPED_S = 32  # the first job's seconds under the scraper (>= RANGE_S)
RANGE_S = 30  # the PromQL range compared with the capture
HELD_TOLERANCE = 0.06  # shares: two readings of ~30 s at 100 Hz on 2 busy cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


class Prom:
    def __init__(self, spawn, tmp: Path, target_port: int) -> None:
        self.port = _free_port()
        config = tmp / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: gilprof\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        )
        self.proc = spawn(
            [
                str(PROMETHEUS),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=open(tmp / "prometheus.out", "wb"),  # noqa: SIM115 - the child owns it
            stderr=subprocess.STDOUT,
        )
        assert wait_for(self.ready, 30), (tmp / "prometheus.out").read_text()

    def ready(self) -> bool:
        try:
            return "Ready" in _get(f"http://127.0.0.1:{self.port}/-/ready", 2)
        except OSError:
            return False

    def query(self, promql: str) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        answer = json.loads(_get(url))
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def value(self, promql: str) -> float:
        (result,) = self.query(promql)
        return float(result["value"][1])


def _job(spawn, tmp: Path, name: str, seconds: float):
    mpiexec = require_mpi()
    log = tmp / f"{name}.log"
    argv = [mpiexec, "-n", "4", sys.executable, str(SERVER), "--impl", "before"]
    argv += ["--duration", str(seconds), "--warmup", "1", "--log-file", str(log)]
    output = open(tmp / f"{name}.out", "wb")  # noqa: SIM115 - the child owns it
    job = spawn(argv, env=repo_pythonpath(), start_new_session=True, stdout=output, stderr=output)
    return job, log


def _rank0_pid(prom: Prom, job: str) -> str | None:
    found = prom.query(f'gilprof_rank_up{{rank="0", job="{job}"}}')
    return found[0]["metric"]["pid"] if found else None


# a rank of its own (RANK set, no launcher): busy in Python, sleeping between bursts
RANK_LOOP = "import time\nwhile True:\n    sum(range(20000))\n    time.sleep(0.002)\n"


def _rank(spawn, script: Path, rank: int):
    env = {**repo_pythonpath(), "RANK": str(rank), "WORLD_SIZE": "2"}
    return spawn([sys.executable, str(script)], env=env, start_new_session=True)


def _up(prom: Prom, rank: str) -> str | None:
    """The one pid Prometheus shows rank `rank` up under (None for none or several)."""
    found = prom.query(f'gilprof_rank_up{{rank="{rank}"}}')
    return found[0]["metric"]["pid"] if len(found) == 1 else None


def test_prometheus_scrapes_the_watch_of_the_example_server(spawn, tmp_path):
    if PROMETHEUS is None:  # .ci/run installs it: without it this test fails, never skips
        pytest.fail("needs Debian's prometheus package (apt-get install prometheus)")
    start = time.monotonic()
    job_a, log = _job(spawn, tmp_path, "server", SCRAPED_S + 8)
    metrics_port = _free_port()
    out, err = tmp_path / "caps", tmp_path / "watch.err"
    watch = spawn(
        gilprof_cmd(
            *("watch", "--ranks", "local", "-o", str(out), "-q", "--recipe"),
            *("disagg-gen-example", "--steps-log", str(log), "--keep", "10m"),
            *("--metrics", f"127.0.0.1:{metrics_port}", "--metrics-window", "10s"),
            # only this test's jobs (their --log-file is under tmp_path): other jobs may run
            *("--match", re.escape(str(tmp_path))),
        ),
        stderr=open(err, "wb"),  # noqa: SIM115 - the child owns it
    )
    prom = Prom(spawn, tmp_path, metrics_port)
    # the job's launcher: the job label of its ranks
    assert wait_for(lambda: prom.query('gilprof_verdict{rank="0"}'), 40), err.read_text()
    (first,) = {r["metric"]["job"] for r in prom.query("gilprof_rank_up")}
    old_pid = _rank0_pid(prom, first)
    assert {r["metric"]["rank"] for r in prom.query("gilprof_rank_up")} == {"0", "1", "2", "3"}

    # a scraper that connects and never reads, one that asks and never reads, 50 at once
    windows = f'gilprof_sampler_windows_total{{rank="0", pid="{old_pid}"}}'
    before = prom.value(windows)
    hung = socket.create_connection(("127.0.0.1", metrics_port))
    half = socket.create_connection(("127.0.0.1", metrics_port))
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    bodies: list[str] = []
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    scrapers = [threading.Thread(target=lambda: bodies.append(_get(url, 30))) for _ in range(50)]
    for t in scrapers:
        t.start()
    for t in scrapers:
        t.join(40)
    assert len(bodies) == 50 and all("gilprof_rank_up" in b for b in bodies)

    # the first job runs out under the scraper; its ranks exit and their captures are written
    assert job_a.wait(timeout=SCRAPED_S + 40) == 0
    ended = time.time()
    assert prom.value(windows) > before + 5  # sampling went on throughout
    rank0 = wait_for(lambda: sorted(out.glob(f"rank0-{old_pid}-capture-*.json")), 20)
    assert rank0, err.read_text()
    hung.close()
    half.close()

    # PromQL over the job's last RANGE_S seconds against `gilprof report` on its capture
    at = f"@ {ended:.0f}"
    sel = f'{{rank="0", pid="{old_pid}"'
    held = prom.value(f'avg_over_time(gilprof_loop_ratio{sel}, part="held"}}[{RANGE_S}s] {at})')
    host_parts = prom.query(
        f'avg_over_time(gilprof_loop_ratio{sel}, part=~"held|gil_wait|native_.*"}}[{RANGE_S}s] {at})'
    )
    busy = sum(float(r["value"][1]) for r in host_parts)
    host = prom.value(
        f'max_over_time(gilprof_verdict{sel}, gilprof_verdict="host"}}[{RANGE_S}s] {at})'
    )
    report = run_cli(
        "report", rank0[0], "--recipe", "disagg-gen-example", "--steps", log, "--format", "json"
    )
    assert report.exit_code == 0, report.output
    verdict = json.loads(report.stdout)["verdict"]
    loop = next(
        t for t in json.loads(report.stdout)["gil"]["threads"] if t["name"] == "executor-loop"
    )
    assert host == 1 and verdict["bound"] == "host"  # rank 0 of the unfixed example
    assert abs(held - loop["held_share"]) < HELD_TOLERANCE, (held, loop)
    assert abs(busy - verdict["busy_share"]) < HELD_TOLERANCE, (busy, verdict)
    profile = Profile.load(rank0[0])
    assert not profile.sampling.partial

    # a new job of two ranks (rank variables, no launcher: each can be killed and restarted
    # alone): rank 0 shows under its new pid and the old pid's series go stale
    rank_script = tmp_path / "rank.py"
    rank_script.write_text(RANK_LOOP)
    ranks = {r: _rank(spawn, rank_script, r) for r in (0, 1)}
    new = wait_for(lambda: _up(prom, "0") not in (None, old_pid), 30)
    assert new, err.read_text()
    assert _up(prom, "0") == str(ranks[0].pid)
    assert wait_for(lambda: not prom.query(f'gilprof_rank_up{{pid="{old_pid}"}}'), 10)
    assert not prom.query(f'gilprof_thread_held_ratio{{pid="{old_pid}"}}')

    # rank 1 alone killed and started again: its new pid shows, its old series go stale, and
    # rank 0 is recorded on under the same pid
    first_1 = wait_for(lambda: _up(prom, "1"), 30)
    assert first_1 == str(ranks[1].pid), err.read_text()
    kill_tree(ranks[1])
    ranks[1] = _rank(spawn, rank_script, 1)
    assert wait_for(lambda: _up(prom, "1") == str(ranks[1].pid), 30), err.read_text()
    assert not prom.query(f'gilprof_rank_up{{pid="{first_1}"}}')
    assert not prom.query(f'gilprof_thread_held_ratio{{pid="{first_1}"}}')
    assert _up(prom, "0") == str(ranks[0].pid)
    # both ranks read (a window each) before the watch is stopped
    pids = "|".join(str(p.pid) for p in ranks.values())
    sampled = f'gilprof_sampler_windows_total{{pid=~"{pids}"}} >= 1'
    assert wait_for(lambda: len(prom.query(sampled)) == 2, 30), err.read_text()

    # SIGTERM: every rank's capture written whole, exit 143
    watch.send_signal(signal.SIGTERM)
    assert watch.wait(timeout=60) == 143, err.read_text()
    captures = sorted(out.glob("rank*-capture-*-terminate-*.json"))
    names = {p.name.split("-capture-")[0] for p in captures}
    assert {f"rank0-{ranks[0].pid}", f"rank1-{ranks[1].pid}"} <= names, err.read_text()
    for path in captures:
        assert Profile.load(path).windows
    assert time.monotonic() - start < 150
