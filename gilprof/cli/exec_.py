"""`gilprof exec`: run under the job's launcher; sample the selected ranks as children."""

from __future__ import annotations

import os
import re

import click

from gilprof.cli._options import (
    LaunchCommand,
    SamplingChoice,
    StartChoice,
    duration_option,
    keep_cmdline_option,
    sampling_options,
    start_options,
    wait_timeout_option,
)
from gilprof.errors import UsageError
from gilprof.renderers.live import LiveStatus
from gilprof.sampling.backends import get_backend
from gilprof.sampling.capture import prepare_folder
from gilprof.sampling.discover import RANK_VARIABLES, parse_rank_selection, rank_from_environment
from gilprof.sampling.exec_ import ExecRequest, exec_command, is_selected, run_and_sample
from gilprof.sampling.session import SessionOptions
from gilprof.sampling.triggers import start_spec

DEFAULT_FOLDER = "gilprof-profiles"


@click.command(
    "exec",
    cls=LaunchCommand,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--ranks",
    default="0",
    show_default=True,
    metavar="all|N|N-M|N,M",
    help="Ranks to sample; every other rank runs the command directly.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(),
    default=DEFAULT_FOLDER,
    metavar="DIR",
    show_default=True,
    help="Folder for the profiles, one rank<R>-<pid>.json per sampled rank.",
)
@duration_option("Seconds to sample (default: until the command exits). The command runs on.")
@sampling_options
@start_options
@click.option(
    "--match",
    help="Sample the first Python process in the command's tree whose command "
    "line matches this regex (default: the command, or its first Python "
    "descendant when the command is a script wrapper).",
)
@wait_timeout_option("Seconds to wait for that Python process to appear.")
@keep_cmdline_option
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def command(
    ranks: str,
    output: str,
    duration: float | None,
    sampling: SamplingChoice,
    start: StartChoice,
    match: str | None,
    wait_timeout: float,
    keep_cmdline: bool,
    quiet: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND as this rank; on the selected ranks, sample it as a child.

    Put gilprof between the launcher and the program. Each rank reads its rank
    variable (PMI_RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, ...). Selected ranks
    start the command as a child and sample it: a parent may trace its own child
    even where kernel.yama.ptrace_scope=1 or a missing SYS_PTRACE capability
    stops `gilprof attach`. Every other rank replaces itself with the command
    (exec): same PID, no sampler, no overhead once it runs. A sampled child inherits
    the launcher's descriptors (mpich's PMI_FD) and environment: MPI apps just work.

    \b
    Examples:
      mpiexec -n 8 gilprof exec --ranks 0 -o prof -- python app.py
      srun gilprof exec --ranks 0,4 -d 60 -- python -m my.server --port 8000
      gilprof exec -- python app.py        # no launcher: this process is rank 0
      gilprof exec --match mgmn_leader -- bash start_worker.sh GEN 0
      mpiexec -n 8 gilprof exec --start-on 'iter =' -d 30 -- python app.py
    Then: gilprof report prof/rank0-*.json

    \b
    Signals and exit status:
      SIGINT/SIGTERM to gilprof are forwarded to the command; sampling stops and
      the profile is written, marked partial. gilprof then waits for the command
      and exits with its exit status (killed by signal N: 128+N). In an
      interactive terminal the command stays in the foreground: Ctrl-C
      reaches it directly, once, and stops sampling too.
      2: usage error (no command, bad --ranks, unwritable -o), nothing started.
      A start trigger (--start-*) that never fires: one error line, no profile;
      the command's exit status, or 3 if that is 0 (130 if interrupted).
      127: command not found; 126: command not executable (as a shell).
      If sampling fails, one error line is printed and the command runs on;
      the exit status is still the command's.
    """
    if not command:
        raise UsageError("no command given; usage: gilprof exec [OPTIONS] -- COMMAND [ARGS]...")
    wanted = parse_rank_selection(ranks)  # every rank validates, so all fail alike
    trigger = start_spec(start.start_after, start.start_on, start.start_on_log, start.start_timeout)
    identity = rank_from_environment(os.environ)
    if identity.variable is None and not quiet:
        click.echo(
            "gilprof: no rank variable set ("
            + ", ".join(RANK_VARIABLES[:4])
            + ", ...); running as rank 0, a single process",
            err=True,
        )
    if not is_selected(identity.rank, wanted):
        exec_command(command)
    try:
        pattern = re.compile(match) if match else None
    except re.error as exc:
        raise UsageError(f"--match: bad regular expression: {exc}") from None
    sampler = get_backend("py-spy")
    sampler.version()  # fail before starting the command if py-spy is missing
    prepare_folder(output)
    options = SessionOptions(
        settings=sampling.settings, duration=duration, window_s=sampling.window
    )

    request = ExecRequest(
        command=command,
        rank=identity,
        options=options,
        folder=output,
        match=pattern,
        wait_timeout=wait_timeout,
        keep_cmdline=keep_cmdline,
        start=trigger,
    )
    code = run_and_sample(
        request, sampler, LiveStatus(enabled=False, quiet=quiet, say_waits=not quiet)
    )
    click.get_current_context().exit(code)
