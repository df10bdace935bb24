"""Where a command's rendered output goes: -o FILE (atomically) or stdout; CI summaries."""

from __future__ import annotations

import os
import sys

import click

from gilprof.errors import UsageError
from gilprof.profile import check_writable, write_bytes_atomic, write_text_atomic
from gilprof.renderers import info


def emit(kind: str, fmt: str, output: str | None, result: object, **options: object) -> None:
    """Render `result` as `fmt` to `output`, or to stdout; binary formats need -o."""
    renderer = info(kind, fmt)
    if renderer.binary and output is None:
        raise UsageError(f"--format {fmt} writes binary data: give -o FILE{renderer.extension}")
    check_output(output)  # before rendering: a big page is not rendered to be thrown away
    color = output is None and sys.stdout.isatty()
    data = renderer.func(result, color=color, **options)
    if output is None:
        click.echo(data, nl=False)
    elif isinstance(data, bytes):
        write_bytes_atomic(output, data)
    else:
        write_text_atomic(output, data)


def check_output(output: str | None) -> None:
    """Refuse an -o that cannot be written before the work (loading, analysis, rendering)."""
    if output is not None:
        check_writable(output)


def append_github_summary(markdown: str) -> None:
    """Append to $GITHUB_STEP_SUMMARY when a GitHub Actions job set it; warn if it cannot."""
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary_path:
        return
    try:
        with open(summary_path, "a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    except OSError as exc:
        click.echo(f"gilprof: warning: cannot append to GITHUB_STEP_SUMMARY: {exc}", err=True)
