"""GP002: which names are copying getters (registry, options, pyproject, the scanned code's own
definitions), and the self-pairing of one helper call with itself."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.errors import InputError
from gilprof.lint import DEFAULT_GETTERS, lint_paths, lint_source, project_getters

ROUTE = """
def route(requests):
    ordered = sorted(requests, key=lambda r: len(r.{name}))
    return [r.{name}[:8] for r in ordered]
"""


def gp002_lines(source: str, **options: Any) -> list[int]:
    return [f.line for f in lint_source(textwrap.dedent(source), **options) if f.rule == "GP002"]


def test_builtin_getters_are_tensorrt_llm_bindings_and_not_prompt_token_ids() -> None:
    assert "input_token_ids" in DEFAULT_GETTERS
    assert "prompt_token_ids" not in DEFAULT_GETTERS
    assert gp002_lines(ROUTE.format(name="input_token_ids")) == [4]
    assert gp002_lines(ROUTE.format(name="prompt_token_ids")) == []


@pytest.mark.parametrize(
    "definition",
    [
        "@dataclass\nclass Request:\n    input_token_ids: list[int]\n",
        "class Request:\n    def __init__(self, ids):\n        self.input_token_ids = ids\n",
        "class Request:\n    __slots__ = ('input_token_ids',)\n",
        "class Request:\n    @property\n    def input_token_ids(self):\n        return self._ids\n",
        "class Request:\n    @cached_property\n    def input_token_ids(self):\n        return list(self._ids)\n",
    ],
    ids=["dataclass-field", "self-attribute", "slots", "plain-property", "cached-property"],
)
def test_a_name_the_code_defines_without_copying_is_not_a_getter(definition: str) -> None:
    assert gp002_lines(definition + ROUTE.format(name="input_token_ids")) == []


@pytest.mark.parametrize(
    "body",
    [
        "return list(self._ids)",
        "return [t for t in self._ids]",
        "return self._ids.copy()",
        "return copy.deepcopy(self._ids)",
        "return tuple(self._ids)",
        "out = sorted(self._ids)\n        return out",
        "return [*self._ids]",
    ],
)
def test_a_property_whose_body_builds_a_container_is_a_getter(body: str) -> None:
    definition = f"class Request:\n    @property\n    def token_list(self):\n        {body}\n"
    source = definition + ROUTE.format(name="token_list")
    assert gp002_lines(source) == [source.count("\n")]  # the loop's line, the last


def test_copying_property_in_one_file_counts_for_another(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(
        "class Request:\n    @property\n    def token_list(self):\n        return list(self._t)\n"
    )
    (tmp_path / "router.py").write_text(ROUTE.format(name="token_list"))
    assert [(Path(f.path).name, f.line) for f in lint_paths([tmp_path]).findings] == [
        ("router.py", 4)
    ]
    # ... unless another class defines the same name as a plain attribute
    (tmp_path / "other.py").write_text("class Other:\n    token_list: list\n")
    assert lint_paths([tmp_path]).findings == ()


def test_explicit_getters_count_even_where_the_code_defines_a_field() -> None:
    source = "class R:\n    beams: list\n" + ROUTE.format(name="beams")
    assert gp002_lines(source) == []
    assert gp002_lines(source, extra_getters=["beams"]) == [6]


def test_getters_from_the_nearest_pyproject(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "router.py").write_text(ROUTE.format(name="beams"))
    (tmp_path / "pyproject.toml").write_text('[tool.gilprof.lint]\ngetters = ["beams"]\n')
    assert [f.line for f in lint_paths([project / "src"]).findings] == [4]
    (project / "pyproject.toml").write_text("[project]\nname = 'proj'\n")  # nearest wins
    assert lint_paths([project / "src"]).findings == ()
    (project / "pyproject.toml").write_text('[tool.gilprof.lint]\ngetters = ["beams"]\n')
    assert project_getters(project / "src") == ("beams",)
    assert [f.line for f in lint_paths([project / "src"]).findings] == [4]
    assert lint_paths([project / "src"], project_config=False).findings == ()
    (project / "pyproject.toml").write_text("[tool.gilprof.lint]\ngetters = 'beams'\n")
    with pytest.raises(InputError, match="must be a list of attribute names"):
        lint_paths([project / "src"])


def test_pyproject_without_the_table_adds_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    assert project_getters(tmp_path / "a.py") == ()


def test_cli_getter_and_bad_pyproject(tmp_path: Path) -> None:
    (tmp_path / "r.py").write_text(ROUTE.format(name="beams"))
    runner = CliRunner()
    result = runner.invoke(cli, ["lint", str(tmp_path), "--format", "json", "--getter", "beams"])
    assert result.exit_code == 1
    assert [f["line"] for f in json.loads(result.stdout)["findings"]] == [4]
    assert runner.invoke(cli, ["lint", str(tmp_path)]).exit_code == 0
    (tmp_path / "pyproject.toml").write_text("[tool.gilprof.lint\n")
    result = runner.invoke(cli, ["lint", str(tmp_path)])
    assert result.exit_code == 2 and "pyproject.toml" in result.stderr


def test_a_helper_call_is_never_paired_with_itself() -> None:
    """vLLM's scheduler: `self._handle_stopped_request(request)` whose helper reads a getter
    twice was reported as reading it again 'first at' its own line."""
    source = """
        class Scheduler:
            def _handle_stopped(self, request):
                if request.input_token_ids:
                    return len(request.input_token_ids)
                return 0

            def update(self, requests):
                for request in requests:
                    self._handle_stopped(request)
        """
    assert gp002_lines(source) == []
    twice = source.replace(
        "self._handle_stopped(request)",
        "self._handle_stopped(request)\n                    self._handle_stopped(request)",
    )
    assert gp002_lines(twice) == [11]


def test_recipe_lint_getters_count_even_where_the_code_defines_a_field(tmp_path: Path) -> None:
    (tmp_path / "r.py").write_text(
        "class R:\n    input_token_ids: list\n" + ROUTE.format(name="input_token_ids")
    )
    runner = CliRunner()
    assert runner.invoke(cli, ["lint", str(tmp_path)]).exit_code == 0
    result = runner.invoke(cli, ["lint", str(tmp_path), "--recipe", "trtllm-serve"])
    assert result.exit_code == 1 and "GP002" in result.stdout
    result = runner.invoke(cli, ["lint", str(tmp_path), "--recipe", "no-such-recipe"])
    assert result.exit_code == 2 and "unknown recipe" in result.stderr
