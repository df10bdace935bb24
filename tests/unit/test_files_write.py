"""gilprof.profile.files: the one rule for outputs (`PATH: cannot write: REASON`, a UsageError),
in-process; tests/integration/test_unwritable_outputs.py runs it on real mounts."""

from __future__ import annotations

import errno
import os

import pytest

import gilprof.profile.files as files
from gilprof.errors import UsageError
from gilprof.profile import (
    StreamWriteError,
    check_folder,
    check_writable,
    write_bytes_atomic,
    write_text_atomic,
)
from gilprof.profile.stream import save_streams

from .builders import hot_and_serve


def test_an_output_is_written_whole_with_the_umask_mode(tmp_path):
    out = tmp_path / "out.bin"
    write_bytes_atomic(out, b"\x1f\x8b" * 100_000)
    assert out.read_bytes() == b"\x1f\x8b" * 100_000
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["out.bin"]


def test_a_disk_full_midway_keeps_the_existing_file_and_no_temp_file(tmp_path, monkeypatch):
    out = tmp_path / "report.html"
    out.write_text("earlier\n")
    real = files.os.write

    def write(fd, data):
        if len(data) > 10:  # a first short write goes through, then the disk is full
            real(fd, bytes(data[:10]))
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(files.os, "write", write)
    with pytest.raises(UsageError) as caught:
        write_text_atomic(out, "x" * 1000)
    assert str(caught.value) == f"{out}: cannot write: No space left on device"
    assert out.read_text() == "earlier\n"
    assert os.listdir(tmp_path) == ["report.html"]


def test_an_interrupted_write_removes_its_temp_file(tmp_path, monkeypatch):
    def interrupted(fd, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_text_atomic(tmp_path / "out", "text")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda tmp: tmp / "missing" / "out", f"folder {{tmp}}{os.sep}missing does not exist"),
        (lambda tmp: tmp, "it is a folder"),
        (lambda tmp: tmp / "file" / "out", "{tmp}/file is not a folder"),
        (lambda tmp: tmp / "fifo", "not a regular file"),
    ],
)
def test_what_cannot_be_written_is_named_with_its_reason(tmp_path, make, reason):
    (tmp_path / "file").write_text("a file\n")
    os.mkfifo(tmp_path / "fifo")
    out = make(tmp_path)
    expected = f"{out}: cannot write: {reason.format(tmp=tmp_path)}"
    for attempt in (check_writable, lambda p: write_text_atomic(p, "x")):
        with pytest.raises(UsageError) as caught:
            attempt(out)
        assert str(caught.value) == expected
    assert sorted(os.listdir(tmp_path)) == ["fifo", "file"]


def test_a_stream_save_that_fails_is_the_same_error_and_leaves_nothing(tmp_path, monkeypatch):
    import gilprof.profile.stream as stream

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(stream.os, "write", full)
    out = tmp_path / "bundle.json"
    with pytest.raises(StreamWriteError, match=r"bundle\.json: cannot write: No space left"):
        save_streams(out, [hot_and_serve(("executor", "loop"), 30, 10)])
    assert isinstance(StreamWriteError("x"), UsageError)
    assert os.listdir(tmp_path) == []


def test_the_folder_check_makes_a_folder_or_says_why_not(tmp_path):
    check_folder(tmp_path / "new")  # creatable: checked, not made
    assert not (tmp_path / "new").exists()
    check_folder(tmp_path / "a" / "b", create=True)
    assert (tmp_path / "a" / "b").is_dir() and os.listdir(tmp_path / "a" / "b") == []
    (tmp_path / "file").write_text("x")
    for create in (False, True):
        with pytest.raises(UsageError, match="file: cannot write: not a folder"):
            check_folder(tmp_path / "file", create=create)
        with pytest.raises(UsageError, match="file is not a folder"):
            check_folder(tmp_path / "file" / "sub", create=create)


def test_a_full_folder_is_refused_before_the_work(tmp_path, monkeypatch):
    class Full:
        f_bavail, f_frsize, f_blocks = 3, 4096, 1000

    monkeypatch.setattr(files.os, "statvfs", lambda _path: Full)
    with pytest.raises(
        UsageError, match=r"out: cannot write: folder .* is \(nearly\) full: 12 KiB"
    ):
        check_writable(tmp_path / "out", min_free=1 << 20)
    check_writable(tmp_path / "out")  # 12 KiB is room enough for a small file
    assert os.listdir(tmp_path) == []
