from __future__ import annotations

import json
import os
import stat

import pytest

from gilprof.errors import InputError
from gilprof.profile import SCHEMA_V1, Profile

from .builders import make_profile, sample


def _profile():
    return make_profile(
        [
            (
                100,
                [
                    sample("exec", "loop", "safe_broadcast", count=30, tid=7),
                    sample("ingress", "serve", count=5, tid=8),
                ],
            ),
            (90, [sample("exec", "loop", count=12, tid=7)]),
        ]
    )


def test_round_trip_keeps_windows_and_counts(tmp_path):
    original = _profile()
    path = tmp_path / "p.json"
    original.save(path)
    loaded = Profile.load(path)
    assert loaded.sampling.samples == 47
    assert loaded.sampling.ticks == 190
    assert [w.ticks for w in loaded.windows] == [100, 90]
    assert {s.frames[-1].name: s.count for s in loaded.samples()} == {
        "safe_broadcast": 30,
        "serve": 5,
        "loop": 12,
    }
    assert loaded.threads == {7: "exec", 8: "ingress"}
    assert json.loads(path.read_text())["schema"] == SCHEMA_V1


def test_save_is_atomic_and_respects_umask(tmp_path):
    path = tmp_path / "p.json"
    old = os.umask(0o027)
    try:
        _profile().save(path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["p.json"]  # no temporary file left


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.update(schema="gilprof.profile/9"), "newer than this gilprof"),
        (lambda d: d.update(schema="something/1"), "not a gilprof profile"),
        (lambda d: d.update(schema="gilprof.profile/x"), "unknown schema version"),
        (lambda d: d["sampling"].update(mode="turbo"), "sampling.mode"),
        (lambda d: d["sampling"].update(rate_hz=-1), "rate_hz"),
        (lambda d: d["windows"][0].update(counts=[[99, 1]]), "windows[0].counts"),
        (lambda d: d["stacks"][0].__setitem__(2, [99]), "frame index out of range"),
        (lambda d: d.pop("frames"), "frames"),
    ],
)
def test_bad_profiles_name_what_is_wrong(tmp_path, mutate, message):
    data = _profile().to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Profile.load(path)


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "empty"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b'{"schema": "gilprof.profile/1", "target": {', "truncated"),
        (b"[1, 2", "truncated"),
        (b'{"a": NaN}', "NaN"),
    ],
)
def test_unreadable_files(tmp_path, content, message):
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        Profile.load(path)


def test_missing_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        Profile.load(tmp_path / "nope.json")
    with pytest.raises(InputError, match="directory"):
        Profile.load(tmp_path)
