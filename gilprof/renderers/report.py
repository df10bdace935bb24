"""Renderers of kind "report": table, json, markdown (stack exports live in renderers.stacks)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from rich.table import Table
from rich.text import Text

from gilprof.analysis.attribution import Attribution, FunctionShare
from gilprof.analysis.blocking import Blocking, step_parts
from gilprof.analysis.contention import Contention
from gilprof.analysis.empty import why_empty
from gilprof.analysis.per_step import LoopCosts
from gilprof.analysis.verdict import Verdict
from gilprof.analysis.what_if import Prediction
from gilprof.model import is_wrapper_frame
from gilprof.profile import Profile
from gilprof.renderers import blocking, per_step, register
from gilprof.renderers._rich import pct, to_text
from gilprof.renderers.verdict_lines import verdict_lines

REPORT_SCHEMA = "gilprof.report/1"


@dataclass(frozen=True)
class ReportData:
    profile: Profile
    attribution: Attribution
    lines: bool = False
    contention: Contention | None = None
    # watched function -> (why it is hot, reference fix or None), from a recipe
    notes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    # host/device verdict of the step loop (report --steps), None without an iteration log
    verdict: Verdict | None = None
    top: int | None = 20  # function rows in table and markdown (json keeps every function)
    all_frames: bool = False  # keep thread-bootstrap and module-entry frames in the top list
    # with --steps: each function's cost to the loop per step, and what removing it saves
    costs: LoopCosts | None = None
    savings: tuple[Prediction, ...] = ()
    what_if: Prediction | None = None
    wide: bool = False  # every column in a terminal table (markdown and html have all)
    full_notes: bool = False  # report --notes: each NOTE whole (the rules it quotes too)
    # where every thread blocks, by the verdict's wait classes (states and contention mode)
    blocking: Blocking | None = None


def shown_functions(data: ReportData) -> list[FunctionShare]:
    """Functions by self share (then total), wrappers left out unless all_frames, cut to top."""
    rows = [
        f
        for f in data.attribution.functions
        if data.all_frames or not is_wrapper_frame(f.key.name, f.key.file)
    ]
    rows.sort(key=lambda f: (-f.self_samples, -f.total_samples, f.key.name, f.key.file))
    return rows if data.top is None else rows[: data.top]


def _function_label(f: FunctionShare, lines: bool) -> str:
    where = f.key.basename + (f":{f.key.line}" if lines and f.key.line else "")
    return f"{f.key.name} ({where})" if where else f.key.name


def report_dict(data: ReportData) -> dict[str, Any]:
    p, a = data.profile, data.attribution
    gil_mode = a.mode.knows_gil
    return {
        "schema": REPORT_SCHEMA,
        "target": {
            "pid": p.target.pid,
            "rank": p.target.rank,
            "rank_source": p.target.rank_source,
            "python": p.target.python,
            "hostname": p.target.hostname,
            "launcher": p.target.launcher,
        },
        "sampling": {
            "sampler": p.sampling.sampler,
            "sampler_version": p.sampling.sampler_version,
            "mode": str(a.mode),
            "rate_hz": p.sampling.rate_hz,
            "duration_s": round(a.duration_s, 6),
            "elapsed_s": round(p.sampling.elapsed_s, 6),
            "ticks": round(a.ticks),
            "ticks_source": p.sampling.ticks_source,
            "samples": a.samples,
            "errors": p.sampling.errors,
            "windows": len(p.windows),
            "partial": p.sampling.partial,
            "partial_reason": p.sampling.partial_reason,
            "priority": p.sampling.priority,
            "start_trigger": None
            if p.sampling.start_trigger is None
            else asdict(p.sampling.start_trigger),
            "messages": list(p.sampling.messages),
        },
        "gil": {
            "state_recorded": gil_mode,
            "utilization": a.utilization,
            "threads": _thread_rows(data),
        },
        "functions": [
            {
                "function": f.key.name,
                "file": f.key.file,
                "line": f.key.line if data.lines else None,
                "thread": f.key.thread,
                "self_share": f.self_share,
                "total_share": f.total_share,
                "self_s": f.self_s,
                "total_s": f.total_s,
                "self_samples": f.self_samples,
                "total_samples": f.total_samples,
            }
            for f in a.functions
        ],
        "watch": [
            {
                "function": w.function,
                "found": w.found,
                "self_share": w.self_share,
                "total_share": w.total_share,
                "self_s": w.self_s,
                "total_s": w.total_s,
                "matched": list(w.matched),
                "why": data.notes.get(w.function, ("", None))[0] or None,
                "fix": data.notes.get(w.function, ("", None))[1],
            }
            for w in a.watch
        ],
        **({"verdict": data.verdict.to_json()} if data.verdict is not None else {}),
        **(
            {"step_split": [part.to_json() for part in step_parts(data.verdict)]}
            if data.verdict is not None
            else {}
        ),
        **(
            {"wait_reasons": [site.to_json() for site in data.blocking.sites]}
            if data.blocking is not None and data.profile.sampling.mode.reads_states
            else {}
        ),
        **(
            {"per_step": per_step.costs_dict(data.costs, data.savings, data.what_if)}
            if data.costs is not None
            else {}
        ),
        "warnings": [w for w in (why_empty(p),) if w],
    }


def _thread_rows(data: ReportData) -> list[dict[str, Any]]:
    a, c = data.attribution, data.contention
    gil_mode = a.mode.knows_gil
    rows: dict[int, dict[str, Any]] = {
        t.tid: {
            "tid": t.tid,
            "name": t.name,
            "held_share": t.share if gil_mode else None,
            "sampled_share": t.share,
        }
        for t in a.threads
    }
    if c is not None:
        for t in c.threads:
            row = rows.setdefault(
                t.tid,
                {
                    "tid": t.tid,
                    "name": t.name,
                    "held_share": t.held_share,
                    "sampled_share": t.held_share,
                },
            )
            row.update(
                wait_share=t.wait_share,
                native_share=t.native_share,
                idle_share=t.idle_share,
                unclassified_share=t.unclassified_share,
            )
    return list(rows.values())


def contention_dict(c: Contention) -> dict[str, Any]:
    return {
        "wait_sites": [
            {"thread": w.thread, "function": w.function, "file": w.file, "share": w.share}
            for w in c.wait_sites
        ],
        "blame": [
            {
                "waiter": b.waiter,
                "holder": b.holder,
                "holder_function": b.holder_function,
                "holder_file": b.holder_file,
                "share": b.share,
            }
            for b in c.blame
        ],
        "native_places": [
            {"thread": n.thread, "place": n.place, "class": n.cls, "share": n.share}
            for n in c.native_places
        ],
    }


@register("report", "json", extension=".json", description="machine-readable")
def render_json(data: ReportData, **_: Any) -> str:
    out = report_dict(data)
    if data.contention is not None:
        out["blame"] = contention_dict(data.contention)["blame"]
        out["wait_sites"] = contention_dict(data.contention)["wait_sites"]
        out["native_places"] = contention_dict(data.contention)["native_places"]
    elif not data.attribution.mode.reads_states:
        out["contention_unavailable"] = (
            f"{data.attribution.mode} mode records no GIL wait; sample with --mode states "
            "(the default)"
        )
    return json.dumps(out, indent=2) + "\n"


def _note(message: str, full: bool) -> str:
    """A NOTE's first clause; the rules it quotes stay in JSON and behind --notes."""
    head, _, rest = message.partition("; ")
    return message if full or not rest or len(message) <= 100 else f"{head} [--notes: the rest]"


