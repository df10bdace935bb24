"""Reading gilprof.profile/2 streams (the format: gilprof.profile.stream): every record
checked against the records before it, one record in memory at a time.

A stream without its footer is a profile marked partial (a capture killed, or still running);
a record cut short at the end of the file is dropped as the one that was in flight.
"""

from __future__ import annotations

import json
import zlib
from array import array
from collections.abc import Iterator
from itertools import accumulate, chain
from typing import Any

from gilprof.errors import InputError
from gilprof.model import Frame, ThreadState
from gilprof.profile.profile import Counts, Profile, Runs, Stack, Window
from gilprof.profile.reader import MALFORMED, describe
from gilprof.profile.stream import GZIP_MAGIC

CHUNK = 1 << 20
MAX_RECORD_BYTES = 1 << 30  # one decompressed record; refuses a gzip bomb
_STATES = {str(s): s for s in ThreadState}
# A loaded window keeps its counts as two arrays (stack indexes, counts): 4-byte ints when
# the values fit, as they nearly always do, halve what the windows of a loaded profile cost.
_INT32 = 1 << 31


def _members(path: str) -> Iterator[tuple[bytes | None, str]]:
    """(decompressed record, "") per complete member; (None, why) for a cut or broken last one."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - a generator: closed in finally
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = handle.read(CHUNK)
        while data:
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
            parts: list[bytes] = []
            size = 0
            while True:
                try:
                    part = decoder.decompress(data, MAX_RECORD_BYTES + 1 - size)
                except zlib.error as exc:
                    # A kill or a full disk cuts a record short and never garbles one: damage
                    # is tolerated (as the record in flight) only when no record follows.
                    if GZIP_MAGIC + b"\x08" in data[1:] + handle.read():
                        raise InputError(f"{path}: corrupt profile stream ({exc})") from None
                    yield None, f"the last record is damaged ({exc})"
                    return
                size += len(part)
                parts.append(part)
                if size > MAX_RECORD_BYTES or decoder.unconsumed_tail:
                    raise InputError(f"{path}: a record is larger than {MAX_RECORD_BYTES} bytes")
                if decoder.eof:
                    data = decoder.unused_data or handle.read(CHUNK)
                    break
                data = handle.read(CHUNK)
                if not data:
                    yield None, "the last record is cut off"
                    return
            yield b"".join(parts), ""
    finally:
        handle.close()


class StreamReader:
    """Reads a gilprof.profile/2 file: every record checked, one profile at a time."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, message: str) -> InputError:
        return InputError(f"{self.path}: {message}")

    def read(self) -> list[Profile]:
        from gilprof.profile.reader import ProfileReader

        profiles: list[Profile] = []
        current: _Loading | None = None
        for count, (raw, cut) in enumerate(_members(self.path), start=1):
            if raw is None:
                if current is None:
                    raise self.fail(f"truncated profile: {cut} before any window")
                current.cut = cut
                break
            record = self._decode(raw, count)
            try:
                if "schema" in record:
                    if current is not None:
                        raise self.fail(f"record {count}: a new header before the footer")
                    reader = ProfileReader(self.path)
                    reader.check_schema(record.get("schema"))
                    current = _Loading(reader.read_header(record), reader)
                elif current is None:
                    raise self.fail(f"record {count}: expected a header with the schema")
                elif "window" in record:
                    current.window(record)
                elif "end" in record:
                    profiles.append(current.end(record["end"]))
                    current = None
                else:
                    raise self.fail(f"record {count}: neither a window nor the footer")
            except InputError:
                raise
            except MALFORMED as exc:
                raise self.fail(f"record {count}: malformed ({describe(exc)})") from None
        if current is not None:
            profiles.append(current.partial())
        if not profiles:
            raise self.fail("not a gilprof profile (an empty gzip stream)")
        return profiles

    def _decode(self, raw: bytes, count: int) -> dict[str, Any]:
        try:
            record = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            if count == 1:
                raise self.fail("not a gilprof profile (gzip, but not JSON records)") from None
            raise self.fail(f"record {count}: not valid JSON ({type(exc).__name__})") from None
        if not isinstance(record, dict):
            raise self.fail(f"record {count}: expected a JSON object")
        return record


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


