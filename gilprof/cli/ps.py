"""`gilprof ps`: the Python ranks of distributed jobs on this host."""

from __future__ import annotations

import sys

import click

from gilprof.cli._options import format_option
from gilprof.renderers import info, render
from gilprof.sampling.discover import job_processes


@click.command("ps")
@click.option("--job", type=int, help="Only descendants of this launcher PID.")
@format_option("ps", "table")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")
def command(job: int | None, fmt: str, as_json: bool) -> None:
    """List Python processes that belong to distributed jobs on this host.

    \b
    A process qualifies when it carries a rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK,
    PMI_RANK, SLURM_PROCID, RANK, ...) or runs under a launcher (mpiexec, mpirun,
    hydra_pmi_proxy, srun, torchrun, prterun, ...). Only rank variables are read from a
    process's environment; nothing else is kept or printed, and secret-looking command-line
    values (--api-key X, --token=X, *_KEY=X) are shown as <redacted>.

    \b
    The role column names the instance of a disaggregated deployment (gen, ctx, ...),
    read from GILPROF_ROLE, the launch command lines (start_worker.sh GEN|CTX,
    --extra_llm_api_options gen_*.yaml) or `trtllm-serve disaggregated_mpi_worker -c CFG`;
    `--format json` also says where it was read (role_source). gilprof's own processes
    (this one, its ancestors, a `gilprof exec` above a rank) are never listed.

    \b
    Examples:
      gilprof ps
      gilprof ps --format json | jq '.[] | select(.rank == 0) | .pid'
      gilprof ps --format json | jq '.[] | select(.role == "gen" and .rank == 0)'
    """
    fmt = "json" if as_json else fmt
    info("ps", fmt)  # an unknown format fails even when no process is found
    procs = job_processes(job)
    if not procs and fmt != "json":
        click.echo("no Python ranks of distributed jobs found on this host", err=True)
        return
    click.echo(render("ps", fmt, procs, color=sys.stdout.isatty()), nl=False)
