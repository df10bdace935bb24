"""gilprof.profile/2: the stream's records, round trips, partial files, bundles, folding."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace

import pytest

from gilprof.errors import InputError
from gilprof.model import Mode, ThreadState
from gilprof.profile import (
    SCHEMA,
    Profile,
    StreamWriteError,
    StreamWriter,
    load_profiles,
    merge_profiles,
    save_bundle,
)

from .builders import make_profile, sample


def _gil():
    return make_profile(
        [
            (
                100,
                [
                    sample("exec", "loop", "safe_broadcast", count=30, tid=7),
                    sample("ingress", "serve", count=5, tid=8),
                ],
            ),
            (
                90,
                [
                    sample("exec", "loop", count=12, tid=7),
                    sample("exec", "loop", "other", count=3, tid=7),
                ],
            ),
        ]
    )


def _contention():
    """Two threads, states changing within each window; spans on the windows' clock."""
    held = sample("exec", "loop", "hot", tid=7)
    waits = sample("io", "serve", "wait", tid=8, state=ThreadState.WAITING)
    idle = sample("io", "serve", tid=8, state=ThreadState.IDLE)
    profile = make_profile([], mode=Mode.CONTENTION, rate=1000)
    for w in range(3):
        t0 = 2.0 * w + 0.1
        profile.add_window(
            t0,
            t0 + 2.0,
            2000,
            [held, waits, idle],
            [(held, 0.0, 1.5), (waits, 0.0, 0.25), (idle, 0.25, 1.999999), (waits, 1.999999, 2.0)],
        )
    profile.finish()
    return profile


def _records(path):
    return [json.loads(line) for line in gzip.open(path, "rt")]


def test_round_trip_keeps_everything_the_v1_document_keeps(tmp_path):
    for original in (_gil(), _contention()):
        path = tmp_path / "p.gilprof"
        original.save(path, version=2)
        loaded = Profile.load(path)
        assert loaded.to_dict() == original.to_dict()  # frames, stacks, counts, spans, totals
        assert loaded.sampling == original.sampling


def _streamed(path, source):
    """Written as a capture writes: each window right after it was added."""
    profile = make_profile([], mode=source.sampling.mode, rate=source.sampling.rate_hz)
    writer = StreamWriter.create(path)
    writer.start(profile)
    for window in source.windows:
        for index in window.counts:
            profile.threads.setdefault(
                source.stacks[index].tid, source.threads[source.stacks[index].tid]
            )
        counts = {
            profile.intern_stack(
                source.stacks[i].tid, source.stacks[i].state, source.stack_frames(i)
            ): c
            for i, c in window.counts.items()
        }
        writer.window(profile, type(window)(window.t0, window.t1, window.ticks, counts))
    profile.sampling = source.sampling
    writer.finish(profile)
    writer.close()


def test_records_are_gzip_json_lines_with_only_what_is_new(tmp_path):
    path = tmp_path / "p.gilprof"
    _streamed(path, _gil())
    header, first, second, footer = _records(path)
    assert header["schema"] == SCHEMA and header["target"]["pid"] == 1234
    assert first["new"]["threads"] == [[7, "exec"], [8, "ingress"]]
    # frames: loop, safe_broadcast, serve, other; a stack sharing a prefix names where it is
    assert first["new"]["frames"][1] == ["safe_broadcast", "app.py", 11]
    assert first["new"]["stacks"] == [[7, "held", -1, 0, [0, 1]], [8, "held", -1, 0, [2]]]
    assert first["counts"] == {"stack": [0, 1], "n": [30, 5]}
    assert "threads" not in second["new"]
    # [loop] is the first frame of stack 0; [loop, other] adds one frame to it
    assert second["new"]["stacks"] == [[7, "held", 0, 1, []], [7, "held", 0, 1, [3]]]
    assert second["counts"] == {"stack": [2, 1], "n": [12, 3]}  # indexes 2, 3 delta-encoded
    assert footer["end"]["windows"] == 2 and footer["end"]["sampling"]["samples"] == 50


