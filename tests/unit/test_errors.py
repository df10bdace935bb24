"""The exit code of each error kind: part of the CLI contract that scripts and CI rely on."""

from __future__ import annotations

import pytest

from gilprof.errors import (
    BudgetFailed,
    GilprofError,
    InputError,
    PermissionDenied,
    SamplerError,
    TargetError,
    UsageError,
)
from gilprof.profile import StreamWriteError
from gilprof.sampling.exec_ import CommandNotExecutable, CommandNotFound


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        (GilprofError, 2),
        (UsageError, 2),
        (InputError, 2),
        (StreamWriteError, 2),  # inherits the default
        (TargetError, 3),
        (PermissionDenied, 4),
        (SamplerError, 5),
        (BudgetFailed, 1),
        (CommandNotFound, 127),
        (CommandNotExecutable, 126),
    ],
)
def test_each_error_kind_exits_with_its_documented_code(kind, code):
    assert kind("x").exit_code == code


def test_a_subclass_without_its_own_code_keeps_its_parents():
    class Narrower(TargetError):
        pass

    assert Narrower.exit_code == 3 and GilprofError.exit_code == 2
