"""`gilprof attach` option handling: a recipe's [sampling] fills what the user did not give,
and what the user gave wins (checked on the request attach hands to the capture)."""

from __future__ import annotations

import pytest

from gilprof.model import Mode

from .builders import attach_request

RECIPE = """
name = "slow-wall"
description = "a recipe whose sampling defaults differ from the CLI's"
[target]
rank = 2
[sampling]
mode = "wall"
rate = 37
duration = 5
native = true
"""


@pytest.fixture
def recipe_file(tmp_path):
    path = tmp_path / "slow-wall.toml"
    path.write_text(RECIPE)
    return str(path)


def test_recipe_sampling_defaults_apply_when_no_flag_is_given(monkeypatch, recipe_file):
    request = attach_request(monkeypatch, ["--recipe", recipe_file])
    assert request.settings.mode is Mode.WALL and request.settings.rate_hz == 37
    assert request.settings.native and request.settings.blocking  # native implies blocking
    assert request.duration == 5 and request.wanted.rank == 2


def test_flags_the_user_gives_win_over_the_recipe(monkeypatch, recipe_file):
    args = ["--recipe", recipe_file, "--mode", "gil", "-r", "250", "-d", "1.5", "--rank", "0"]
    request = attach_request(monkeypatch, args)
    assert request.settings.mode is Mode.GIL and request.settings.rate_hz == 250
    assert request.duration == 1.5 and request.wanted.rank == 0
    assert request.settings.native  # not given: still the recipe's


def test_without_a_recipe_the_cli_defaults_hold(monkeypatch):
    request = attach_request(monkeypatch, ["--pid", "1", "--window", "0.5"])
    assert request.settings.mode is Mode.STATES and request.settings.rate_hz == 100
    assert not request.settings.native and not request.settings.blocking
    assert request.window_s == 0.5 and request.duration is None


def test_native_frames_in_the_default_mode_are_contention_mode(monkeypatch):
    request = attach_request(monkeypatch, ["--pid", "1", "--native"])
    assert request.settings.mode is Mode.CONTENTION and request.settings.blocking


def test_contention_mode_always_reads_native_stacks(monkeypatch):
    request = attach_request(monkeypatch, ["--pid", "1", "--mode", "contention"])
    assert request.settings.native and request.settings.blocking
