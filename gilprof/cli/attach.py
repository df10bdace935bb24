"""`gilprof attach`: find a rank (or launch its job), sample it, write one profile."""

from __future__ import annotations

import sys

import click

from gilprof.cli._options import (
    LaunchCommand,
    SamplingChoice,
    StartChoice,
    backend_option,
    duration_option,
    given,
    keep_cmdline_option,
    match_option,
    sampling_options,
    start_options,
    wait_timeout_option,
)
from gilprof.cli._recipe import recipe_option, start_of
from gilprof.recipes import Recipe
from gilprof.renderers.live import LiveStatus
from gilprof.sampling.capture import CaptureRequest, capture
from gilprof.sampling.discover import Selection, TargetQuery


@click.command("attach", cls=LaunchCommand, context_settings={"ignore_unknown_options": True})
@click.option(
    "--ranks",
    metavar="all|local|N-M|N,M",
    help="Sample several ranks at once (one sampler each); -o is then a folder.",
)
@click.option(
    "--pid",
    type=int,
    help="Sample this PID; a shell or launcher PID resolves to its Python descendants.",
)
@click.option("--rank", type=int, help="Global rank to sample (default 0 when a job is found).")
@click.option("--job", type=int, help="Only consider descendants of this launcher PID.")
@click.option(
    "--role",
    metavar="gen|ctx|NAME",
    help="Only ranks of this instance role (disaggregated serving; see `gilprof ps`).",
)
@match_option
@duration_option("Seconds to sample (default: until the target exits or Ctrl-C).")
@sampling_options
@start_options
@backend_option
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    help="Profile file (default gilprof-rank<R>-<pid>-<time>.json); a folder with --ranks.",
)
@wait_timeout_option("Launch mode: seconds to wait for the rank to start.")
@keep_cmdline_option
@recipe_option
@click.option("-q", "--quiet", is_flag=True, help="No live status line.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(
    ranks: str | None,
    pid: int | None,
    rank: int | None,
    job: int | None,
    role: str | None,
    match: str | None,
    duration: float | None,
    sampling: SamplingChoice,
    start: StartChoice,
    backend: str,
    output: str | None,
    wait_timeout: float,
    keep_cmdline: bool,
    recipe: Recipe | None,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """Sample one rank of a running or just-launched job with py-spy (or austin).

    \b
    Attach to a running job:
      gilprof attach --rank 0 -d 20 -o rank0.json      # rank 0 of the job on this host
      gilprof attach --pid 4242 -d 20                  # a shell or mpiexec PID resolves to its ranks
      gilprof attach --job $(pgrep -n mpiexec) --rank 3
      gilprof attach --rank 0 --role gen -d 20        # rank 0 of the generation instance
      gilprof attach --ranks all -d 20 -o prof/       # every local rank, one profile each
      gilprof attach --rank 0 -d 20 -o r0.json         # the default mode: GIL waits, blame and
                                                       # why each thread blocks, never pausing it
      gilprof attach --rank 0 --backend austin --mode wall -d 20
    Launch a job and sample it (exits with the job's exit code):
      gilprof attach --rank 0 -o rank0.json -- mpiexec -n 4 python app.py
    Start sampling later (imports and warm-up skipped):
      gilprof attach --rank 0 --start-on 'iter =' -d 20 -- mpiexec -n 4 python app.py
      gilprof attach --rank 0 --start-on-log gen.log:'iter =' -d 20
      gilprof attach --pid 4242 --start-after 30 -d 20

    The profile keeps the raw stacks per sampling window; read it with `gilprof report`.
    Ctrl-C stops sampling and still writes the profile, marked partial.

    \b
    Exit status:
      0    profile complete
      6    profile written but partial: the target exited before --duration ended
      130  interrupted (SIGINT/SIGTERM); profile written, marked partial (while waiting
           for a start trigger: nothing written)
      2 usage, 3 target not found or gone (or the start trigger never fired: the job
      exited, or --start-timeout passed), 4 no ptrace permission, 5 sampler failed
      launch mode: the job's exit status
    """
    parent_match, rules = None, None
    if recipe is not None:  # the recipe supplies defaults; flags the user gave win
        ctx = click.get_current_context()
        target_spec, defaults = recipe.target, recipe.sampling
        rank = rank if given(ctx, "rank") or pid is not None else target_spec.rank
        match = match if given(ctx, "match") else target_spec.match
        rules = target_spec.role_rules(recipe.name)
        role = role if given(ctx, "role") else target_spec.role
        # With a role, parent_match is one way to tell the role (a rule), not a filter.
        parent_match = None if target_spec.role else target_spec.parent_match
        duration = duration if given(ctx, "duration") else defaults.duration
        sampling = sampling.or_defaults(
            defaults.mode, defaults.rate, defaults.native, recipe.native
        )
    request = CaptureRequest(
        settings=sampling.settings,
        backend=backend,
        duration=duration,
        window_s=sampling.window,
        wanted=TargetQuery(pid, rank, job, Selection(match, parent_match, role, rules)),
        ranks=ranks,
        command=command,
        output=output,
        wait_timeout=wait_timeout,
        keep_cmdline=keep_cmdline,
        start=start_of(start, recipe, launch=bool(command), quiet=quiet),
    )
    result = capture(
        request, LiveStatus(enabled=not quiet and sys.stderr.isatty(), say_waits=not quiet)
    )
    if result.exit_code:
        click.get_current_context().exit(result.exit_code)
