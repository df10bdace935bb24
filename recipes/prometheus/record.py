"""Record the series the rules' unit tests run on, from real `gilprof watch --metrics` runs of
the bundled example server (4 ranks under mpiexec): unfixed (`--impl before`) and fixed
(`--impl after`), rank 0's verdict, GIL wait and watched functions' cost per step, scraped
every --every seconds for --seconds. Writes recorded.json beside this file, then
gilprof-rules.test.yml from it (gilprof.renderers.alert_rules.rules_tests_text):

    python recipes/prometheus/record.py                    # record both, ~4 minutes
    python recipes/prometheus/record.py --from-recording   # rewrite the test file only

tests/unit/test_metrics_rules.py checks that the test file is what recorded.json gives and
runs `promtool test rules` on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gilprof.recipes import load_budget_file
from gilprof.renderers.alert_rules import rules_tests_text

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SERVER = ROOT / "examples" / "disagg_gen" / "server.py"
IMPLS = {"unfixed": "before", "fixed": "after"}
WARMUP_WINDOWS = 5  # rank 0 windows skipped before the recording starts
KEPT = ("gilprof_verdict", "gilprof_thread_gil_wait_ratio", "gilprof_function_step_seconds")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _selector(name: str, labels: dict[str, str]) -> str:
    labels = {**labels, "host": "h", "job": "example"}  # no host name in the repository
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def scrape(url: str, functions: set[str], threads: list[str]) -> dict[str, float]:
    """Rank 0's kept series in one scrape."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in KEPT or s.labels.get("rank") != "0":
                continue
            if "function" in s.labels and s.labels["function"] not in functions:
                continue
            thread = s.labels.get("thread")
            if s.name == KEPT[1] and not any(re.search(t, thread or "") for t in threads):
                continue
            found[_selector(s.name, s.labels)] = s.value
    return found


def record(impl: str, seconds: float, every: float, tmp: Path) -> list[dict[str, float]]:
    budgets = load_budget_file(str(HERE / "budgets.toml"))
    log, port = tmp / f"{impl}.log", _free_port()
    mpiexec = shutil.which("mpiexec") or sys.exit("mpiexec not found")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [mpiexec, "-n", "4", sys.executable, str(SERVER), "--impl", impl]
    argv += ["--duration", str(seconds + 60), "--warmup", "1", "--log-file", str(log)]
    quiet = subprocess.DEVNULL
    job = subprocess.Popen(argv, env=env, start_new_session=True, stdout=quiet, stderr=quiet)
    argv = [sys.executable, "-m", "gilprof", "watch", "--ranks", "local", "-q", "-o", str(tmp)]
    argv += ["--recipe", "disagg-gen-example", "--steps-log", str(log)]
    argv += ["--match", re.escape(str(log)), "--metrics", f"127.0.0.1:{port}"]
    watch = subprocess.Popen(argv, env=env, start_new_session=True, stdout=quiet)
    url = f"http://127.0.0.1:{port}/metrics"
    functions, threads = set(budgets.max_ms_per_step), list(budgets.max_wait)
    try:
        # past the warm-up: rank 0's first windows hold the server's start (no steps yet),
        # which reads undetermined and is no part of a serving fleet's day
        deadline = time.monotonic() + 90
        while _windows(url) < WARMUP_WINDOWS:
            if time.monotonic() > deadline or watch.poll() is not None:
                sys.exit(f"{impl}: rank 0 read fewer than {WARMUP_WINDOWS} windows in 90 s")
            time.sleep(1)
        scrapes = []
        t0 = time.monotonic()
        for i in range(round(seconds / every)):
            time.sleep(max(0.0, t0 + i * every - time.monotonic()))
            scrapes.append(scrape(url, functions, threads))
        return scrapes
    finally:
        for proc in (watch, job):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def _windows(url: str) -> float:
    """Windows sampled of rank 0 so far (0 before the endpoint answers)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "gilprof_sampler_windows_total" and s.labels.get("rank") == "0":
                return float(s.value)
    return 0.0


def write_tests(recording: dict) -> None:
    budgets = load_budget_file(str(HERE / "budgets.toml"))
    text = rules_tests_text(recording, budgets, "recipes/prometheus/recorded.json")
    (HERE / "gilprof-rules.test.yml").write_text(text)
    print(f"wrote {HERE / 'gilprof-rules.test.yml'}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=100.0)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--from-recording", action="store_true")
    options = parser.parse_args(argv)
    path = HERE / "recorded.json"
    if not options.from_recording:
        cases = {}
        with tempfile.TemporaryDirectory(prefix="gilprof-record-") as tmp:
            for case, impl in IMPLS.items():
                scrapes = record(impl, options.seconds, options.every, Path(tmp))
                keys = sorted({k for s in scrapes for k in s})
                series = {k: [s.get(k) for s in scrapes] for k in keys}
                cases[case] = {"impl": impl, "series": series}
        command = f"python recipes/prometheus/record.py --seconds {options.seconds:g}"
        recording = {
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": command + f" --every {options.every}",
            "seconds": options.seconds,
            "every_s": options.every,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "cases": cases,
        }
        path.write_text(json.dumps(recording, indent=1) + "\n")
        print(f"wrote {path}")
    write_tests(json.loads(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