def _hidden_note(data: ReportData) -> str:
    parts = []
    if not data.all_frames:
        parts.append("thread bootstrap and <module> frames hidden (--all-frames)")
    total = len(data.attribution.functions)
    if data.top is not None and total > data.top:
        parts.append(f"top {data.top} of {total} (--top)")
    return f" [{'; '.join(parts)}]" if parts else ""


def _header_lines(p: Profile, a: Attribution, full_notes: bool = True) -> list[str]:
    t, s = p.target, p.sampling
    rank = "?" if t.rank is None else f"{t.rank} (from {t.rank_source})"
    lines = [
        f"target   pid {t.pid}  rank {rank}  host {t.hostname or '?'}  python {t.python or '?'}",
        f"sampling {s.sampler} {s.sampler_version}"
        f"{'' if s.has_lines else ' (stacks from the reader: functions, no lines)'}  mode {a.mode}  {s.rate_hz:g} Hz  "
        f"{a.duration_s:.1f} s sampled in {len(p.windows)} windows  {round(a.ticks)} ticks "
        f"({s.ticks_source})  {a.samples} samples  {s.errors} errors",
    ]
    if s.errors:
        share = min(1.0, s.errors / max(1.0, s.ticks))
        matters = (
            "few enough not to bias the shares"
            if share < 0.05
            else "enough to bias shares if they cluster in some code: sample again, or "
            "use --blocking"
        )
        lines.append(
            f"errors   {s.errors} samples the sampler failed to read (the target's "
            f"stack changed mid-read, or a thread exited); left out of every share: "
            f"{100 * share:.1f}% of ticks, {matters}"
        )
    if s.start_trigger is not None:
        lines.append(f"started  by {s.start_trigger.summary()}")
    if s.priority:
        lines.append(f"priority sampler ran {s.priority}")
    # What the sampler or gilprof learnt about this capture's accuracy (e.g. a sampler that
    # could not run at real-time priority reads short GIL bursts low under load).
    lines.extend(f"NOTE     {_note(message, full_notes)}" for message in s.messages)
    warning = why_empty(p)
    if warning:
        lines.append(f"WARNING  {warning}")
    if s.partial:
        lines.append(f"PARTIAL  {s.partial_reason or 'run ended early'}")
    return lines


