"""The pictures, looked at in a real headless Chromium: names in the DOM, zoom, search, hover.

One test samples a real target (py-spy and the thread-state reader: the default mode) and drives the page with mouse and
keyboard events over the DevTools protocol; the others render hand-made profiles through the
CLI and read the DOM after the scripts ran (--dump-dom), with state given in the URL fragment.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gilprof.model import Mode
from gilprof.profile import Profile

from ..unit.builders import make_profile, sample, steady_profile
from .browser import DevTools, dump_dom, png_size, screenshot
from .conftest import GIL_WORKLOAD, attach, gilprof_stdout, output_of, start_target

pytestmark = pytest.mark.integration


def _report_dom(spawn, tmp_path: Path, profile: Profile, name: str, fragment: str = "") -> str:
    """The DOM of `profile`'s report page (NAME.html), after its scripts ran."""
    saved, page = tmp_path / f"{name}.json", tmp_path / f"{name}.html"
    profile.save(saved)
    gilprof_stdout(spawn, "report", str(saved), "--format", "html", "-o", str(page))
    return dump_dom(page.as_uri() + fragment, tmp_path)


def _frame_width(dt: DevTools, flame: str, name: str) -> float:
    return dt.eval(
        f"(() => {{ const g = [...document.querySelectorAll('#{flame} g.frame')]"
        f".find(g => g.dataset.name === {json.dumps(name)}); "
        "return g ? +g.querySelector('rect').getAttribute('width') : -1; })()"
    )


def test_report_page_of_a_real_capture_zooms_searches_and_names_the_holder(spawn, tmp_path):
    truth = str(tmp_path / "truth.json")
    target = start_target(
        spawn,
        [sys.executable, GIL_WORKLOAD, "--duration", "9", "--truth", truth, "--ingress-unlocked"],
        1.0,
    )  # ingress contends for the GIL itself: the waiters' graph has it on every run
    profile = tmp_path / "c.json"
    # the default: states mode; 5 s, since a 3 s capture once in five held no waiting tick
    output_of(attach(spawn, target.pid, profile, "-d", "5"))
    page = tmp_path / "report.html"
    gilprof_stdout(spawn, "report", str(profile), "--format", "html", "-o", str(page))
    assert page.stat().st_size < 1_000_000
    assert "http://" not in page.read_text().replace("http://www.w3.org/2000/svg", "")

    with DevTools(tmp_path) as dt:
        dt.open(page.as_uri(), "window.gilprof && document.querySelector('#flame-held g.frame')")
        lanes = dt.eval(
            "[...document.querySelectorAll('#timeline .lane-name')].map(e => e.textContent)"
        )
        assert {"executor-loop", "ingress"} <= set(lanes)
        help_text = dt.eval("document.querySelector('#timeline-section p.help').textContent")
        assert "(per tick)" in help_text  # the reader's states, tick by tick, without pausing
        legend = dt.eval("document.querySelector('#timeline-section .legend').textContent")
        assert "waiting" in legend and "held" in legend
        whole = dt.eval("document.getElementById('timeline').dataset.range")
        dt.click("#timeline .lane canvas")
        a, b = map(float, dt.eval("document.getElementById('timeline').dataset.range").split("-"))
        w0, w1 = map(float, whole.split("-"))
        assert b - a == pytest.approx((w1 - w0) / 4, rel=0.01)  # zoomed in 4x
        dt.click("#timeline-reset")
        assert dt.eval("document.getElementById('timeline').dataset.range") == whole
        held = dt.eval(
            "[...document.querySelectorAll('#flame-held g.frame')].map(g => g.dataset.name)"
        )
        assert {"executor-loop", "ingress", "safe_broadcast", "spin"} <= set(held)
        full = dt.eval("+document.querySelector('#flame-held g.frame rect').getAttribute('width')")
        before = _frame_width(dt, "flame-held", "safe_broadcast")
        assert 0 < before < full

        dt.click('#flame-held g.frame[data-name="safe_broadcast"]')
        assert dt.eval("document.getElementById('flame-held').dataset.zoom") == "safe_broadcast"
        assert _frame_width(dt, "flame-held", "safe_broadcast") == pytest.approx(full, abs=1.5)
        assert "ingress_work" not in dt.eval(
            "[...document.querySelectorAll('#flame-held g.frame')].map(g => g.dataset.name)"
        )

        dt.type_into("#flame-held-section input.search", "^spin$")
        matched = float(dt.eval("document.getElementById('flame-held').dataset.matched"))
        assert 0.2 < matched <= 1.0
        assert dt.eval("document.querySelectorAll('#flame-held g.frame.match').length") >= 1
        assert "matched:" in dt.eval(
            "document.querySelector('#flame-held-section .matched').textContent"
        )

        dt.click("#flame-held-section button.reset")
        assert dt.eval("document.getElementById('flame-held').dataset.zoom") == ""

        # the waiters' graph: hovering a waiting thread's row (first in the DOM) names who
        # held the GIL meanwhile, the busiest holder first. Which of the two waits more varies
        # from run to run (ingress read 0.0% in one run of five): hover whichever is drawn.
        waiters = dt.eval(
            "[...document.querySelectorAll('#flame-wait g.frame')].map(g => g.dataset.name)"
        )
        waiter = "ingress" if "ingress" in waiters else "executor-loop"
        holder = {"ingress": "executor-loop", "executor-loop": "ingress"}[waiter]
        dt.hover(f'#flame-wait g.frame[data-name="{waiter}"]')
        tip = dt.eval("document.getElementById('tooltip').textContent")
        assert "meanwhile the GIL was held by: " in tip, tip
        # a thread waits for the other to release it, or for the interpreter's hand-off
        # (a wait of a few samples may see only that); never for itself
        held_by = tip.split("meanwhile the GIL was held by: ")[1]
        assert held_by.startswith((f"{holder} in ", "nobody (GIL in hand-off)")), tip
        assert f"{waiter} in " not in held_by, tip
        # the blocked-time graph: each thread's off-CPU time under the class of its wait
        blocked = dt.eval(
            "[...document.querySelectorAll('#flame-blocked g.frame')].map(g => g.dataset.name)"
        )
        assert "sleeping" in blocked and "clock_nanosleep" in blocked, blocked
        assert dt.eval("document.querySelectorAll('table.blame td .heat').length") >= 1

        shot = dt.screenshot(tmp_path / "wide.png")
        assert png_size(shot) == (1400, 1000)
        dt.resize(480, 900)
        dt.wait_for("document.getElementById('flame-held').getAttribute('width') < 480")
        overflow = dt.eval("document.documentElement.scrollWidth")
        assert overflow <= 520, overflow  # the narrow window needs no sideways scrolling
        assert png_size(dt.screenshot(tmp_path / "narrow.png")) == (480, 900)

    svg = tmp_path / "flame.svg"
    gilprof_stdout(spawn, "report", str(profile), "--format", "svg", "-o", str(svg))
    ET.parse(svg)
    dom = dump_dom(svg.as_uri() + "#search=safe_broadcast", tmp_path)
    assert 'data-search="safe_broadcast"' in dom and "Matched:" in dom

    trace = json.loads(gilprof_stdout(spawn, "report", str(profile), "--format", "perfetto"))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert any(n.startswith("executor-loop") for n in names)
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} >= {"held", "waiting"}


