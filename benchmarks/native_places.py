"""Is native time named right? The native locator on threads whose native library is known.

    python benchmarks/native_places.py                         # this interpreter, 10 s, quiet
    python benchmarks/native_places.py --python /root/.pyenv/versions/3.13.0/bin/python3 --hogs 2
    python benchmarks/native_places.py --json

The target runs a spinner (pure Python), a thread in `zlib.compress` (libz) and a thread in
`hashlib.sha256` of large buffers (the OpenSSL library, libcrypto), each call releasing the
GIL. gilprof's thread-state reader with its native locator reads it at 100 Hz (the default
mode's reader, without py-spy). For each thread: its native readings, the share placed, and,
of those placed in a library (not the GIL's hand-off, not woken, not unplaced), the share in
its own library. The issue's target: at least 90% named right where the library is known.
Also the reader + locator's CPU per Python thread per tick.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE / "accuracy")]

import _common  # noqa: E402

_common.ensure_gilprof_importable()

from accuracy_sample import hogs  # noqa: E402

from gilprof.model import ThreadState  # noqa: E402
from gilprof.native_classes import NativeClass, NativeRules, native_class_of  # noqa: E402
from gilprof.sampling.threadstate.reader import StateReader  # noqa: E402

TARGET = r"""
import hashlib, os, sys, threading, time, zlib
data = os.urandom(1 << 20)
def spinner():
    x = 0
    while True: x += 1
def compressor():
    while True: zlib.compress(data, 6)
def hasher():
    while True: hashlib.sha256(data).digest()
for name, body in (("spin", spinner), ("zlib", compressor), ("sha256", hasher)):
    threading.Thread(target=body, name=name, daemon=True).start()
print(" ".join(f"{t.name}={t.native_id}" for t in threading.enumerate() if t.name != "MainThread"), flush=True)
time.sleep(float(sys.argv[1]))
"""
EXPECTED = {"zlib": "libz.so", "sha256": "libcrypto.so"}
NOT_A_LIBRARY = {NativeClass.GIL, NativeClass.WOKEN, NativeClass.UNPLACED}


def measure(python: str, seconds: float, hog_count: int) -> dict:
    with hogs(hog_count):
        target = subprocess.Popen(
            [python, "-c", TARGET, str(seconds + 30)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert target.stdout is not None
            names = dict(pair.split("=") for pair in target.stdout.readline().split())
            by_tid = {int(tid): name for name, tid in names.items()}
            time.sleep(0.5)
            reader = StateReader.open(target.pid, 100)
            note = reader.locate_native(NativeRules())
            if note:
                raise SystemExit(note)
            stop = threading.Event()
            threading.Timer(seconds, stop.set).start()
            recording = reader.record(stop)
            reader.close()
            # spans name threads by their profile id (the Linux id, or pthread_t on 3.10)
            by_tid = {
                thread.profile_id: by_tid[tid]
                for tid, thread in reader.threads.items()
                if tid in by_tid
            }
        finally:
            target.kill()
            target.wait(timeout=10)
    native: dict[str, dict[str, float]] = {}
    for sample, start, end in recording.spans:
        name = by_tid.get(sample.tid)
        if name is None or not sample.frames:
            continue
        cls = native_class_of(sample.frames[-1])
        if cls is None or sample.state is ThreadState.HELD:
            continue
        place = sample.frames[-1].name.removeprefix("[native]").strip()
        library = place if cls in NOT_A_LIBRARY else place.split()[0]
        key = cls.value if cls in NOT_A_LIBRARY else library
        mine = native.setdefault(name, {})
        mine[key] = mine.get(key, 0.0) + end - start
    rows = {}
    for name, expected in EXPECTED.items():
        counts = native.get(name, {})
        total = sum(counts.values())
        in_libraries = {
            k: v for k, v in counts.items() if k not in {c.value for c in NOT_A_LIBRARY}
        }
        named = sum(in_libraries.values())
        right = sum(v for k, v in in_libraries.items() if k.startswith(expected))
        rows[name] = {
            "expected": expected,
            "native_seconds": round(total, 3),
            "placed_in_a_library": round(named / total, 4) if total else None,
            "named_right": round(right / named, 4) if named else None,
            "places": {
                k: round(v / total, 4) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:6]
            }
            if total
            else {},
        }
    ticks = max(1, recording.ticks)
    return {
        "python": python,
        "hogs": hog_count,
        "seconds": seconds,
        "threads": rows,
        "reader_ms_per_thread_tick": round(
            1e3 * recording.cpu_s / max(1, recording.thread_reads), 4
        ),
        "reader_ms_per_tick": round(1e3 * recording.cpu_s / ticks, 4),
        "placed": recording.native_placed,
        "unplaced": recording.native_unplaced,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", default=None)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--hogs", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(p, args.seconds, args.hogs) for p in args.python or [sys.executable]]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for r in results:
        print(
            f"{r['python']} hogs={r['hogs']} {r['seconds']:g} s: reader+locator "
            f"{r['reader_ms_per_thread_tick']:.3f} ms per Python thread per tick "
            f"({r['placed']} placed, {r['unplaced']} unplaced)"
        )
        for name, row in r["threads"].items():
            print(
                f"  {name:7} named right {row['named_right']} (placed in a library "
                f"{row['placed_in_a_library']}); {row['places']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
