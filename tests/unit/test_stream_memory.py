"""What a profile read back from a gilprof.profile/2 stream keeps in memory.

Windows cost their non-zero (window, stack) cells, a few bytes each; stacks and frames cost
the same however many windows and samples there are.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from gilprof.model import Frame, ThreadState
from gilprof.profile import Profile, Window
from gilprof.profile.profile import Counts
from tests.unit.builders import make_profile, sample


def _profile(windows: int, stacks: int = 300, count: int = 3) -> Profile:
    profile = make_profile([])
    # Frame indexes above 256: Python caches no int object that large.
    for i in range(400):
        profile.intern_frame(Frame(f"f{i}", "app.py", i))
    for s in range(stacks):
        frames = [profile.frames[(s * 7 + k) % 400] for k in range(12)]
        profile.intern_stack(1 + s % 3, ThreadState.HELD, frames)
    for w in range(windows):
        profile.windows.append(Window(w, w + 1, 100, dict.fromkeys(range(stacks), count)))
    profile.finish()
    return profile


def _loaded_bytes(path: Path) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        profile = Profile.load(path)
        size = tracemalloc.get_traced_memory()[0]
        assert profile.windows
        return size
    finally:
        tracemalloc.stop()


def test_windows_cost_a_few_bytes_per_cell_and_stacks_do_not_grow_with_windows(tmp_path):
    sizes = {}
    for windows in (20, 80):
        path = tmp_path / f"w{windows}.json"
        _profile(windows).save(path, version=2)
        sizes[windows] = _loaded_bytes(path)
    per_cell = (sizes[80] - sizes[20]) / (60 * 300)
    # 8 bytes of arrays per cell, plus each window's own objects spread over its cells.
    assert per_cell < 12, per_cell


def test_counts_are_4_byte_ints_unless_a_value_needs_8(tmp_path):
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    make_profile([(10, [sample("t", "main", count=5)])]).save(small, version=2)
    make_profile([(2.0**40, [sample("t", "main", count=2**40)])]).save(large, version=2)
    for path, itemsize, count in ((small, 4, 5), (large, 8, 2**40)):
        counts = Profile.load(path).windows[0].counts
        assert isinstance(counts, Counts) and counts.values().itemsize == itemsize
        assert dict(counts.items()) == {0: count}


def test_stacks_share_one_int_object_per_frame_index(tmp_path):
    path = tmp_path / "p.json"
    _profile(4).save(path, version=2)
    stacks = Profile.load(path).stacks
    by_index: dict[int, int] = {}
    for stack in stacks:
        for index in stack.frames:
            assert by_index.setdefault(index, id(index)) == id(index)
    assert max(by_index) > 256