@register("report", "table", extension=".txt", description="for a terminal")
def render_table(
    data: ReportData, *, color: bool = False, width: int | None = None, **_: Any
) -> str:
    """`color` and `width` are the terminal's; what to show is in `data`."""
    p, a = data.profile, data.attribution
    gil_mode = a.mode.knows_gil
    out: list[Any] = [
        Text(line, style="bold" if i == 0 else "")
        for i, line in enumerate(verdict_lines(data.verdict))
    ]
    if data.costs is not None:  # ms per step leads: the unit a decision is made in
        out += per_step.tables(data.costs, data.savings, data.what_if, data.top, data.wide)
    out += [Text(line) for line in _header_lines(p, a, data.full_notes)]
    if gil_mode:
        out.append(
            Text(f"GIL utilization {pct(a.utilization)} of ticks had a GIL holder", style="bold")
        )
    else:
        out.append(
            Text(
                f"{a.mode} mode records no GIL state: shares are per thread, not GIL-held time",
                style="yellow",
            )
        )

    threads = Table(title="Threads", title_justify="left")
    threads.add_column("thread")
    threads.add_column("tid", justify="right")
    threads.add_column("held share" if gil_mode else "sampled share", justify="right")
    threads.add_column("seconds", justify="right")
    for t in a.threads:
        threads.add_row(t.name, str(t.tid), pct(t.share), f"{t.share * a.duration_s:.2f}")
    out.append(threads)
    blocked = blocking.table(data.blocking.sites) if data.blocking else None
    if blocked is not None:
        out.append(blocked)

    if data.contention is not None:
        out += _contention_tables(data.contention)
    title = (
        "Functions by self share (GIL holder's stack)" if gil_mode else "Functions by self share"
    )
    funcs = Table(title=title, title_justify="left")
    funcs.add_column("function")
    if a.by_thread:
        funcs.add_column("thread")
    for name in ("self", "total", "self s", "total s"):
        funcs.add_column(name, justify="right")
    for f in shown_functions(data):
        row = [_function_label(f, data.lines)]
        if a.by_thread:
            row.append(f.key.thread or "")
        row += [pct(f.self_share), pct(f.total_share), f"{f.self_s:.2f}", f"{f.total_s:.2f}"]
        funcs.add_row(*row)
    out.append(funcs)
    if _hidden_note(data):
        out.append(Text(_hidden_note(data).strip(" []"), style="dim"))

    if a.watch:
        watch = Table(title="Watched functions", title_justify="left")
        for name in ("function", "seen", "self", "total", "total s"):
            watch.add_column(name, justify="left" if name in ("function", "seen") else "right")
        for w in a.watch:
            seen = "yes" if w.found else "NEVER SEEN"
            watch.add_row(
                w.function,
                seen,
                pct(w.self_share),
                pct(w.total_share),
                f"{w.total_s:.2f}",
                style=None if w.found else "dim",
            )
        out.append(watch)
        for w in a.watch:
            why, fix = data.notes.get(w.function, ("", None))
            if why or fix:
                out.append(
                    Text(
                        f"{w.function}: {' '.join(why.split())}" + (f" Fix: {fix}" if fix else ""),
                        style="dim",
                    )
                )
    return to_text(out, color=color, width=width)


