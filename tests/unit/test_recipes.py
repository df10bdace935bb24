"""Recipes: every shipped recipe validates; bad recipes fail with file + key; CLI list/show."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from gilprof.cli.main import cli
from gilprof.errors import InputError
from gilprof.model import function_name_matches
from gilprof.recipes import (
    Recipe,
    TargetSpec,
    WatchedFunction,
    builtin_names,
    list_recipes,
    load_recipe,
    parse_recipe,
)

REQUIRED = (
    "trtllm-disagg-gen",
    "trtllm-disagg-ctx",
    "trtllm-serve",
    "vllm",
    "sglang",
    "torchrun",
    "mpi-generic",
    "disagg-gen-example",
)

MINIMAL = 'name = "x"\ndescription = "a recipe"\n'


def write(tmp_path: Path, body: str, name: str = "x.toml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def input_error(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_recipe(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    return message


# --- shipped recipes --------------------------------------------------------------------------


def test_builtin_recipes_ship_as_package_data() -> None:
    data = resources.files("gilprof") / "recipes_data"
    assert data.is_dir()
    shipped = sorted(e.name[:-5] for e in data.iterdir() if e.name.endswith(".toml"))
    assert shipped == builtin_names()


def test_every_shipped_recipe_loads_and_validates() -> None:
    recipes = list_recipes()
    assert [r.name for r in recipes] == builtin_names()
    for recipe in recipes:
        assert recipe.source == f"recipes/{recipe.name}.toml"
        assert recipe.description and recipe.text
        assert load_recipe(recipe.name) == recipe
        for entry in recipe.watch:
            assert entry.why.strip(), (recipe.name, entry.function)
        for pattern in (recipe.target.match, recipe.target.parent_match):
            if pattern is not None:
                re.compile(pattern)
        json.dumps(recipe.to_dict())


@pytest.mark.parametrize("name", REQUIRED)
def test_required_recipe_exists(name: str) -> None:
    assert name in builtin_names()
    recipe = load_recipe(name)
    assert recipe.sampling.mode in ("states", "gil", "wall", "cpu")
    assert recipe.watch, f"{name} watches nothing"


def test_trtllm_gen_recipe_covers_the_known_hot_spots() -> None:
    recipe = load_recipe("trtllm-disagg-gen")
    names = recipe.watch_names()
    for wanted in (
        "safe_broadcast",
        "_balance_requests_across_ranks",
        "PyExecutor._fetch_new_requests",
        "PyExecutor._executor_loop_overlap",
        "RequestBroadcaster._broadcast_requests",
        "_broadcast_new_requests",
        "PyExecutor._handle_responses",
        "_pickle_loads",
    ):
        assert wanted in names
    assert recipe.target.role == "GEN"
    assert recipe.target.matches_thread("await_response_thread")
    assert recipe.target.matches_thread("Thread-3 (_event_loop_wrapper)")
    broadcast = recipe.watched(
        "safe_broadcast", "/x/tensorrt_llm/_torch/distributed/communicator.py"
    )
    assert broadcast is not None
    assert broadcast.fix == "gilprof.reference.broadcast.safe_broadcast"
    # Qualnames as py-spy reports them on 3.11+ (class of the current and of the older layout).
    assert recipe.watched("DefaultADPRouter._balance_requests_across_ranks") is not None
    assert recipe.watched("ExecutorRequestQueue._balance_requests_across_ranks") is not None
    assert recipe.steps is not None and recipe.steps.parser == "trtllm"
    assert "input_token_ids" in recipe.lint_getters


def test_example_recipe_matches_the_bundled_server() -> None:
    recipe = load_recipe("disagg-gen-example")
    assert recipe.target.rank == 0
    assert recipe.target.matches_thread("executor-loop")
    assert recipe.target.matches_thread("ingress")
    assert {"safe_broadcast", "_balance_requests_across_ranks"} <= set(recipe.watch_names())
    assert recipe.target.match is not None
    assert re.search(recipe.target.match, "python examples/disagg_gen/server.py --requests 64")
    assert re.search(recipe.target.match, "/usr/bin/python3 -m disagg_gen --impl before")
    assert not re.search(recipe.target.match, "python -m disagg_gen_other")
    assert "broadcast_sample_state" in recipe.watch_names()
    assert recipe.steps is not None and recipe.steps.parser == "trtllm"


@pytest.mark.parametrize("name", ["trtllm-disagg-gen", "trtllm-disagg-ctx", "trtllm-serve"])
def test_trtllm_recipes_watch_functions_that_exist_upstream(name: str) -> None:
    recipe = load_recipe(name)
    names = set(recipe.watch_names())
    # An attribute holding an AwaitResponseHelper, never a frame name.
    assert "_await_response_helper" not in names
    assert {"await_response_task", "AwaitResponseHelper.__call__"} <= names
    assert recipe.watched("RpcWorker.await_response_task") is not None
    # Older and newer name of the fetch: a version has one or the other.
    assert {
        "PyExecutor._fetch_new_requests",
        "PyExecutor._fetch_and_activate_new_requests",
    } <= names
    # Pipeline parallelism: the broadcast_sample_state_handler thread and its loop.
    assert recipe.target.matches_thread("broadcast_sample_state_handler")
    assert recipe.watched("PyExecutor._broadcast_sample_state_loop") is not None


def test_sglang_recipe_watches_current_and_older_layouts() -> None:
    recipe = load_recipe("sglang")
    names = set(recipe.watch_names())
    assert {"SchedulerRequestReceiver.recv_requests", "Scheduler.recv_requests"} <= names
    for side in ("prefill", "decode"):
        mixin = f"SchedulerDisaggregation{side.capitalize()}Mixin"
        for loop in ("normal", "overlap"):
            assert recipe.watched(f"{mixin}.event_loop_{loop}_disagg_{side}") is not None


@pytest.mark.parametrize(
    ("name", "cmdline", "expected"),
    [
        ("trtllm-disagg-gen", "python3 -m tensorrt_llm.llmapi.mgmn_leader_node", True),
        ("trtllm-disagg-gen", "python3 -m tensorrt_llm.llmapi.mgmn_worker_node", False),
        ("trtllm-serve", "/usr/bin/python3 -m mpi4py.futures.server", True),
        ("vllm", "VLLM::EngineCore", True),
        ("vllm", "VLLM::EngineCore_DP0", True),
        ("vllm", "vllm serve meta-llama/Llama-3.1-8B", False),
        ("sglang", "sglang::scheduler", True),
        ("sglang", "sglang::scheduler_TP0", True),
        ("sglang", "sglang::scheduler_DP0_TP0_EP0", True),
        ("sglang", "sglang::scheduler_TP1", False),
        ("sglang", "sglang::scheduler_DP0_TP12", False),
        ("sglang", "sglang::detokenizer", False),
        # TP0 of every other DP/PP group is not rank 0 (sglang 0.5.23 titles).
        ("sglang", "sglang::scheduler_DP1_TP0", False),
        ("sglang", "sglang::scheduler_PP1_TP0", False),
        ("sglang", "sglang::scheduler_DP0_PP0_ATTN_CP1_TP0", False),
        ("sglang", "sglang::scheduler_DP0_PP0_TP0_EP0", True),
        # vLLM 0.34.0: API servers as children titled VLLM::APIServer_N / _DP<n>; deprecated shim.
        ("vllm-api-server", "VLLM::APIServer_0", True),
        ("vllm-api-server", "VLLM::APIServer_3", True),
        ("vllm-api-server", "VLLM::APIServer_DP1", True),
        ("vllm-api-server", "python -m vllm.entrypoints.openai.api_server --model m", True),
        ("vllm-api-server", "python -m vllm.entrypoints.launchers.api_server.entry", True),
        ("vllm-api-server", "VLLM::EngineCore_DP0", False),
    ],
)
def test_target_match_patterns(name: str, cmdline: str, expected: bool) -> None:
    pattern = load_recipe(name).target.match
    assert pattern is not None
    assert bool(re.search(pattern, cmdline)) is expected


def test_disagg_parent_patterns_tell_gen_from_ctx() -> None:
    gen = load_recipe("trtllm-disagg-gen").target.parent_match
    ctx = load_recipe("trtllm-disagg-ctx").target.parent_match
    assert gen is not None and ctx is not None
    gen_argv = "bash start_worker.sh GEN 0 /models/ds 8336 e2e 2880 true false /logs false gen.yaml"
    ctx_argv = gen_argv.replace("GEN", "CTX").replace("gen.yaml", "ctx.yaml")
    assert re.search(gen, gen_argv) and not re.search(gen, ctx_argv)
    assert re.search(ctx, ctx_argv) and not re.search(ctx, gen_argv)


# --- name matching ----------------------------------------------------------------------------


# wanted: (sampled names it matches, sampled names it does not)
NAME_MATCHES: dict[str, tuple[list[str], list[str]]] = {
    "safe_broadcast": (["safe_broadcast"], ["unsafe_broadcast"]),
    "_balance_requests_across_ranks": (["DefaultADPRouter._balance_requests_across_ranks"], []),
    "DefaultADPRouter._balance_requests_across_ranks": (
        ["_balance_requests_across_ranks"],
        ["Other._balance_requests_across_ranks"],
    ),
    "broadcast_requests": ([], ["RequestBroadcaster._broadcast_requests"]),
    "output_handler": (["AsyncLLM._run_output_handler.<locals>.output_handler"], []),
    "Scheduler.schedule": (["Scheduler.schedule"], ["Scheduler.schedule_batch"]),
}


@pytest.mark.parametrize(
    ("wanted", "sampled", "expected"),
    [
        (wanted, sampled, expected)
        for wanted, (matched, unmatched) in NAME_MATCHES.items()
        for expected, names in ((True, matched), (False, unmatched))
        for sampled in names
    ],
)
def test_function_name_matches(wanted: str, sampled: str, expected: bool) -> None:
    assert function_name_matches(wanted, sampled) is expected


def test_watched_function_file_is_a_basename_filter() -> None:
    entry = WatchedFunction(function="EngineCore.step", why="w", file="core.py")
    assert entry.matches("EngineCore.step", "/site-packages/vllm/v1/engine/core.py")
    assert entry.matches("EngineCore.step")  # sampler gave no file
    assert not entry.matches("EngineCore.step", "/elsewhere/other_core.py")


def test_thread_patterns_are_globs() -> None:
    target = TargetSpec(threads=("Thread-* (_event_loop_wrapper)", "ingress"))
    assert target.matches_thread("Thread-12 (_event_loop_wrapper)")
    assert target.matches_thread("ingress")
    assert not target.matches_thread("ingress-2")


def test_a_profile_without_any_expected_thread_is_called_out() -> None:
    target = TargetSpec(threads=("executor-loop", "ingress"))
    assert target.missing_threads(["MainThread", "executor-loop"]) is None
    why = target.missing_threads(["MainThread", "pydevd.Reader"])
    assert why is not None and "executor-loop" in why and "MainThread" in why
    assert TargetSpec().missing_threads(["MainThread"]) is None  # nothing expected
    assert target.missing_threads([]) is None  # nothing seen: the empty-profile warning says it


def test_report_warns_when_the_recipe_threads_are_absent(tmp_path: Path) -> None:
    from .builders import make_profile, sample

    path = tmp_path / "p.json"
    make_profile([(100, [sample("worker", "loop", count=50)])]).save(path)
    result = CliRunner().invoke(cli, ["report", str(path), "--recipe", "disagg-gen-example"])
    assert result.exit_code == 0, result.output
    assert "none of the recipe's threads" in result.stderr
    result = CliRunner().invoke(cli, ["report", str(path)])
    assert "recipe" not in result.stderr


# --- bad recipes ------------------------------------------------------------------------------


def test_minimal_recipe_gets_defaults(tmp_path: Path) -> None:
    recipe = load_recipe(str(write(tmp_path, MINIMAL)))
    assert recipe == Recipe(name="x", description="a recipe", source=str(tmp_path / "x.toml"))
    assert recipe.target.rank == 0 and recipe.sampling.rate is None and recipe.gate.is_empty()


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    message = input_error(write(tmp_path, MINIMAL + "[sampling\nrate = 1\n"))
    assert "not valid TOML" in message


def test_rate_given_as_text(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + '[sampling]\nrate = "fast"\n')
    assert input_error(path) == f'{path}: sampling.rate: expected a number > 0, got "fast"'


@pytest.mark.parametrize(
    ("body", "key", "expected"),
    [
        ("colour = 1\n", "colour", "unknown key"),
        ("[target]\nrnak = 0\n", "target.rnak", "unknown key"),
        ('[[watch]]\nfuncion = "f"\nwhy = "w"\n', "watch[0].funcion", "unknown key"),
        ('[target]\nrank = "0"\n', "target.rank", 'expected an integer >= 0, got "0"'),
        ("[target]\nrank = -1\n", "target.rank", "expected an integer >= 0, got -1"),
        ("[target]\nrank = true\n", "target.rank", "expected an integer >= 0, got true"),
        ('[target]\nthreads = "ingress"\n', "target.threads", "expected a list of strings"),
        ("[target]\nthreads = [1]\n", "target.threads[0]", "expected a non-empty string"),
        ('[target]\nlauncher = ["mpirun"]\n', "target.launcher", "unknown key"),
        ('[target]\nmatch = "(unclosed"\n', "target.match", "expected a valid regular expression"),
        ('[target]\nrole_env = "NOT A NAME"\n', "target.role_env", "environment variable name"),
        (
            '[sampling]\nmode = "fast"\n',
            "sampling.mode",
            'expected one of "states", "gil", "wall", "cpu"',
        ),
        ("[sampling]\nrate = -5\n", "sampling.rate", "expected a number > 0, got -5"),
        ("[sampling]\nrate = 0\n", "sampling.rate", "expected a number > 0"),
        ("[sampling]\nrate = nan\n", "sampling.rate", "expected a number > 0"),
        ("[sampling]\nduration = true\n", "sampling.duration", "expected a number > 0, got true"),
        ('[sampling]\nnative = "yes"\n', "sampling.native", "expected true or false"),
        ('[steps]\nparser = "csv"\n', "steps.parser", 'expected one of "trtllm", "jsonl"'),
        ('[steps]\nlog = "x.log"\n', "steps.parser", "missing"),
        ("[gate]\nmax_utilization = 150\n", "gate.max_utilization", "<= 100"),
        ("[gate]\nmax_regression = -1\n", "gate.max_regression", "expected a number >= 0"),
        ("[gate.max_share]\nsafe_broadcast = 101\n", "gate.max_share.safe_broadcast", "<= 100"),
        ('[gate.max_share]\nsafe_broadcast = "5%"\n', "gate.max_share.safe_broadcast", "a number"),
        ('[[watch]]\nfunction = "f"\n', "watch[0].why", "missing"),
        ('[[watch]]\nwhy = "w"\n', "watch[0].function", "missing"),
        ('[[watch]]\nfunction = "f g"\nwhy = "w"\n', "watch[0].function", "function name"),
        ('[[watch]]\nfunction = "f"\nwhy = "w"\nfile = "a/b.py"\n', "watch[0].file", "basename"),
        (
            '[[watch]]\nfunction = "f"\nwhy = "w"\nfix = "os.system(1)"\n',
            "watch[0].fix",
            "dotted path",
        ),
        (
            '[[watch]]\nfunction = "f"\nwhy = "w"\n[[watch]]\nfunction = "f"\nwhy = "again"\n',
            "watch[1].function",
            "duplicate of watch[0]",
        ),
        ('lint_getters = ["ok", "not ok"]\n', "lint_getters[1]", "getter name"),
    ],
)
def test_bad_recipe_names_file_and_key(tmp_path: Path, body: str, key: str, expected: str) -> None:
    path = write(tmp_path, MINIMAL + body)
    message = input_error(path)
    assert message.startswith(f"{path}: {key}: "), message
    assert expected in message, message


def test_missing_name_and_bad_name(tmp_path: Path) -> None:
    assert "name: missing" in input_error(write(tmp_path, 'description = "d"\n'))
    bad = write(tmp_path, 'name = "Has Spaces"\ndescription = "d"\n', "y.toml")
    assert ": name: expected a lowercase name" in input_error(bad)


def test_recipe_strings_are_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    body = (
        'name = "x"\n'
        f"description = \"__import__('pathlib').Path('{marker}').touch()\"\n"
        f"[target]\nmatch = '{marker}'\n"
        f"[[watch]]\nfunction = \"f\"\nwhy = \"__import__('os').system('touch {marker}')\"\n"
    )
    recipe = load_recipe(str(write(tmp_path, body)))
    assert not marker.exists()
    assert "__import__" in recipe.description


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(InputError) as info:
        load_recipe("trtllm-gen")
    message = str(info.value)
    assert "unknown recipe 'trtllm-gen'" in message
    for name in REQUIRED:
        assert name in message


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such recipe file"):
        load_recipe(str(tmp_path / "absent.toml"))


def test_parse_recipe_is_pure() -> None:
    recipe = parse_recipe(MINIMAL + '[sampling]\nmode = "wall"\nrate = 250\n', "inline")
    assert recipe.source == "inline" and recipe.sampling.mode == "wall"
    assert recipe.sampling.rate == 250.0


# --- CLI --------------------------------------------------------------------------------------


def run(*args: str):
    return CliRunner().invoke(cli, ["recipes", *args])


def test_cli_lists_every_recipe() -> None:
    result = run()
    assert result.exit_code == 0, result.output
    for name in builtin_names():
        assert name in result.output


def test_cli_plain_and_json_lists() -> None:
    plain = run("--plain")
    assert plain.exit_code == 0
    rows = [line.split("\t") for line in plain.output.strip().splitlines()]
    assert [row[0] for row in rows] == builtin_names()
    listed = json.loads(run("--json").output)
    assert [entry["name"] for entry in listed] == builtin_names()
    assert all(entry["description"] for entry in listed)


def test_cli_show_prints_toml_and_summary() -> None:
    result = run("--show", "trtllm-disagg-gen")
    assert result.exit_code == 0, result.output
    assert 'name = "trtllm-disagg-gen"' in result.output
    assert "recipe trtllm-disagg-gen (recipes/trtllm-disagg-gen.toml): valid" in result.output
    assert "fix: gilprof.reference.broadcast.safe_broadcast" in result.output


def test_cli_show_json_and_user_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + '[[watch]]\nfunction = "hot"\nwhy = "w"\n')
    result = run("--show", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["name"] == "x" and data["watch"][0]["function"] == "hot"
    assert data["source"] == str(path)


def test_cli_unknown_name_exits_2() -> None:
    result = run("--show", "no-such-stack")
    assert result.exit_code == 2
    assert "unknown recipe 'no-such-stack'" in result.output
    assert "trtllm-disagg-gen" in result.output
    assert "Traceback" not in result.output


def test_cli_bad_file_exits_2_naming_key(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + '[sampling]\nmode = "fast"\n')
    result = run("--show", str(path))
    assert result.exit_code == 2
    assert f"{path}: sampling.mode: expected one of" in result.output


def test_cli_json_and_plain_conflict() -> None:
    result = run("--json", "--plain")
    assert result.exit_code == 2
