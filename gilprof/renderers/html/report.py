"""`gilprof report --format html`: the answer, a GIL timeline, flame graphs; ranks side by side."""

from __future__ import annotations

from typing import Any

from gilprof.analysis.contention import Contention, analyze
from gilprof.analysis.ranks import RankComparison
from gilprof.analysis.table import WindowTable, build_table, thread_label
from gilprof.model import Mode, ThreadState
from gilprof.profile import Profile
from gilprof.renderers import blocking, per_step, register
from gilprof.renderers.flamegraph import MIN_SHARE, flame_json, held_flame, wait_flame
from gilprof.renderers.html import esc, page, pct, table
from gilprof.renderers.report import ReportData, shown_functions, verdict_lines

# Lane colours by state; the legend and the thread table use the same ones.
STATES = (
    ThreadState.HELD,
    ThreadState.WAITING,
    ThreadState.NATIVE,
    ThreadState.IDLE,
    ThreadState.UNCLASSIFIED,
    ThreadState.ACTIVE,
    ThreadState.UNKNOWN,
)
COLORS = {
    "held": "#e8590c",
    "waiting": "#1c7ed6",
    "native": "#2f9e44",
    "idle": "#ced4da",
    "unclassified": "#868e96",
    "active": "#f59f00",
    "unknown": "#a9b4c2",
}
# Per-tick runs kept for the timeline; beyond this the lanes fall back to per-window shares.
MAX_RUNS = 150_000


def _state_shares(
    profile: Profile, table: WindowTable, contention: Contention | None
) -> dict[int, dict[str, float]]:
    """tid -> state -> share of wall time (time-weighted spans when there are any)."""
    if contention is not None and contention.seconds > 0:
        return {
            t.tid: {
                "held": t.held_share,
                "waiting": t.wait_share,
                "native": t.native_share,
                "idle": t.idle_share,
                "unclassified": t.unclassified_share,
            }
            for t in contention.threads
        }
    ticks = profile.sampling.ticks or 1.0
    return {
        tid: {str(state): min(1.0, sum(row.values()) / ticks) for state, row in states.items()}
        for tid, states in table.states.items()
    }


def _runs(profile: Profile) -> dict[int, list[list[int]]] | None:
    """Per-tick state runs per thread (contention-mode spans, adjacent equal states merged),
    as [start, end, state index] in units of 0.1 ms; None when the profile has no spans."""
    if not any(w.spans for w in profile.windows):
        return None
    index = {state: i for i, state in enumerate(STATES)}
    out: dict[int, list[list[int]]] = {}
    count = 0
    for window in profile.windows:
        for tid, stack, t0, t1 in sorted(window.spans, key=lambda s: (s[0], s[2])):
            state = index[profile.stacks[stack].state]
            a, b = round(t0 * 1e4), round(t1 * 1e4)
            runs = out.setdefault(tid, [])
            if runs and runs[-1][2] == state and a - runs[-1][1] <= 1:
                runs[-1][1] = b
                continue
            runs.append([a, b, state])
            count += 1
            if count > MAX_RUNS:
                return None
    return out


def timeline_data(
    profile: Profile, table: WindowTable, shares: dict[int, dict[str, float]]
) -> dict[str, Any]:
    nwin = len(table.windows)
    lanes = []
    order = sorted(table.states, key=lambda tid: (-shares.get(tid, {}).get("held", 0.0), tid))
    runs = _runs(profile)
    for tid in order:
        states = {}
        for state, row in table.states[tid].items():
            dense = WindowTable.dense(row, nwin)
            states[str(state)] = [
                round(c / t, 4) if t else 0
                for c, (_, _, t) in zip(dense, table.windows, strict=True)
            ]
        lane: dict[str, Any] = {
            "tid": tid,
            "name": table.thread_names.get(tid, f"tid {tid}"),
            "states": states,
        }
        if runs is not None:
            lane["runs"] = runs.get(tid, [])
        lanes.append(lane)
    return {
        "windows": [[round(a, 4), round(b, 4)] for a, b, _ in table.windows],
        "lanes": lanes,
        "states": [str(s) for s in STATES],
        "colors": COLORS,
        "perTick": runs is not None,
    }