def _contention_tables(c: Contention) -> list[Any]:
    states = Table(title="GIL contention per thread (share of wall time)", title_justify="left")
    for name in ("thread", "held", "waiting for GIL", "native (no GIL)", "idle", "unclassified"):
        states.add_column(name, justify="left" if name == "thread" else "right")
    for t in c.threads:
        states.add_row(
            t.name,
            pct(t.held_share),
            pct(t.wait_share),
            pct(t.native_share),
            pct(t.idle_share),
            pct(t.unclassified_share),
        )
    sites = Table(title="Where threads wait for the GIL", title_justify="left")
    for name in ("thread", "waiting in", "share of wall"):
        sites.add_column(name, justify="right" if name.startswith("share") else "left")
    for w in c.wait_sites[:15]:
        sites.add_row(w.thread, f"{w.function} ({w.file})", pct(w.share))
    blame = Table(
        title="Blame: while WAITER waits, HOLDER holds the GIL in FUNCTION", title_justify="left"
    )
    for name in ("waiter", "holder", "holder function", "share of wall"):
        blame.add_column(name, justify="right" if name.startswith("share") else "left")
    for b in c.blame[:20]:
        where = f"{b.holder_function} ({b.holder_file})" if b.holder_file else b.holder_function
        blame.add_row(b.waiter, b.holder, where, pct(b.share))
    if not c.native_places:
        return [states, sites, blame]
    native = Table(
        title="Where threads run without the GIL (native locator: place, class)",
        title_justify="left",
    )
    for name in ("thread", "native place", "class", "share of wall"):
        native.add_column(name, justify="right" if name.startswith("share") else "left")
    for n in c.native_places[:15]:
        native.add_row(n.thread, n.place, n.cls, pct(n.share))
    return [states, sites, blame, native]


@register("report", "markdown", extension=".md", description="for a PR comment")
def render_markdown(data: ReportData, **_: Any) -> str:
    p, a = data.profile, data.attribution
    gil_mode = a.mode.knows_gil
    lines = [f"### gilprof report: {p.label}", ""]
    lines += [
        f"**{line}**" if i == 0 else f"- {line}"
        for i, line in enumerate(verdict_lines(data.verdict))
    ]
    if data.costs is not None:
        lines += ["", *per_step.markdown(data.costs, data.savings, data.what_if, data.top)]
    lines += [f"- {line}" for line in _header_lines(p, a)]
    if gil_mode:
        lines.append(f"- GIL utilization: **{pct(a.utilization)}**")
    lines += [
        "",
        "| thread | tid | " + ("held share" if gil_mode else "sampled share") + " |",
        "|---|---:|---:|",
    ]
    lines += [f"| {t.name} | {t.tid} | {pct(t.share)} |" for t in a.threads]
    lines += blocking.markdown(data.blocking.sites) if data.blocking else []
    lines += [
        "",
        f"Functions by self share{_hidden_note(data)}",
        "",
        "| function | " + ("thread | " if a.by_thread else "") + "self | total | total s |",
        "|---|" + ("---|" if a.by_thread else "") + "---:|---:|---:|",
    ]
    for f in shown_functions(data):
        thread = f"{f.key.thread} | " if a.by_thread else ""
        lines.append(
            f"| `{_function_label(f, data.lines)}` | {thread}{pct(f.self_share)} | "
            f"{pct(f.total_share)} | {f.total_s:.2f} |"
        )
    if a.watch:
        lines += ["", "| watched | seen | self | total |", "|---|---|---:|---:|"]
        lines += [
            f"| `{w.function}` | {'yes' if w.found else 'never'} | {pct(w.self_share)} | "
            f"{pct(w.total_share)} |"
            for w in a.watch
        ]
    return "\n".join(lines) + "\n"
