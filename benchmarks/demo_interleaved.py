"""The demo's prediction with before and after interleaved in one job: the model, or the pairing?

    python benchmarks/demo_interleaved.py                  # 4 blocks of 10 s per side, ~2 min
    python benchmarks/demo_interleaved.py --blocks 6 --json out.json

`gilprof demo` predicts the fixes' saving from one run of the unfixed server and measures it
on a second run of the fixed one. On a 2-core machine the unfixed server's mean step moves by
a third between runs of the same code, so one pair of runs measures the pairing as much as
the model. This script takes the pairing out: one job (`examples/disagg_gen/server.py --impl
before --after-flag FLAG`, 4 ranks, the simulated device's 20 ms), whose rank 0 runs the
fixed variant while FLAG exists. It alternates blocks (before, after, after, before, ...:
each side as often first as second, so a drift over the run falls on both), samples rank 0
in the states mode in every block, 1 s windows at 100 Hz, and keeps the log lines each block
wrote, after 1 s for the switch to take hold.

Reported, pooled over the blocks, per before/after pair and paired (the mean of the pairs'
savings with a t interval over the pairs): the mean host step of each side,
the saving predicted from the before blocks' profile alone (the demo's prediction: the
reference fixes' `FUNC:LINE` specs, the device step known), the measured saving with its
batch-means interval, and the demo's one-line judgement (gilprof.cli.demo_run). Exit status:
0 when the pooled prediction agrees by one of the demo's bars, 1 when not, 2 when the run
failed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import _common
from _common import BenchmarkError

_common.ensure_gilprof_importable()

from gilprof.analysis.attribution import DEFAULT_WATCH  # noqa: E402
from gilprof.cli._demo_check import agreement, measured_saving, prediction_gap  # noqa: E402
from gilprof.cli._verdict import VerdictChoice  # noqa: E402
from gilprof.cli.demo_run import predict_fixes, rank0_records  # noqa: E402
from gilprof.model import Mode  # noqa: E402
from gilprof.profile import Profile, merge_profiles  # noqa: E402
from gilprof.recipes import load_recipe  # noqa: E402
from gilprof.sampling.backends import SamplerSettings, get_backend  # noqa: E402
from gilprof.sampling.capture import make_target, stop_on_signals  # noqa: E402
from gilprof.sampling.discover import Selection  # noqa: E402
from gilprof.sampling.launch import LaunchedJob  # noqa: E402
from gilprof.sampling.processes import find_binary  # noqa: E402
from gilprof.sampling.session import SessionOptions, run_session  # noqa: E402
from gilprof.stats import t_quantile  # noqa: E402
from gilprof.steps import RankSteps, StepRecord, summarize  # noqa: E402

SERVER = _common.REPO_ROOT / "examples" / "disagg_gen" / "server.py"
DEVICE_MS = 20.0
WARMUP_S = 4.0
SETTLE_S = 1.0  # the flag is looked for every 0.5 s; then one step in the new variant


def _steps(records: list[StepRecord]) -> RankSteps:
    steps = summarize(records, rank=0).rank(0)
    if steps is None:
        raise BenchmarkError("a block logged no steps")
    return steps


class Block:
    def __init__(self, side: str, profile: Profile, lines: tuple[int, int]) -> None:
        self.side, self.profile, self.lines = side, profile, lines


def run_blocks(args: argparse.Namespace, folder: Path, stop: threading.Event) -> list[Block]:
    flag, log = folder / "after.flag", folder / "steps.log"
    per_block = args.block_s + SETTLE_S + 2.0
    duration = WARMUP_S + 2 * args.blocks * per_block + 10.0
    argv = [
        find_binary("mpiexec"),
        *("-n", str(args.ranks), sys.executable, str(SERVER), "--impl", "before"),
        *("--after-flag", str(flag), "--duration", f"{duration:g}"),
        *(f"--device-ms={DEVICE_MS:g}", "--log-file", str(log)),
    ]
    server_out = open(folder / "server.out", "wb")  # noqa: SIM115 - closed below
    job = LaunchedJob(argv, stdout=server_out.fileno(), stderr=server_out.fileno())
    blocks: list[Block] = []
    try:
        info = job.wait_for_rank(0, Selection(), timeout=90, stop=stop)
        stop.wait(WARMUP_S)
        target = make_target(info, keep_cmdline=False)
        options = SessionOptions(
            SamplerSettings(Mode.STATES, 100.0), duration=args.block_s, window_s=1.0
        )
        order = [
            ("before", "after") if b % 2 == 0 else ("after", "before") for b in range(args.blocks)
        ]
        for sides in order:
            for side in sides:
                if stop.is_set():
                    raise KeyboardInterrupt
                if side == "after":
                    flag.touch()
                else:
                    flag.unlink(missing_ok=True)
                stop.wait(SETTLE_S)
                first = len(rank0_records(log))
                profile = run_session(target, get_backend("py-spy"), options, stop)
                blocks.append(Block(side, profile, (first, len(rank0_records(log)))))
                print(
                    f"  block {len(blocks)}: {side:6s} steps {first}-{blocks[-1].lines[1]}",
                    file=sys.stderr,
                )
    finally:
        job.shutdown(grace=10)
        server_out.close()
    return blocks


def judge(befores: list[Block], afters: list[Block], records: list[StepRecord]) -> dict[str, Any]:
    """The demo's prediction from the before blocks, against the after blocks."""
    [before] = merge_profiles([b.profile for b in befores])
    [after] = merge_profiles([b.profile for b in afters])
    steps_b = _steps([r for b in befores for r in records[b.lines[0] : b.lines[1]]])
    steps_a = _steps([r for b in afters for r in records[b.lines[0] : b.lines[1]]])
    recipe = load_recipe("disagg-gen-example")
    watch = DEFAULT_WATCH + recipe.watch_names()
    verdict_judge = VerdictChoice(skip_warmup=0).judge
    verdict_b = verdict_judge(before, steps_b, recipe, watch)
    verdict_judge(after, steps_a, recipe, watch)  # the after profile must read too
    prediction = predict_fixes(before, verdict_b, steps_b, DEVICE_MS)
    measured = measured_saving(steps_b, steps_a)
    saving = prediction.step_saving_ms
    gap = prediction_gap(prediction, steps_b, steps_a)
    return {
        "before_ms": round(steps_b.host_step_ms.mean, 2),
        "after_ms": round(steps_a.host_step_ms.mean, 2),
        "predicted_saving_ms": round(saving.value, 2),
        "measured_saving_ms": round(measured.value, 2),
        "measured_95": [round(measured.low, 2), round(measured.high, 2)],
        "error": round((saving.value - measured.value) / measured.value, 3)
        if measured.value
        else None,
        "judgement": agreement(saving, measured, gap),
    }


