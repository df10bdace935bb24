"""The pictures, looked at in a real headless Chromium: names in the DOM, zoom, search, hover.

One test samples a real target (py-spy, contention mode) and drives the page with mouse and
keyboard events over the DevTools protocol; the others render hand-made profiles through the
CLI and read the DOM after the scripts ran (--dump-dom), with state given in the URL fragment.
"""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET

import pytest

from gilprof.model import Mode

from ..unit.builders import make_profile, sample
from .browser import DevTools, dump_dom, png_size, screenshot
from .conftest import WORKLOADS, gilprof_cmd

pytestmark = pytest.mark.integration


def _run(spawn, *args: str, timeout: float = 60) -> str:
    proc = spawn(gilprof_cmd(*args))
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def _frame_width(dt: DevTools, flame: str, name: str) -> float:
    return dt.eval(
        f"(() => {{ const g = [...document.querySelectorAll('#{flame} g.frame')]"
        f".find(g => g.dataset.name === {json.dumps(name)}); "
        "return g ? +g.querySelector('rect').getAttribute('width') : -1; })()"
    )


def test_report_page_of_a_real_capture_zooms_searches_and_names_the_holder(spawn, tmp_path):
    target = spawn(
        [
            sys.executable,
            str(WORKLOADS / "gil_workload.py"),
            "--duration",
            "9",
            "--truth",
            str(tmp_path / "truth.json"),
        ]
    )
    time.sleep(1.0)
    profile = tmp_path / "c.json"
    _run(
        spawn,
        "attach",
        "--pid",
        str(target.pid),
        "--mode",
        "contention",
        "-d",
        "3",
        "-q",
        "-o",
        str(profile),
    )
    page = tmp_path / "report.html"
    _run(spawn, "report", str(profile), "--format", "html", "-o", str(page))
    assert page.stat().st_size < 1_000_000
    assert "http://" not in page.read_text().replace("http://www.w3.org/2000/svg", "")

    with DevTools(tmp_path) as dt:
        dt.open(page.as_uri(), "window.gilprof && document.querySelector('#flame-held g.frame')")
        lanes = dt.eval(
            "[...document.querySelectorAll('#timeline .lane-name')].map(e => e.textContent)"
        )
        assert {"executor-loop", "ingress"} <= set(lanes)
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

        # the waiters' graph: hovering ingress's waiting (the thread's row, first in the DOM)
        # names who held the GIL meanwhile, the busiest holder first
        dt.hover('#flame-wait g.frame[data-name="ingress"]')
        tip = dt.eval("document.getElementById('tooltip').textContent")
        assert "meanwhile the GIL was held by: executor-loop in " in tip, tip
        assert dt.eval("document.querySelectorAll('table.blame td .heat').length") >= 1

        shot = dt.screenshot(tmp_path / "wide.png")
        assert png_size(shot) == (1400, 1000)
        dt.resize(480, 900)
        dt.wait_for("document.getElementById('flame-held').getAttribute('width') < 480")
        overflow = dt.eval("document.documentElement.scrollWidth")
        assert overflow <= 520, overflow  # the narrow window needs no sideways scrolling
        assert png_size(dt.screenshot(tmp_path / "narrow.png")) == (480, 900)

    svg = tmp_path / "flame.svg"
    _run(spawn, "report", str(profile), "--format", "svg", "-o", str(svg))
    ET.parse(svg)
    dom = dump_dom(svg.as_uri() + "#search=safe_broadcast", tmp_path)
    assert 'data-search="safe_broadcast"' in dom and "Matched:" in dom

    trace = json.loads(_run(spawn, "report", str(profile), "--format", "perfetto"))
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert any(n.startswith("executor-loop") for n in names)
    assert {e["cat"] for e in trace["traceEvents"] if e["ph"] == "X"} >= {"held", "waiting"}


def test_fragment_selects_thread_zoom_and_search_in_dump_dom(tmp_path, spawn):
    p = make_profile(
        [
            (
                100,
                [
                    sample("MainThread", "main", "loop", "safe_broadcast", count=40, tid=1),
                    sample("ingress", "run", "recv", count=30, tid=2),
                ],
            )
        ]
        * 5
    )
    p.save(tmp_path / "p.json")
    page = tmp_path / "p.html"
    _run(spawn, "report", str(tmp_path / "p.json"), "--format", "html", "-o", str(page))
    dom = dump_dom(page.as_uri() + "#thread=ingress&search=recv", tmp_path)
    assert 'data-zoom="ingress"' in dom and 'data-search="recv"' in dom
    assert 'class="frame match" data-name="recv"' in dom
    assert 'data-name="safe_broadcast"' not in dom  # zoomed to the other thread
    assert "matched: 30.00% of ticks" in dom


def test_empty_and_stateless_profiles_say_what_is_missing(tmp_path, spawn):
    empty = make_profile([])
    empty.save(tmp_path / "empty.json")
    _run(
        spawn,
        "report",
        str(tmp_path / "empty.json"),
        "--format",
        "html",
        "-o",
        str(tmp_path / "e.html"),
    )
    dom = dump_dom((tmp_path / "e.html").as_uri(), tmp_path)
    assert "This profile holds no samples" in dom

    wall = make_profile(
        [(100, [sample("worker", "main", "work", count=50, tid=1)])] * 3, mode=Mode.WALL
    )
    wall.save(tmp_path / "wall.json")
    _run(
        spawn,
        "report",
        str(tmp_path / "wall.json"),
        "--format",
        "html",
        "-o",
        str(tmp_path / "w.html"),
    )
    dom = dump_dom((tmp_path / "w.html").as_uri(), tmp_path)
    assert "wall mode records no GIL state" in dom
    assert 'data-name="work"' in dom  # it still draws what it has


def test_diff_page_colours_only_the_significant_change(tmp_path, spawn):
    before = make_profile(
        [
            (
                100,
                [
                    sample("t", "main", "safe_broadcast", count=50, tid=1),
                    sample("t", "main", "steady", count=20, tid=1),
                ],
            )
        ]
        * 20
    )
    after = make_profile(
        [
            (
                100,
                [
                    sample("t", "main", "safe_broadcast", count=10, tid=1),
                    sample("t", "main", "steady", count=20, tid=1),
                ],
            )
        ]
        * 20
    )
    before.save(tmp_path / "b.json")
    after.save(tmp_path / "a.json")
    page = tmp_path / "diff.html"
    _run(
        spawn,
        "compare",
        str(tmp_path / "b.json"),
        str(tmp_path / "a.json"),
        "--format",
        "html",
        "-o",
        str(page),
    )
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
        p = make_profile(
            [
                (
                    100,
                    [
                        sample("MainThread", "main", "safe_broadcast", count=hot, tid=1),
                        sample("MainThread", "main", "step", count=30, tid=1),
                    ],
                )
            ]
            * 3,
            rank=rank,
        )
        p.target = type(p.target)(pid=100 + rank, rank=rank, hostname="h")
        p.save(tmp_path / f"r{rank}.json")
        paths.append(str(tmp_path / f"r{rank}.json"))
    page = tmp_path / "ranks.html"
    _run(spawn, "report", *paths, "--format", "html", "-o", str(page))
    dom = dump_dom(page.as_uri(), tmp_path)
    assert "3 ranks side by side" in dom
    assert "rank 0" in dom and "rank 2" in dom
    assert "+34.5 pp" in dom  # rank 0's 40% minus the median of 5% and 6%
