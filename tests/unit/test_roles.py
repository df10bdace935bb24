"""Role of a rank (gen, ctx, ...) from its environment, launch command lines, config, recipe."""

from __future__ import annotations

import builtins

import pytest

from gilprof.recipes import parse_recipe
from gilprof.sampling.roles import (
    CommandLine,
    Role,
    RoleRules,
    disagg_instances,
    find_role,
    normalise,
    parse_simple_yaml,
)

from .builders import attach_request

LEADER = CommandLine(300, ("python3", "-m", "tensorrt_llm.llmapi.mgmn_leader_node"))
LAUNCH = CommandLine(200, ("bash", "/usr/bin/trtllm-llmapi-launch", "trtllm-serve", "model"))
GEN_WORKER = CommandLine(100, ("bash", "/work/scripts/start_worker.sh", "GEN", "0", "model"))
CTX_WORKER = CommandLine(101, ("/bin/bash", "./start_worker.sh", "CTX", "3"))
CONFIG = """\
hostname: localhost
port: 8000
backend: pytorch
context_servers:
  num_instances: 2
  tensor_parallel_size: 2
  urls:
    - "localhost:8001"
    - "localhost:8002"
generation_servers:
  num_instances: 1
  tensor_parallel_size: 4   # the gen instance is wider
  urls:
    - "localhost:8003"
"""


def no_files(_path: str) -> str | None:
    return None


def test_role_names_are_normalised():
    assert [
        normalise(t)
        for t in ("GEN", "generation", "Decode", "CTX", "context", "prefill", " Embed ")
    ] == ["gen", "gen", "gen", "ctx", "ctx", "ctx", "embed"]


def test_start_worker_argument_of_an_ancestor():
    role = find_role({}, [LEADER, LAUNCH, GEN_WORKER], 0, no_files)
    assert role == Role("gen", "start_worker.sh argument (pid 100)")
    assert find_role({}, [LEADER, CTX_WORKER], 0, no_files).name == "ctx"


def test_gilprof_role_variable_comes_first():
    role = find_role({"GILPROF_ROLE": "ctx"}, [LEADER, GEN_WORKER], 0, no_files)
    assert role == Role("ctx", "GILPROF_ROLE")


@pytest.mark.parametrize(
    "path,role",
    [
        ("./gen_extra-llm-api-config.yml", "gen"),
        ("/cfg/ctx_extra-llm-api-config.yaml", "ctx"),
        ("context_extra-llm-api-config.yml", "ctx"),
        ("extra-llm-api-config.yml", None),  # says neither
        ("gen_or_ctx.yml", None),  # says both
        ("/gen/extra.yml", None),  # a folder's name is not the file's
    ],
)
def test_extra_llm_api_options_path(path, role):
    for argv in (
        ("trtllm-serve", "m", "--extra_llm_api_options", path),
        ("trtllm-serve", "m", f"--extra_llm_api_options={path}"),
    ):
        found = find_role({}, [CommandLine(5, argv)], 0, no_files)
        assert (found.name if found else None) == role


def test_nearest_ancestor_wins():
    inner = CommandLine(7, ("trtllm-serve", "m", "--extra_llm_api_options", "ctx.yml"))
    assert find_role({}, [LEADER, inner, GEN_WORKER], 0, no_files).name == "ctx"


def worker(cwd: str | None = "/srv") -> CommandLine:
    return CommandLine(
        50,
        (
            "/usr/bin/python3",
            "/usr/local/bin/trtllm-serve",
            "disaggregated_mpi_worker",
            "-c",
            "disagg.yaml",
        ),
        cwd,
    )


def test_instance_layout_of_a_disaggregated_config():
    kinds = [(i.kind, i.ranks) for i in disagg_instances(CONFIG)]
    assert kinds == [("ctx", 2), ("ctx", 2), ("gen", 4)]
    assert disagg_instances("disagg_cluster:\n  cluster_uri: etcd://x\n") is None


def test_minimal_yaml_reader_without_pyyaml(monkeypatch):
    real_import = builtins.__import__

    def no_yaml(name, *args, **kwargs):
        if name == "yaml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    assert [(i.kind, i.ranks) for i in disagg_instances(CONFIG)] == [
        ("ctx", 2),
        ("ctx", 2),
        ("gen", 4),
    ]
    parsed = parse_simple_yaml(CONFIG)
    assert parsed["port"] == "8000" and parsed["generation_servers"] == {
        "num_instances": "1",
        "tensor_parallel_size": "4",
    }


