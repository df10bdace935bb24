"""Real containers for tests: a target in its own PID and mount namespaces whose root is a
Debian sid root pivoted to `/`, made the way Docker makes one (overlay root file system,
private /proc, pivot_root, the old root detached).

The sid root (Debian's python3.13, 3.14 and 3.15) is built once per machine by `.ci/sid-root`
into a cache directory outside the clone; the fixture builds it where it is missing (about
75 s here, 63 s of it debootstrap). Each container writes only to an overlay upper
directory under the test's tmp_path, so the cached root is never changed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from .conftest import IN_CI, ROOT, wait_for

SID_ROOT = Path(os.environ.get("GILPROF_SID_ROOT", "/var/cache/gilprof/sid-root"))
MARKER = ".gilprof-root-complete"  # written last by .ci/sid-root
SHARE = "/srv/gilprof"  # the test's folder, seen from inside the container


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} (required in CI)")
    pytest.skip(what)


def sid_root() -> Path:
    """The cached sid root, built by .ci/sid-root if it is not there yet."""
    if os.geteuid() != 0:
        _missing("containers need root (unshare, mount, pivot_root)")
    for tool in ("unshare", "nsenter", "mount"):
        if not any(Path(d, tool).exists() for d in os.environ.get("PATH", "").split(":")):
            _missing(f"{tool} not found")
    if not (SID_ROOT / MARKER).exists():
        build = subprocess.run(
            [str(ROOT / ".ci" / "sid-root")], capture_output=True, text=True, timeout=900
        )
        if build.returncode != 0:
            _missing(f"the Debian sid root could not be built: {build.stderr[-500:]}")
    return SID_ROOT


def sid_python(version: str) -> str:
    """benchmarks/sid-pythonX.Y (Debian's release build, same PID, private mount namespace)
    with its debug symbols installed by benchmarks/sid-debug-symbols: uprobes need
    take_gil/drop_gil, which Debian strips and ships in python3.X-dbg."""
    root = sid_root()
    install = _install_symbols(version)
    if install.returncode != 0 and "cannot fetch" in install.stderr:
        # sid has moved past the cached root's version, whose package left the archive:
        # the root is built again at sid's current versions (once), and their symbols fetched
        (root / MARKER).unlink()
        sid_root()
        install = _install_symbols(version)
    if install.returncode != 0:
        _missing(f"python{version}'s debug symbols: {install.stderr.strip()[-300:]}")
    return str(ROOT / "benchmarks" / f"sid-python{version}")


def _install_symbols(version: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ROOT / "benchmarks" / "sid-debug-symbols"), version],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@dataclass
class Container:
    unshare: subprocess.Popen
    pid: int  # the target's PID on the host (1 inside)
    share: Path  # the host folder bound at SHARE inside

    def enter(self, *argv: str) -> list[str]:
        """`argv` run inside the container: its PID and mount namespaces and its root, as
        `docker exec` runs a command."""
        target = str(self.pid)
        return ["nsenter", "--target", target, "--pid", "--mount", "--root", "--wd", *argv]


def gilprof_binds() -> list[str]:
    """Host folders a container needs to run this gilprof inside: the interpreter running
    the tests (with its site-packages and py-spy) and the repository, at the same paths."""
    paths = sorted({sys.prefix, sys.base_prefix, str(ROOT)})
    system = ("/", "/usr", "/usr/local", "/bin", "/lib", "/opt")
    shadowing = [p for p in paths if os.path.normpath(p) in system]
    if shadowing:  # bound over the container's own /usr it would hide Debian's pythons
        _missing(f"the tests' interpreter lives in a system folder ({shadowing[0]}): use a venv")
    return paths


def start_container(
    spawn, tmp_path: Path, argv: Sequence[str], binds: Sequence[str] = ()
) -> Container:
    """Run `argv` as PID 1 of a new container; `binds` are host folders mounted at the same
    path inside. Files put in tmp_path/share are at /srv/gilprof inside."""
    root = sid_root()
    share = tmp_path / "share"
    layers = tmp_path / "layers"
    for folder in (share, layers / "upper", layers / "work", layers / "root"):
        folder.mkdir(parents=True, exist_ok=True)
    new = shlex.quote(str(layers / "root"))
    lines = [
        "set -e",
        f"mount -t overlay overlay -o lowerdir={shlex.quote(str(root))},"
        f"upperdir={shlex.quote(str(layers / 'upper'))},"
        f"workdir={shlex.quote(str(layers / 'work'))} {new}",
        f"mount -t proc -o nosuid,noexec,nodev proc {new}/proc",
        f"mount --rbind /dev {new}/dev",
        f"mkdir -p {new}{SHARE} && mount --bind {shlex.quote(str(share))} {new}{SHARE}",
    ]
    for path in binds:
        quoted = shlex.quote(path)
        lines.append(f"mkdir -p {new}{quoted} && mount --rbind {quoted} {new}{quoted}")
    lines += [
        f"cd {new}",
        "mkdir -p .old",
        "pivot_root . .old",
        "umount -l /.old",
        "cd /",
        "exec " + shlex.join(argv),
    ]
    unshare = spawn(
        ["unshare", "--pid", "--mount", "--fork", "--kill-child", "sh", "-c", "\n".join(lines)],
        stdin=subprocess.DEVNULL,
    )

    def inner_init() -> int | None:
        try:
            children = psutil.Process(unshare.pid).children()
        except psutil.NoSuchProcess:
            return None
        for child in children:
            try:
                if child.exe().endswith(os.path.basename(argv[0])):
                    return child.pid
            except psutil.Error:
                continue
        return None

    pid = wait_for(inner_init, 20)
    if pid is None:
        _, err = unshare.communicate(timeout=10) if unshare.poll() is not None else (b"", b"")
        pytest.fail(f"the container did not start: {err.decode(errors='replace')[-1500:]}")
    return Container(unshare, pid, share)
