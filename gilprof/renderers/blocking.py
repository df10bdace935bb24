"""The "Where threads block" table (gilprof.analysis.blocking) for the terminal, markdown and
HTML reports, and the blocked-time flame graph of the HTML page."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from rich.table import Table

from gilprof.analysis.blocking import BlockedSite
from gilprof.model import ThreadState
from gilprof.profile import Profile
from gilprof.renderers._rich import pct
from gilprof.renderers.flamegraph import ROOT_NAME, Flame, Node, seconds_per_tick
from gilprof.wait_classes import Reason, is_evidence

TITLE = "Where threads block"
HELP = (
    "Each thread's blocked (off-CPU) time by why it waits, from what the machine showed: "
    "the system call and what it waits on, the native caller, who ended the wait. Share: of "
    "the thread's samples."
)
TERMINAL_ROWS = 12  # the terminal table's rows (markdown, HTML and JSON keep every row)


def _head(rows: Sequence[BlockedSite]) -> list[str]:
    per_step = any(r.ms_per_step is not None for r in rows)
    return ["thread", "class", "where: evidence", "share", *(["ms/step"] if per_step else [])]


def _where(row: BlockedSite) -> str:
    evidence = row.evidence.removesuffix(f" in {row.where}") if row.where else row.evidence
    if not row.where:
        return evidence or "-"
    return f"{row.where}: {evidence}" if evidence else row.where


def _cells(row: BlockedSite, per_step: bool) -> list[str]:
    cells = [row.thread, row.cls.words, _where(row), pct(row.share)]
    if per_step:
        cells.append("-" if row.ms_per_step is None else f"{row.ms_per_step:.1f}")
    return cells


def table(rows: Sequence[BlockedSite], limit: int | None = TERMINAL_ROWS) -> Table | None:
    if not rows:
        return None
    head = _head(rows)
    shown = rows if limit is None else rows[:limit]
    title = TITLE + (
        f" (top {limit} of {len(rows)}: --format json has all)" if len(rows) > len(shown) else ""
    )
    out = Table(title=title, title_justify="left")
    for name in head:
        figure = name in ("share", "ms/step")
        out.add_column(name, justify="right" if figure else "left", ratio=None if figure else 1)
    for row in shown:
        out.add_row(*_cells(row, "ms/step" in head))
    return out


def markdown(rows: Sequence[BlockedSite]) -> list[str]:
    if not rows:
        return []
    head = _head(rows)
    lines = ["", f"{TITLE}", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "|".join("---:" if h in ("share", "ms/step") else "---" for h in head) + "|")
    for row in rows:
        cells = [c.replace("|", "\\|") for c in _cells(row, "ms/step" in head)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def html_section(
    rows: Sequence[BlockedSite],
    esc: Callable[[str], str],
    html_table: Callable[[list[str], list[list[str]], str], str],
) -> str:
    if not rows:
        return ""
    head = _head(rows)
    body = [[esc(c) for c in _cells(row, "ms/step" in head)] for row in rows]
    return (
        f'<section id="blocking-section"><h2>{TITLE}</h2><p class="help">{esc(HELP)}</p>'
        f"{html_table(head, body, 'blocking')}</section>"
    )


def blocked_flame(
    profile: Profile, reasons: Mapping[int, Reason], label: Callable[[int], str]
) -> Flame:
    """Blocked (off-CPU) stacks: thread, then the wait's class, then its Python frames, then
    the evidence (the call, what it waits on, the native caller, the waker) on top."""
    root = Node(ROOT_NAME)
    for index, count in profile.state_totals().items():
        stack = profile.stacks[index]
        reason = reasons.get(index)
        if stack.state is not ThreadState.IDLE or reason is None:
            continue
        frames = profile.stack_frames(index)
        thread = root.child(label(stack.tid), "")
        node = thread.child(reason.cls.words, "")
        path = [root, thread, node]
        code = [f for f in frames if not is_evidence(f)]
        evidence = [f for f in frames if is_evidence(f)]
        for frame in (*code, *evidence):
            node = node.child(frame.name, frame.file.rsplit("/", 1)[-1])
            path.append(node)
        for n in path:
            n.value += count
    return Flame(
        "blocked",
        root,
        profile.sampling.ticks,
        seconds_per_tick(profile),
        "stacks of blocked threads, by why they wait",
    )
