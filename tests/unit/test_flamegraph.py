"""Flame-graph trees, their JSON and the standalone SVG, from hand-made profiles."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from gilprof.analysis.attribution import attribute
from gilprof.analysis.compare import compare_profiles
from gilprof.model import Mode, Sample, SamplingInfo, Target, ThreadState
from gilprof.profile import Profile
from gilprof.renderers import render
from gilprof.renderers.flamegraph import diff_flame, flame_json, held_flame, render_svg, wait_flame
from gilprof.renderers.report import ReportData

from .builders import frames, make_profile, sample, steady_profile

MAIN, INGRESS = 11, 22


def gil_profile() -> Profile:
    return make_profile(
        [
            (
                100,
                [
                    sample("MainThread", "main", "loop", "safe_broadcast", count=40, tid=MAIN),
                    sample("MainThread", "main", "loop", count=10, tid=MAIN),
                    sample("ingress", "run", "recv", count=30, tid=INGRESS),
                ],
            )
        ]
        * 4
    )


def contention_profile() -> Profile:
    """MainThread holds the GIL in `spin` 0-0.6 s while ingress waits in `recv`; then ingress
    holds it in `parse` 0.6-1.0 s while MainThread waits in `loop`."""
    p = Profile(Target(pid=1, rank=0), SamplingInfo("test", "0", Mode.CONTENTION, 100.0))

    def s(tid: int, name: str, state: ThreadState, *names: str, count: int) -> Sample:
        return Sample(tid, name, frames(*names), count, state)

    main_held = s(MAIN, "MainThread", ThreadState.HELD, "main", "spin", count=60)
    ingress_wait = s(INGRESS, "ingress", ThreadState.WAITING, "run", "recv", count=60)
    ingress_held = s(INGRESS, "ingress", ThreadState.HELD, "run", "parse", count=40)
    main_wait = s(MAIN, "MainThread", ThreadState.WAITING, "main", "loop", count=40)
    p.add_window(
        0.0,
        1.0,
        100,
        [main_held, ingress_wait, ingress_held, main_wait],
        spans=[
            (main_held, 0.0, 0.6),
            (ingress_wait, 0.0, 0.6),
            (ingress_held, 0.6, 1.0),
            (main_wait, 0.6, 1.0),
        ],
    )
    p.finish()
    return p


def test_held_tree_has_a_thread_level_and_counts_every_sample_once():
    flame = held_flame(gil_profile())
    root = flame.root
    assert root.value == 4 * 80
    assert {n.name for n in root.children.values()} == {"MainThread", "ingress"}
    main = root.children[("MainThread", "")]
    loop = main.children[("main", "app.py")].children[("loop", "app.py")]
    assert loop.value == 4 * 50
    assert loop.children[("safe_broadcast", "app.py")].value == 4 * 40
    assert flame.ticks == 400


def test_held_tree_in_contention_mode_keeps_only_held_stacks():
    root = held_flame(contention_profile()).root
    assert root.value == 100
    assert root.children[("MainThread", "")].children[("main", "app.py")].children.keys() == {
        ("spin", "app.py")
    }


def test_waiters_tree_names_who_held_the_gil_meanwhile():
    root = wait_flame(contention_profile()).root
    recv = root.children[("ingress", "")].children[("run", "app.py")].children[("recv", "app.py")]
    assert recv.value == 60
    assert set(recv.holders) == {"MainThread in spin"}
    assert abs(recv.holders["MainThread in spin"] - 0.6) < 1e-9
    loop = (
        root.children[("MainThread", "")].children[("main", "app.py")].children[("loop", "app.py")]
    )
    assert set(loop.holders) == {"ingress in parse"}
    data = flame_json(wait_flame(contention_profile()))
    assert "MainThread in spin" in data["holders"]


def test_json_drops_frames_narrower_than_the_threshold_into_their_caller():
    p = make_profile(
        [
            (
                1000,
                [
                    sample("t", "main", "hot", count=999, tid=1),
                    sample("t", "main", "tiny", count=1, tid=1),
                ],
            )
        ]
    )
    data = flame_json(held_flame(p), min_share=0.01)
    assert data["dropped"] == 1
    assert not any(name.startswith("tiny\t") for name in data["names"])
    assert data["root"][1] == 1000  # the dropped time stays in the totals


def test_diff_tree_colours_only_significant_functions():
    def side(slow: int) -> Profile:
        return steady_profile(
            sample("t", "main", "slow", count=slow, tid=1),
            sample("t", "main", "same", count=20, tid=1),
            windows=20,
        )

    before, after = side(50), side(10)
    comparison = compare_profiles(before, after)
    flame = diff_flame(before, after, comparison)
    slow = flame.root.children[("t", "")].children[("main", "app.py")].children[("slow", "app.py")]
    assert (slow.before, slow.value) == (1000, 200)
    assert flame.significance[("slow", "app.py")][0] == -1  # less GIL time after: better
    assert flame.significance[("same", "app.py")][0] == 0
    data = flame_json(flame)
    assert data["root"][1] == [1400, 600]


def test_svg_is_valid_xml_with_static_frames_and_the_script():
    svg = render_svg(held_flame(gil_profile()), "sub <title> & more")
    doc = ET.fromstring(svg)
    texts = [t.text for t in doc.iter("{http://www.w3.org/2000/svg}text")]
    assert "safe_broadcast" in texts and "MainThread" in texts
    scripts = list(doc.iter("{http://www.w3.org/2000/svg}script"))
    assert any("gilprofStandaloneSvg" in (s.text or "") for s in scripts)
    data = json.loads(next(s.text or "" for s in scripts if s.get("id") == "flame-data"))
    assert data["kind"] == "held"


def test_names_that_look_like_markup_cannot_break_out_of_the_page():
    evil = "f</script><script>alert(1)</script>"
    p = make_profile([(10, [sample("t<b>", "main", evil, count=5, tid=1)])])
    html = render("report", "html", ReportData(p, attribute(p)))
    assert "<script>alert(1)" not in html
    assert "t<b>" not in html and "t&lt;b&gt;" in html
    ET.fromstring(render_svg(held_flame(p)))  # still valid XML


def test_empty_profile_page_says_so():
    p = Profile(Target(pid=1), SamplingInfo("test", "0", Mode.GIL, 100.0))
    html = render("report", "html", ReportData(p, attribute(p)))
    assert "holds no samples" in html
    assert re.search(r"<svg class=\"flame", html) is None


def test_wall_mode_page_says_there_is_no_gil_state():
    p = make_profile(
        [(10, [sample("t", "main", count=5, tid=1, state=ThreadState.ACTIVE)])], mode=Mode.WALL
    )
    html = render("report", "html", ReportData(p, attribute(p)))
    assert "records no GIL state" in html