def test_fragment_selects_thread_zoom_and_search_in_dump_dom(tmp_path, spawn):
    p = steady_profile(
        sample("MainThread", "main", "loop", "safe_broadcast", count=40, tid=1),
        sample("ingress", "run", "recv", count=30, tid=2),
        windows=5,
    )
    dom = _report_dom(spawn, tmp_path, p, "p", "#thread=ingress&search=recv")
    assert 'data-zoom="ingress"' in dom and 'data-search="recv"' in dom
    assert 'class="frame match" data-name="recv"' in dom
    assert 'data-name="safe_broadcast"' not in dom  # zoomed to the other thread
    assert "matched: 30.00% of ticks" in dom


def test_empty_and_stateless_profiles_say_what_is_missing(tmp_path, spawn):
    dom = _report_dom(spawn, tmp_path, make_profile([]), "empty")
    assert "This profile holds no samples" in dom

    wall = steady_profile(
        sample("worker", "main", "work", count=50, tid=1), windows=3, mode=Mode.WALL
    )
    dom = _report_dom(spawn, tmp_path, wall, "wall")
    assert "wall mode records no GIL state" in dom
    assert 'data-name="work"' in dom  # it still draws what it has


def _steady_pair(hot: int) -> Profile:
    """safe_broadcast at hot% beside a steady function at 20%, over 20 windows."""
    return steady_profile(
        sample("t", "main", "safe_broadcast", count=hot, tid=1),
        sample("t", "main", "steady", count=20, tid=1),
        windows=20,
    )


def test_diff_page_colours_only_the_significant_change(tmp_path, spawn):
    before, after, page = tmp_path / "b.json", tmp_path / "a.json", tmp_path / "diff.html"
    _steady_pair(hot=50).save(before)
    _steady_pair(hot=10).save(after)
    gilprof_stdout(spawn, "compare", str(before), str(after), "--format", "html", "-o", str(page))
    shot = screenshot(page.as_uri(), tmp_path / "diff.png", tmp_path)
    assert png_size(shot) == (1400, 1000)
    dom = dump_dom(page.as_uri(), tmp_path)
    fills = {}
    for g in dom.split('<g class="frame')[1:]:
        name = g.split('data-name="', 1)[1].split('"', 1)[0]
        fills[name] = g.split('fill="', 1)[1].split('"', 1)[0]
    assert fills["safe_broadcast"].startswith("rgb(") and fills["safe_broadcast"].endswith(",240)")
    assert fills["steady"] == "#e2e2e2"
    assert "improved" in dom


def test_ranks_page_puts_ranks_side_by_side(tmp_path, spawn):
    paths = []
    for rank, hot in ((0, 40), (1, 5), (2, 6)):
        p = steady_profile(
            sample("MainThread", "main", "safe_broadcast", count=hot, tid=1),
            sample("MainThread", "main", "step", count=30, tid=1),
            windows=3,
            rank=rank,
        )
        p.target = type(p.target)(pid=100 + rank, rank=rank, hostname="h")
        p.save(tmp_path / f"r{rank}.json")
        paths.append(str(tmp_path / f"r{rank}.json"))
    page = tmp_path / "ranks.html"
    gilprof_stdout(spawn, "report", *paths, "--format", "html", "-o", str(page))
    dom = dump_dom(page.as_uri(), tmp_path)
    assert "3 ranks side by side" in dom
    assert "rank 0" in dom and "rank 2" in dom
    assert "+34.5 pp" in dom  # rank 0's 40% minus the median of 5% and 6%