def _answer(data: ReportData, shares: dict[int, dict[str, float]], names: dict[int, str]) -> str:
    _p, a = data.profile, data.attribution
    parts = []
    verdict = getattr(data, "verdict", None)
    if verdict is not None:
        parts.append(
            '<div class="verdict">'
            + "".join(f"<div>{esc(line)}</div>" for line in verdict_lines(verdict))
            + "</div>"
        )
    if a.mode.knows_gil:
        parts.append(
            f'<p class="big"><span class="num">{pct(a.utilization)}</span> of ticks had '
            f"a GIL holder (GIL utilization), over {a.duration_s:.1f} s sampled</p>"
        )
    else:
        parts.append(
            f'<p class="warn">{esc(a.mode)} mode records no GIL state: shares below are '
            "per thread (time on CPU or sampled), not GIL-held time.</p>"
        )
    cols = [
        s
        for s in ("held", "waiting", "native", "idle", "unclassified", "active", "unknown")
        if any(s in row for row in shares.values())
    ]
    rows = []
    for tid, row in sorted(shares.items(), key=lambda kv: (-kv[1].get("held", 0.0), kv[0])):
        bar = "".join(
            f'<span style="width:{100 * row.get(s, 0):.2f}%;background:{COLORS[s]}" '
            f'title="{s} {pct(row.get(s, 0))}"></span>'
            for s in cols
        )
        rows.append(
            [esc(names.get(tid, f"tid {tid}")), str(tid)]
            + [pct(row.get(s)) if s in row else "" for s in cols]
            + [f'<div class="bar">{bar}</div>']
        )
    parts.append(table(["thread", "tid", *cols, "share of wall time"], rows, "threads"))
    return "".join(parts)


def _missing(data: ReportData, per_tick: bool) -> list[str]:
    p, mode = data.profile, data.attribution.mode
    notes = []
    if mode is Mode.GIL:
        notes.append(
            "gil mode records only the thread holding the GIL: the rest of each lane is "
            "'not holding' — waiting for the GIL, native code and idle cannot be told "
            "apart. Sample with --mode states (the default) to see waits and who caused them."
        )
    elif not mode.knows_gil:
        notes.append(f"{mode} mode records no GIL state: lanes show when threads were sampled.")
    if mode.reads_states and not per_tick:
        notes.append(
            "this profile has no per-tick spans (or too many to draw): lanes are "
            "per-window shares and the waiters' graph cannot name the holders."
        )
    if p.sampling.partial:
        notes.append(f"PARTIAL profile: {p.sampling.partial_reason or 'the run ended early'}.")
    if getattr(data, "verdict", None) is None:
        notes.append(
            "no verdict: pass --steps LOG (the iteration log) for host/device-bound and step times."
        )
    elif not getattr(data, "step_spans", None):
        notes.append(
            "steps lane not drawn: the iteration log's timestamps cannot be aligned with the "
            "profile's clock to within a step (they have 1 s resolution)."
        )
    return notes


def _functions(data: ReportData) -> str:
    a = data.attribution
    rows = [
        [
            f"<code>{esc(f.key.name)}</code>",
            esc(f.key.basename) + (f":{f.key.line}" if data.lines and f.key.line else ""),
            *([esc(f.key.thread or "")] if a.by_thread else []),
            pct(f.self_share),
            pct(f.total_share),
            f"{f.total_s:.2f}",
        ]
        for f in shown_functions(data)
    ]
    head = ["function", "file", *(["thread"] if a.by_thread else []), "self", "total", "total s"]
    return table(head, rows, "functions")


def _watch(data: ReportData) -> str:
    a = data.attribution
    if not a.watch:
        return ""
    rows = []
    for w in a.watch:
        why, fix = data.notes.get(w.function, ("", None))
        note = " ".join(why.split()) + (f" Fix: {fix}" if fix else "")
        rows.append(
            [
                f"<code>{esc(w.function)}</code>",
                "yes" if w.found else "<b>never seen</b>",
                pct(w.self_share),
                pct(w.total_share),
                f"{w.total_s:.2f}",
                esc(note),
            ]
        )
    return (
        '<section id="watch"><h2>Watched functions</h2>'
        + table(["function", "seen", "self", "total", "total s", "why"], rows, "watch")
        + "</section>"
    )


