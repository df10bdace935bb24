"""Renderers of kind "bench_reference": table (for people) and json (for scripts)."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from gilprof.reference import IMPL_NAMES
from gilprof.reference.bench import BenchResult, BenchRow
from gilprof.renderers import register
from gilprof.renderers._rich import to_text

BENCH_SCHEMA = "gilprof.bench_reference/1"


@register("bench_reference", "json")
def render_json(result: BenchResult, **_: Any) -> str:
    return json.dumps({"schema": BENCH_SCHEMA, **result.to_dict()}, indent=2) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(row: BenchRow, key: str) -> str:
    value = row.ratios.get(key)
    return "-" if value is None else f"{value:.2f}x"


def _bytes(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1e6:.1f} MB"
    return f"{count / 1e3:.1f} kB"


def _size(row: BenchRow) -> str:
    p = row.params
    if row.benchmark == "router":
        return f"{p['requests']} req, {p['ranks']} ranks"
    return f"{p['requests']} req, {_bytes(p['payload_bytes'])}"


def _note(row: BenchRow) -> str:
    if row.getter_reads_per_request:
        reads = "/".join(f"{row.getter_reads_per_request[n]:g}" for n in IMPL_NAMES)
        return f"reads/req {reads}"
    return f"rank 0 of {row.params['ranks']}"


def _tokens(rows: list[BenchRow]) -> str:
    ranges = {
        row.benchmark: f"{row.params['min_tokens']}-{row.params['max_tokens']}" for row in rows
    }
    if len(set(ranges.values())) == 1:
        return f"requests of {ranges.popitem()[1]} tokens"
    return "; ".join(f"{name}: {span} tokens/request" for name, span in ranges.items())


@register("bench_reference", "table")
def render_table(result: BenchResult, width: int | None = None, **_: Any) -> str:
    settings = result.settings
    rows = ([result.router] if result.router else []) + result.broadcast
    table = Table(
        title=(
            f"Reference implementations, median ms of {settings['repeats']} runs "
            f"(python {settings['python']}, {settings['cpus']} CPUs); {_tokens(rows)}"
        ),
        title_justify="left",
    )
    table.add_column("benchmark", no_wrap=True)
    table.add_column("size", no_wrap=True)
    for name in IMPL_NAMES:
        table.add_column(name, justify="right")
    table.add_column("before/\nafter", justify="right")
    table.add_column("before/\nfast", justify="right")
    table.add_column("note", no_wrap=True)
    for row in rows:
        table.add_row(
            row.benchmark,
            _size(row),
            *(_ms(row.median_ms.get(name)) for name in IMPL_NAMES),
            _ratio(row, "before/after"),
            _ratio(row, "before/fast"),
            _note(row),
        )
    footer = (
        "fast's broadcast and bcast are after's; before/fast there measures the same code "
        "twice.\n"
        "Broadcast times include waiting for the other ranks: with more ranks than cores "
        "they are noisy."
    )
    return to_text([table, footer], width=width)
