"""Files a profile lives in: atomic writes (readers never see half a file) and checked reads.

One rule for every output gilprof writes: an output that cannot be written (its folder missing,
read-only or full, the path a folder or not allowed) is a UsageError naming the path and the
reason, `PATH: cannot write: REASON`; no temporary file is left behind and a file already at
the path is kept. `check_writable` and `check_folder` apply the rule before long work starts.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from gilprof.errors import InputError, UsageError

TEMP_PREFIX = ".gilprof-"  # temporary files beside an output, renamed onto it when complete


def write_json_atomic(path: str | os.PathLike[str], data: Any) -> None:
    write_text_atomic(path, json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n")


def read_json_file(path: str | os.PathLike[str], what: str) -> Any:
    name = os.fspath(path)
    if os.path.isdir(name):
        raise InputError(f"{name}: is a directory, not a {what} file")
    if os.path.exists(name) and not os.path.isfile(name):
        raise InputError(f"{name}: not a regular file")
    try:
        with open(name, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise InputError(f"{name}: no such file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror or exc}") from None
    if not raw.strip():
        raise InputError(f"{name}: empty file, not a {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not a {what} (not UTF-8 text)") from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        if _ends_early(text, exc):
            raise InputError(
                f"{name}: truncated {what} (JSON ends early at byte {exc.pos})"
            ) from None
        raise InputError(f"{name}: not a valid {what}: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{name}: not a valid {what}: nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{name}: not a valid {what}: {exc}") from None


def _ends_early(text: str, exc: json.JSONDecodeError) -> bool:
    """Whether the decoder failed because the text stops, not because of a wrong byte."""
    if exc.msg.startswith("Unterminated string"):  # reported at the opening quote
        return True
    rest = text[exc.pos :].rstrip()
    # A cut inside a literal (`fals`) or a number (`1.`, `1e-`) is reported where the
    # literal or the unfinished part of the number starts.
    return (
        len(rest) <= 1
        or (rest[1:] in ("-", "+") and rest[0] in "eE")
        or any(word.startswith(rest) for word in ("true", "false", "null"))
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """write_text_atomic for bytes (pprof's gzip, ...)."""
    with atomic_file(path) as fd:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


@contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[int]:
    """A descriptor of a new temporary file beside `path`, renamed onto `path` when the block
    ends without error. On any failure the temporary file is removed and `path` is left as it
    was; an OSError (here or in the block) becomes the UsageError of `cannot_write`."""
    target = os.fspath(path)
    _refuse_special(target)
    folder = _folder_of(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".tmp", dir=folder)
    except OSError as exc:
        raise cannot_write(target, exc) from None
    try:
        try:
            yield fd
            os.fsync(fd)
        finally:
            with suppress(OSError):
                os.close(fd)
        # mkstemp creates 0600; give the file the mode the user's umask would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise cannot_write(target, exc) from None
        raise


def check_writable(path: str | os.PathLike[str], *, min_free: int = 1) -> None:
    """Raise the UsageError the write would end in, now: `path` must be a file that can be
    created or replaced, in an existing folder that takes new files and has `min_free` bytes
    free. Call it before work that takes long (sampling, rendering a big page)."""
    target = os.fspath(path)
    _refuse_special(target)
    folder = _folder_of(target)
    if not os.path.isdir(folder):
        raise UsageError(f"{target}: cannot write: {_missing(folder)}")
    _probe(target, folder, min_free)


def check_folder(
    folder: str | os.PathLike[str], *, create: bool = False, min_free: int = 1
) -> None:
    """The folder variant of check_writable, for outputs of several files: `folder` (created
    when `create`, else only checked to be creatable) must take new files."""
    name = os.fspath(folder)
    if os.path.lexists(name) and not os.path.isdir(name):
        raise UsageError(f"{name}: cannot write: not a folder (a file is in the way)")
    if os.path.isdir(name):
        _probe(name, name, min_free)
        return
    ancestor = _nearest_existing(name)
    if not os.path.isdir(ancestor):
        raise UsageError(f"{name}: cannot write: {ancestor} is not a folder")
    if not create:
        _probe(name, ancestor, min_free)
        return
    try:
        os.makedirs(name, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{name}: cannot write: {_reason(exc, ancestor)}") from None
    try:
        _probe(name, name, min_free)
    except UsageError:
        with suppress(OSError):  # made for nothing: do not leave it behind
            os.rmdir(name)
        raise


def cannot_write(path: str, exc: OSError) -> UsageError:
    """The one-line error for an OSError met while writing `path`."""
    return UsageError(f"{path}: cannot write: {write_reason(path, exc)}")


def write_reason(path: str, exc: OSError) -> str:
    """Why writing `path` failed, in words that name the folder where that is the cause."""
    return _reason(exc, _folder_of(path))


def _reason(exc: OSError, folder: str) -> str:
    code = exc.errno
    if code == errno.ENOENT:
        if not os.path.isdir(folder):
            return _missing(folder)
        return f"not allowed: {folder} takes no new files"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"folder {folder} is not writable ({_strerror(exc)})"
    if code == errno.EISDIR:
        return "it is a folder"
    if code == errno.ENOTDIR:
        return f"{_nearest_existing(folder)} is not a folder"
    return _strerror(exc)


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _missing(folder: str) -> str:
    ancestor = _nearest_existing(folder)
    if os.path.lexists(ancestor) and not os.path.isdir(ancestor):
        return f"{ancestor} is not a folder"
    return f"folder {folder} does not exist"


def _folder_of(path: str) -> str:
    return os.path.dirname(os.path.abspath(path))


def _nearest_existing(path: str) -> str:
    current = os.path.abspath(path)
    while not os.path.lexists(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    return current


def _refuse_special(target: str) -> None:
    if os.path.isdir(target):
        raise UsageError(f"{target}: cannot write: it is a folder")
    if os.path.lexists(target) and not os.path.isfile(target):
        # The output is written by rename, which would replace a device or FIFO (-o /dev/null).
        raise UsageError(f"{target}: cannot write: not a regular file")


def _probe(path: str, folder: str, min_free: int) -> None:
    """Create and remove a file in `folder` (the only test a read-only mount, /proc or a
    missing permission all fail, as root too), then look at its free space."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX + "check-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise UsageError(f"{path}: cannot write: {_reason(exc, folder)}") from None
    os.close(fd)
    os.unlink(tmp)
    try:
        vfs = os.statvfs(folder)
    except OSError:
        return
    free = vfs.f_bavail * vfs.f_frsize
    if vfs.f_blocks and free < min_free:  # f_blocks 0: a file system without a size (/proc)
        raise UsageError(
            f"{path}: cannot write: folder {folder} is (nearly) full: {free // 1024} KiB free"
        )
