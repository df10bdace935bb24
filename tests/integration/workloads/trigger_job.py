"""A job with a warm-up and a "ready" moment, for the start-trigger tests.

It spins in `warm_up` for --warm seconds, printing progress (with a CRLF and bytes that are
not UTF-8, to check they pass through unchanged), then prints "ready t=<wall clock>" (on
stdout, and into --log if given; with --go-file once that file exists), then spins in `hot_loop` for --hot seconds and exits with
--exit. Everything it writes to stdout is also written to --copy, for a byte comparison.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(i * i for i in range(500))


def warm_up(seconds: float, out) -> None:
    for step in range(3):
        out(f"loading shard {step}\r\n".encode())
        spin(seconds / 3)
    out(b"weights \xff\xfe loaded\n")


def hot_loop(seconds: float) -> None:
    spin(seconds)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", type=float, default=1.5)
    parser.add_argument("--hot", type=float, default=3.0)
    parser.add_argument("--ready", default="ready")
    parser.add_argument("--log")
    parser.add_argument("--copy")
    parser.add_argument("--pidfile")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--go-file", help="after the warm-up, wait until this file exists")
    args = parser.parse_args()
    copy = open(args.copy, "wb") if args.copy else None  # noqa: SIM115

    def out(data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        if copy is not None:
            copy.write(data)
            copy.flush()

    if args.pidfile:
        with open(args.pidfile + ".tmp", "w") as handle:
            handle.write(str(os.getpid()))
        os.replace(args.pidfile + ".tmp", args.pidfile)
    sys.stderr.write("stderr: starting\n")
    sys.stderr.flush()
    warm_up(args.warm, out)
    while args.go_file and not os.path.exists(args.go_file):
        time.sleep(0.05)
    line = f"{args.ready} t={time.time():.3f}\n"
    out(line.encode())
    if args.log:
        with open(args.log, "a") as log:
            log.write(line)
    hot_loop(args.hot)
    out(b"done\n")
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
