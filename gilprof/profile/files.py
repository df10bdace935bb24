"""Files a profile lives in: atomic writes (readers never see half a file) and checked reads."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from gilprof.errors import InputError


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
    target = os.fspath(path)
    fd, tmp = tempfile.mkstemp(
        prefix=".gilprof-", suffix=".tmp", dir=os.path.dirname(os.path.abspath(target))
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; give the file the mode the user's umask would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