def test_contention_runs_store_each_thread_id_once(tmp_path):
    path = tmp_path / "c.gilprof"
    _contention().save(path, version=2)
    window = _records(path)[1]
    assert sorted(r[0] for r in window["runs"]) == [7, 8]
    io = next(r for r in window["runs"] if r[0] == 8)
    # gaps (since the run before, microseconds) and lengths, not absolute times
    assert io[2] == [0, 0, 0] and io[3] == [250_000, 1_749_999, 1]


def test_loaded_windows_are_compact_but_read_like_dicts(tmp_path):
    path = tmp_path / "p.gilprof"
    _gil().save(path, version=2)
    window = Profile.load(path).windows[1]
    assert dict(window.counts.items()) == {2: 12, 3: 3}
    assert window.counts.get(3) == 3 and window.counts.get(0) is None and 2 in window.counts
    assert sum(window.counts.values()) == 15 and len(window.counts) == 2
    assert window.counts == {2: 12, 3: 3}


def test_a_stream_without_footer_is_partial_and_a_cut_record_is_dropped(tmp_path):
    path = tmp_path / "p.gilprof"
    _contention().save(path, version=2)
    data = path.read_bytes()
    members = len(_records(path))
    header_end = len(gzip.compress(b"x"))  # any cut inside the header is refused
    outcomes: list[int | None] = []
    for cut in range(len(data)):
        (tmp_path / "cut").write_bytes(data[:cut])
        try:
            profile = Profile.load(tmp_path / "cut")
        except InputError as exc:
            assert "truncated" in str(exc) or "empty" in str(exc), exc
            outcomes.append(None)
            continue
        assert profile.sampling.partial, cut
        assert "without its footer" in (profile.sampling.partial_reason or "")
        outcomes.append(len(profile.windows))
    assert outcomes[:header_end] == [None] * header_end
    seen = [n for n in outcomes if n is not None]
    assert seen == sorted(seen) and set(seen) == set(range(members - 1))  # 0..3 windows


def test_bundles_are_streams_one_after_another_and_merge_reads_both_schemas(tmp_path):
    a, b = _gil(), make_profile([(50, [sample("exec", "loop", count=9, tid=7)])], rank=1)
    b.target = replace(b.target, pid=99)
    save_bundle(tmp_path / "bundle", [a, b])
    loaded = load_profiles(tmp_path / "bundle")
    assert [p.target.rank for p in loaded] == [0, 1]
    assert [p.sampling.samples for p in loaded] == [50, 9]
    a.save(tmp_path / "old.json")  # v1
    merged = merge_profiles([*load_profiles(tmp_path / "old.json"), *loaded])
    assert [(p.target.rank, p.sampling.samples, len(p.windows)) for p in merged] == [
        (0, 100, 4),
        (1, 9, 1),
    ]
    with pytest.raises(InputError, match="holds 2 profiles"):
        Profile.load(tmp_path / "bundle")


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda r: r[1].update(window=5), "numbered 5"),
        (lambda r: r[1]["counts"].update(stack=[0, 0]), "not strictly ascending"),
        (lambda r: r[1]["counts"].update(stack=[0, 9]), "out of range"),
        (lambda r: r[1]["counts"].update(n=[1]), "differ in length"),
        (lambda r: r[1]["counts"].update(n=[1, -1]), "negative count"),
        (lambda r: r[1]["new"]["stacks"].append([7, "held", 5, 0, []]), "base stack"),
        (lambda r: r[1]["new"]["stacks"].append([7, "held", 0, 9, []]), "keep"),
        (lambda r: r[1]["new"]["stacks"].append([7, "held", -1, 0, [99]]), "frame index"),
        (lambda r: r[1]["new"]["stacks"].append([7, "sleepy", -1, 0, []]), "unknown state"),
        (lambda r: r[1]["new"]["frames"].append(["f", "g", True]), "bad line"),
        (lambda r: r[3]["end"].update(windows=7), "footer"),
        (lambda r: r[0].update(schema="gilprof.profile/3"), "newer"),
        (lambda r: r.insert(1, {"what": 1}), "neither a window"),
        (lambda r: r[1].update(t0=float("inf")), "not valid JSON"),
    ],
)
def test_bad_records_name_what_is_wrong(tmp_path, mutate, message):
    path = tmp_path / "p.gilprof"
    _gil().save(path, version=2)
    records = _records(path)
    mutate(records)
    with open(path, "wb") as out:
        for record in records:
            out.write(gzip.compress((json.dumps(record) + "\n").encode()))
    with pytest.raises(InputError, match=message):
        Profile.load(path)


