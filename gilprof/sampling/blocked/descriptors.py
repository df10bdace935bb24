"""What a blocked system call waits on: its descriptors, and who is at their other end.

A descriptor argument resolves through /proc/PID/fd/N: `socket:[inode]`, `pipe:[inode]`,
`anon_inode:[eventfd]`, a device node, a file. An epoll descriptor's watched descriptors are
its `tfd:` lines in /proc/PID/fdinfo; poll's and select's are read from the target's memory
(their arrays, at the call's pointer arguments). A TCP socket's two ends are in the network
namespace's table (/proc/PID/net/tcp, tcp6): the other end is the socket with the two
addresses swapped, and its process is the one whose /proc/*/fd holds that inode.
"""

from __future__ import annotations

import contextlib
import os
import struct

from gilprof.sampling.blocked.relation import JobRelations
from gilprof.sampling.threadstate.memory import MemoryReadError, TargetMemory
from gilprof.wait_classes import (
    FD_DEV_OTHER,
    FD_DEVICE,
    FD_EVENTFD,
    FD_FILE,
    FD_OTHER,
    FD_PIPE,
    FD_PIPE_PROCESS,
    FD_PIPE_SELF,
    FD_SOCKET,
    FD_SOCKET_CLIENT,
    FD_SOCKET_LAUNCHER,
    FD_SOCKET_RANK,
    FD_SOCKET_SELF,
)

# system calls whose first argument is the descriptor waited on
FD_FIRST = frozenset(
    {
        "read", "readv", "pread64", "recvfrom", "recvmsg", "recvmmsg", "accept", "accept4",
        "connect", "write", "writev", "sendto", "sendmsg", "ioctl", "fcntl",
    }
)  # fmt: skip
EPOLLS = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2"})
POLLS = frozenset({"poll", "ppoll"})
SELECTS = frozenset({"select", "pselect6"})
MAX_FDS = 16  # descriptors looked at per call
GPU_DEVICE_PREFIXES = ("/dev/nvidia", "/dev/dri/", "/dev/kfd", "/dev/accel")
_TCP_STATES = {"01": "established", "0A": "listening"}


