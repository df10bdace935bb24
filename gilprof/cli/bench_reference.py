"""`gilprof bench-reference`: time the before/after/fast reference implementations."""

from __future__ import annotations

import shutil

import click

from gilprof.cli._options import format_option, number_option
from gilprof.reference.bench import BENCHMARKS, BenchPlan, run_bench
from gilprof.renderers import info, render


@click.command("bench-reference")
@number_option(
    "--ranks",
    type=click.IntRange(min=2),
    default=4,
    metavar="N",
    help="MPI ranks for the broadcast and bcast benchmarks (launched with mpiexec -n N).",
)
@number_option(
    "--repeats",
    type=click.IntRange(min=1),
    metavar="R",
    help="Timed runs per implementation and size; the median is reported. [default: 7, quick 5]",
)
@click.option("--quick", is_flag=True, help="Small sizes: seconds instead of a minute.")
@click.option(
    "--only",
    type=click.Choice(list(BENCHMARKS)),
    default=None,
    help="Run one benchmark; `router` needs no MPI.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request sizes.")
@number_option(
    "--timeout",
    type=click.FloatRange(min=1.0),
    default=900.0,
    metavar="SECONDS",
    help="Give up on the MPI part after this long (its processes are killed).",
)
@format_option("bench_reference", "table")
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json.")
def command(
    ranks: int,
    repeats: int | None,
    quick: bool,
    only: str | None,
    seed: int,
    timeout: float,
    fmt: str,
    as_json: bool,
) -> None:
    """Time known rank-0 hot spots before and after their fixes.

    \b
    Benchmarks (median per implementation, ratios before/after and before/fast):
      router     attention-DP routing of 2,880 requests of 1k-8k tokens across
                 8 ranks; each request's `input_token_ids` copies its token list
                 on every read, like the C++ binding. before reads it twice per
                 request, after once, fast not at all (O(1) num_input_tokens).
      broadcast  time on rank 0 of the chunked pickle broadcast of 32, 128 and
                 512 such requests to N-1 other ranks under mpiexec; before
                 also unpickles its own bytes (a deep copy), after does not.
                 fast uses after's broadcast.
      bcast      time on rank 0 of mpi4py's lowercase comm.bcast of the same
                 payloads: before keeps bcast's result on the root (an
                 unpickled copy), after sends the bytes and keeps its object.

    \b
    Examples:
      gilprof bench-reference                      # full sizes, 4 ranks, a table
      gilprof bench-reference --quick --format json  # small sizes, JSON for scripts
      gilprof bench-reference --only router --repeats 15
      gilprof bench-reference --ranks 2            # fewer ranks than cores: less noise

    Broadcast times include waiting for the other ranks; mpich busy-polls, so
    with more ranks than cores they are noisy. Needs `pip install 'gilprof[mpi]'`
    for the broadcast and bcast parts.
    """
    fmt = "json" if as_json else fmt
    info("bench_reference", fmt)  # an unknown format fails before a minute of benchmarks
    make_plan = BenchPlan.quick if quick else BenchPlan.full
    plan = make_plan(ranks=ranks, repeats=repeats, seed=seed)
    result = run_bench(plan, only=only, timeout=timeout)
    width = max(100, min(200, shutil.get_terminal_size((120, 24)).columns))
    click.echo(render("bench_reference", fmt, result, width=width), nl=False)