def test_corrupt_bytes_in_the_middle_are_refused(tmp_path):
    path = tmp_path / "p.gilprof"
    _gil().save(path, version=2)
    data = bytearray(path.read_bytes())
    data[data.find(b"\x1f\x8b\x08", 1) + 20] ^= 0xFF  # inside the first window's record
    path.write_bytes(bytes(data))
    with pytest.raises(InputError):
        Profile.load(path)


def test_streaming_writer_folds_what_it_wrote(tmp_path):
    """What a capture does: append each window, then keep only the running totals."""
    source = _contention()
    profile = make_profile([], mode=Mode.CONTENTION, rate=1000)
    writer = StreamWriter.create(tmp_path / "live")
    writer.start(profile)
    assert Profile.load(tmp_path / "live").sampling.partial  # a header alone: partial, 0 windows
    for window in source.windows:
        profile.windows.append(window)
        profile.stacks, profile.frames, profile.threads = (
            source.stacks,
            source.frames,
            source.threads,
        )
        writer.window(profile, window)
        profile.fold_windows()
        assert len(profile.windows) == 1
        folded = profile.windows[0].spans  # one span per (thread, stack): memory stays flat
        assert len(folded) == len({(t, k) for t, k, _, _ in folded})
    profile.finish()
    assert profile.sampling.samples == source.sampling.samples
    assert profile.sampling.duration_s == pytest.approx(source.sampling.duration_s)
    writer.finish(profile)
    writer.close()
    loaded = Profile.load(tmp_path / "live")
    assert [w.t0 for w in loaded.windows] == [w.t0 for w in source.windows]
    assert list(loaded.windows[2].spans) == [
        (t, s, round(a, 6), round(b, 6))  # microseconds
        for t, s, a, b in source.windows[2].spans
    ]


def test_a_failed_write_is_one_error_and_later_writes_refuse(tmp_path):
    writer = StreamWriter.create(tmp_path / "p")
    writer.start(_gil())
    writer.close()
    writer.fd = 10**6  # a closed descriptor: EBADF, as a vanished disk would fail
    with pytest.raises(StreamWriteError, match="cannot write"):
        writer.finish(_gil())
    with pytest.raises(StreamWriteError, match="cannot write"):
        writer.finish(_gil())


def test_a_fold_keeps_every_states_mode_weight():
    """top and a streamed capture read states from the folded window: no weight is lost."""
    profile = make_profile([], mode=Mode.STATES, rate=100)
    stack_a = profile.intern_stack(1, ThreadState.HELD, ())
    stack_b = profile.intern_stack(2, ThreadState.WAITING, ())
    profile.add_window(0.0, 1.0, 100, [], [])
    profile.windows[-1].spans = [(1, stack_a, 0.0, 0.4), (2, stack_b, 0.1, 0.9)]
    profile.add_window(1.0, 3.0, 100, [], [])  # a slower window: 50 ticks per second
    profile.windows[-1].spans = [(1, stack_a, 1.0, 3.0), (2, stack_b, 2.0, 2.5)]
    before = profile.state_totals()
    profile.fold_windows()
    after = profile.state_totals()
    assert len(profile.windows) == 1
    assert after == pytest.approx(before)
    assert before[stack_a] == pytest.approx(40 + 100) and before[stack_b] == pytest.approx(80 + 25)