def paired_saving(pairs: list[dict[str, Any]]) -> dict[str, float] | None:
    """The mean of the pairs' measured savings with a t interval over the pairs: each pair's
    two blocks are seconds apart, so what the machine does over minutes falls on both sides of
    each difference (the pooled batch-means interval keeps the jumps between blocks)."""
    if len(pairs) < 2:
        return None
    savings = [p["measured_saving_ms"] for p in pairs]
    predicted = statistics.fmean(p["predicted_saving_ms"] for p in pairs)
    mean = statistics.fmean(savings)
    half = t_quantile(0.975, len(savings) - 1) * statistics.stdev(savings) / len(savings) ** 0.5
    return {
        "measured_ms": mean,
        "low_ms": mean - half,
        "high_ms": mean + half,
        "predicted_ms": predicted,
        "error": (predicted - mean) / mean if mean else math.nan,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=4, help="before/after pairs (default 4)")
    parser.add_argument("--block-s", type=float, default=10.0, help="seconds sampled per block")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.blocks < 1 or args.block_s < 3:
        parser.error("--blocks must be >= 1 and --block-s >= 3")
    try:
        with (
            tempfile.TemporaryDirectory(prefix="gilprof-interleaved-") as tmp,
            stop_on_signals() as stop,
        ):
            blocks = run_blocks(args, Path(tmp), stop)
            records = rank0_records(Path(tmp) / "steps.log")
            befores = [b for b in blocks if b.side == "before"]
            afters = [b for b in blocks if b.side == "after"]
            pooled = judge(befores, afters, records)
            pairs = [judge([b], [a], records) for b, a in zip(befores, afters, strict=True)]
    except (BenchmarkError, OSError) as exc:
        print(f"demo_interleaved: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("demo_interleaved: interrupted", file=sys.stderr)
        return 2
    print(
        f"{'':8s} {'before':>7s} {'after':>7s} {'pred':>6s} {'meas':>6s} {'meas 95%':>14s} {'error':>6s}"
    )
    for name, row in [("pooled", pooled), *((f"pair {i + 1}", p) for i, p in enumerate(pairs))]:
        low, high = row["measured_95"]
        error = "n/a" if row["error"] is None else f"{100 * row['error']:+.0f}%"
        print(
            f"{name:8s} {row['before_ms']:7.1f} {row['after_ms']:7.1f} "
            f"{row['predicted_saving_ms']:6.1f} {row['measured_saving_ms']:6.1f} "
            f"{f'[{low:.1f}, {high:.1f}]':>14s} {error:>6s}"
        )
    print(f"pooled: {pooled['judgement']}")
    paired = paired_saving(pairs)
    if paired is not None:
        print(
            f"paired: measured saving {paired['measured_ms']:.1f} ms, 95% CI "
            f"[{paired['low_ms']:.1f}, {paired['high_ms']:.1f}] over {len(pairs)} pairs (t over "
            f"the pairs' own savings); predicted {paired['predicted_ms']:.1f} ms; error "
            f"{100 * paired['error']:+.0f}%"
        )
    if args.json:
        figures = {
            "settings": vars(args) | {"json": str(args.json)},
            "pooled": pooled,
            "pairs": pairs,
            "paired": paired,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 1 if "DISAGREES" in pooled["judgement"] else 0


if __name__ == "__main__":
    sys.exit(main())
