"""Flame graphs: a profile's stacks folded into a tree, as compact JSON and as a standalone SVG.

One tree model serves three pictures: the GIL holders' stacks, the stacks of threads while they
wait for the GIL (each frame knowing who held the GIL meanwhile), and a diff of two profiles.
The first level under the root is the thread, so "per thread or all" is a zoom, not a second
tree. Frames merge by (function, file base name): paths differ between hosts.

The drawing, zoom and search live in one script (assets/flame.js) that both the HTML pages and
the standalone SVG embed; the SVG also carries static rectangles laid out here, so viewers that
run no scripts (image viewers, GitHub) still show the picture.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from gilprof.analysis.compare import Comparison
from gilprof.analysis.contention import python_function
from gilprof.analysis.table import counts_toward_shares, thread_label
from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.renderers import register
from gilprof.renderers.html import asset, script_json

# Nodes narrower than this share of the root are dropped from the JSON (their time stays in
# the parent): a 10-minute capture has ~1e5 distinct frames-in-context, most far below a pixel.
MIN_SHARE = 2e-4
ROOT_NAME = "all threads"


@dataclass
class Node:
    name: str
    file: str = ""
    value: float = 0.0  # samples (after-side samples in a diff)
    before: float = 0.0  # diff only: before-side samples
    children: dict[tuple[str, str], Node] = field(default_factory=dict)
    holders: dict[str, float] = field(default_factory=dict)  # waiters: holder -> seconds

    def child(self, name: str, file: str) -> Node:
        key = (name, file)
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = Node(name, file)
        return node


@dataclass
class Flame:
    """A tree plus what its numbers mean: `value / ticks` is a share of sampling ticks."""

    kind: str  # "held", "wait" or "diff"
    root: Node
    ticks: float
    seconds_per_tick: float
    title: str = ""
    ticks_before: float = 0.0  # diff only
    significance: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


def _frame_key(frame: Any) -> tuple[str, str]:
    return frame.name, os.path.basename(frame.file)


def _add_stack(
    root: Node, thread: str, frames: Iterable[Any], count: float, before: bool = False
) -> list[Node]:
    path = [root]
    node = root.child(thread, "")
    path.append(node)
    for frame in frames:
        node = node.child(*_frame_key(frame))
        path.append(node)
    for n in path:
        if before:
            n.before += count
        else:
            n.value += count
    return path


def seconds_per_tick(profile: Profile) -> float:
    s = profile.sampling
    if s.ticks > 0:
        return s.duration_s / s.ticks
    return 1.0 / s.rate_hz if s.rate_hz else 0.0


def held_flame(profile: Profile, tids: set[int] | None = None) -> Flame:
    """Stacks of the GIL holder (in wall and cpu modes: every sampled stack)."""
    mode = profile.sampling.mode
    root = Node(ROOT_NAME)
    for index, count in profile.total_counts().items():
        stack = profile.stacks[index]
        if not counts_toward_shares(mode, stack.state) or (
            tids is not None and stack.tid not in tids
        ):
            continue
        _add_stack(root, thread_label(profile, stack.tid), profile.stack_frames(index), count)
    title = (
        "GIL holders' stacks" if mode.knows_gil else f"sampled stacks ({mode} mode: no GIL state)"
    )
    return Flame("held", root, profile.sampling.ticks, seconds_per_tick(profile), title)


def wait_flame(profile: Profile) -> Flame:
    """Stacks of threads waiting for the GIL; each node's `holders` says who held it meanwhile
    (thread and innermost Python function), in seconds of overlap."""
    root = Node(ROOT_NAME)
    holders = _holders_by_waiting_stack(profile)
    for index, count in profile.state_totals().items():
        stack = profile.stacks[index]
        if stack.state is not ThreadState.WAITING:
            continue
        path = _add_stack(
            root, thread_label(profile, stack.tid), profile.stack_frames(index), count
        )
        for holder, seconds in holders.get(index, {}).items():
            for node in path:
                node.holders[holder] = node.holders.get(holder, 0.0) + seconds
    return Flame(
        "wait",
        root,
        profile.sampling.ticks,
        seconds_per_tick(profile),
        "stacks of threads waiting for the GIL",
    )


def _holders_by_waiting_stack(profile: Profile) -> dict[int, dict[str, float]]:
    """waiting stack index -> {"thread in function": seconds}, from contention-mode spans.

    The blame matrix (gilprof.analysis.contention) sums the same overlaps per waiter thread;
    here they are kept per waiting stack so the waiters' flame graph can name them per frame.
    """
    label_of: dict[int, str] = {}

    def label(stack_index: int) -> str:
        if stack_index not in label_of:
            stack = profile.stacks[stack_index]
            where = python_function(profile.stack_frames(stack_index))
            label_of[stack_index] = (
                f"{thread_label(profile, stack.tid)} in {where.name if where else '?'}"
            )
        return label_of[stack_index]

    out: dict[int, dict[str, float]] = {}
    for window in profile.windows:
        points = sorted({t for span in window.spans for t in (span[2], span[3])})
        events = sorted(window.spans, key=lambda s: s[2])
        active: list[tuple[int, int, float, float]] = []
        cursor = 0
        for a, b in itertools.pairwise(points):
            if b <= a:
                continue
            while cursor < len(events) and events[cursor][2] <= a:
                active.append(events[cursor])
                cursor += 1
            active = [s for s in active if s[3] > a]
            held = [s[1] for s in active if profile.stacks[s[1]].state is ThreadState.HELD]
            for s in active:
                if profile.stacks[s[1]].state is not ThreadState.WAITING:
                    continue
                row = out.setdefault(s[1], {})
                names = [label(h) for h in held] or ["nobody (GIL in hand-off)"]
                for name in names:
                    row[name] = row.get(name, 0.0) + (b - a) / len(names)
    return out


def diff_flame(before: Profile, after: Profile, comparison: Comparison | None) -> Flame:
    """Both profiles' share-counting stacks in one tree; colours come from `comparison`'s
    per-function intervals (only functions it tested can be coloured)."""
    root = Node(ROOT_NAME)
    for profile, is_before in ((before, True), (after, False)):
        mode = profile.sampling.mode
        for index, count in profile.total_counts().items():
            stack = profile.stacks[index]
            if counts_toward_shares(mode, stack.state):
                _add_stack(
                    root,
                    thread_label(profile, stack.tid),
                    profile.stack_frames(index),
                    count,
                    before=is_before,
                )
    significance: dict[tuple[str, str], tuple[int, str]] = {}
    for change in comparison.functions if comparison else ():
        d = change.total
        sign = 0 if not d.significant else (1 if d.delta > 0 else -1)
        note = (
            f"{100 * d.before:.1f}% -> {100 * d.after:.1f}% ({100 * d.delta:+.1f} pp, "
            f"CI [{100 * d.low:+.1f}, {100 * d.high:+.1f}]): {change.verdict}"
        )
        significance[(change.name, os.path.basename(change.file))] = (sign, note)
    return Flame(
        "diff",
        root,
        after.sampling.ticks,
        seconds_per_tick(after),
        "diff: widths after, colours where the interval excludes zero",
        ticks_before=before.sampling.ticks,
        significance=significance,
    )


# -- JSON for flame.js ------------------------------------------------------------------------


def flame_json(flame: Flame, min_share: float = MIN_SHARE) -> dict[str, Any]:
    """{names, root: [name id, value, children, extra?], ...}; names are "function\\tfile"."""
    names: dict[str, int] = {}
    holder_names: dict[str, int] = {}
    dropped = 0
    limit = max(flame.root.value, flame.root.before) * min_share

    def name_id(node: Node) -> int:
        key = f"{node.name}\t{node.file}"
        if key not in names:
            names[key] = len(names)
        return names[key]

    def encode(node: Node) -> list[Any]:
        nonlocal dropped
        kids = []
        for child in sorted(node.children.values(), key=lambda n: (n.name, n.file)):
            if max(child.value, child.before) < limit:
                dropped += 1
                continue
            kids.append(encode(child))
        value: Any = round(node.value, 3)
        out: list[Any] = [name_id(node), value, kids]
        if flame.kind == "diff":
            sign, note = flame.significance.get((node.name, node.file), (0, ""))
            out[1] = [round(node.before, 3), round(node.value, 3)]
            out.append([sign, note])
        elif flame.kind == "wait" and node.holders:
            top = sorted(node.holders.items(), key=lambda kv: -kv[1])[:4]
            out.append(
                [[holder_names.setdefault(h, len(holder_names)), round(s, 3)] for h, s in top]
            )
        return out

    root = encode(flame.root)
    return {
        "kind": flame.kind,
        "title": flame.title,
        "names": list(names),
        "holders": list(holder_names),
        "root": root,
        "ticks": flame.ticks,
        "ticksBefore": flame.ticks_before,
        "spt": flame.seconds_per_tick,
        "dropped": dropped,
        "minShare": min_share,
    }


# -- standalone SVG ---------------------------------------------------------------------------

SVG_WIDTH = 1200
ROW = 17
TOP = 52
CHAR_W = 6.6


def _static_rows(flame: Flame, width: float, color: Callable[[Node, int], str]) -> list[str]:
    """Rectangles laid out here (icicle: root on top), for viewers that run no script."""
    out: list[str] = []
    total = flame.root.value or 1.0

    def walk(node: Node, x: float, depth: int) -> None:
        w = width * node.value / total
        if w < 0.5:
            return
        label = node.name if depth else f"{ROOT_NAME}"
        chars = int((w - 6) / CHAR_W)
        text = label if len(label) <= chars else (label[: chars - 2] + ".." if chars > 3 else "")
        y = TOP + depth * ROW
        share = 100 * node.value / flame.ticks if flame.ticks else 0.0
        tip = (
            f"{label} ({node.file}) {share:.2f}% of ticks" if node.file else f"{label} {share:.2f}%"
        )
        out.append(
            f'<g><title>{escape(tip)}</title><rect x="{x + 10:.1f}" y="{y}" '
            f'width="{max(w - 0.5, 0.1):.1f}" height="{ROW - 1}" fill="{color(node, depth)}" '
            f'rx="2"/><text x="{x + 13:.1f}" y="{y + 12}">{escape(text)}</text></g>'
        )
        cx = x
        for child in sorted(node.children.values(), key=lambda n: (n.name, n.file)):
            walk(child, cx, depth + 1)
            cx += width * child.value / total

    walk(flame.root, 0.0, 0)
    return out


def _depth(node: Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def _static_color(node: Node, depth: int) -> str:
    if depth <= 1:
        return "#c8c8d0"
    h = sum(ord(c) for c in node.name) * 7919 % 1000 / 1000
    return f"hsl({int(5 + 50 * h)},{75 + int(10 * h)}%,{58 + int(8 * h)}%)"


def render_svg(flame: Flame, subtitle: str = "") -> str:
    """One SVG file: static picture plus flame.js for zoom (click), search (Ctrl-F or the
    Search button) and hover details; valid XML (scripts in CDATA)."""
    depth = min(_depth(flame.root), 200)
    height = TOP + depth * ROW + 40
    data = script_json(flame_json(flame)).replace("]]>", "]]]]><![CDATA[>")
    script = asset("flame.js").replace("]]>", "]]]]><![CDATA[>")
    rows = _static_rows(flame, SVG_WIDTH - 20, _static_color)
    return (
        "\n".join(
            [
                '<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
                f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{SVG_WIDTH}" '
                f'height="{height}" viewBox="0 0 {SVG_WIDTH} {height}" id="gilprof-flame" '
                f"data-kind={quoteattr(flame.kind)}>",
                "<style>text{font:11px monospace;fill:#111}.title{font:bold 16px sans-serif}"
                ".sub{font:12px sans-serif;fill:#555}.btn{cursor:pointer;font:12px sans-serif;"
                "fill:#0645ad}</style>",
                '<rect width="100%" height="100%" fill="#fafafa"/>',
                f'<text class="title" x="10" y="20">{escape(flame.title)}</text>',
                f'<text class="sub" x="10" y="38">{escape(subtitle)}</text>',
                f'<text class="btn" id="reset" x="{SVG_WIDTH - 200}" y="20">Reset zoom</text>',
                f'<text class="btn" id="search-btn" x="{SVG_WIDTH - 100}" y="20">Search</text>',
                f'<text class="sub" id="matched" x="{SVG_WIDTH - 200}" y="38"></text>',
                f'<g id="frames" transform="translate(0,0)">{"".join(rows)}</g>',
                f'<text class="sub" id="details" x="10" y="{height - 14}"> </text>',
                f'<script type="application/json" id="flame-data"><![CDATA[{data}]]></script>',
                f"<script><![CDATA[{script}\ngilprofStandaloneSvg();]]></script>",
                "</svg>",
            ]
        )
        + "\n"
    )


@register("report", "svg", extension=".svg", description="interactive flame graph (zoom, search)")
def render_report_svg(data: Any, **_: Any) -> str:
    p = data.profile
    s = p.sampling
    subtitle = (
        f"{p.label} · {s.mode} mode · {s.duration_s:.1f} s · {s.samples} samples · "
        "click to zoom, Ctrl-F or Search to find"
    )
    return render_svg(held_flame(p), subtitle)
