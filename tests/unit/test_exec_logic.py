"""`gilprof exec` decisions without processes: which rank am I, am I sampled, which exit status."""

from __future__ import annotations

import contextlib

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import gilprof.cli.exec_ as exec_cli
from gilprof.errors import UsageError
from gilprof.model import Mode
from gilprof.sampling.backends.base import SamplerSettings
from gilprof.sampling.discover import (
    RANK_VARIABLES,
    RankIdentity,
    parse_rank_selection,
    rank_from_environment,
)
from gilprof.sampling.exec_ import (
    CommandNotExecutable,
    CommandNotFound,
    is_selected,
)
from gilprof.sampling.processes import exit_status


def test_no_rank_variable_means_rank_0_and_says_so():
    assert rank_from_environment({"PATH": "/bin"}) == RankIdentity(0, None)


@pytest.mark.parametrize("name", RANK_VARIABLES)
def test_each_rank_variable_is_read(name):
    assert rank_from_environment({name: "5"}) == RankIdentity(5, name)


def test_launcher_variable_wins_over_inherited_slurm_procid():
    # mpirun inside a SLURM step: every rank inherits SLURM_PROCID=0
    env = {"SLURM_PROCID": "0", "OMPI_COMM_WORLD_RANK": "3", "RANK": "7"}
    assert rank_from_environment(env) == RankIdentity(3, "OMPI_COMM_WORLD_RANK")


def test_non_integer_value_falls_through_to_the_next_variable():
    env = {"PMI_RANK": "", "SLURM_PROCID": " 2 ", "RANK": "x"}
    assert rank_from_environment(env) == RankIdentity(2, "SLURM_PROCID")
    assert rank_from_environment({"RANK": "-1"}) == RankIdentity(0, None)


@pytest.mark.parametrize(
    "text,selected,not_selected",
    [
        ("0", [0], [1, 7]),
        ("all", [0, 1, 63], []),
        ("1-3", [1, 2, 3], [0, 4]),
        ("0,4", [0, 4], [1, 3, 5]),
        ("0-1,8", [0, 1, 8], [2, 7, 9]),
    ],
)
def test_rank_selection(text, selected, not_selected):
    wanted = parse_rank_selection(text)
    assert all(is_selected(r, wanted) for r in selected)
    assert not any(is_selected(r, wanted) for r in not_selected)


@pytest.mark.parametrize("text", ["zero", "1-", "3-1", "", "0;1"])
def test_bad_rank_selection_is_a_usage_error(text):
    with pytest.raises(UsageError):
        parse_rank_selection(text)


@pytest.mark.parametrize(
    "returncode,status", [(0, 0), (3, 3), (255, 255), (-2, 130), (-15, 143), (-9, 137)]
)
def test_exit_status_is_what_a_shell_reports(returncode, status):
    assert exit_status(returncode) == status


@given(st.integers(min_value=-64, max_value=255))
def test_exit_status_fits_a_byte_and_keeps_signals_above_128(returncode):
    status = exit_status(returncode)
    assert 0 <= status <= 255
    if returncode < 0:
        assert 128 < status <= 192
    else:
        assert status == returncode


def test_command_errors_carry_shell_codes():
    assert (CommandNotFound.exit_code, CommandNotExecutable.exit_code) == (127, 126)


def test_sampler_settings_follow_attach_rules():
    assert SamplerSettings.for_mode("gil", 100, False, False).blocking is False
    native = SamplerSettings.for_mode("wall", 50, True, False)
    assert native.native and native.blocking and native.rate_hz == 50.0
    contention = SamplerSettings.for_mode("contention", 100, False, False)
    assert contention.mode is Mode.CONTENTION and contention.native and contention.blocking


class _Execed(Exception):
    pass


def _run_cli(monkeypatch, env: dict[str, str], args: list[str]):
    """Invoke the command with exec and the sampler replaced by recorders."""
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    execed: list[tuple[str, ...]] = []

    def fake_exec(argv):
        execed.append(tuple(argv))
        raise _Execed

    def no_sampler(_name):
        raise AssertionError("an unselected rank must not touch the sampler")

    monkeypatch.setattr(exec_cli, "exec_command", fake_exec)
    monkeypatch.setattr(exec_cli, "get_backend", no_sampler)
    result = CliRunner().invoke(exec_cli.command, args)
    return result, execed