@pytest.mark.parametrize(
    "env,rank,role",
    [
        ({"TLLM_DISAGG_INSTANCE_IDX": "1"}, 0, "ctx"),
        ({"TLLM_DISAGG_INSTANCE_IDX": "2"}, 0, "gen"),
        ({}, 3, "ctx"),  # ranks 0-1: ctx 0, 2-3: ctx 1, 4-7: gen
        ({}, 4, "gen"),
        ({}, 7, "gen"),
        ({}, 8, None),  # beyond the layout
        ({"TLLM_DISAGG_INSTANCE_IDX": "9"}, 0, "instance-9"),  # the config has 3 instances
    ],
)
def test_disaggregated_mpi_worker(env, rank, role):
    read = {"/srv/disagg.yaml": CONFIG}.get
    found = find_role(env, [worker()], rank, read)
    assert (found.name if found else None) == role
    if found and role != "instance-9":
        assert "disaggregated_mpi_worker (pid 50)" in found.source
        assert "disagg.yaml" in found.source


def test_unreadable_config_reports_the_instance_index():
    found = find_role({"TLLM_DISAGG_INSTANCE_IDX": "2"}, [worker()], 0, no_files)
    assert found == Role(
        "instance-2", "disaggregated_mpi_worker (pid 50), TLLM_DISAGG_INSTANCE_IDX=2"
    )
    assert find_role({}, [worker()], 0, no_files) is None


def test_recipe_rules_come_last():
    rules = RoleRules("r", role="GEN", parent_match=r"my_launch\.sh .*--gen")
    launch = CommandLine(9, ("bash", "my_launch.sh", "--gen"))
    assert find_role({}, [LEADER, launch], 0, no_files, rules) == Role(
        "gen", "recipe r: parent_match (pid 9)"
    )
    # the rank's own command line is not an ancestor's
    assert find_role({}, [launch], 0, no_files, rules) is None
    # gilprof's own sources win over the recipe's
    assert find_role({}, [LEADER, CTX_WORKER, launch], 0, no_files, rules).name == "ctx"
    by_env = RoleRules("r", role_env="MY_ROLE")
    assert find_role({"MY_ROLE": "Prefill"}, [LEADER], 0, no_files, by_env) == Role(
        "ctx", "recipe r: MY_ROLE"
    )
    assert find_role({"MY_ROLE": "4"}, [LEADER], 0, no_files, by_env).name == "instance-4"


def test_recipe_target_gives_role_rules():
    recipe = parse_recipe(
        'name = "x"\ndescription = "d"\n[target]\nrole = "GEN"\n'
        "parent_match = 'start_worker\\.sh .*GEN'\n"
        'role_env = "TLLM_DISAGG_INSTANCE_IDX"\n',
        "x.toml",
    )
    rules = recipe.target.role_rules(recipe.name)
    assert rules == RoleRules(
        "x", role="GEN", parent_match=r"start_worker\.sh .*GEN", role_env="TLLM_DISAGG_INSTANCE_IDX"
    )
    plain = parse_recipe('name = "y"\ndescription = "d"\n[target]\nrank = 0\n', "y.toml")
    assert plain.target.role_rules("y") is None


def test_attach_takes_role_and_role_rules_from_the_recipe(monkeypatch):
    selection = attach_request(
        monkeypatch, ["--recipe", "trtllm-disagg-gen", "-d", "1"]
    ).wanted.selection
    assert selection.role == "GEN"
    assert attach_request(monkeypatch, ["--recipe", "trtllm-disagg-gen"]).wanted.rank == 0
    # with a role, the recipe's parent_match tells the role; it no longer filters
    assert selection.parent_match is None
    assert selection.rules.parent_match == r"start_worker\.sh .*GEN"
    request = attach_request(monkeypatch, ["--recipe", "trtllm-disagg-gen", "--role", "ctx"])
    assert request.wanted.selection.role == "ctx"
    selection = attach_request(monkeypatch, ["--recipe", "torchrun"]).wanted.selection  # a filter
    assert selection.role is None and selection.parent_match and selection.rules is None
    assert (
        attach_request(monkeypatch, ["--role", "gen", "--ranks", "all"]).wanted.selection.role
        == "gen"
    )