def descriptor_numbers(
    syscall: str, args: list[int], pid: int, memory: TargetMemory | None
) -> list[int]:
    """The descriptors a blocked call waits on, from its arguments."""
    if syscall in FD_FIRST:
        return [args[0]] if 0 <= args[0] < 1 << 31 else []
    if syscall in EPOLLS:
        return _epoll_targets(pid, args[0])
    if memory is None:
        return []
    if syscall in POLLS and 0 < args[1] <= 4096:
        with contextlib.suppress(MemoryReadError):
            data = memory.read(args[0], 8 * min(args[1], MAX_FDS))
            polled = [struct.unpack_from("<i", data, 8 * i)[0] for i in range(len(data) // 8)]
            return [fd for fd in polled if fd >= 0]
    if syscall in SELECTS and 0 < args[0] <= 65536:
        fds: list[int] = []
        for pointer in args[1:3]:
            if not pointer:
                continue
            with contextlib.suppress(MemoryReadError):
                bits = int.from_bytes(memory.read(pointer, (args[0] + 7) // 8), "little")
                fds.extend(i for i in range(args[0]) if bits >> i & 1)
        return fds[:MAX_FDS]
    return []


def _epoll_targets(pid: int, epfd: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/fdinfo/{epfd}", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        if line.startswith("tfd:"):
            with contextlib.suppress(ValueError, IndexError):
                out.append(int(line.split()[1]))
    return out[:MAX_FDS]


def _tcp_table(pid: int) -> dict[int, tuple[str, str, str]]:
    """inode -> (local, remote, state) of the target's network namespace, as hex text."""
    table: dict[int, tuple[str, str, str]] = {}
    for name in ("tcp", "tcp6"):
        with (
            contextlib.suppress(OSError),
            open(f"/proc/{pid}/net/{name}", encoding="ascii") as handle,
        ):
            next(handle, None)
            for line in handle:
                fields = line.split()
                if len(fields) > 9:
                    table[int(fields[9])] = (fields[1], fields[2], fields[3])
    return table


def _address(hex_address: str) -> tuple[str, int]:
    host, _, port = hex_address.partition(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        text = ".".join(str(b) for b in raw[::-1])
    else:
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        packed = b"".join(words)
        text = "[" + ":".join(packed[i : i + 2].hex() for i in range(0, 16, 2)) + "]"
        if packed[:12] == b"\0" * 10 + b"\xff\xff":
            text = ".".join(str(b) for b in packed[12:])
    return text, int(port, 16)


def _is_loopback(hex_address: str) -> bool:
    host, _, _port = hex_address.partition(":")
    if len(host) == 8:
        return host.endswith("7F")
    return host in ("00000000000000000000000001000000",) or (
        host.startswith("0000000000000000FFFF0000") and host.endswith("7F")
    )


class Descriptors:
    """Describes a target's descriptors, each once while it keeps its inode."""

    def __init__(self, pid: int, relations: JobRelations) -> None:
        self.pid = pid
        self.relations = relations
        self._seen: dict[tuple[int, str], tuple[str, str]] = {}
        self.unreadable = ""  # why /proc/PID/fd could not be read, once it failed

    def describe(self, fd: int) -> tuple[str, str] | None:
        """(kind tag, words) of one descriptor, None where it is closed."""
        try:
            target = os.readlink(f"/proc/{self.pid}/fd/{fd}")
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.unreadable = f"/proc/{self.pid}/fd is not readable: {exc.strerror}"
            return None
        known = self._seen.get((fd, target))
        if known is None:
            known = self._seen[(fd, target)] = self._describe(fd, target)
        return known

    def _describe(self, fd: int, target: str) -> tuple[str, str]:
        if target.startswith("socket:["):
            return self._socket(int(target[8:-1]))
        if target.startswith("pipe:["):
            return self._pipe(fd, int(target[6:-1]))
        if target == "anon_inode:[eventfd]":
            return FD_EVENTFD, "an eventfd"
        if target.startswith(GPU_DEVICE_PREFIXES):
            return FD_DEVICE, target
        if target.startswith("/dev/"):
            return FD_DEV_OTHER, target
        if target.startswith("/"):
            return FD_FILE, target
        return FD_OTHER, target

    def _pipe(self, fd: int, inode: int) -> tuple[str, str]:
        owners = self.relations.owners(f"pipe:[{inode}]")
        others = [p for p in owners if p != self.pid]
        if others:
            return FD_PIPE_PROCESS, f"a pipe from {self.relations.describe(others[0])}"
        if len([1 for f in _fds_of(self.pid) if f == f"pipe:[{inode}]"]) > 1:
            return FD_PIPE_SELF, "a pipe within this process"
        return FD_PIPE, "a pipe whose other end was not found"

    def _socket(self, inode: int) -> tuple[str, str]:
        table = _tcp_table(self.pid)
        row = table.get(inode)
        if row is None:
            return FD_SOCKET, "a socket (not TCP; its other end not looked up)"
        local, remote, state = row
        if state == "0A":
            host, port = _address(local)
            return FD_SOCKET_CLIENT, f"a listening TCP socket {host}:{port} (clients connect)"
        rhost, rport = _address(remote)
        peer = next(
            (i for i, (lo, re, _s) in table.items() if lo == remote and re == local and i != inode),
            None,
        )
        if peer is None:
            where = "on this host, not found" if _is_loopback(remote) else "on another host"
            return FD_SOCKET, f"TCP to {rhost}:{rport} ({where})"
        owners = self.relations.owners(f"socket:[{peer}]")
        if not owners:
            return FD_SOCKET, f"TCP to {rhost}:{rport} (its process not found)"
        owner = owners[0]
        relation = self.relations.relation(owner)
        words = f"TCP from {self.relations.describe(owner)}"
        tag = {
            "self": FD_SOCKET_SELF,
            "launcher": FD_SOCKET_LAUNCHER,
            "rank": FD_SOCKET_RANK,
        }.get(relation, FD_SOCKET_CLIENT)
        return tag, words


def _fds_of(pid: int) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        for name in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                out.append(os.readlink(f"/proc/{pid}/fd/{name}"))
    return out
