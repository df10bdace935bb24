"""Do the readers of one `gilprof attach --ranks all` hold each other back? The straggler job's
slow rank, read by a reader that shares gilprof's process (and GIL) with three others, or alone.

    python benchmarks/shared_readers.py                      # 3 runs of each, beside 4 CPU hogs
    python benchmarks/shared_readers.py --runs 4 --hogs 0 --switch 0.005 --switch 0.001

The job is the straggler test's (tests/integration/test_straggler_torchrun.py): 4 ranks under
torchrun (gloo, CPU), rank 2 sleeps 25 ms a step, then all meet in `dist.all_reduce`. Rank 2
logs the wall time it spent inside `time.sleep` (the truth). Each run samples 8 s:

- `all`: one gilprof for every rank (`--ranks all`): four readers in one process;
- `alone`: rank 2's gilprof alone in its process, a second gilprof for ranks 0, 1 and 3.

For each `--switch` (the readers' switch interval, gilprof's READER_SWITCH_INTERVAL_S, set in
the gilprof process before it starts) it prints the slow rank's sleep share read against the
truth, and gilprof's CPU (its processes and their py-spy children).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "accuracy"), str(HERE.parent)]

import _common  # noqa: E402

_common.ensure_gilprof_importable()

from accuracy_sample import hogs  # noqa: E402

from gilprof.analysis.straggler import rank_loop  # noqa: E402
from gilprof.profile import Profile  # noqa: E402
from tests.integration.test_straggler_torchrun import APP, SLEEP_MS, _step_log  # noqa: E402

SLOW_RANK = 2
SECONDS = 8
GILPROF = "import sys; import gilprof.sampling.backends.states as s; "
GILPROF += "s.READER_SWITCH_INTERVAL_S = float(sys.argv.pop(1)); "
GILPROF += "from gilprof.cli.main import main; main()"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _sample(job: int, folder: Path, layout: str, switch: float) -> float:
    """Run the gilprofs of one layout over SECONDS; their CPU seconds."""
    base = [sys.executable, "-c", GILPROF, str(switch), "attach", "--job", str(job)]
    base += ["-d", str(SECONDS), "--window", "1", "-q"]
    groups = ["all"] if layout == "all" else [str(SLOW_RANK), "0,1,3"]
    env = _common.child_env()
    cpu0 = _children_cpu()
    procs = [
        subprocess.Popen(
            [*base, "--ranks", ranks, "-o", str(folder / f"g{i}")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i, ranks in enumerate(groups)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=SECONDS + 120)
        if proc.returncode != 0:
            raise _common.BenchmarkError(f"gilprof attach failed: {err.decode()[-400:]}")
    return _children_cpu() - cpu0


def _one(job: int, log: Path, folder: Path, layout: str, switch: float) -> dict[str, Any]:
    start = time.time()
    cpu = _sample(job, folder, layout, switch)
    period_ms, truth = _step_log(log.read_text(), SLOW_RANK, start, time.time())
    profile = Profile.load(str(next(folder.rglob(f"rank{SLOW_RANK}-*.json"))))
    shares = {c.key: c.share for c in rank_loop(profile, ()).components}
    read = shares.get("sleep", 0.0)
    return {
        "layout": layout,
        "switch_s": switch,
        "truth": round(truth, 4),
        "read": round(read, 4),
        "error_points": round(100 * (read - truth), 2),
        "period_ms": round(period_ms, 2),
        "gilprof_cpu_s": round(cpu, 3),
    }


def run(options: argparse.Namespace) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gilprof-shared-readers-") as tmp:
        root = Path(tmp)
        app, stop, log = root / "app.py", root / "stop", root / "job.log"
        app.write_text(APP)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        cmd += ["--nproc-per-node", "4", str(app), "--stop-file", str(stop)]
        cmd += ["--slow-rank", str(SLOW_RANK), "--sleep-ms", str(SLEEP_MS)]
        cmd += ["--max-seconds", "3600"]
        with log.open("wb") as out:
            job = _common.start_in_session(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while log.read_text().count("step 40 ") < 4:
                if job.poll() is not None or time.monotonic() > deadline:
                    raise _common.BenchmarkError(f"the job did not start: {log.read_text()[-800:]}")
                time.sleep(0.2)
            with hogs(options.hogs):
                for i in range(options.runs):
                    for switch in options.switch or [0.005, 0.001]:
                        for layout in ("all", "alone"):
                            folder = root / f"run{i}-{switch}-{layout}"
                            rows.append(_one(job.pid, log, folder, layout, switch))
                            if not options.json:
                                print(rows[-1], flush=True)
        finally:
            stop.touch()
            try:
                job.wait(60)
            except subprocess.TimeoutExpired:
                _common.stop_session(job)
    summary = []
    for switch in sorted({r["switch_s"] for r in rows}, reverse=True):
        for layout in ("all", "alone"):
            cell = [r for r in rows if r["switch_s"] == switch and r["layout"] == layout]
            errors = [r["error_points"] for r in cell]
            summary.append(
                {
                    "switch_s": switch,
                    "layout": layout,
                    "runs": len(cell),
                    "mean_error_points": round(sum(errors) / len(errors), 2),
                    "errors_points": errors,
                    "gilprof_cpu_s_mean": round(
                        sum(r["gilprof_cpu_s"] for r in cell) / len(cell), 3
                    ),
                }
            )
    return {
        "machine": _common.machine_info(),
        "hogs": options.hogs,
        "rows": rows,
        "summary": summary,
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"\nslow rank's sleep share, read - truth (points), beside {result['hogs']} hogs:")
    for s in result["summary"]:
        print(
            f"  switch {s['switch_s'] * 1e3:g} ms, {s['layout']:5}: mean "
            f"{s['mean_error_points']:+.2f} over {s['runs']} runs {s['errors_points']}; gilprof CPU "
            f"{s['gilprof_cpu_s_mean']:.2f} s per {SECONDS} s"
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hogs", type=int, default=4)
    parser.add_argument("--switch", type=float, action="append", help="seconds (repeatable)")
    _common.output_options(parser)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(_common.run_main(None, parse_args, run, print_report))
