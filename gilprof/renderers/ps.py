"""Renderers of kind "ps": the Python ranks of distributed jobs on this host."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from gilprof.redact import redact_cmdline
from gilprof.renderers import register
from gilprof.renderers._rich import to_text
from gilprof.sampling.discover import ProcessInfo


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def _shown(p: ProcessInfo) -> str:
    return _short(" ".join(redact_cmdline(p.cmdline)) or p.name)


@register("ps", "json", extension=".json", description="machine-readable")
def render_json(procs: list[ProcessInfo], **_: Any) -> str:
    rows = [
        {
            "pid": p.pid,
            "ppid": p.ppid,
            "launcher": p.launcher,
            "launcher_pid": p.launcher_pid,
            "rank": p.rank,
            "local_rank": p.local_rank,
            "world_size": p.world_size,
            "rank_source": p.rank_source,
            "role": p.role,
            "role_source": p.role_source,
            "threads": p.threads,
            "cmdline": _shown(p),
        }
        for p in procs
    ]
    return json.dumps(rows, indent=2) + "\n"


@register("ps", "table", extension=".txt", description="for a terminal")
def render_table(procs: list[ProcessInfo], color: bool = False, **_: Any) -> str:
    table = Table()
    for name in (
        "pid",
        "launcher",
        "rank",
        "local",
        "size",
        "rank var",
        "role",
        "threads",
        "command",
    ):
        table.add_column(
            name, justify="right" if name in ("pid", "rank", "local", "size", "threads") else "left"
        )
    for p in procs:
        table.add_row(
            str(p.pid),
            f"{p.launcher or '-'}({p.launcher_pid or '-'})",
            _opt(p.rank),
            _opt(p.local_rank),
            _opt(p.world_size),
            p.rank_source or "-",
            p.role or "-",
            str(p.threads),
            _shown(p),
        )
    return to_text([table], color=color)
