"""A target in another PID or mount namespace (a container), seen from gilprof's own.

Thread ids. The interpreter stores the ids its threads have in their own PID namespace
(what gettid() returned there); /proc, as gilprof sees it, lists them under the ids of the
namespace /proc was mounted for. `/proc/PID/task/TID/status` has both: its `NSpid:` line
gives a thread's id in each namespace from /proc's down to the thread's own, so the first
field names the /proc entry and the last is the id the interpreter stored. A target in
gilprof's own namespace has one field there and needs no mapping (the common case costs one
read at attach).

Files. /proc/PID/maps and /proc/PID/exe name files by their path in the target's mount
namespace (a container's `/usr/bin/python3.13`, which the host may not have, or a different
file of that name). `/proc/PID/root` is the target's root directory, so
`/proc/PID/root` + that path reaches the target's file from any namespace; a target in a
plain chroot is the exception (maps then names the file by its path from gilprof's root),
so each candidate is checked to be the mapped file (readable_path), and the one that is
is read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


def nspids(status_path: str) -> list[int]:
    """The NSpid line of a /proc status file: ids from /proc's namespace to the innermost.
    Empty when the file is gone or has no such line (kernels before 4.1)."""
    try:
        with open(status_path, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return [int(field) for field in line.split()[1:]]
    except (OSError, ValueError):
        return []
    return []


class ThreadIds:
    """The target's thread ids as the interpreter stores them -> the ids /proc lists."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        # more than one id: the target's PID namespace is below the one /proc shows
        self.nested = len(nspids(f"/proc/{pid}/status")) > 1
        self._proc_id: dict[int, int] = {}

    def refresh(self) -> None:
        """Read every thread's NSpid again (threads come and go)."""
        mapping: dict[int, int] = {}
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            tasks = []
        for name in tasks:
            ids = nspids(f"/proc/{self.pid}/task/{name}/status")
            if ids:
                mapping[ids[-1]] = int(name)
        self._proc_id = mapping

    def proc_id(self, inner: int, refresh: bool = False) -> int | None:
        """The /proc id of the thread the interpreter knows as `inner`; None when no thread
        of the target has that id (with `refresh`, after reading the threads again)."""
        if not self.nested:
            return inner
        found = self._proc_id.get(inner)
        if found is None and refresh:
            self.refresh()
            found = self._proc_id.get(inner)
        return found


@dataclass(frozen=True)
class MappedFile:
    path: str  # as the target names it (its own mount namespace)
    base: int  # load address of its offset-0 mapping
    end: int  # where that mapping ends (names it in /proc/PID/map_files)
    device: tuple[int, int]  # (major, minor) from maps
    inode: int


def parse_maps(text: str) -> dict[str, MappedFile]:
    """Each file mapped from offset 0, in map order (its first such mapping)."""
    files: dict[str, MappedFile] = {}
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or int(fields[2], 16) != 0:
            continue
        path = fields[5].strip()
        if not path.startswith("/") or path in files:
            continue
        major, _, minor = fields[3].partition(":")
        start, _, end = fields[0].partition("-")
        files[path] = MappedFile(
            path, int(start, 16), int(end, 16), (int(major, 16), int(minor, 16)),
            int(fields[4]),
        )  # fmt: skip
    return files


def _identity(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def same_file(path: str, mapped: MappedFile, reference: tuple[int, int] | None = None) -> bool:
    """Whether `path` is the mapped file: the same (device, inode) as `reference` (what
    stat says of the mapping itself), or without one the inode maps gives. Only the inode:
    on overlayfs (Docker's root file system) maps gives the device of the layer the file
    lives in and stat the overlay's, while the inode numbers agree (measured: maps 00:29,
    stat 0:2b, inode 1455248 in both)."""
    found = _identity(path)
    if found is None:
        return False
    return found == reference if reference is not None else found[1] == mapped.inode


def readable_path(pid: int, mapped: MappedFile) -> str:
    """Where gilprof can open the file the target mapped:

    - through the target's root (a container seen from the host, or from inside);
    - by the path itself (a plain chroot: maps gives the path from gilprof's root);
    - through the target's root with leading folders dropped: a target chrooted inside a
      mount namespace of its own shows paths from that namespace's root
      (`/mnt/r/usr/bin/python3.14` for a root at /mnt/r), which no one else can reach;
    - /proc/PID/map_files, the mapping itself, whatever namespace its path belongs to (root
      only: CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE).

    Each candidate is checked to be the mapped file (`same_file`, against the map_files
    entry where gilprof may stat it). Where none is (a file replaced since it was mapped),
    the path through the target's root: what is read from it is still checked against the
    live process before it is trusted."""
    through_root = f"/proc/{pid}/root{mapped.path}"
    parts = mapped.path.strip("/").split("/")
    by_mapping = f"/proc/{pid}/map_files/{mapped.base:x}-{mapped.end:x}"
    reference = _identity(by_mapping)
    candidates = [
        through_root,
        mapped.path,
        *(f"/proc/{pid}/root/" + "/".join(parts[k:]) for k in range(1, len(parts))),
    ]
    for candidate in candidates:
        if same_file(candidate, mapped, reference):
            return candidate
    return by_mapping if reference is not None else through_root


def executable_inode(pid: int) -> int | None:
    """The inode of the target's executable, whatever its path is called where (the inode
    only: see same_file)."""
    found = _identity(f"/proc/{pid}/exe")
    return found[1] if found is not None else None
