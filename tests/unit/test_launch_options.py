"""`attach` and `exec` end in a command to launch: a mistyped option before that command is
refused as click refuses one elsewhere (exit 2, the nearest option named), and every word of
the launch command, options included, is passed to it untouched."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import gilprof.cli.exec_ as exec_cli
from gilprof.cli.main import cli

from .builders import attach_request


def _gilprof(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize(
    "args,unknown,suggested",
    [
        (("attach", "--rnak", "0", "-d", "1", "--", "true"), "--rnak", "--rank"),
        (
            ("attach", "--rank", "0", "--duraton", "5", "--", "python", "app.py"),
            "--duraton",
            "--duration",
        ),
        (
            ("attach", "--rank=0", "--wait-timout=5", "python", "app.py"),
            "--wait-timout",
            "--wait-timeout",
        ),
        (("attach", "-q", "-x", "--", "true"), "-x", None),
        (("attach", "-qx", "--", "true"), "-x", None),
        (("exec", "--rnaks", "0", "--", "python", "app.py"), "--rnaks", "--ranks"),
        (("exec", "-o", "prof", "--duraton", "5", "python", "app.py"), "--duraton", "--duration"),
    ],
)
def test_an_unknown_option_before_the_launch_command_is_named(args, unknown, suggested):
    result = _gilprof(*args)
    assert result.exit_code == 2, result.output
    assert f"No such option '{unknown}'" in result.stderr, result.stderr
    if suggested:
        assert f"Did you mean '{suggested}'?" in result.stderr, result.stderr
    assert "cannot launch" not in result.stderr


@pytest.mark.parametrize(
    "args,command",
    [
        (["--rank", "0", "--", "python", "app.py", "--foo"], ("python", "app.py", "--foo")),
        (["--rank", "0", "python", "app.py", "--foo"], ("python", "app.py", "--foo")),
        (["-qd", "5", "--", "python", "--rnak"], ("python", "--rnak")),
        (["-d5", "--rank", "-1", "--", "--help"], ("--help",)),
        (["--match", "--weird", "-o", "-", "--", "true"], ("true",)),
    ],
)
def test_attach_passes_the_launch_command_untouched(monkeypatch, args, command):
    assert attach_request(monkeypatch, args).command == command


class _Execed(Exception):
    pass


@pytest.mark.parametrize(
    "args,command",
    [
        (["--ranks", "1", "--", "python", "app.py", "--foo"], ("python", "app.py", "--foo")),
        (
            ["--ranks", "1", "python", "app.py", "--rnak", "-o", "x"],
            ("python", "app.py", "--rnak", "-o", "x"),
        ),
        (["-q", "--ranks=1", "-d", "2", "--", "--not-an-option"], ("--not-an-option",)),
    ],
)
def test_exec_passes_the_launch_command_untouched(monkeypatch, args, command):
    monkeypatch.setenv("PMI_RANK", "3")  # not selected: exec replaces itself with the command
    execed: list[tuple[str, ...]] = []

    def fake_exec(argv):
        execed.append(tuple(argv))
        raise _Execed

    monkeypatch.setattr(exec_cli, "exec_command", fake_exec)
    result = CliRunner().invoke(exec_cli.command, args)
    assert isinstance(result.exception, _Execed), result.output
    assert execed == [command]
