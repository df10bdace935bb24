"""Every file reader against bad input: an InputError with one line, or (for the parsers of
py-spy output, which skip garbage) no exception and nothing parsed. Never another exception
type, never a hang: every read runs under a SIGALRM time limit.

Readers: profiles (Profile.load, load_profiles; gilprof.profile/1 documents and /2 streams), py-spy raw (parse_raw) and chrometrace
step logs (read_step_logs, summarize_logs), recipes (load_recipe),
budgets (parse_gate_budgets, and the CLI's budget-file loader); then the CLI end to end.
This module: fixed bad files and random bytes through every file reader, and the CLI end to
end; test_fuzz_readers_profiles.py: profiles; test_fuzz_readers_texts.py: py-spy raw, step
logs, recipes and budgets, and (its last test) the number of cases each reader saw.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from gilprof.cli.main import cli
from gilprof.errors import InputError

from .fuzz_builders import (
    BAD_CONTENTS,
    CASES,
    FIFO_LIMIT_S,
    FILE_READERS,
    FUZZ,
    JSON_VALUES,
    SKIPPING,
    SPECIAL_PATHS,
    TIME_LIMIT_S,
    VALID_PROFILE,
    VALID_PROFILE_TEXT,
    VALID_RECIPE_TEXT,
    bad_path,
    fuzz_scratch,  # noqa: F401 - the module-scoped `scratch` fixture
    outcome,
    paths_of,
    replaced,
    time_limit,
)


def _cases() -> Iterator[Any]:
    for reader in FILE_READERS:
        for case in (*BAD_CONTENTS, *SPECIAL_PATHS):
            yield pytest.param(reader, case, id=f"{reader}-{case}")


# -- fixed bad files through every file reader --------------------------------------------------
@pytest.mark.parametrize("reader,case", list(_cases()))
def test_bad_file_gives_input_error(scratch: Path, reader: str, case: str) -> None:
    result = outcome(
        reader,
        lambda: FILE_READERS[reader](bad_path(scratch, case)),
        FIFO_LIMIT_S if case == "fifo" else TIME_LIMIT_S,
    )
    if reader in SKIPPING and case not in ("directory", "missing"):
        # garbage lines are skipped; a FIFO without a writer reads as an empty file
        assert result == [], f"garbage parsed as iteration lines: {result!r:.300}"
    else:
        assert isinstance(result, InputError), f"{case} accepted: {result!r:.300}"


@given(content=st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode))
@FUZZ
def test_random_bytes_through_every_file_reader(scratch: Path, content: bytes) -> None:
    path = scratch / "random.bin"
    path.write_bytes(content)
    for reader, read in FILE_READERS.items():
        result = outcome(reader, functools.partial(read, path))
        if reader in SKIPPING:
            assert isinstance(result, list)
        else:
            assert isinstance(result, InputError), f"{reader} accepted {content[:80]!r}"


# -- the CLI end to end -------------------------------------------------------------------------
PROFILE_CASES = (
    "empty",
    "non_utf8",
    "nan",
    "huge_int",
    "huge_float",
    "deep_lists",
    "deep_objects",
    "random_binary",
    "truncated",
    "newer_schema",
    "wrong_type",
    "directory",
    "fifo",
    "missing",
)
TOML_CASES = (
    "non_utf8",
    "huge_int_toml",
    "deep_toml",
    "random_binary",
    "wrong_type_toml",
    "directory",
    "fifo",
    "missing",
)
LOG_CASES = (
    "empty",
    "non_utf8",
    "deep_log_line",
    "random_binary",
    "long_line",
    "directory",
    "fifo",
    "missing",
)


def _cli_file(folder: Path, case: str) -> Path:
    if case == "wrong_type":
        path = folder / "wrong_type.json"
        path.write_text(json.dumps(replaced(VALID_PROFILE, ("windows", 0, "counts"), "many")))
        return path
    if case == "wrong_type_toml":
        path = folder / "wrong_type.toml"
        path.write_text(
            VALID_RECIPE_TEXT.replace("rate = 100", 'rate = "fast"') + "\n[gate]\n"
            "max_utilization = true\n"
        )
        return path
    return bad_path(folder, case)


def _cli_params() -> Iterator[Any]:
    for case in PROFILE_CASES:
        for name in ("report", "compare-before", "compare-after", "gate"):
            yield pytest.param(name, case, id=f"{name}-{case}")
    for case in TOML_CASES:
        for name in ("recipes-show", "gate-budget"):
            yield pytest.param(name, case, id=f"{name}-{case}")
    for case in LOG_CASES:
        yield pytest.param("steps", case, id=f"steps-{case}")


@pytest.mark.parametrize("command,case", list(_cli_params()))
def test_cli_bad_input_is_one_error_line_and_exit_2(scratch: Path, command: str, case: str) -> None:
    good = scratch / "good.json"
    if not good.exists():
        good.write_text(VALID_PROFILE_TEXT)
    bad = str(_cli_file(scratch, case))
    args = {
        "report": ["report", bad],
        "compare-before": ["compare", bad, str(good)],
        "compare-after": ["compare", str(good), bad],
        "gate": ["gate", bad],
        "recipes-show": ["recipes", "--show", bad],
        "gate-budget": ["gate", str(good), "--budget", bad],
        "steps": ["steps", bad],
    }[command]
    CASES["cli " + command.split("-")[0]] += 1
    with time_limit(FIFO_LIMIT_S if case == "fifo" else TIME_LIMIT_S):
        result = CliRunner().invoke(cli, args)
    assert "Traceback" not in result.output
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gilprof: error: "), result.output


@given(path=st.sampled_from(paths_of(VALID_PROFILE)), value=JSON_VALUES)
@settings(FUZZ, max_examples=60)
def test_cli_report_and_compare_on_mutated_profiles(
    scratch: Path, path: tuple[Any, ...], value: Any
) -> None:
    good, bad = scratch / "good.json", scratch / "cli-mutated.json"
    good.write_text(VALID_PROFILE_TEXT)
    bad.write_text(json.dumps(replaced(VALID_PROFILE, path, value)))
    for args in (
        ["report", str(bad)],
        ["report", str(bad), "--format", "json"],
        ["compare", str(good), str(bad)],
        ["gate", str(bad), "--max-utilization", "50"],
    ):
        CASES["cli " + args[0]] += 1
        with time_limit():
            result = CliRunner().invoke(cli, args)
        assert "Traceback" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            result.exception,
        )
        if result.exit_code == 2:
            lines = result.output.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("gilprof: error: "), result.output
        else:
            assert result.exit_code in (0, 1), (args, result.output)  # 1: a failed budget
