"""Where a thread that runs without the GIL is, and what that time is: the native locator.

The state reader (gilprof.sampling.threadstate) reads a thread as "native" when it is on a
CPU (or runnable) and does not hold the GIL. The locator keeps the kernel's on-CPU samples
of every Python thread (perf.CpuSampler, every PERIOD_NS of the thread's CPU time) and, for
each native reading, takes the thread's sample nearest to the reading's instant:

- the mapped file its instruction pointer is in (/proc/PID/maps, the file read through
  /proc/PID/root so a container's libraries are found), and the function whose extent holds
  it (symbols.FunctionSymbols);
- its class (gilprof.native_classes): the interpreter's own code (the file the reader found
  `_PyRuntime` in: an identity, not a name) is the GIL's acquisition path; a device
  library's sample is a wait when every sample of the thread within NEIGHBOURHOOD of the
  reading is in a device library or a clock read (a spin), else a launch; a clock read
  takes the class of the samples around it; the rules decide the rest.

No sample within NEAREST of the reading: the thread was off its CPU (runnable, waiting for
a core), or the native moment was shorter than a period. A thread resumes where it was
preempted, so it is placed at its last sample when that is at most BRIDGE old and its next
sample (if it has run since) is of the same class; otherwise the reading is unplaced, and
says so. Off its CPU (no sample within NEAREST, or preempted at the reading) between two
samples in the interpreter's own code, it was preempted in the GIL's hand-off: released
after the one, taken back before the other (the interpreter runs Python holding the GIL).

Samples are matched after the fact: the reader asks at the tick after the reading, so the
samples that follow it are in. Symbols are loaded in a background thread the first time a
file appears (a large library takes a while); until then its readings name the file only.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Iterable

from gilprof.model import Frame
from gilprof.native_classes import (
    NativeClass,
    NativeRules,
    interpreter_class,
    is_clock_read,
    is_pass_through,
    native_frame,
)
from gilprof.sampling.native.calls import CallBefore, CallSites
from gilprof.sampling.native.perf import CpuSample, CpuSampler
from gilprof.sampling.native.switches import BRIDGE_NS, SwitchEvidence
from gilprof.sampling.native.symbols import SymbolTables
from gilprof.sampling.threadstate.namespaces import MappedFile, parse_maps

PERIOD_NS = 1_000_000  # one sample per ms of a thread's CPU time
NEAREST_NS = 3 * PERIOD_NS // 2
NEIGHBOURHOOD_NS = 3 * PERIOD_NS
KEEP_NS = 200_000_000  # samples kept per thread: the reader asks about the last tick only
MAPS_REFRESH_NS = 200_000_000
DRAIN_EVERY_NS = 40_000_000  # a buffer holds ~90 ms of a busy thread's samples
MAX_CALLER_WORDS = 64  # stack words searched for a caller (SWITCH_STACK_BYTES of them)

UNPLACED_FRAME = native_frame(NativeClass.UNPLACED, "unplaced (no on-CPU sample near it)")
WOKEN_FRAME = native_frame(NativeClass.WOKEN, "woken from a system call, not running yet")
GIL_WOKEN_FRAME = native_frame(NativeClass.GIL, "woken from the GIL's wait, not running yet")
HAND_OFF_FRAME = native_frame(NativeClass.GIL, "the GIL's hand-off, preempted in it")


class Mappings:
    """/proc/PID/maps as sorted (start, end, file offset, path)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.starts: list[int] = []
        self.rows: list[tuple[int, int, int, str]] = []
        self.files: dict[str, MappedFile] = {}  # each file's identity, to open it (readable_path)
        self.read_at = -MAPS_REFRESH_NS
        self._text = ""

    def refresh(self, now_ns: int) -> None:
        if now_ns - self.read_at < MAPS_REFRESH_NS:
            return
        self.read_at = now_ns
        try:
            with open(f"/proc/{self.pid}/maps", encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            return  # the process is gone: keep what we had
        if text == self._text:
            return  # reading costs a fifth of parsing, and a rank's maps rarely change
        self._text = text
        rows = []
        for line in text.splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) < 5 or "x" not in fields[1]:
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5].strip() if len(fields) > 5 else "[anon]"
            rows.append((low, high, int(fields[2], 16), path))
        rows.sort()
        self.rows = rows
        self.files = parse_maps(text)
        self.starts = [row[0] for row in rows]

    def find(self, ip: int) -> tuple[int, int, int, str] | None:
        index = bisect.bisect_right(self.starts, ip) - 1
        if index >= 0 and ip < self.rows[index][1]:
            return self.rows[index]
        return None


