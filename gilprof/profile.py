"""The saved profile: raw stack counts per sampling window, with target and sampling metadata.

A profile keeps what the sampler saw (interned frames and stacks, and per-window counts) and
nothing derived, so `report`, `compare` and `gate` recompute attribution from the same file.
Memory is bounded by distinct stacks x windows, never by the number of samples.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gilprof.errors import InputError
from gilprof.model import Frame, Mode, Sample, SamplingInfo, Target, ThreadState

SCHEMA = "gilprof.profile/1"
SCHEMA_NAME, _, _version = SCHEMA.rpartition("/")
SCHEMA_VERSION = int(_version)


@dataclass(frozen=True, slots=True)
class Stack:
    tid: int
    state: ThreadState
    frames: tuple[int, ...]  # indices into Profile.frames, root first


@dataclass
class Window:
    """One contiguous stretch of sampling: [t0, t1) seconds since the profile started."""

    t0: float
    t1: float
    ticks: float
    counts: dict[int, int] = field(default_factory=dict)  # stack index -> samples
    # contention mode: (tid, stack index, t0, t1) runs of one stack, all threads on one clock
    spans: list[tuple[int, int, float, float]] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return max(0.0, self.t1 - self.t0)


class Profile:
    def __init__(self, target: Target, sampling: SamplingInfo) -> None:
        self.target = target
        self.sampling = sampling
        self.frames: list[Frame] = []
        self.stacks: list[Stack] = []
        self.threads: dict[int, str] = {}
        self.windows: list[Window] = []
        self._frame_index: dict[Frame, int] = {}
        self._stack_index: dict[Stack, int] = {}

    # -- building -------------------------------------------------------------------------
    def intern_frame(self, frame: Frame) -> int:
        index = self._frame_index.get(frame)
        if index is None:
            index = len(self.frames)
            self.frames.append(frame)
            self._frame_index[frame] = index
        return index

    def intern_stack(self, tid: int, state: ThreadState, frames: Iterable[Frame]) -> int:
        stack = Stack(tid, state, tuple(self.intern_frame(f) for f in frames))
        index = self._stack_index.get(stack)
        if index is None:
            index = len(self.stacks)
            self.stacks.append(stack)
            self._stack_index[stack] = index
        return index

    def add_window(self, t0: float, t1: float, ticks: float, samples: Iterable[Sample],
                   spans: Iterable[tuple[Sample, float, float]] = ()) -> Window:
        """Counts per stack; `spans` (sample, start, end) in seconds on the window's clock."""
        window = Window(t0, t1, ticks)
        for sample in samples:
            index = self._intern_sample(sample)
            window.counts[index] = window.counts.get(index, 0) + sample.count
        for sample, start, end in spans:
            window.spans.append((sample.tid, self._intern_sample(sample), t0 + start, t0 + end))
        self.windows.append(window)
        return window

    def _intern_sample(self, sample: Sample) -> int:
        if sample.thread_name or sample.tid not in self.threads:
            self.threads[sample.tid] = sample.thread_name
        return self.intern_stack(sample.tid, sample.state, sample.frames)

    def finish(self, **changes: Any) -> None:
        """Fold window totals into the sampling metadata (plus any explicit changes)."""
        duration = sum(w.seconds for w in self.windows)
        elapsed = (self.windows[-1].t1 - self.windows[0].t0) if self.windows else 0.0
        self.sampling = replace(
            self.sampling,
            duration_s=duration,
            elapsed_s=elapsed,
            ticks=sum(w.ticks for w in self.windows),
            samples=sum(sum(w.counts.values()) for w in self.windows),
            **changes,
        )

    # -- reading --------------------------------------------------------------------------
    def stack_frames(self, index: int) -> tuple[Frame, ...]:
        return tuple(self.frames[i] for i in self.stacks[index].frames)

    def total_counts(self) -> dict[int, int]:
        totals: dict[int, int] = {}
        for window in self.windows:
            for index, count in window.counts.items():
                totals[index] = totals.get(index, 0) + count
        return totals

    def samples(self) -> Iterator[Sample]:
        """Aggregated samples over the whole profile, one per distinct stack."""
        for index, count in self.total_counts().items():
            stack = self.stacks[index]
            yield Sample(stack.tid, self.threads.get(stack.tid, ""), self.stack_frames(index),
                         count, stack.state)

    @property
    def label(self) -> str:
        rank = "?" if self.target.rank is None else str(self.target.rank)
        return f"rank {rank} pid {self.target.pid}@{self.target.hostname or '?'}"

    # -- persistence ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        sampling = asdict(self.sampling)
        sampling["mode"] = str(self.sampling.mode)
        sampling["messages"] = list(self.sampling.messages)
        target = asdict(self.target)
        target["cmdline"] = list(self.target.cmdline)
        return {
            "schema": SCHEMA,
            "target": target,
            "sampling": sampling,
            "threads": [{"tid": tid, "name": name} for tid, name in sorted(self.threads.items())],
            "frames": [[f.name, f.file, f.line] for f in self.frames],
            "stacks": [[s.tid, str(s.state), list(s.frames)] for s in self.stacks],
            "windows": [self._window_dict(w) for w in self.windows],
        }

    @staticmethod
    def _window_dict(w: Window) -> dict[str, Any]:
        out: dict[str, Any] = {"t0": round(w.t0, 6), "t1": round(w.t1, 6), "ticks": w.ticks,
                               "counts": [[i, c] for i, c in sorted(w.counts.items())]}
        if w.spans:
            out["spans"] = [[tid, stack, round(a, 6), round(b, 6)] for tid, stack, a, b in w.spans]
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        write_json_atomic(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: Any, source: str = "profile") -> Profile:
        return _ProfileReader(source).read(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        return cls.from_dict(read_json_file(path, what="profile"), source=str(path))


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    write_text_atomic(path, json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n")


def read_json_file(path: str | os.PathLike[str], what: str) -> Any:
    name = os.fspath(path)
    if os.path.isdir(name):
        raise InputError(f"{name}: is a directory, not a {what} file")
    if os.path.exists(name) and not os.path.isfile(name):
        raise InputError(f"{name}: not a regular file")
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise InputError(f"{name}: empty file, not a {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not a {what} (not UTF-8 text)") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if _ends_early(text, exc):
            raise InputError(f"{name}: truncated {what} (JSON ends early at byte {exc.pos})") from None
        raise InputError(f"{name}: not a valid {what}: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{name}: not a valid {what}: nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{name}: not a valid {what}: {exc}") from None


def _ends_early(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder failed because the text stops, not because of a wrong byte."""
    if exc.msg.startswith("Unterminated string"):  # reported at the opening quote
        return True
    rest = text[exc.pos:].rstrip()
    # A cut inside a literal (`fals`) or a number (`1.`, `1e-`) is reported where the
    # literal or the unfinished part of the number starts.
    return (len(rest) <= 1 or (rest[1:] in ("-", "+") and rest[0] in "eE")
            or any(word.startswith(rest) for word in ("true", "false", "null")))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


class _ProfileReader:
    """Validates a decoded profile; every failure names the key that was wrong."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str) -> InputError:
        return InputError(f"{self.source}: {message}")

    def read(self, data: Any) -> Profile:
        if not isinstance(data, dict):
            raise self.fail("not a gilprof profile (expected a JSON object)")
        schema = data.get("schema")
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_NAME + "/"):
            raise self.fail(f"not a gilprof profile (schema is {_short(schema)}, expected {SCHEMA!r})")
        version_text = schema.rpartition("/")[2]
        # ASCII digits only ("²".isdigit() is true), and few enough for int() to accept.
        if not (version_text.isascii() and version_text.isdigit()) or len(version_text) > 18:
            raise self.fail(f"unknown schema version {_short(schema)}")
        version = int(version_text)
        if version > SCHEMA_VERSION:
            raise self.fail(
                f"profile schema {SCHEMA_NAME}/{version} is newer than this gilprof reads ({SCHEMA}); "
                "upgrade gilprof"
            )
        if version < 1:
            raise self.fail(f"unknown schema version {_short(schema)}")
        try:
            return self._read_v1(data)
        # OverflowError: an integer beyond the float range; RecursionError: repr() of a value
        # nested hundreds deep while an error message is formatted.
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
                RecursionError) as exc:
            detail = str(exc)
            detail = detail if len(detail) <= 120 else detail[:117] + "..."
            raise self.fail(f"malformed profile ({type(exc).__name__}: {detail})") from None

    def _read_v1(self, data: dict[str, Any]) -> Profile:
        t = self._object(data, "target")
        s = self._object(data, "sampling")
        target = Target(
            pid=self._int(t, "pid"),
            rank=self._opt_int(t, "rank"),
            rank_source=self._opt_str(t, "rank_source"),
            local_rank=self._opt_int(t, "local_rank"),
            world_size=self._opt_int(t, "world_size"),
            launcher=self._opt_str(t, "launcher"),
            launcher_pid=self._opt_int(t, "launcher_pid"),
            hostname=str(t.get("hostname") or ""),
            python=str(t.get("python") or ""),
            cmdline=tuple(str(a) for a in self._list(t, "cmdline", default=[])),
        )
        try:
            mode = Mode(s.get("mode"))
        except ValueError:
            raise self.fail(f"sampling.mode: expected gil, wall or cpu, got {_short(s.get('mode'))}") from None
        sampling = SamplingInfo(
            sampler=str(s.get("sampler", "")),
            sampler_version=str(s.get("sampler_version", "")),
            mode=mode,
            rate_hz=self._number(s, "rate_hz", positive=True),
            native=bool(s.get("native", False)),
            blocking=bool(s.get("blocking", False)),
            window_s=self._number(s, "window_s", default=0.0),
            started_at=str(s.get("started_at", "")),
            errors=self._int(s, "errors", default=0),
            partial=bool(s.get("partial", False)),
            partial_reason=self._opt_str(s, "partial_reason"),
            ticks_source=str(s.get("ticks_source", "estimated")),
            messages=tuple(str(m) for m in self._list(s, "messages", default=[])),
        )
        profile = Profile(target, sampling)
        for i, entry in enumerate(self._list(data, "threads", default=[])):
            if not isinstance(entry, dict):
                raise self.fail(f"threads[{i}]: expected an object")
            profile.threads[int(entry["tid"])] = str(entry.get("name", ""))
        for i, entry in enumerate(self._list(data, "frames")):
            if not isinstance(entry, list) or len(entry) != 3:
                raise self.fail(f"frames[{i}]: expected [name, file, line]")
            profile.intern_frame(Frame(str(entry[0]), str(entry[1]), int(entry[2])))
        nframes = len(profile.frames)
        for i, entry in enumerate(self._list(data, "stacks")):
            if not isinstance(entry, list) or len(entry) != 3 or not isinstance(entry[2], list):
                raise self.fail(f"stacks[{i}]: expected [tid, state, [frame indices]]")
            indices = [int(x) for x in entry[2]]
            if any(not 0 <= x < nframes for x in indices):
                raise self.fail(f"stacks[{i}]: frame index out of range")
            profile.intern_stack(int(entry[0]), ThreadState(entry[1]),
                                 (profile.frames[x] for x in indices))
        nstacks = len(profile.stacks)
        for i, entry in enumerate(self._list(data, "windows")):
            if not isinstance(entry, dict):
                raise self.fail(f"windows[{i}]: expected an object")
            window = Window(self._number(entry, "t0"), self._number(entry, "t1"),
                            self._number(entry, "ticks"))
            for pair in self._list(entry, "counts"):
                index, count = int(pair[0]), int(pair[1])
                if not 0 <= index < nstacks or count < 0:
                    raise self.fail(f"windows[{i}].counts: bad entry {_short(pair)}")
                window.counts[index] = window.counts.get(index, 0) + count
            for span in self._list(entry, "spans", default=[]):
                tid, index, a, b = int(span[0]), int(span[1]), float(span[2]), float(span[3])
                if not 0 <= index < nstacks or not (math.isfinite(a) and math.isfinite(b)) or b < a:
                    raise self.fail(f"windows[{i}].spans: bad entry {_short(span)}")
                window.spans.append((tid, index, a, b))
            profile.windows.append(window)
        profile.finish()
        return profile

    # small typed getters: each failure names its key
    def _object(self, data: dict[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key)
        if not isinstance(value, dict):
            raise self.fail(f"{key}: expected an object")
        return value

    def _list(self, data: dict[str, Any], key: str, default: list[Any] | None = None) -> list[Any]:
        value = data.get(key, default)
        if not isinstance(value, list):
            raise self.fail(f"{key}: expected a list")
        return value

    def _int(self, data: dict[str, Any], key: str, default: int | None = None) -> int:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key}: expected an integer, got {_short(value)}")
        return value

    def _opt_int(self, data: dict[str, Any], key: str) -> int | None:
        return None if data.get(key) is None else self._int(data, key)

    def _opt_str(self, data: dict[str, Any], key: str) -> str | None:
        value = data.get(key)
        return None if value is None else str(value)

    def _number(self, data: dict[str, Any], key: str, default: float | None = None,
                positive: bool = False) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise self.fail(f"{key}: expected a finite number, got {_short(value)}")
        if positive and value <= 0:
            raise self.fail(f"{key}: expected a number > 0, got {_short(value)}")
        return float(value)


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond the float range
        return False


def _short(value: Any) -> str:
    """A value for a one-line error message: bounded in length, whatever the file held."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return "a huge integer"
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # nested too deep, or an int of 4300+ digits inside
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= 60 else text[:57] + "..."


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(prefix=".gilprof-", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(target)))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; give the file the mode the user's umask would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


BUNDLE_SCHEMA = "gilprof.bundle/1"


def load_profiles(path: str | os.PathLike[str]) -> list[Profile]:
    """A profile file, or a bundle of several (from `gilprof merge`)."""
    data = read_json_file(path, what="profile")
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("gilprof.bundle/"):
        if data["schema"] != BUNDLE_SCHEMA:
            raise InputError(f"{os.fspath(path)}: bundle schema {_short(data['schema'])} is not "
                             f"{BUNDLE_SCHEMA!r}; upgrade gilprof")
        members = data.get("profiles")
        if not isinstance(members, list) or not members:
            raise InputError(f"{os.fspath(path)}: profiles: expected a non-empty list")
        return [Profile.from_dict(m, source=f"{os.fspath(path)}[{i}]") for i, m in enumerate(members)]
    return [Profile.from_dict(data, source=os.fspath(path))]


def save_bundle(path: str | os.PathLike[str], profiles: list[Profile]) -> None:
    write_json_atomic(path, {"schema": BUNDLE_SCHEMA, "profiles": [p.to_dict() for p in profiles]})


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
        if (into.sampling.mode, into.sampling.rate_hz) != (profile.sampling.mode, profile.sampling.rate_hz):
            raise InputError(f"cannot merge two profiles of {profile.label} sampled with different "
                             "modes or rates")
        offset = into.windows[-1].t1 if into.windows else 0.0
        _append_windows(into, profile, offset)
        into.sampling = replace(into.sampling, partial=into.sampling.partial or profile.sampling.partial,
                                errors=into.sampling.errors + profile.sampling.errors)
    out = list(merged.values())
    for profile in out:
        profile.finish()
    return sorted(out, key=lambda p: (p.target.rank is None, p.target.rank or 0, p.target.hostname))


def _append_windows(into: Profile, source: Profile, offset: float) -> None:
    for tid, name in source.threads.items():
        into.threads.setdefault(tid, name)
    remap = {i: into.intern_stack(s.tid, s.state, source.stack_frames(i))
             for i, s in enumerate(source.stacks)}
    for window in source.windows:
        into.windows.append(Window(window.t0 + offset, window.t1 + offset, window.ticks,
                                   {remap[i]: c for i, c in window.counts.items()},
                                   [(tid, remap[i], a + offset, b + offset)
                                    for tid, i, a, b in window.spans]))
