"""Option names mean the same on every command: --format from the renderer registry, one
--skip-warmup default, and an unknown format refused before any work."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.renderers import formats
from gilprof.steps import DEFAULT_SKIP_WARMUP

from .builders import make_profile, sample


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    profile = tmp_path / "p.json"
    make_profile([(100, [sample("main", "loop", count=50)])] * 3).save(profile)
    log = tmp_path / "gen.log"
    log.write_text("".join(f'{{"rank": 0, "iter": {i}, "host_step_ms": 10}}\n' for i in range(9)))
    return {"profile": str(profile), "log": str(log), "src": str(tmp_path)}


# command -> (renderer kind, arguments before the options)
COMMANDS = {
    "report": ("report", ["{profile}"]),
    "compare": ("compare", ["{profile}", "{profile}"]),
    "gate": ("gate", ["{profile}"]),
    "steps": ("steps", ["{log}"]),
    "lint": ("lint", ["{src}"]),
    "ps": ("ps", []),
    "recipes": ("recipes", []),
    "bench-reference": ("bench_reference", []),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_lists_the_formats_the_registry_has(command: str) -> None:
    kind, _ = COMMANDS[command]
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "--format FORMAT" in text
    for name in formats(kind):
        assert name in text, (command, name)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_format_is_one_line_and_exit_2(command: str, files: dict[str, str]) -> None:
    _, args = COMMANDS[command]
    argv = [command, *(a.format(**files) for a in args), "--format", "nope"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("gilprof: error:")]
    assert len(errors) == 1 and "unknown format 'nope'" in errors[0], result.stderr


@pytest.mark.parametrize("command", ["steps", "report", "compare", "gate"])
def test_skip_warmup_has_one_default(command: str) -> None:
    text = " ".join(CliRunner().invoke(cli, [command, "--help"]).stdout.split())
    text = text.split("Options:", 1)[1]
    assert "--skip-warmup N Drop the first N iterations of each rank" in text
    assert f"[default: {DEFAULT_SKIP_WARMUP};" in text.split("--skip-warmup", 1)[1][:200]
