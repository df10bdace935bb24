"""`--format pprof`: the profile as pprof's profile.proto, gzipped.

Opens in `go tool pprof`, Pyroscope/Grafana and Parca. One pprof sample per (window, stack)
with the stack's counts; labels say which thread (`thread`, `tid`), its GIL state
(`gil_state`: held, waiting, native, idle, ...) and the sampling window (`window`, with the
window's start second in `window_start_s`, both strings), so `pprof -tagfocus=gil_state=held` or
`-tagfocus=thread=executor-loop` narrow it down. Values: samples, and wall nanoseconds
(samples x the sampling period). Every sample the profile holds is exported: in contention
mode waiting and idle threads too (filter by gil_state); in states mode the holders' stacks
come from py-spy's counts and every other state from the thread-state reader, its seconds in
ticks (rounded), so `-tagfocus=gil_state=waiting` shows where threads wait.

The encoding is written here (the format is a handful of messages; see
https://github.com/google/pprof/blob/main/proto/profile.proto) so gilprof needs no
protobuf runtime.
"""

from __future__ import annotations

import gzip
from datetime import datetime
from typing import Any

from gilprof.analysis.table import thread_label
from gilprof.model import Mode, ThreadState
from gilprof.renderers import register
from gilprof.renderers.report import ReportData


def _varint(value: int, out: bytearray) -> None:
    if value < 0:
        value += 1 << 64  # int64 negatives: ten bytes, two's complement
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _key(field: int, wire: int, out: bytearray) -> None:
    _varint((field << 3) | wire, out)


def _int_field(field: int, value: int, out: bytearray) -> None:
    if value:  # proto3: zero is the default and left out
        _key(field, 0, out)
        _varint(value, out)


def _bytes_field(field: int, data: bytes | bytearray, out: bytearray) -> None:
    _key(field, 2, out)
    _varint(len(data), out)
    out += data


def _packed(field: int, values: list[int], out: bytearray) -> None:
    if values:
        body = bytearray()
        for v in values:
            _varint(v, body)
        _bytes_field(field, body, out)


def _message(*fields: tuple[int, int]) -> bytearray:
    out = bytearray()
    for field, value in fields:
        _int_field(field, value, out)
    return out


class _Strings:
    def __init__(self) -> None:
        self.table: list[str] = [""]
        self.index: dict[str, int] = {"": 0}

    def __call__(self, text: str) -> int:
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.table)
            self.table.append(text)
        return found


def encode_profile(data: ReportData) -> bytes:
    """profile.proto bytes (not yet gzipped) of data.profile."""
    p = data.profile
    s = _Strings()
    out = bytearray()
    period_ns = round(1e9 / p.sampling.rate_hz)
    # Profile.sample_type = 1: samples/count, wall/nanoseconds
    _bytes_field(1, _message((1, s("samples")), (2, s("count"))), out)
    _bytes_field(1, _message((1, s("wall")), (2, s("nanoseconds"))), out)
    # Function (5) and Location (4) per distinct frame; a location has one line.
    location_of: dict[int, int] = {}  # profile frame index -> location id
    for index, frame in enumerate(p.frames):
        ident = index + 1
        location_of[index] = ident
        name = s(frame.name)
        function = _message((1, ident), (2, name), (3, name), (4, s(frame.file)), (5, 0))
        _bytes_field(5, function, out)
        line = _message((1, ident), (2, frame.line))
        location = _message((1, ident))
        _bytes_field(4, line, location)
        _bytes_field(4, location, out)
    k_thread, k_tid, k_state = s("thread"), s("tid"), s("gil_state")
    k_window, k_start = s("window"), s("window_start_s")
    labels_of: dict[int, bytearray] = {}  # stack -> its encoded thread/state labels
    locations_of: dict[int, list[int]] = {}
    for w, window in enumerate(p.windows):
        # Strings: a numeric label of 0 would be encoded as no value at all (proto3).
        window_labels = bytearray()
        _bytes_field(3, _message((1, k_window), (2, s(str(w)))), window_labels)
        _bytes_field(3, _message((1, k_start), (2, s(f"{window.t0:.1f}"))), window_labels)
        for stack_index, count in _window_samples(p, window):
            if not count:
                continue
            labels = labels_of.get(stack_index)
            if labels is None:
                stack = p.stacks[stack_index]
                labels = bytearray()
                _bytes_field(3, _message((1, k_thread), (2, s(thread_label(p, stack.tid)))), labels)
                _bytes_field(3, _message((1, k_tid), (3, stack.tid)), labels)
                _bytes_field(3, _message((1, k_state), (2, s(str(stack.state)))), labels)
                labels_of[stack_index] = labels
                locations_of[stack_index] = [location_of[f] for f in reversed(stack.frames)]
            sample = bytearray()
            _packed(1, locations_of[stack_index], sample)  # leaf first
            _packed(2, [count, count * period_ns], sample)
            sample += labels
            sample += window_labels
            _bytes_field(2, sample, out)
    period_type = _message((1, s("wall")), (2, s("nanoseconds")))  # both already in the table
    for text in s.table:
        _bytes_field(6, text.encode("utf-8"), out)
    _int_field(9, _started_ns(p.sampling.started_at), out)
    _int_field(10, round(p.sampling.duration_s * 1e9), out)
    _bytes_field(11, period_type, out)
    _int_field(12, period_ns, out)
    return bytes(out)


def _started_ns(started_at: str) -> int:
    try:
        return round(datetime.fromisoformat(started_at).timestamp() * 1e9)
    except ValueError:  # not recorded (older or synthetic profiles)
        return 0


@register(
    "report",
    "pprof",
    extension=".pb.gz",
    binary=True,
    description="profile.proto for go tool pprof, Pyroscope, Parca",
)
def render_pprof(data: ReportData, **_: Any) -> bytes:
    return gzip.compress(encode_profile(data), 6, mtime=0)


def _window_samples(p: Any, window: Any) -> list[tuple[int, int]]:
    """(stack, count) of a window: its counts, and in states mode the reader's states other
    than held (its held time is py-spy's counts already)."""
    out = list(window.counts.items())
    if p.sampling.mode is Mode.STATES:
        for stack_index, weight in p.state_weights(window).items():
            if p.stacks[stack_index].state is not ThreadState.HELD and round(weight):
                out.append((stack_index, round(weight)))
    return out
