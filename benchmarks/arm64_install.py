"""The host side of benchmarks/arm64_check.py: start the emulated arm64 machine if it is not
running, copy the working tree in (tracked and untracked, not ignored files), `pip install`
it into a venv there, install binutils and python3.11-dbg with apt (for the uprobe truth), run
`arm64_check.py --inside` there and copy its results out."""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VM = ROOT.parent / "shared" / "tools" / "arm64-vm"
GUEST_TREE, GUEST_VENV = "/root/gilprof-src", "/root/gilprof-venv"


# -- on the host ----------------------------------------------------------------------------


def vm(*argv: str, timeout: float = 1800, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VM), *argv], text=True, timeout=timeout, check=check)


def host(args: argparse.Namespace) -> int:
    if subprocess.run([str(VM), "status"], capture_output=True, check=False).returncode != 0:
        vm("start", timeout=1200)
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(tmp) / "gilprof-src.tgz"
        listing = Path(tmp) / "files"
        listing.write_bytes(b"\n".join(f for f in files if f and (ROOT / f.decode()).exists()))
        subprocess.run(
            ["tar", "czf", str(tarball), "-C", str(ROOT), "-T", str(listing)], check=True
        )
        vm("copy-in", str(tarball), "/root/gilprof-src.tgz")
    started = time.monotonic()
    setup = (
        f"rm -rf {GUEST_TREE} && mkdir -p {GUEST_TREE} && tar xzf /root/gilprof-src.tgz -C {GUEST_TREE}"
        f" && (test -x {GUEST_VENV}/bin/python || python3 -m venv {GUEST_VENV})"
        f" && {GUEST_VENV}/bin/pip install -q {GUEST_TREE}"
    )
    if args.truth:
        setup += (
            " && (dpkg -s python3.11-dbg binutils >/dev/null 2>&1 || (apt-get update -qq"
            " && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq binutils python3.11-dbg))"
        )
    vm("run", setup, timeout=3600)
    install_s = time.monotonic() - started
    print(f"[arm64-check] installed in the guest in {install_s:.0f} s", flush=True)
    command = (
        f"cd /tmp && {GUEST_VENV}/bin/python {GUEST_TREE}/benchmarks/arm64_check.py --inside"
        f" --rate {args.rate} --seconds {args.seconds} --checks {args.checks}"
        f" --out /root/arm64-check.json"
        + ("" if args.truth else " --no-truth")
        + (" --no-realtime" if args.extra else "")
    )
    status = vm("run", command, timeout=7200, check=False).returncode
    with tempfile.TemporaryDirectory() as tmp:
        vm("copy-out", "/root/arm64-check.json", f"{tmp}/r.json")
        results = json.loads(Path(f"{tmp}/r.json").read_text())
    results["install_s"] = round(install_s, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return status
