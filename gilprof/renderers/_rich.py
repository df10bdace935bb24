"""Rendering rich renderables to a string, with colour only when asked for."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.table import Table


def readable(table: Table) -> Table:
    """Figures (right-aligned columns) never wrap; text columns wrap whole words and fold a
    long name over lines instead of cutting it to an ellipsis: two rows never look alike."""
    for column in table.columns:
        if column.justify == "right":
            column.no_wrap = True
        elif column.overflow == "ellipsis":
            column.overflow = "fold"
    return table


def console_width(width: int | None = None) -> int:
    """The columns a terminal table is laid out for: `width`, else the terminal's, 100-160."""
    return width or max(100, min(160, shutil.get_terminal_size((120, 40)).columns))


def to_text(renderables: Iterable[Any], *, color: bool = False, width: int | None = None) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        width=console_width(width),
        soft_wrap=False,
    )
    for item in renderables:
        console.print(readable(item) if isinstance(item, Table) else item)
    return buffer.getvalue()


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"