def _blame_heatmap(c: Contention) -> str:
    waiters = sorted({b.waiter for b in c.blame})
    holders = sorted({b.holder for b in c.blame})
    cell: dict[tuple[str, str], float] = {}
    top_fn: dict[tuple[str, str], tuple[float, str]] = {}
    for b in c.blame:
        key = (b.waiter, b.holder)
        cell[key] = cell.get(key, 0.0) + b.share
        if b.share > top_fn.get(key, (0.0, ""))[0]:
            top_fn[key] = (b.share, b.holder_function)
    peak = max(cell.values(), default=0.0) or 1.0
    rows = []
    for w in waiters:
        row = [f"<b>{esc(w)}</b>"]
        for h in holders:
            v = cell.get((w, h), 0.0)
            alpha = 0.08 + 0.92 * v / peak if v else 0
            fn = top_fn.get((w, h), (0, ""))[1]
            row.append(
                f'<div class="heat" style="background:rgba(28,126,214,{alpha:.2f});'
                f'color:{"#fff" if alpha > 0.55 else "#111"}" title="while {esc(w)} waits, '
                f'{esc(h)} holds the GIL, mostly in {esc(fn)}">{pct(v) if v else ""}'
                f"{'<small>' + esc(fn) + '</small>' if v else ''}</div>"
            )
        rows.append(row)
    return table(["waiter \\ holder", *(esc(h) for h in holders)], rows, "blame")


def _flame_section(fid: str, title: str, help_text: str, threads: list[str]) -> str:
    options = "".join(f"<option>{esc(t)}</option>" for t in threads)
    return (
        f'<section id="{fid}-section"><h2>{esc(title)}</h2><p class="help">{help_text}</p>'
        f'<div class="controls"><select class="thread"><option value="">all threads</option>'
        f'{options}</select><input class="search" type="search" placeholder="search (regex)">'
        f'<button class="reset">Reset zoom</button><span class="matched"></span></div>'
        f'<div class="flame-box"><svg class="flame" id="{fid}"></svg></div></section>'
    )


@register(
    "report",
    "html",
    extension=".html",
    description="one offline page: answer, timeline, flame graphs",
)
def render_html(data: ReportData, **_: Any) -> str:
    p = data.profile
    title = f"gilprof report: {p.label}"
    s = p.sampling
    meta = (
        f"{esc(s.sampler)} {esc(s.sampler_version)} · {esc(s.mode)} mode · {s.rate_hz:g} Hz · "
        f"{s.duration_s:.1f} s in {len(p.windows)} windows · {s.samples} samples"
    )
    header = f'<header><h1>{esc(title)}</h1><p class="meta">{meta}</p></header>'
    if not p.windows or s.samples == 0:
        empty = (
            header + '<section id="answer"><p class="warn empty">This profile holds no samples: '
            "nothing to draw. Was the target running Python while it was sampled?</p></section>"
        )
        return page(title, empty, {"empty": True})
    table_ = build_table(p)
    contention = data.contention
    if contention is None and s.mode.reads_states and any(w.spans for w in p.windows):
        contention = analyze(p)
    shares = _state_shares(p, table_, contention)
    timeline = timeline_data(p, table_, shares)
    step_spans = getattr(data, "step_spans", None)
    if step_spans:
        timeline["steps"] = [[round(a, 4), round(b, 4), str(label)] for a, b, label in step_spans]
    names = table_.thread_names
    held = held_flame(p)
    thread_names = [lane["name"] for lane in timeline["lanes"]]
    flames: dict[str, Any] = {"flame-held": flame_json(held)}
    body = [
        header,
        "<main>",
        f'<section id="answer"><h2>Answer</h2>{_answer(data, shares, names)}</section>',
    ]
    if data.costs is not None:
        body.append(
            per_step.html_section(data.costs, data.savings, data.what_if, data.top, esc, table)
        )
    legend = "".join(
        f'<span class="key" style="--c:{COLORS[k]}">{k}</span>'
        for k in COLORS
        if any(k in lane["states"] for lane in timeline["lanes"])
    )
    unit = "per tick" if timeline["perTick"] else "share of each sampling window"
    body.append(
        f'<section id="timeline-section"><h2>GIL timeline</h2><p class="help">One lane per '
        f"thread, coloured by state ({unit}). Hover for times and shares; click to zoom in.</p>"
        f'<div class="legend">{legend}<button id="timeline-reset" hidden>Whole capture</button>'
        '</div><div id="timeline"></div></section>'
    )
    help_held = (
        "Stacks of the thread holding the GIL. Width: share of sampling ticks. Click to "
        "zoom, click the top row to go back; pick a thread to see only its stacks."
    )
    body.append(
        _flame_section(
            "flame-held", held.title[:1].upper() + held.title[1:], help_held, thread_names
        )
    )
    if s.mode.reads_states:
        waiting = wait_flame(p)
        if waiting.root.value > 0:
            flames["flame-wait"] = flame_json(waiting)
            body.append(
                _flame_section(
                    "flame-wait",
                    "Where threads wait for the GIL",
                    "Stacks of threads while they wait for the GIL; hover a frame to see who held the "
                    "GIL meanwhile.",
                    sorted({n.name for n in waiting.root.children.values()}),
                )
            )
        if data.blocking is not None and data.blocking.sites:
            body.append(blocking.html_section(data.blocking.sites, esc, table))
            blocked = blocking.blocked_flame(
                p, data.blocking.reasons, lambda tid: thread_label(p, tid)
            )
            flames["flame-blocked"] = flame_json(blocked)
            body.append(
                _flame_section(
                    "flame-blocked",
                    "Blocked time: why threads wait",
                    "Stacks of threads while they are off their CPU, under the class of their "
                    "wait; the call and its evidence are on top. Width: share of sampling ticks.",
                    sorted({n.name for n in blocked.root.children.values()}),
                )
            )
        if contention is not None and contention.blame:
            body.append(
                '<section id="blame-section"><h2>Blame: while a thread waits, who holds '
                f'the GIL</h2><p class="help">Share of wall time.</p>{_blame_heatmap(contention)}'
                "</section>"
            )
    body.append(
        '<section id="functions-section"><h2>Functions</h2><p class="help">By self share '
        f"(on top of the GIL holder's stack), then total.</p>{_functions(data)}</section>"
    )
    body.append(_watch(data))
    notes = _missing(data, timeline["perTick"])
    dropped = sum(f["dropped"] for f in flames.values())
    if dropped:
        notes.append(
            f"{dropped} flame-graph frames narrower than {100 * MIN_SHARE:.2f}% "
            "of the total are folded into their callers."
        )
    body.append(
        '<section id="notes"><h2>What this page cannot show</h2><ul>'
        + "".join(f"<li>{esc(n)}</li>" for n in notes)
        + "</ul></section></main>"
    )
    return page(title, "".join(body), {"timeline": timeline, "flames": flames})


