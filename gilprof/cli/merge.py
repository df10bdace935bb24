"""`gilprof merge`: gather per-host (or per-piece) profiles of one job into one bundle."""

from __future__ import annotations

import os

import click

from gilprof.errors import UsageError
from gilprof.profile import check_writable, load_profiles, merge_profiles, save_bundle


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(), help="Bundle file to write.")
def command(inputs: tuple[str, ...], output: str) -> None:
    """Combine profiles of one job (several ranks, several hosts) into one bundle file.

    \b
    Inputs are profile files, bundles, or folders of them (e.g. one folder per node from
    `gilprof attach --ranks local -o out/$(hostname)`). Pieces of the same process
    (same host and pid) are joined window after window; other processes stay separate.
    `gilprof report BUNDLE` shows the ranks side by side.

    \b
    Every node, with the job's own launcher (one gilprof per node):
      mpiexec -n 2 -ppn 1 gilprof attach --ranks local -d 20 -o out/node-'$PMI_RANK'
      srun --ntasks-per-node=1 gilprof attach --ranks local -d 20 -o out/node-$SLURM_NODEID
      gilprof merge out/ -o job.json && gilprof report job.json
    """
    check_writable(output)  # before the inputs are read
    paths: list[str] = []
    for item in inputs:
        if os.path.isdir(item):
            for root, _dirs, files in sorted(os.walk(item)):
                paths += [os.path.join(root, f) for f in sorted(files) if f.endswith(".json")]
        else:
            paths.append(item)
    if not paths:
        raise UsageError("no profile files found in the given inputs")
    profiles = [p for path in paths for p in load_profiles(path)]
    merged = merge_profiles(profiles)
    save_bundle(output, merged)
    click.echo(
        f"gilprof: merged {len(profiles)} profiles from {len(paths)} files into "
        f"{len(merged)} processes: {output}",
        err=True,
    )
