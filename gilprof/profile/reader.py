"""Reading a saved profile: every field checked, one clear error naming the file and key."""

from __future__ import annotations

import math
from array import array
from typing import Any

from gilprof.errors import InputError
from gilprof.model import Frame, Mode, SamplingInfo, StartTrigger, Target, ThreadState
from gilprof.profile.profile import SCHEMA, SCHEMA_NAME, SCHEMA_VERSION, Counts, Profile, Window

# What reading a wrong-shaped document raises. OverflowError: an integer beyond the float
# range; RecursionError: repr() of a value nested hundreds deep while a message is formatted.
MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    OverflowError,
    RecursionError,
)


def describe(exc: BaseException) -> str:
    """The exception as one short phrase for an error line."""
    detail = str(exc)
    detail = detail if len(detail) <= 120 else detail[:117] + "..."
    return f"{type(exc).__name__}: {detail}"


class ProfileReader:
    """Validates a decoded profile; every failure names the key that was wrong."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, message: str) -> InputError:
        return InputError(f"{self.source}: {message}")

    def check_schema(self, schema: Any) -> int:
        """The schema's version, if this gilprof reads it; else one clear error."""
        if not isinstance(schema, str) or not schema.startswith(SCHEMA_NAME + "/"):
            raise self.fail(
                f"not a gilprof profile (schema is {_short(schema)}, expected {SCHEMA!r})"
            )
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
        return version

    def read(self, data: Any) -> Profile:
        """A decoded gilprof.profile/1 document (version 2 is a stream: gilprof.profile.stream)."""
        if not isinstance(data, dict):
            raise self.fail("not a gilprof profile (expected a JSON object)")
        if self.check_schema(data.get("schema")) != 1:
            raise self.fail(f"{SCHEMA_NAME}/2 is a gzip stream of records, not one JSON document")
        try:
            return self._read_v1(data)
        except MALFORMED as exc:
            raise self.fail(f"malformed profile ({describe(exc)})") from None

    def read_header(self, data: dict[str, Any]) -> Profile:
        """An empty profile with the target and sampling settings of `data`."""
        return Profile(
            self.read_target(self._object(data, "target")),
            self.read_sampling(self._object(data, "sampling")),
        )

    def read_target(self, t: dict[str, Any]) -> Target:
        return Target(
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
            role=self._opt_str(t, "role"),
            role_source=self._opt_str(t, "role_source"),
        )

    def read_sampling(self, s: dict[str, Any]) -> SamplingInfo:
        try:
            mode = Mode(s.get("mode"))
        except ValueError:
            raise self.fail(
                f"sampling.mode: expected gil, wall or cpu, got {_short(s.get('mode'))}"
            ) from None
        return SamplingInfo(
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
            priority=str(s.get("priority") or ""),
            start_trigger=self.read_start_trigger(s.get("start_trigger")),
            gpu_busy=tuple(
                min(1.0, max(0.0, float(x)))
                for x in self._list(s, "gpu_busy", default=[])
                if isinstance(x, (int, float)) and not isinstance(x, bool) and x == x
            ),
            gpu_note=str(s.get("gpu_note") or ""),
            stacks=str(s.get("stacks") or "sampler"),
            origin_monotonic=self._opt_number(s, "origin_monotonic"),
        )

    def read_start_trigger(self, t: Any) -> StartTrigger | None:
        if t is None:
            return None
        if not isinstance(t, dict):
            raise self.fail("sampling.start_trigger: expected an object")
        after = t.get("first_window_after_s")
        return StartTrigger(
            kind=str(t.get("kind", "")),
            description=str(t.get("description", "")),
            fired_at=str(t.get("fired_at", "")),
            waited_s=self._number(t, "waited_s", default=0.0),
            line=self._opt_str(t, "line"),
            source=self._opt_str(t, "source"),
            first_window_after_s=None if after is None else self._number(t, "first_window_after_s"),
        )

    def _read_v1(self, data: dict[str, Any]) -> Profile:
        target = self.read_target(self._object(data, "target"))
        sampling = self.read_sampling(self._object(data, "sampling"))
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
            profile.intern_stack(
                int(entry[0]), ThreadState(entry[1]), (profile.frames[x] for x in indices)
            )
        nstacks = len(profile.stacks)
        for i, entry in enumerate(self._list(data, "windows")):
            if not isinstance(entry, dict):
                raise self.fail(f"windows[{i}]: expected an object")
            counts: dict[int, int] = {}
            for pair in self._list(entry, "counts"):
                index, count = int(pair[0]), int(pair[1])
                if not 0 <= index < nstacks or count < 0:
                    raise self.fail(f"windows[{i}].counts: bad entry {_short(pair)}")
                counts[index] = counts.get(index, 0) + count
            spans = []
            for span in self._list(entry, "spans", default=[]):
                tid, index, a, b = int(span[0]), int(span[1]), float(span[2]), float(span[3])
                if not 0 <= index < nstacks or not (math.isfinite(a) and math.isfinite(b)) or b < a:
                    raise self.fail(f"windows[{i}].spans: bad entry {_short(span)}")
                spans.append((tid, index, a, b))
            keys = sorted(counts)
            # Compact counts as a v2 load keeps them: a dict per window costs ~6x more.
            profile.windows.append(
                Window(
                    self._number(entry, "t0"),
                    self._number(entry, "t1"),
                    self._number(entry, "ticks"),
                    Counts(array("q", keys), array("q", [counts[k] for k in keys])),
                    spans,
                )
            )
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

    def _opt_number(self, data: dict[str, Any], key: str) -> float | None:
        return None if data.get(key) is None else self._number(data, key)

    def _opt_str(self, data: dict[str, Any], key: str) -> str | None:
        value = data.get(key)
        return None if value is None else str(value)

    def _number(
        self, data: dict[str, Any], key: str, default: float | None = None, positive: bool = False
    ) -> float:
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
