"""Which instance of a disaggregated deployment a rank serves: its role (gen, ctx, ...).

A deployment runs several instances, each with its own rank 0, often on one node. The role
is read, first match wins, from:

1. `GILPROF_ROLE` in the rank's environment (set by the user);
2. the command lines of the rank and its ancestors, nearest first, as TensorRT-LLM launches
   them: `start_worker.sh <CTX|GEN> ...`, or an `--extra_llm_api_options` file whose name
   says gen or ctx (`gen_extra-llm-api-config.yaml`);
3. `trtllm-serve disaggregated_mpi_worker -c CFG`: the instance index (`TLLM_DISAGG_INSTANCE_IDX`,
   or the global rank laid out over the config's instances) and the config's order, context
   servers first, then generation servers (tensorrt_llm/llmapi/disagg_utils.py);
4. the recipe's rules (`RoleRules`).

Pure logic: the caller reads processes and files and passes them in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

ROLE_VARIABLE = "GILPROF_ROLE"
INSTANCE_VARIABLE = "TLLM_DISAGG_INSTANCE_IDX"
ROLE_VARIABLES = (ROLE_VARIABLE, INSTANCE_VARIABLE)

_ALIASES = {
    "gen": "gen",
    "generation": "gen",
    "decode": "gen",
    "ctx": "ctx",
    "context": "ctx",
    "prefill": "ctx",
}
_WORDS = re.compile(r"[a-z]+")
_WORKER_SCRIPT = "start_worker.sh"
_EXTRA_OPTIONS = "--extra_llm_api_options"
_DISAGG_WORKER = "disaggregated_mpi_worker"


@dataclass(frozen=True)
class Role:
    name: str
    source: str  # where it was read, for the profile and error messages


@dataclass(frozen=True)
class CommandLine:
    """One process of the chain from the rank up to init: its PID, argv and working folder."""

    pid: int
    argv: tuple[str, ...]
    cwd: str | None = None


@dataclass(frozen=True)
class RoleRules:
    """A recipe's role rules: `role_env` names a variable holding the role; `role` is the role
    of a rank with an ancestor whose command line matches `parent_match`."""

    label: str
    role: str | None = None
    parent_match: str | None = None
    role_env: str | None = None


def normalise(text: str) -> str:
    """gen/generation/decode -> gen, ctx/context/prefill -> ctx, anything else lowercased."""
    value = text.strip().lower()
    return _ALIASES.get(value, value)


def _role_in_name(path: str) -> str | None:
    """gen or ctx when the file name says so as a word (gen_config.yaml, ctx-extra.yml)."""
    found = {_ALIASES[w] for w in _WORDS.findall(os.path.basename(path).lower()) if w in _ALIASES}
    return found.pop() if len(found) == 1 else None


def _option_value(argv: Sequence[str], option: str) -> str | None:
    for index, arg in enumerate(argv):
        if arg == option and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return None


def role_from_command(line: CommandLine) -> Role | None:
    """The role a TensorRT-LLM launch command line states, if it states one."""
    argv = line.argv
    for index, arg in enumerate(argv[:-1]):
        if os.path.basename(arg) == _WORKER_SCRIPT:
            return Role(normalise(argv[index + 1]), f"{_WORKER_SCRIPT} argument (pid {line.pid})")
    path = _option_value(argv, _EXTRA_OPTIONS)
    role = _role_in_name(path) if path else None
    if role:
        return Role(role, f"{_EXTRA_OPTIONS} {os.path.basename(path or '')} (pid {line.pid})")
    return None


@dataclass(frozen=True)
class Instance:
    kind: str  # "ctx" or "gen"
    ranks: int


def disagg_instances(text: str) -> list[Instance] | None:
    """The instances a disaggregated config lays out, context first; None if it does not say
    (a `disagg_cluster` config registers workers dynamically)."""
    document = _load_yaml(text)
    if not isinstance(document, dict) or "disagg_cluster" in document:
        return None
    instances: list[Instance] = []
    for key, kind in (("context_servers", "ctx"), ("generation_servers", "gen")):
        section = document.get(key)
        if not isinstance(section, dict):
            continue
        count = _int(section.get("num_instances"), 1)
        ranks = 1
        for size in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"):
            ranks *= _int(section.get(size, document.get(size)), 1)
        instances += [Instance(kind, max(ranks, 1))] * count
    return instances or None


def _int(value: object, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return default


def _load_yaml(text: str) -> object:
    try:
        import yaml  # optional: not a dependency of gilprof
    except ImportError:
        return parse_simple_yaml(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def parse_simple_yaml(text: str) -> dict[str, object]:
    """The top-level keys and one level of nested `key: scalar` of a YAML mapping: all that
    the instance layout needs, without PyYAML. Lists and deeper levels are skipped."""
    top: dict[str, object] = {}
    section: dict[str, object] | None = None
    section_indent = -1
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith(("#", "-")):
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(":")
        if not sep:
            continue
        value = value.strip().strip("'\"")
        if indent == 0:
            section = None
            if value:
                top[key] = value
            else:
                section = {}
                top[key] = section
                section_indent = -1
        elif section is not None:
            if section_indent < 0:
                section_indent = indent
            if indent == section_indent and value:
                section[key] = value
    return top


def role_from_disagg_worker(
    line: CommandLine,
    env: Mapping[str, str],
    rank: int | None,
    read_file: Callable[[str], str | None],
) -> Role | None:
    """The role of a rank of `trtllm-serve disaggregated_mpi_worker -c CFG`: its instance's
    kind in the config, or "instance-N" when the config cannot be read or does not say."""
    if _DISAGG_WORKER not in line.argv:
        return None
    config = _option_value(line.argv, "-c") or _option_value(line.argv, "--config_file")
    instances = None
    if config:
        path = config if os.path.isabs(config) or not line.cwd else os.path.join(line.cwd, config)
        text = read_file(path)
        instances = disagg_instances(text) if text is not None else None
    index_text = env.get(INSTANCE_VARIABLE, "").strip()
    if index_text.isdigit():
        index, how = int(index_text), f"{INSTANCE_VARIABLE}={index_text}"
    elif instances is not None and rank is not None:
        found = _instance_of_rank(instances, rank)
        if found is None:
            return None
        index, how = found, f"rank {rank} in the config's layout"
    else:
        return None
    where = f"{_DISAGG_WORKER} (pid {line.pid}), {how}"
    if instances is not None and index < len(instances):
        return Role(instances[index].kind, f"{where}, {os.path.basename(config or '')}")
    return Role(f"instance-{index}", where)


def _instance_of_rank(instances: Sequence[Instance], rank: int) -> int | None:
    first = 0
    for index, instance in enumerate(instances):
        if rank < first + instance.ranks:
            return index
        first += instance.ranks
    return None


def role_from_rules(
    rules: RoleRules, env: Mapping[str, str], ancestors: Sequence[CommandLine]
) -> Role | None:
    if rules.role_env and env.get(rules.role_env, "").strip():
        value = env[rules.role_env].strip()
        name = f"instance-{value}" if value.isdigit() else normalise(value)
        return Role(name, f"recipe {rules.label}: {rules.role_env}")
    if rules.role and rules.parent_match:
        pattern = re.compile(rules.parent_match)
        for line in ancestors:
            if pattern.search(" ".join(line.argv)):
                return Role(
                    normalise(rules.role), f"recipe {rules.label}: parent_match (pid {line.pid})"
                )
    return None


def find_role(
    env: Mapping[str, str],
    chain: Sequence[CommandLine],
    rank: int | None,
    read_file: Callable[[str], str | None],
    rules: RoleRules | None = None,
) -> Role | None:
    """The rank's role. `chain`: the rank's own command line, then its ancestors' nearest first."""
    if env.get(ROLE_VARIABLE, "").strip():
        return Role(normalise(env[ROLE_VARIABLE]), ROLE_VARIABLE)
    for line in chain:
        role = role_from_command(line)
        if role is not None:
            return role
    for line in chain:
        role = role_from_disagg_worker(line, env, rank, read_file)
        if role is not None:
            return role
    if rules is not None:
        return role_from_rules(rules, env, chain[1:])
    return None


def read_small_file(path: str, limit: int = 1 << 20) -> str | None:
    """A config file's text, or None if it cannot be read or is not a small regular file."""
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > limit:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
