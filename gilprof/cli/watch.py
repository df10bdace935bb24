"""`gilprof watch`: a flight recorder that keeps the last minutes and writes them on a trigger."""

from __future__ import annotations

import sys
from datetime import datetime

import click

from gilprof.cli._options import (
    SamplingChoice,
    backend_option,
    keep_cmdline_option,
    match_option,
    number_option,
    sampling_options,
)
from gilprof.cli._recipe import recipe_option
from gilprof.cli._watch_console import WatchConsole, host_step_ms
from gilprof.cli._watch_metrics import MetricsChoice, metrics_options, run_watch
from gilprof.errors import UsageError
from gilprof.recipes import Recipe
from gilprof.sampling.discover import Selection, TargetQuery
from gilprof.sampling.flight import RecorderOptions, WatchRequest, watch
from gilprof.sampling.recorder import parse_seconds, parse_trigger, parse_until


@click.command("watch")
@click.option("--pid", type=int, help="Record this PID (a launcher PID resolves to its ranks).")
@click.option("--rank", type=int, help="Global rank to record (default 0 when a job is found).")
@click.option("--job", type=int, help="Only consider descendants of this launcher PID.")
@click.option("--role", metavar="gen|ctx|NAME", help="Only ranks of this instance role.")
@match_option
@sampling_options
@backend_option
@click.option("-o", "--output", type=click.Path(), required=True, help="Folder for the captures.")
@click.option("--keep", default="5m", show_default=True, help="Minutes kept before a trigger.")
@click.option("--after", default="1m", show_default=True, help="Sampling kept after a trigger.")
@click.option("--steps-log", type=click.Path(), help="Iteration log to follow (from its end).")
@click.option("--trigger", metavar="p50>MS|p50>Fx", help="Step trigger on --steps-log.")
@number_option(
    "--over", type=click.IntRange(min=1), default=20, metavar="K", help="Iterations of the p50."
)
@click.option("--baseline", default="2m", show_default=True, help="Baseline for p50>Fx.")
@click.option("--until", metavar="HH:MM|SECONDS", help="Write a last capture then and exit.")
@number_option("--max-captures", type=click.IntRange(min=1), metavar="N", help="Exit after N.")
@click.option("--min-gap", default="10m", show_default=True, help="Triggers closer are ignored.")
@keep_cmdline_option
@metrics_options
@recipe_option
@click.option("-q", "--quiet", is_flag=True, help="No live status line.")
def command(
    pid: int | None,
    rank: int | None,
    job: int | None,
    role: str | None,
    match: str | None,
    sampling: SamplingChoice,
    backend: str,
    output: str,
    keep: str,
    after: str,
    steps_log: str | None,
    trigger: str | None,
    over: int,
    baseline: str,
    until: str | None,
    max_captures: int | None,
    min_gap: str,
    keep_cmdline: bool,
    ranks: str | None,
    metrics: str | None,
    metrics_window: str,
    metrics_job: str | None,
    recipe: Recipe | None,
    quiet: bool,
) -> None:
    """Record a rank for hours; write the last minutes when something happens.

    Samples without pausing the target (states mode) in --window windows, keeps the last
    --keep of them in bounded memory, and writes a capture (a profile of the kept minutes
    and --after more) to -o DIR as capture-<n>-<trigger>-<time>.json when a trigger fires.

    \b
    Triggers:
      --steps-log LOG --trigger 'p50>120'   host step p50 of the last --over iterations
                                            above 120 ms (read as LOG grows)
      --steps-log LOG --trigger 'p50>1.5x'  above 1.5 x the p50 of the first --baseline
      kill -USR1 <gilprof pid>              now
      --until 18:30 | --until 3600          at that time (or after that long), then exit
      Ctrl-C / SIGTERM                      writes what is kept, exits 130 / 143

    \b
    Examples:
      gilprof watch --rank 0 -o captures/ --steps-log rank0.log --trigger 'p50>1.5x'
      gilprof watch --pid 4242 -o captures/ --keep 10m --until 06:00 --max-captures 3
      gilprof watch --ranks local -o captures/ --metrics 9464 --recipe disagg-gen-example

    --ranks local records every rank of the job on this host and follows ranks that start,
    restart or exit; --metrics serves what each rank's last --metrics-window read as
    Prometheus series (docs/metrics.md lists them; --steps-log feeds rank 0's step times).

    A trigger within --min-gap of the last one is logged and ignored; the step trigger
    fires again only after the p50 fell back below its threshold. `gilprof report` on a
    capture shows the trigger, its time and the log lines around it. Durations take
    s, m, h (90s, 5m, 1h) or plain seconds.

    \b
    Exit status:
      0    --until reached, --max-captures written, or the target exited
      130  SIGINT (Ctrl-C), 143 SIGTERM: what was kept is written first, marked partial
      2 usage (e.g. -o not writable), 3 target not found, 4 no ptrace permission, 5 sampler
    """
    if trigger is not None and steps_log is None:
        raise UsageError("--trigger needs --steps-log LOG (the iteration log to follow)")
    options = RecorderOptions(
        settings=sampling.settings,
        folder=output,
        window_s=sampling.window,
        keep_s=parse_seconds(keep, "--keep"),
        after_s=parse_seconds(after, "--after"),
        min_gap_s=parse_seconds(min_gap, "--min-gap"),
        max_captures=max_captures,
        until_s=None if until is None else parse_until(until, datetime.now()),
        steps_log=steps_log,
        trigger=None if trigger is None else parse_trigger(trigger),
        over=over,
        baseline_s=parse_seconds(baseline, "--baseline"),
        host_ms_of=host_step_ms,
    )
    request = WatchRequest(
        options=options,
        backend=backend,
        wanted=TargetQuery(pid, rank, job, Selection(match, None, role, None)),
        keep_cmdline=keep_cmdline,
    )
    console = WatchConsole(live=not quiet and sys.stderr.isatty())
    metered = MetricsChoice(ranks, metrics, metrics_window, metrics_job, recipe)
    code = run_watch(request, console, metered) if metered.wanted else watch(request, console)
    if code:
        click.get_current_context().exit(code)