class _Loading:
    """One profile being read: checks every record against what came before."""

    def __init__(self, profile: Profile, reader: Any) -> None:
        self.profile = profile
        self.reader = reader
        self.cut = ""
        self.ints: list[int] = []  # frame index -> the int object every stack refers to

    def fail(self, message: str) -> InputError:
        return self.reader.fail(f"window {len(self.profile.windows)}: {message}")

    def window(self, record: dict[str, Any]) -> None:
        profile = self.profile
        if record["window"] != len(profile.windows) or isinstance(record["window"], bool):
            raise self.fail(f"numbered {_short(record['window'])}, expected {len(profile.windows)}")
        new = record.get("new", {})
        if not isinstance(new, dict):
            raise self.fail("new: expected an object")
        self._threads(new.get("threads", []))
        self._frames(new.get("frames", []))
        self._stacks(new.get("stacks", []))
        reader = self.reader
        t0, t1 = reader._number(record, "t0"), reader._number(record, "t1")
        ticks = reader._number(record, "ticks")
        counts = record["counts"]
        if not isinstance(counts, dict):
            raise self.fail("counts: expected an object")
        deltas = array("q", _list(counts["stack"]))
        numbers = _compact(_list(counts["n"]))
        if len(deltas) != len(numbers):
            raise self.fail("counts: stack and n differ in length")
        if deltas and (deltas[0] < 0 or min(deltas[1:], default=1) < 1):
            raise self.fail("counts: stack indexes not strictly ascending")
        # ascending: the last key, the sum of the deltas, is the largest
        keys = array("i" if sum(deltas) < _INT32 else "q", accumulate(deltas))
        if keys and keys[-1] >= len(profile.stacks):
            raise self.fail(f"counts: stack index {keys[-1]} out of range")
        if numbers and min(numbers) < 0:
            raise self.fail("counts: negative count")
        window = Window(t0, t1, ticks, Counts(keys, numbers))
        runs = record.get("runs")
        if runs is not None:
            window.spans = self._runs(runs, round(t0 * 1e6))
        profile.windows.append(window)

    def _threads(self, entries: Any) -> None:
        for entry in _list(entries):
            tid, name = entry
            if not isinstance(tid, int) or isinstance(tid, bool):
                raise self.fail(f"threads: bad thread id {_short(tid)}")
            self.profile.threads[tid] = str(name)

    def _frames(self, entries: Any) -> None:
        profile = self.profile
        for entry in _list(entries):
            name, file, line = entry
            if not isinstance(line, int) or isinstance(line, bool):
                raise self.fail(f"frames: bad line {_short(line)}")
            frame = Frame(str(name), str(file), line)
            if profile.intern_frame(frame) != len(profile.frames) - 1:
                raise self.fail(f"frames: {_short(entry)} given twice")

    def _stacks(self, entries: Any) -> None:
        profile = self.profile
        stacks = profile.stacks
        entries = _list(entries)
        # The frame indexes of all new stacks checked at once (ints, in range): a record can
        # hold tens of thousands of stacks, and per-stack checks were most of a load.
        added = array("q", chain.from_iterable(_list(entry[4]) for entry in entries))
        if added and (min(added) < 0 or max(added) >= len(profile.frames)):
            raise self.fail("stacks: frame index out of range")
        ints = self.ints
        ints.extend(range(len(ints), len(profile.frames)))
        shared = ints.__getitem__
        for entry in entries:
            tid, state, base, keep, extra = entry
            if type(tid) is not int:
                raise self.fail(f"stacks: bad thread id {_short(tid)}")
            if state not in _STATES:
                raise self.fail(f"stacks: unknown state {_short(state)}")
            if type(base) is not int or not -1 <= base < len(stacks):
                raise self.fail(f"stacks: base stack {_short(base)} out of range")
            prefix = stacks[base].frames if base >= 0 else ()
            if type(keep) is not int or not 0 <= keep <= len(prefix):
                raise self.fail(f"stacks: keep {_short(keep)} out of range")
            # Frame indexes as the one int object per frame: an int above 256 costs 32 bytes,
            # and every stack would otherwise hold its own copies (a fifth of a loaded profile).
            # A stack given twice would only split its counts over two indexes: not checked
            # (Profile indexes its stacks when first asked to intern one).
            stacks.append(Stack(tid, _STATES[state], prefix[:keep] + tuple(map(shared, extra))))

    def _runs(self, entries: Any, origin: int) -> Runs:
        runs = Runs()
        nstacks = len(self.profile.stacks)
        for entry in _list(entries):
            tid, stacks, gaps, lengths = entry
            if not isinstance(tid, int) or isinstance(tid, bool):
                raise self.fail(f"runs: bad thread id {_short(tid)}")
            stack_ids = array("q", _list(stacks))
            gap_us = array("q", _list(gaps))
            len_us = array("q", _list(lengths))
            if not len(stack_ids) == len(gap_us) == len(len_us):
                raise self.fail("runs: arrays differ in length")
            if stack_ids and (min(stack_ids) < 0 or max(stack_ids) >= nstacks):
                raise self.fail("runs: stack index out of range")
            if len_us and min(len_us) < 0:
                raise self.fail("runs: negative length")
            starts, ends = array("q"), array("q")
            end = origin
            for gap, length in zip(gap_us, len_us, strict=True):
                start = end + gap
                end = start + length
                starts.append(start)
                ends.append(end)
            runs.add(tid, stack_ids, starts, ends)
        return runs

    def end(self, footer: Any) -> Profile:
        if not isinstance(footer, dict):
            raise self.reader.fail("footer: expected an object")
        profile = self.profile
        if footer.get("windows") != len(profile.windows) or footer.get("stacks") != len(
            profile.stacks
        ):
            raise self.reader.fail(
                f"footer: says {_short(footer.get('windows'))} windows and "
                f"{_short(footer.get('stacks'))} stacks, the file holds {len(profile.windows)} "
                f"and {len(profile.stacks)}"
            )
        sampling = self.reader.read_sampling(self.reader._object(footer, "sampling"))
        profile.sampling = sampling
        profile.finish()
        return profile

    def partial(self) -> Profile:
        """A stream without its footer: the capture was killed (or is still running)."""
        profile = self.profile
        why = f"; {self.cut}" if self.cut else ""
        covered = profile.windows[-1].t1 if profile.windows else 0.0
        profile.finish(
            partial=True,
            partial_reason=(
                f"file ends after {len(profile.windows)} windows ({covered:.1f} s) without its footer: "
                f"gilprof was killed or is still sampling{why}"
            ),
        )
        return profile


def _compact(values: list[Any]) -> array[int]:
    """Counts as 4-byte ints when they fit (they nearly always do), else 8-byte."""
    try:
        return array("i", values)
    except OverflowError:
        return array("q", values)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {_short(value)}")
    return value


def _short(value: Any) -> str:
    from gilprof.profile.reader import _short as short

    return short(value)
