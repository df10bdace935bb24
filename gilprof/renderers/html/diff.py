"""`gilprof compare --format html`: diff flame graph, change table, step-time distributions.

The flame graph needs both profiles' stacks, which a Comparison does not keep: the compare
command passes them as `profiles=(before, after)` (and the step times as `steps=(before,
after)` RankSteps); without them the page has the tables and says what is missing.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from gilprof.analysis.compare import IMPROVED, REGRESSED, ShareChange
from gilprof.renderers import register
from gilprof.renderers.compare import CompareView
from gilprof.renderers.flamegraph import diff_flame, flame_json
from gilprof.renderers.html import esc, page, pct, table
from gilprof.stats import Difference

_ROW_CLASS = {REGRESSED: "sig-worse", IMPROVED: "sig-better"}


def _pp(v: float) -> str:
    return "±inf" if not math.isfinite(v) else f"{100 * v:+.1f}"


def _rows(changes: Sequence[ShareChange], with_file: bool, first: str = "function") -> str:
    rows = []
    for c in changes:
        d = c.total
        cls = _ROW_CLASS.get(c.verdict, "")
        rows.append(
            [
                f'<code class="{cls}">{esc(c.name)}</code>',
                *([esc(c.file)] if with_file else []),
                pct(d.before),
                pct(d.after),
                f"{_pp(d.delta)} pp",
                f"[{_pp(d.low)}, {_pp(d.high)}]",
                f'<span class="{"worse" if c.verdict == REGRESSED else "better" if c.verdict == IMPROVED else ""}">'
                f"{esc(c.verdict)}</span>",
            ]
        )
    head = [first, *(["file"] if with_file else []), "before", "after", "change", "CI", "verdict"]
    return table(head, rows, "changes")


def _cost_rows(changes: Sequence[ShareChange]) -> str:
    rows = []
    for c in changes:
        d = c.cost
        cls = _ROW_CLASS.get(c.verdict, "")
        ci = "" if d is None or not math.isfinite(d.low) else f"[{d.low:+.2f}, {d.high:+.2f}]"
        rows.append(
            [
                f'<code class="{cls}">{esc(c.name)}</code>',
                esc(c.file),
                f"{d.before:.2f}" if d else "0",
                f"{d.after:.2f}" if d else "0",
                f"{d.delta:+.2f}" if d else "",
                ci,
                esc(c.verdict),
                esc(c.share_verdict or ""),
            ]
        )
    head = ["function", "file", "ms before", "ms after", "change", "CI", "verdict", "share alone"]
    return table(head, rows, "costs")


def _ms(d: Difference) -> str:
    ci = "n/a" if not math.isfinite(d.low) else f"[{d.low:+.1f}, {d.high:+.1f}]"
    return f"{d.before:.1f} → {d.after:.1f} ms ({d.delta:+.1f} ms, CI {ci})"


def _histogram_svg(
    before: Sequence[float],
    after: Sequence[float],
    width: int = 640,
    height: int = 180,
    bins: int = 40,
) -> str:
    """Two step-time distributions as outlined histograms (inline SVG, no script)."""
    values = sorted([*before, *after])
    if not values:
        return ""
    lo = values[0]
    hi = values[min(len(values) - 1, int(0.995 * len(values)))]  # a few outliers would flatten it
    hi = hi if hi > lo else lo + 1.0
    step = (hi - lo) / bins

    def counts(xs: Sequence[float]) -> list[float]:
        out = [0.0] * bins
        for x in xs:
            out[min(bins - 1, max(0, int((x - lo) / step)))] += 1
        n = len(xs) or 1
        return [c / n for c in out]

    cb, ca = counts(before), counts(after)
    peak = max(*cb, *ca) or 1.0
    pad, bottom = 40, 24
    w, h = width - pad - 10, height - bottom - 10

    def path(cs: list[float]) -> str:
        pts = [f"M{pad},{10 + h}"]
        for i, c in enumerate(cs):
            y = 10 + h - h * c / peak
            pts += [
                f"L{pad + w * i / bins:.1f},{y:.1f}",
                f"L{pad + w * (i + 1) / bins:.1f},{y:.1f}",
            ]
        pts.append(f"L{pad + w},{10 + h}")
        return " ".join(pts)

    anchors = ("start", "middle", "middle", "middle", "end")
    ticks = "".join(
        f'<text x="{pad + w * k / 4:.0f}" y="{height - 6}" text-anchor="{anchors[k]}">'
        f"{lo + (hi - lo) * k / 4:.1f} ms</text>"
        for k in range(5)
    )
    for xs, color in ((before, "#5c6370"), (after, "#1c7ed6")):
        if xs:  # the medians that compare's interval is about
            x = pad + w * (min(max(statistics.median(xs), lo), hi) - lo) / (hi - lo)
            ticks += (
                f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="{10 + h}" stroke="{color}" '
                'stroke-dasharray="4 3"/>'
            )
    p50 = [f"{statistics.median(xs):.1f}" if xs else "n/a" for xs in (before, after)]
    return (
        f'<svg class="dist" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'style="max-width:100%;font:11px sans-serif">'
        f'<path d="{path(cb)}" fill="rgba(134,142,150,0.35)" stroke="#5c6370"/>'
        f'<path d="{path(ca)}" fill="rgba(28,126,214,0.25)" stroke="#1c7ed6"/>'
        f'<line x1="{pad}" y1="{10 + h}" x2="{pad + w}" y2="{10 + h}" stroke="#888"/>{ticks}'
        f'<text x="{pad + w}" y="22" text-anchor="end">'
        f'<tspan fill="#5c6370">■ before (p50 {p50[0]} ms)</tspan>  '
        f'<tspan fill="#1c7ed6">■ after (p50 {p50[1]} ms)</tspan>  host step time; dashed: p50'
        "</text></svg>"
    )


@register(
    "compare", "html", extension=".html", description="one offline page: diff flame graph, changes"
)
def render_html(view: CompareView, **_: Any) -> str:
    c, profiles, steps = view.comparison, view.profiles, view.steps
    title = "gilprof compare"
    header = (
        f'<header><h1>{esc(title)}: before vs after</h1><p class="meta">before '
        f"{esc(c.before_label)} · after {esc(c.after_label)} · {esc(c.mode)} mode · "
        f"{100 * c.confidence:.0f}% intervals from batch means over {c.batches[0]}/"
        f"{c.batches[1]} windows</p></header>"
    )
    body = [header, "<main>", '<section id="answer"><h2>Answer</h2>']
    if c.steps:
        s = c.steps
        body.append(f'<p class="verdict">Host step p50 {esc(_ms(s.host_p50))}</p>')
        if s.device_p50:
            body.append(f"<p>Device step p50 {esc(_ms(s.device_p50))}</p>")
        body.append(f"<p>before: {esc(s.verdict_before)}; after: {esc(s.verdict_after)}</p>")
    head_rows = ([c.utilization] if c.utilization else []) + list(c.watch)
    if head_rows:
        body.append(_rows(head_rows, False, ""))
    body.append("</section>")
    data: dict[str, Any] = {"flames": {}}
    notes = []
    if profiles is not None:
        flame = diff_flame(profiles[0], profiles[1], c)
        data["flames"]["flame-diff"] = flame_json(flame)
        body.append(
            '<section id="flame-diff-section"><h2>Diff flame graph</h2><p class="help">Frames of '
            "both profiles' GIL-holding stacks. Colour only where the function's interval "
            '(the table below) excludes zero: <span class="worse">red: more GIL time after</span>, '
            '<span class="better">blue: less</span>; grey: no significant change, or not among '
            "the compared rows. Click to zoom; hover for before/after.</p>"
            '<div class="controls"><select class="side"><option value="1">widths: after'
            '</option><option value="0">widths: before</option></select>'
            '<input class="search" type="search" placeholder="search (regex)">'
            '<button class="reset">Reset zoom</button><span class="matched"></span></div>'
            '<div class="flame-box"><svg class="flame" id="flame-diff"></svg></div></section>'
        )
    else:
        notes.append("no diff flame graph: the page was rendered without the two profiles.")
    if c.costs is not None:
        body.append(
            f'<section id="costs-section"><h2>Cost to the loop, ms per {esc(c.costs.unit)}</h2>'
            f'<p class="help">Judged on this: the loop thread ({esc(c.costs.threads[0])})\'s own '
            "time in the function plus its GIL wait while another thread held the GIL in it, "
            "per unit of work. A share of wall time also grows when more work was done.</p>"
            + _cost_rows(c.functions)
            + "</section>"
        )
    body.append(
        '<section id="functions-section"><h2>Changes per function (total share)</h2>'
        + _rows(c.functions, True)
        + "</section>"
    )
    if c.threads:
        body.append(
            '<section id="threads-section"><h2>Threads (held share)</h2>'
            + _rows(c.threads, False, "thread")
            + "</section>"
        )
    if steps is not None and steps[0] is not None and steps[1] is not None:
        body.append(
            '<section id="steps-section"><h2>Step-time distributions</h2>'
            + _histogram_svg(list(steps[0].host_ms), list(steps[1].host_ms))
            + "</section>"
        )
    elif c.steps is None:
        notes.append("no step times: pass --steps-before and --steps-after.")
    if notes:
        body.append(
            '<section id="notes"><h2>What this page cannot show</h2><ul>'
            + "".join(f"<li>{esc(n)}</li>" for n in notes)
            + "</ul></section>"
        )
    body.append("</main>")
    return page(title, "".join(body), data)
