"""Rendering rich renderables to a string, with colour only when asked for."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterable
from typing import Any

from rich.console import Console


def to_text(renderables: Iterable[Any], *, color: bool = False, width: int | None = None) -> str:
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        width=width or max(100, min(160, shutil.get_terminal_size((120, 40)).columns)),
        soft_wrap=False,
    )
    for item in renderables:
        console.print(item)
    return buffer.getvalue()


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{100 * value:.{digits}f}%"
