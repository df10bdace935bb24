"""Where a command's rendered output goes: -o FILE (atomically) or stdout; CI summaries."""

from __future__ import annotations

import os
import sys

import click

from gilprof.errors import UsageError
from gilprof.profile import write_text_atomic
from gilprof.renderers import info


def emit(kind: str, fmt: str, output: str | None, result: object, **options: object) -> None:
    """Render `result` as `fmt` to `output`, or to stdout; binary formats need -o."""
    renderer = info(kind, fmt)
    if renderer.binary and output is None:
        raise UsageError(f"--format {fmt} writes binary data: give -o FILE{renderer.extension}")
    color = output is None and sys.stdout.isatty()
    data = renderer.func(result, color=color, **options)
    if output is None:
        click.echo(data, nl=False)
    elif isinstance(data, bytes):
        write_bytes_atomic(output, data)
    else:
        write_text_atomic(output, data)


def write_bytes_atomic(path: str, data: bytes) -> None:
    tmp = f"{path}.gilprof-tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


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
