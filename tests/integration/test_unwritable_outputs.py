"""Every output gilprof cannot write is one line on stderr and exit 2: never a traceback, never
a temporary file left behind, never a clobbered file.

Every command that writes, with every --format it accepts, is run as a real process against a
folder that does not exist, a read-only folder (a read-only bind mount: root writes through
file modes), a path that is a folder (a file, for commands that write a folder), a full file
system (a small tmpfs) and more. The mounts need root; they are undone in the fixture's
teardown, whatever the tests did. A mount that fails fails the tests, it does not skip them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gilprof.renderers import formats
from gilprof.sampling.discover import RANK_VARIABLES

from ..unit.builders import hot_and_serve
from .conftest import IN_CI, repo_pythonpath, require_tool, run_gilprof

pytestmark = pytest.mark.integration

KEPT = "kept: an earlier output\n"


@dataclass(frozen=True)
class Places:
    """Where outputs cannot go; `inputs` holds two profiles and the launch marker."""

    base: Path
    read_only: Path  # a read-only bind mount holding existing.out
    full: Path  # a tmpfs with no byte free, holding existing.out
    nearly_full: Path  # a tmpfs with a few KiB free, holding existing.out
    inputs: Path

    def output(self, place: str, name: str, *, folder: bool) -> Path:
        """The output path of a command writing a file (or a folder) in `place`."""
        if place == "missing":
            return self.base / "no-such-folder" / name
        if place == "read-only":
            return self.read_only / name
        if place == "path-is-a-folder":  # for a command writing a folder: a file is in the way
            return self.inputs / "a.json" if folder else self.base
        if place == "full":
            return self.full / name
        if place == "under-a-file":
            return self.inputs / "a.json" / name
        if place == "not-allowed":
            return Path("/proc") / name
        raise AssertionError(place)


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:  # fail, never skip: these tests must run where CI runs (root)
        pytest.fail(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def _fill(folder: Path, leave: int) -> None:
    """Write into `folder` until at most `leave` bytes are free."""
    vfs = os.statvfs(folder)
    with open(folder / "filler", "wb") as handle, contextlib.suppress(OSError):
        handle.write(b"\0" * max(0, vfs.f_bavail * vfs.f_frsize - leave))
        handle.flush()
    for _ in range(64):  # the last pages, one write at a time
        if not leave and os.statvfs(folder).f_bavail:
            with open(folder / "filler", "ab") as handle, contextlib.suppress(OSError):
                handle.write(b"\0" * 4096)


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> Iterator[Places]:
    if os.geteuid() != 0 and not IN_CI:
        pytest.skip("needs root to mount a read-only folder and a small file system")
    base = tmp_path_factory.mktemp("unwritable")
    inputs = base / "inputs"
    inputs.mkdir()
    for name in ("a.json", "b.json"):
        hot_and_serve(("executor", "loop", "safe_broadcast"), 40, 20).save(inputs / name)
    source = base / "read-only-source"
    source.mkdir()
    (source / "existing.out").write_text(KEPT)
    mounted: list[Path] = []
    try:
        read_only = base / "read-only"
        read_only.mkdir()
        _run(["mount", "--bind", str(source), str(read_only)])
        mounted.append(read_only)
        _run(["mount", "-o", "remount,ro,bind", str(read_only)])
        small = {}
        for name, leave in (("full", 0), ("nearly-full", 8 * 1024)):
            folder = base / name
            folder.mkdir()
            _run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)])
            mounted.append(folder)
            (folder / "existing.out").write_text(KEPT)
            _fill(folder, leave)
            small[name] = folder
        assert os.statvfs(small["full"]).f_bavail == 0
        yield Places(base, read_only, small["full"], small["nearly-full"], inputs)
    finally:
        for folder in reversed(mounted):
            if subprocess.run(["umount", str(folder)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(folder)], capture_output=True)


# Command lines, with OUT the output, A and B two profiles, JOB a command that would leave a
# file behind if it were ever launched.
Template = tuple[str, ...]
JOB = "JOB"


def _file_commands() -> dict[str, Template]:
    """id -> a command writing one file at OUT: every command, with every --format."""
    cases: dict[str, Template] = {}
    for fmt in formats("report"):
        cases[f"report-{fmt}"] = ("report", "A", "--format", fmt, "-o", "OUT")
    for fmt in formats("ranks"):  # several profiles: the ranks side by side
        cases[f"report-ranks-{fmt}"] = ("report", "A", "B", "--format", fmt, "-o", "OUT")
    for fmt in formats("compare"):
        cases[f"compare-{fmt}"] = ("compare", "A", "B", "--format", fmt, "-o", "OUT")
    for fmt in formats("gate"):  # --format goes to stdout; --junit is the file
        cases[f"gate-junit-{fmt}"] = (
            *("gate", "A", "--max-share", "loop=99", "--format", fmt, "--junit", "OUT"),
        )
    cases["merge"] = ("merge", "A", "B", "-o", "OUT")
    cases["attach"] = ("attach", "-q", "-d", "1", "-o", "OUT", "--", JOB)
    # a PID that does not exist: were the output not refused first, top would exit 3
    cases["top"] = ("top", "--pid", str(2**22 + 1), "-o", "OUT")
    return cases


FILE_COMMANDS = _file_commands()
FOLDER_COMMANDS: dict[str, Template] = {
    "attach-ranks": ("attach", "--ranks", "all", "-q", "-d", "1", "-o", "OUT", "--", JOB),
    "exec": ("exec", "-q", "-d", "1", "-o", "OUT", "--", JOB),
    "demo": ("demo", "-o", "OUT"),
}
SAMPLING = {"attach", "top", "attach-ranks", "exec"}  # they check for py-spy first


def _argv(template: Template, p: Places, out: Path) -> list[str]:
    words = {"A": str(p.inputs / "a.json"), "B": str(p.inputs / "b.json"), "OUT": str(out)}
    job = [sys.executable, "-c", f"open({str(p.inputs / 'job-started')!r}, 'w')"]
    argv: list[str] = []
    for word in template:
        argv += job if word == JOB else [words.get(word, word)]
    return argv


FILE_PLACES = ("missing", "read-only", "path-is-a-folder", "full")
# A folder command makes a missing folder (and its parents): that is not an error.
FOLDER_PLACES = ("read-only", "path-is-a-folder", "full", "under-a-file", "not-allowed")
MORE_PLACES = ("under-a-file", "not-allowed")  # for some file commands
MORE_PLACES_FOR = ("report-html", "report-pprof", "compare-html", "merge", "gate-junit-table")


def _refused(argv: list[str], out: Path) -> str:
    """Run `gilprof ARGV`: it must exit 2 with one line on stderr naming `out`."""
    env = {k: v for k, v in repo_pythonpath().items() if k not in RANK_VARIABLES}  # rank 0
    done = run_gilprof(*argv, stdin=subprocess.DEVNULL, env=env, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    [line] = lines
    assert line.startswith("gilprof: error: ") and "cannot write" in line, line
    assert str(out) in line, line
    return line


def _no_temp_files(*folders: Path) -> None:
    for folder in folders:
        if folder.is_dir():
            left = [n for n in os.listdir(folder) if n.startswith(".gilprof-")]
            assert not left, f"temporary files left in {folder}: {left}"


def _check(places: Places, argv: list[str], out: Path, command: str) -> str:
    if command in SAMPLING:
        require_tool("py-spy")
    line = _refused(argv, out)
    _no_temp_files(out.parent, places.read_only, places.full, places.inputs)
    assert not (places.inputs / "job-started").exists(), "a job was launched"
    assert not (places.base / "no-such-folder").exists()
    return line


@pytest.mark.parametrize(
    "command,place",
    [(c, p) for c in FILE_COMMANDS for p in FILE_PLACES]
    + [(c, p) for c in MORE_PLACES_FOR for p in MORE_PLACES],
)
def test_a_file_that_cannot_be_written_is_one_line_and_exit_2(places, command, place):
    out = places.output(place, f"{command}.out", folder=False)
    line = _check(places, _argv(FILE_COMMANDS[command], places, out), out, command)
    reason = {
        "missing": "does not exist",
        "read-only": "Read-only file system",
        "path-is-a-folder": "it is a folder",
        "full": "is (nearly) full",
        "under-a-file": "is not a folder",
        "not-allowed": "not allowed",
    }[place]
    assert reason in line, line
    assert not out.exists() or out.is_dir()


@pytest.mark.parametrize("command,place", [(c, p) for c in FOLDER_COMMANDS for p in FOLDER_PLACES])
def test_a_folder_that_cannot_be_written_is_one_line_and_exit_2(places, command, place):
    out = places.output(place, command, folder=True)
    line = _check(places, _argv(FOLDER_COMMANDS[command], places, out), out, command)
    assert "launching" not in line


@pytest.mark.parametrize(
    "command", ["report-html", "report-pprof", "compare-html", "merge", "gate-junit-table"]
)
@pytest.mark.parametrize("place", ["read-only", "full"])
def test_an_existing_file_is_kept_when_its_replacement_cannot_be_written(places, command, place):
    folder = places.read_only if place == "read-only" else places.full
    out = folder / "existing.out"
    before = sorted(os.listdir(folder))
    _check(places, _argv(FILE_COMMANDS[command], places, out), out, command)
    assert out.read_text() == KEPT
    assert sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("command", ["report-html", "compare-html"])
def test_a_disk_that_fills_up_during_the_write_keeps_the_existing_file(places, command):
    """A few KiB free: the check before the work passes, the write itself fails midway
    (ENOSPC on a page 20+ KiB long). The temporary file goes, the earlier output stays."""
    folder = places.nearly_full
    out = folder / "existing.out"
    before = sorted(os.listdir(folder))
    line = _check(places, _argv(FILE_COMMANDS[command], places, out), out, command)
    assert "No space left on device" in line, line
    assert out.read_text() == KEPT
    assert sorted(os.listdir(folder)) == before
    _no_temp_files(folder)


def test_the_nearly_full_file_system_takes_a_small_output(places, tmp_path):
    """The counterpart of the test above: there is room for a small file, so a refusal
    there comes from the write itself, not from the check before it."""
    out = places.nearly_full / "small.json"
    try:
        done = run_gilprof(*_argv(FILE_COMMANDS["merge"], places, out))
        assert done.returncode == 0, done.stderr
        assert out.stat().st_size > 0
    finally:
        out.unlink(missing_ok=True)