@register("ranks", "html", extension=".html", description="ranks side by side, one offline page")
def render_ranks_html(r: RankComparison, **_: Any) -> str:
    title = f"gilprof: {len(r.columns)} ranks side by side"
    ref = r.columns[r.reference]
    head = [
        "function",
        "file",
        *(esc(f"rank {c.rank if c.rank is not None else '?'}") for c in r.columns),
        f"excess of {esc(ref.label.split(' pid')[0])}",
    ]
    peak = max((v for row in (*r.rows, *r.watch) for v in row.shares), default=0.0) or 1.0

    def cells(row: Any) -> list[str]:
        out = [f"<code>{esc(row.function)}</code>", esc(row.file)]
        for v in row.shares:
            out.append(
                f'<div class="heat" style="background:rgba(232,89,12,{0.05 + 0.9 * v / peak:.2f})">'
                f"{pct(v)}</div>"
            )
        ex = row.excess
        out.append(
            "n/a"
            if ex is None
            else f'<b class="{"worse" if ex > 0.01 else ""}">{100 * ex:+.1f} pp</b>'
        )
        return out

    util = table(
        ["rank", "label", "GIL utilization", "samples", "partial"],
        [
            [
                esc(c.rank),
                esc(c.label),
                pct(c.utilization),
                str(c.samples),
                "yes" if c.partial else "",
            ]
            for c in r.columns
        ],
        "ranks",
    )
    body = (
        f'<header><h1>{esc(title)}</h1><p class="meta">rank-0 excess: the reference rank\'s '
        "total share minus the median of the others</p></header><main>"
        f'<section id="answer"><h2>Ranks</h2>{util}</section>'
        + (
            f'<section id="watch"><h2>Watched functions</h2>{table(head, [cells(w) for w in r.watch], "watch")}</section>'
            if r.watch
            else ""
        )
        + f'<section id="functions-section"><h2>Functions by rank-0 excess</h2>'
        f"{table(head, [cells(row) for row in r.rows], 'functions')}</section></main>"
    )
    return page(title, body, {})
