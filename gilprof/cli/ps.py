"""`gilprof ps`: the Python ranks of distributed jobs on this host."""

from __future__ import annotations

import json
import sys

import click
from rich.table import Table

from gilprof.discover import job_processes
from gilprof.redact import redact_cmdline
from gilprof.renderers._rich import to_text


@click.command("ps")
@click.option("--job", type=int, help="Only descendants of this launcher PID.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def command(job: int | None, as_json: bool) -> None:
    """List Python processes that belong to distributed jobs on this host.

    \b
    A process qualifies when it carries a rank variable (OMPI_COMM_WORLD_RANK, PMIX_RANK,
    PMI_RANK, SLURM_PROCID, RANK, ...) or runs under a launcher (mpiexec, mpirun,
    hydra_pmi_proxy, srun, torchrun, prterun, ...). Only rank variables are read from a
    process's environment; nothing else is kept or printed, and secret-looking command-line
    values (--api-key X, --token=X, *_KEY=X) are shown as <redacted>.

    \b
    Examples:
      gilprof ps
      gilprof ps --json | jq '.[] | select(.rank == 0) | .pid'
    """
    procs = job_processes(job)
    shown = {p.pid: _short(" ".join(redact_cmdline(p.cmdline)) or p.name) for p in procs}
    if as_json:
        rows = [{"pid": p.pid, "ppid": p.ppid, "launcher": p.launcher, "launcher_pid": p.launcher_pid,
                 "rank": p.rank, "local_rank": p.local_rank, "world_size": p.world_size,
                 "rank_source": p.rank_source, "role": p.role, "threads": p.threads,
                 "cmdline": shown[p.pid]} for p in procs]
        click.echo(json.dumps(rows, indent=2))
        return
    if not procs:
        click.echo("no Python ranks of distributed jobs found on this host", err=True)
        return
    table = Table()
    for name in ("pid", "launcher", "rank", "local", "size", "rank var", "threads", "command"):
        table.add_column(name, justify="right" if name in ("pid", "rank", "local", "size", "threads") else "left")
    for p in procs:
        table.add_row(str(p.pid), f"{p.launcher or '-'}({p.launcher_pid or '-'})",
                      _opt(p.rank), _opt(p.local_rank), _opt(p.world_size), p.rank_source or "-",
                      str(p.threads), shown[p.pid])
    click.echo(to_text([table], color=sys.stdout.isatty()), nl=False)


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)
