"""Bundles (several ranks' profiles in one file) and merging pieces of one process's profile.

A bundle is written as gilprof.profile/2 streams one after another (header .. footer per
profile); the older gilprof.bundle/1 JSON document still loads.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import replace

from gilprof.errors import InputError
from gilprof.profile.files import read_json_file, write_json_atomic
from gilprof.profile.profile import Counts, Profile, Window
from gilprof.profile.reader import _short
from gilprof.profile.stream import is_stream, read_streams, save_streams

BUNDLE_SCHEMA = "gilprof.bundle/1"


def load_profiles(path: str | os.PathLike[str]) -> list[Profile]:
    """A profile file, or a bundle of several (from `gilprof merge`), of either schema."""
    if is_stream(path):
        return read_streams(path)
    data = read_json_file(path, what="profile")
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("gilprof.bundle/"):
        if data["schema"] != BUNDLE_SCHEMA:
            raise InputError(
                f"{os.fspath(path)}: bundle schema {_short(data['schema'])} is not "
                f"{BUNDLE_SCHEMA!r}; upgrade gilprof"
            )
        members = data.get("profiles")
        if not isinstance(members, list) or not members:
            raise InputError(f"{os.fspath(path)}: profiles: expected a non-empty list")
        return [
            Profile.from_dict(m, source=f"{os.fspath(path)}[{i}]") for i, m in enumerate(members)
        ]
    return [Profile.from_dict(data, source=os.fspath(path))]


def save_bundle(path: str | os.PathLike[str], profiles: list[Profile], version: int = 2) -> None:
    """Several profiles in one file, written atomically (version 1: the old JSON bundle)."""
    if version == 1:
        write_json_atomic(
            path, {"schema": BUNDLE_SCHEMA, "profiles": [p.to_dict() for p in profiles]}
        )
    else:
        save_streams(path, profiles)


def merge_profiles(profiles: list[Profile]) -> list[Profile]:
    """Profiles of the same process (host, pid) are joined window after window; others stay apart.

    Windows of a later piece are shifted to start after the earlier piece ends, so window
    times stay increasing; modes and rates must agree to be joined.
    """
    merged: dict[tuple[str, int], Profile] = {}
    for profile in profiles:
        key = (profile.target.hostname, profile.target.pid)
        into = merged.get(key)
        if into is None:
            copy = Profile(profile.target, profile.sampling)
            _append_windows(copy, profile, 0.0)
            merged[key] = copy
            continue
        if (into.sampling.mode, into.sampling.rate_hz) != (
            profile.sampling.mode,
            profile.sampling.rate_hz,
        ):
            raise InputError(
                f"cannot merge two profiles of {profile.label} sampled with different "
                "modes or rates"
            )
        offset = into.windows[-1].t1 if into.windows else 0.0
        _append_windows(into, profile, offset)
        into.sampling = replace(
            into.sampling,
            partial=into.sampling.partial or profile.sampling.partial,
            errors=into.sampling.errors + profile.sampling.errors,
        )
    out = list(merged.values())
    for profile in out:
        profile.finish()
    return sorted(out, key=lambda p: (p.target.rank is None, p.target.rank or 0, p.target.hostname))


def _append_windows(into: Profile, source: Profile, offset: float) -> None:
    for tid, name in source.threads.items():
        into.threads.setdefault(tid, name)
    remap = {
        i: into.intern_stack(s.tid, s.state, source.stack_frames(i))
        for i, s in enumerate(source.stacks)
    }
    for window in source.windows:
        into.windows.append(
            Window(
                window.t0 + offset,
                window.t1 + offset,
                window.ticks,
                {remap[i]: c for i, c in window.counts.items()},
                [(tid, remap[i], a + offset, b + offset) for tid, i, a, b in window.spans],
            )
        )
    # Counts as compact as a loaded window's: a bundle of many ranks stays small in memory.
    for window in into.windows:
        if isinstance(window.counts, dict):
            keys = sorted(window.counts)
            window.counts = Counts(array("q", keys), array("q", [window.counts[k] for k in keys]))
