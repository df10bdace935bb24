"""Options shared by several commands, defined once so that names and help agree everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gilprof.model import Mode
from gilprof.sampling.session import DEFAULT_WINDOW_S

F = TypeVar("F", bound=Callable[..., Any])

MODE_HELP = (
    "gil: only the GIL holder; wall: all threads, idle included; cpu: active threads; "
    "contention: all threads with native frames, to tell holding, waiting for the GIL, "
    "native and idle apart (pauses the target per sample)."
)


def sampling_options(func: F) -> F:
    """-r/--rate, --mode, --native, --blocking, --window: how a sampler samples."""
    for option in reversed(
        (
            click.option(
                "-r",
                "--rate",
                type=click.IntRange(1, 10000),
                default=100,
                show_default=True,
                help="Samples per second.",
            ),
            click.option(
                "--mode",
                type=click.Choice([m.value for m in Mode]),
                default="gil",
                show_default=True,
                help=MODE_HELP,
            ),
            click.option(
                "--native", is_flag=True, help="Include native (C/C++) frames; implies --blocking."
            ),
            click.option(
                "--blocking",
                is_flag=True,
                help="Pause the target at each sample (more exact, much slower targets).",
            ),
            click.option(
                "--window",
                type=click.FloatRange(min=0.2),
                default=DEFAULT_WINDOW_S,
                show_default=True,
                help="Seconds per sampling window (the unit of time for confidence intervals).",
            ),
        )
    ):
        func = option(func)
    return func


def format_option(
    kind: str, default: str, *, extra_kinds: tuple[str, ...] = ()
) -> Callable[[F], F]:
    """--format, its choices read from the renderer registry of `kind` (and `extra_kinds`)."""
    from gilprof.renderers import describe_formats

    def decorate(func: F) -> F:
        return click.option(
            "--format",
            "fmt",
            default=default,
            show_default=True,
            metavar="FORMAT",
            help=f"Output format: {describe_formats(kind, *extra_kinds)}.",
        )(func)

    return decorate
