"""Where threads block (gilprof.analysis.blocking) and compare's per-class change
(gilprof.renderers.compare_classes): pure logic on built profiles."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gilprof.analysis.blocking import blocking_of, step_parts, where_threads_block
from gilprof.analysis.verdict import verdict
from gilprof.model import Frame, Mode, Sample, ThreadState
from gilprof.renderers import blocking as blocking_renderer
from gilprof.renderers.compare_classes import part_changes
from gilprof.wait_classes import SYSCALL_FILE, WAKER_THREAD, WaitClass, WaitRules, waker_frame

from .builders import frames, make_profile

LOOP, INGRESS = 11, 12
FUTEX = Frame("futex", SYSCALL_FILE, 0)
SLEEP = Frame("clock_nanosleep", SYSCALL_FILE, 0)
FED = waker_frame(WAKER_THREAD, "thread 'ingress' (tid 12)", INGRESS)


def _profile(input_count: int = 70, sleep_count: int = 10, mode: Mode = Mode.CONTENTION):
    loop_wait = (*frames("executor", "Queue.get@queue.py", "Condition.wait@threading.py"), FUTEX)
    samples = [
        Sample(LOOP, "executor", frames("executor", "work"), 100 - input_count - sleep_count),
        Sample(LOOP, "executor", (*loop_wait, FED), input_count, ThreadState.IDLE),
        Sample(
            LOOP, "executor", (*frames("executor", "backoff"), SLEEP), sleep_count, ThreadState.IDLE
        ),
        Sample(INGRESS, "ingress", (*frames("ingress"), SLEEP), 99, ThreadState.IDLE),
        Sample(INGRESS, "ingress", frames("ingress", "Queue.put@queue.py"), 1),
    ]
    return make_profile([(100, samples)] * 4, mode=mode)


def test_each_threads_blocked_time_by_class_with_its_evidence_and_ms_per_step():
    rows = where_threads_block(_profile(), WaitRules(), step_ms=20.0, first_tid=LOOP)
    assert [(r.thread, r.cls) for r in rows] == [
        ("executor", WaitClass.INPUT),
        ("executor", WaitClass.SLEEP),
        ("ingress", WaitClass.SLEEP),
    ]
    first = rows[0]
    assert first.share == pytest.approx(0.70)
    assert first.ms_per_step == pytest.approx(14.0)
    assert "fed by thread 'ingress'" in first.evidence
    assert first.where.startswith("executor")  # the caller, not queue.py's machinery
    assert rows[2].share == pytest.approx(0.99)
    # without the loop named first, the thread that blocks most leads
    assert where_threads_block(_profile(), WaitRules())[0].thread == "ingress"
    assert where_threads_block(_profile(), WaitRules())[0].ms_per_step is None


def test_small_places_fold_into_one_row_of_their_class_and_tiny_ones_go():
    rows = where_threads_block(_profile(sleep_count=3), WaitRules(), min_share=0.05)
    assert ("executor", WaitClass.SLEEP) not in {(r.thread, r.cls) for r in rows}
    rows = where_threads_block(_profile(sleep_count=3), WaitRules(), min_share=0.02)
    assert ("executor", WaitClass.SLEEP) in {(r.thread, r.cls) for r in rows}


def test_a_profile_without_thread_states_has_no_blocked_rows():
    assert where_threads_block(_profile(mode=Mode.GIL), WaitRules()) == ()
    assert blocking_of(_profile(mode=Mode.GIL), WaitRules()).sites == ()


def test_the_step_split_sums_the_loops_parts_in_ms_and_compare_shows_each_change():
    profile = _profile()
    judged = verdict(profile, 20.0, None, loop_thread="executor")
    parts = {p.key: p for p in step_parts(judged)}
    assert parts["input"].ms == pytest.approx(14.0)
    assert parts["sleep"].ms == pytest.approx(2.0)
    assert parts["host"].ms == pytest.approx(4.0)
    assert sum(p.share for p in parts.values()) == pytest.approx(1.0, abs=0.01)

    after = verdict(_profile(input_count=20, sleep_count=50), 20.0, None, loop_thread="executor")
    changes = {c.key: c for c in part_changes(judged, after)}
    assert changes["input"].change_ms == pytest.approx(-10.0)
    assert changes["sleep"].change_ms == pytest.approx(8.0)
    one_sided = {c.key: c for c in part_changes(judged, None)}
    assert one_sided["input"].after_ms is None and one_sided["input"].change_ms is None
    assert part_changes(None, None) == ()


def test_the_table_names_evidence_once_and_keeps_every_row_in_markdown():
    rows = where_threads_block(_profile(), WaitRules(), step_ms=20.0, first_tid=LOOP)
    sleep = next(r for r in rows if r.thread == "ingress")
    text = blocking_renderer._where(replace(sleep, evidence=f"clock_nanosleep in {sleep.where}"))
    assert text == f"{sleep.where}: clock_nanosleep"
    lines = blocking_renderer.markdown(rows)
    assert sum(line.startswith("| executor") for line in lines) == 2
    assert "ms/step" in lines[3]
