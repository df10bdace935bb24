"""What the threaded workloads share: run their threads for a while, then write their truth.

Imported by its siblings as a top-level module (a script's folder is first on sys.path), so
stdlib only, like them: the targets run on several interpreters without gilprof installed.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Callable


def arguments(duration: float) -> argparse.ArgumentParser:
    """A parser with the options every workload takes: --duration S and --truth FILE."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=duration)
    parser.add_argument("--truth", default="")
    return parser


def run_for(seconds: float, stop: threading.Event, threads: list[threading.Thread]) -> None:
    """Start `threads`, let them run for `seconds`, then set `stop` and join them."""
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()


def write_truth(path: str, truth: dict[str, float | None]) -> None:
    """Write the truth as JSON, whole or not at all (the test polls for the file)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(truth, handle)
    os.replace(tmp, path)


def start_and_report_ids(path: str, named: tuple[tuple[str, Callable[[], None]], ...]) -> None:
    """Start one daemon thread per (name, function), write their Linux ids to `path` as
    JSON once they run (write_truth), and wait until the process is killed."""
    for name, function in named:
        threading.Thread(target=function, name=name, daemon=True).start()
    time.sleep(0.5)
    write_truth(
        path, {t.name: t.native_id for t in threading.enumerate() if t.name != "MainThread"}
    )
    threading.Event().wait()