class NativeLocator(SwitchEvidence):
    def __init__(
        self,
        pid: int,
        interpreter_path: str,
        rules: NativeRules,
        calls: CallSites,
        period_ns: int = PERIOD_NS,
    ) -> None:
        self.pid = pid
        self.interpreter_path = interpreter_path
        self.rules = rules
        self.sampler = CpuSampler(period_ns)
        self.maps = Mappings(pid)
        self.symbols = SymbolTables(pid)
        self.calls = calls  # which stack words follow a call to their callee
        self._times: dict[int, list[int]] = {}
        self._samples: dict[int, list[CpuSample]] = {}
        # each thread's context switches: times, and SWITCH_IN / _PREEMPTED / _BLOCKED
        self._switch_times: dict[int, list[int]] = {}
        self._switch_kinds: dict[int, list[str]] = {}
        self._classes: dict[str, NativeClass] = {}
        self._pass_through: dict[str, bool] = {}
        self._drained: dict[int, int] = {}  # tid -> when its buffer was last drained
        # id(sample) -> its place and class (a sample is looked at by several readings)
        self._place_cache: dict[int, tuple[str, NativeClass | None]] = {}
        self.placed = 0
        self.unplaced = 0
        self.samples = 0

    def interpreter_note(self) -> str:
        """'' where the interpreter's symbols name take_gil; else one line on what that
        costs: its native time is all counted as the GIL's hand-off (interpreter_class)."""
        self.maps.refresh(time.monotonic_ns())
        path = self.interpreter_path
        table = self.symbols.load_now(path, self.maps.files.get(path))
        if table is not None and table.has("take_gil"):
            return ""
        return (
            f"the interpreter ({os.path.basename(path)}) is stripped and no debug file for it "
            "was found under /usr/lib/debug/.build-id: its native time cannot be told from "
            "the GIL's hand-off and all counts as waiting, so a waiting share may read high "
            "by the time a thread runs the interpreter's own C code without the GIL (10-13 "
            "points for a thread waking from time.sleep beside a spinner, on Debian's "
            "3.13-3.15; docs/accuracy.md); its debug symbols (Debian: python3.X-dbg) make "
            "it exact"
        )

    def follow(self, tids: Iterable[int]) -> None:
        """Sample these threads from now on (PerfRefused when the kernel will not)."""
        wanted = set(tids)
        self.sampler.follow(wanted)
        for tid in list(self._times):
            if tid not in wanted:
                for sample in self._samples[tid]:
                    self._place_cache.pop(id(sample), None)
                del self._times[tid], self._samples[tid]
                self._drained.pop(tid, None)
                self._switch_times.pop(tid, None)
                self._switch_kinds.pop(tid, None)

    def collect(self, now_ns: int, wanted: Iterable[int] | None = None) -> None:
        """Take the samples written since the last drain of the `wanted` threads (all by
        default) and of any not drained for DRAIN_EVERY_NS (its buffer must not fill);
        forget those older than KEEP_NS. A thread with no native reading to place needs
        no drain at every tick: most of an engine's threads sit blocked or hold the GIL."""
        due = set(self.sampler.events) if wanted is None else set(wanted)
        for tid, drained in self._drained.items():
            if now_ns - drained >= DRAIN_EVERY_NS:
                due.add(tid)
        for tid, event in self.sampler.events.items():
            if tid not in due:
                continue
            self._drained[tid] = now_ns
            fresh: list[CpuSample] = []
            switches: list[tuple[int, str]] = []
            event.drain(fresh, switches)
            switch_times = self._switch_times.setdefault(tid, [])
            switch_kinds = self._switch_kinds.setdefault(tid, [])
            if switches:
                switches.sort()
                switch_times.extend(t for t, _kind in switches)
                switch_kinds.extend(kind for _t, kind in switches)
            cut = bisect.bisect_left(switch_times, now_ns - KEEP_NS)
            if cut:
                del switch_times[:cut], switch_kinds[:cut]
            times = self._times.setdefault(tid, [])
            samples = self._samples.setdefault(tid, [])
            if fresh:
                fresh.sort(key=lambda sample: sample.time_ns)
                self.samples += len(fresh)
                times.extend(sample.time_ns for sample in fresh)
                samples.extend(fresh)
            cut = bisect.bisect_left(times, now_ns - KEEP_NS)
            if cut:
                for sample in samples[:cut]:
                    self._place_cache.pop(id(sample), None)
                del times[:cut], samples[:cut]

    def place(
        self, tid: int, at_ns: int, blocked_ns: int | None = None, on_gil: bool = False
    ) -> Frame:
        """The leaf frame of a native reading of `tid` at `at_ns` (CLOCK_MONOTONIC);
        `blocked_ns`: when the reader last saw the thread blocked (used where the kernel
        gave no context switches), `on_gil`: blocked in the GIL's own wait then."""
        times = self._times.get(tid) or []
        samples = self._samples.get(tid) or []
        first, woken, block_ns = self._since_last_block(tid, at_ns, blocked_ns)
        # the reader's word on what it blocked in holds for that block only: read blocked
        # after the kernel saw it block
        on_gil = (
            on_gil and blocked_ns is not None and block_ns is not None and blocked_ns >= block_ns
        )
        index = bisect.bisect_left(times, at_ns)
        before, after = index - 1, index
        if before < first:
            before = -1  # from before the thread last blocked: not where it is now
        if woken and before < 0:
            # Woken from a blocking call and not sampled running since: runnable, waiting
            # for a core, or on its way back (the kernel's return, then take_gil).
            # Woken from the GIL's wait (the reader saw it, or the kernel's sample of the
            # switch where it blocked is in the GIL's code), it is still inside take_gil:
            # waiting. Otherwise host-side time, not yet in the GIL's code as far as
            # anything can tell.
            self.placed += 1
            if on_gil or self._blocked_in_gil(tid, block_ns, at_ns):
                return GIL_WOKEN_FRAME
            return WOKEN_FRAME
        preempted_at = self._preemption_sample(tid, at_ns)
        near = [i for i in (before, after) if 0 <= i < len(times)]
        if preempted_at is not None:
            # Preempted, not switched in since, and the kernel's sample of that switch
            # says where: the thread is there now
            best = preempted_at
        elif not near:
            self.unplaced += 1
            return UNPLACED_FRAME
        else:
            best = min(near, key=lambda i: abs(times[i] - at_ns))
        off_cpu = preempted_at is None and abs(times[best] - at_ns) > NEAREST_NS
        if (
            preempted_at is None
            and (off_cpu or self._preempted(tid, at_ns))
            and self._hand_off(tid, before, after, at_ns)
        ):
            self.placed += 1
            return HAND_OFF_FRAME
        if off_cpu:
            # Off its CPU at the reading (preempted, runnable): a thread resumes where it
            # was preempted, at its last sample. Placed there if that sample is at most
            # BRIDGE old and the thread's next sample, if it has run since, is of the same
            # class.
            if before < 0 or at_ns - times[before] > BRIDGE_NS:
                self.unplaced += 1
                return UNPLACED_FRAME
            ran_since = after < len(times) and times[after] - at_ns <= BRIDGE_NS
            if ran_since and self._class_at(tid, before, at_ns) != self._class_at(
                tid, after, at_ns
            ):
                self.unplaced += 1
                return UNPLACED_FRAME
            best = before
        place, cls = self._cached_place(samples[best], at_ns)
        if cls is None:  # a clock read called from nowhere known: the code around it
            cls = self._class_around_clock(tid, best, at_ns)
        if cls is NativeClass.DEVICE and not self._spinning(tid, at_ns):
            cls = NativeClass.LAUNCH
        self.placed += 1
        return native_frame(cls, place)

    def _hand_off(self, tid: int, before: int, after: int, at_ns: int) -> bool:
        """Whether a reading of a thread off its CPU falls in the GIL's hand-off: its last
        sample before the reading (since it last blocked) and its first after are both in
        the interpreter's own code (or the C library called from its GIL functions), each
        at most BRIDGE away. The reading says the thread does not hold the GIL, and the
        interpreter runs Python holding it: between the two samples the thread released
        the GIL and took it back, and was preempted in between with no other code sampled.
        Preemption there is common: drop_gil's signal wakes the waiter, which may take the
        dropper's core. (A native call shorter than a sampling period, preempted in, reads
        the same way.)"""
        times = self._times.get(tid) or []
        if before < 0 or after >= len(times):
            return False
        if at_ns - times[before] > BRIDGE_NS or times[after] - at_ns > BRIDGE_NS:
            return False
        return self._interpreters(tid, before, at_ns) and self._interpreters(tid, after, at_ns)

    def _interpreters(self, tid: int, index: int, at_ns: int) -> bool:
        """Whether the sample is in the interpreter's own code, or in the C library or the
        kernel called from its GIL functions (the GIL's mutex and condition variables)."""
        sample = self._samples[tid][index]
        return self._in_interpreter(sample) or self._class_at(tid, index, at_ns) is NativeClass.GIL

    def _place_of(self, sample: CpuSample, at_ns: int) -> tuple[str, NativeClass | None]:
        """The place and class of one sample. A sample in a clock read or the C library
        (where a system call is made) takes its caller's: the first candidate return address
        (CpuSample.callers) in executable code that is none of those. A leaf function keeps
        no frame of its own beyond its return address, so the first such word is its
        caller's (or its caller's caller's, where a C library wrapper stands between).
        None for a clock read whose caller is not found."""
        ip = sample.user_ip()
        if ip is None:
            return "[kernel]", NativeClass.HOST
        place, path, function = self._where(ip, at_ns)
        cls = self._class_of(path, function)
        # caught in the kernel, the user registers say where it entered it: a system call's
        # site (the C library's wrapper, passed over) or, for a context switch's sample,
        # the instruction it was preempted at, which is its place
        if cls is not None and not self._passes(path):
            return place, cls
        callee = path  # the file the next real return address's call must go into
        for address in sample.callers()[:MAX_CALLER_WORDS]:
            if self.maps.find(address) is None:
                continue
            if not self._returns_into(address, callee, at_ns):
                continue  # a stale word (gilprof.sampling.native.calls)
            caller, caller_path, caller_function = self._where(address, at_ns)
            caller_cls = self._class_of(caller_path, caller_function)
            if caller_cls is not None and not self._passes(caller_path):
                return caller, caller_cls
            callee = caller_path
        return place, cls

    def _returns_into(self, address: int, callee: str, at_ns: int) -> bool:
        """Whether `address` can be the return address of a call into the file `callee`:
        some call ends just before it, and a direct call goes into that file or to a PLT
        stub (a call to another library). Only a word shown stale is refused: a call to the
        same file is kept whichever function it named, since a tail call (a jump) may stand
        between; an indirect call, or code that cannot be read, is kept."""
        kind, target = self.calls.before(address)
        if kind is CallBefore.NONE:
            return False
        if kind is not CallBefore.DIRECT:
            return True
        row = self.maps.find(target)  # its file only: no symbol lookup
        return (row is not None and row[3] == callee) or self.calls.is_plt(target)

    def _passes(self, path: str) -> bool:
        passes = self._pass_through.get(path)
        if passes is None:
            library = os.path.basename(path) if path.startswith("/") else path
            passes = self._pass_through[path] = is_pass_through(library)
        return passes

    def _cached_place(self, sample: CpuSample, at_ns: int) -> tuple[str, NativeClass | None]:
        found = self._place_cache.get(id(sample))
        if found is None:
            found = self._place_cache[id(sample)] = self._place_of(sample, at_ns)
        return found

    def _class_at(self, tid: int, index: int, at_ns: int) -> NativeClass | None:
        return self._cached_place(self._samples[tid][index], at_ns)[1]

    def _class_around_clock(self, tid: int, index: int, at_ns: int) -> NativeClass:
        """The class of the nearest samples that are no clock read, before and after
        `index` within BRIDGE; where they disagree, the nearer one's."""
        times = self._times[tid]
        found: list[tuple[int, NativeClass]] = []
        for step in (-1, 1):
            i = index + step
            while 0 <= i < len(times) and abs(times[i] - times[index]) <= BRIDGE_NS:
                cls = self._class_at(tid, i, at_ns)
                if cls is not None:
                    found.append((abs(times[i] - times[index]), cls))
                    break
                i += step
        if not found:
            return NativeClass.HOST  # nothing but clock reads: a C loop reading the clock
        return min(found, key=lambda pair: pair[0])[1]

    def _spinning(self, tid: int, at_ns: int) -> bool:
        """Whether the thread's samples within NEIGHBOURHOOD of `at_ns` are all in a device
        library, a clock read or the interpreter (the Python code that called the wait and
        runs after it): a spin-wait. Host libraries among them (the framework's operator
        dispatch, the runtime's launch path) make it a launch."""
        times = self._times[tid]
        low = bisect.bisect_left(times, at_ns - NEIGHBOURHOOD_NS)
        high = bisect.bisect_right(times, at_ns + NEIGHBOURHOOD_NS)
        samples = self._samples[tid]
        return all(
            self._in_interpreter(samples[i])
            or self._class_at(tid, i, at_ns) in (None, NativeClass.DEVICE)
            for i in range(low, high)
        )

    def _in_interpreter(self, sample: CpuSample) -> bool:
        ip = sample.user_ip()
        row = self.maps.find(ip) if ip is not None else None
        return row is not None and row[3] == self.interpreter_path

    def _where(self, ip: int, now_ns: int) -> tuple[str, str, str | None]:
        """(place for the frame: file name and function, the mapped path, the function)."""
        row = self.maps.find(ip)
        if row is None:
            self.maps.refresh(now_ns)
            row = self.maps.find(ip)
            if row is None:
                return "[unmapped]", "[unmapped]", None
        low, _high, offset, path = row
        library = os.path.basename(path) if path.startswith("/") else path
        symbol = (
            self.symbols.name(path, ip - low + offset, self.maps.files.get(path))
            if path.startswith("/")
            else None
        )
        return (f"{library} {symbol}" if symbol else library), path, symbol

    def _class_of(self, path: str, function: str | None) -> NativeClass | None:
        """The class of a place; None for a clock read (it takes its neighbours')."""
        if is_clock_read(path, function):
            return None
        if path == self.interpreter_path:
            return interpreter_class(function)
        cls = self._classes.get(path)
        if cls is None:
            library = os.path.basename(path) if path.startswith("/") else path
            cls = self.rules.library_class(library)
            self._classes[path] = cls
        return cls

    def close(self) -> None:
        self.sampler.close()