def test_unselected_rank_execs_the_command_with_its_own_options(monkeypatch):
    result, execed = _run_cli(
        monkeypatch,
        {"PMI_RANK": "2"},
        ["--ranks", "0,1", "python", "app.py", "-o", "x", "--ranks", "9"],
    )
    assert isinstance(result.exception, _Execed)
    # options after the command belong to the command
    assert execed == [("python", "app.py", "-o", "x", "--ranks", "9")]
    assert "no rank variable" not in result.stderr


def test_without_rank_variable_rank_0_is_selected(monkeypatch):
    result, execed = _run_cli(monkeypatch, {}, ["--", "python", "app.py"])
    assert execed == []  # rank 0 is sampled (here: the fake sampler refuses)
    assert isinstance(result.exception, AssertionError)
    assert "no rank variable set" in result.stderr

    result, execed = _run_cli(monkeypatch, {}, ["--ranks", "1", "--", "python", "app.py"])
    assert execed == [("python", "app.py")]


# What each launcher sets on a rank (values from their documentation): the rank read, and the
# variable it came from, whatever else the rank inherited.
@pytest.mark.parametrize(
    "env,rank,variable",
    [
        # Open MPI 4 (mpirun): OMPI_COMM_WORLD_RANK; Open MPI 5 (prterun) sets PMIX_RANK as well
        ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, 3, "OMPI_COMM_WORLD_RANK"),
        ({"OMPI_COMM_WORLD_RANK": "3", "PMIX_RANK": "3"}, 3, "OMPI_COMM_WORLD_RANK"),
        # srun --mpi=pmix: PMIX_RANK and SLURM_PROCID agree; the MPI-level one is named
        ({"PMIX_RANK": "5", "SLURM_PROCID": "5"}, 5, "PMIX_RANK"),
        # mpirun inside an sbatch step: every rank inherits the step's SLURM_PROCID=0
        ({"PMIX_RANK": "2", "SLURM_PROCID": "0"}, 2, "PMIX_RANK"),
        ({"PMI_RANK": "1", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}, 1, "PMI_RANK"),
        # plain srun: SLURM_PROCID alone
        ({"SLURM_PROCID": "7", "SLURM_LOCALID": "3"}, 7, "SLURM_PROCID"),
        # torchrun under srun: torch's RANK is below the launcher's own variable
        ({"SLURM_PROCID": "1", "RANK": "9"}, 1, "SLURM_PROCID"),
    ],
)
def test_rank_of_each_launcher_and_precedence(env, rank, variable):
    assert rank_from_environment(env) == RankIdentity(rank, variable)


@pytest.mark.parametrize(
    "env,selected",
    [
        ({"OMPI_COMM_WORLD_RANK": "0", "SLURM_PROCID": "4"}, True),
        ({"PMIX_RANK": "1", "SLURM_PROCID": "0"}, False),
        ({"SLURM_PROCID": "1"}, False),
        ({"SLURM_PROCID": "0"}, True),
    ],
)
def test_exec_selects_by_the_launchers_rank(monkeypatch, env, selected):
    for name in ("PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    result, execed = _run_cli(monkeypatch, env, ["--ranks", "0", "--", "python", "app.py"])
    assert (execed == []) is selected, (env, execed, result.output)


def test_inherited_descriptors_are_those_open_and_inheritable_at_start(monkeypatch):
    import os

    import gilprof.sampling.processes as processes

    read_end, write_end = os.pipe()  # non-inheritable, as everything Python opens
    os.set_inheritable(read_end, True)  # as a launcher hands it over (no FD_CLOEXEC)
    try:
        start = processes._open_descriptors()
        assert read_end in start and write_end not in start
        monkeypatch.setattr(processes, "_INHERITED_AT_START", start)
        assert read_end in processes.inherited_fds()
        # closed and the number reused for another file: no longer what the launcher handed over
        os.close(read_end)
        other = os.open(os.devnull, os.O_RDONLY)
        os.dup2(other, read_end, inheritable=True)
        os.close(other)
        assert read_end not in processes.inherited_fds()
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)
