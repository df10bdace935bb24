"""Recipe TOML -> Recipe: every key checked for type and range, regexes compiled, nothing run."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gilprof.analysis.gate import GateBudgets
from gilprof.errors import InputError, one_line
from gilprof.recipes.native import native_section

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from gilprof.recipes.model import (
    SAMPLING_MODES,
    STEP_PARSERS,
    Recipe,
    SamplingDefaults,
    StartDefaults,
    StepsSpec,
    TargetSpec,
    WatchedFunction,
)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DOTTED_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# py-spy reports qualnames on 3.11+, including nested ones like `f.<locals>.g`.
FUNCTION_RE = re.compile(r"^[A-Za-z_<][A-Za-z0-9_<>.]*$")


def _show(value: Any) -> str:
    """A value as the user wrote it in TOML, short enough for a one-line message."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, int) and abs(value) >= 10**30:
        return "a huge integer"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


class _Checker:
    """Reads one parsed TOML document; every error names the file and the dotted key."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, key: str, message: str) -> InputError:
        return InputError(f"{self.label}: {one_line(key)}: {one_line(message)}")

    def expected(self, key: str, what: str, value: Any) -> InputError:
        return self.fail(key, f"expected {what}, got {_show(value)}")

    def table(self, value: Any, key: str, allowed: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.expected(key, "a table", value)
        for name in value:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                raise self.fail(where, f"unknown key; expected one of: {', '.join(allowed)}")
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.expected(key, "a non-empty string", value)
        return value

    def pattern(self, value: Any, key: str, pattern: re.Pattern[str], what: str) -> str:
        text = self.string(value, key)
        if not pattern.match(text):
            raise self.expected(key, what, value)
        return text

    def regex(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        try:
            re.compile(text)
        except re.error as exc:
            raise self.fail(
                key, f"expected a valid regular expression, got {_show(value)} ({exc})"
            ) from None
        return text

    def integer(self, value: Any, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.expected(key, f"an integer >= {minimum}", value)
        return value

    def number(
        self,
        value: Any,
        key: str,
        *,
        above: float | None = None,
        at_least: float | None = None,
        at_most: float | None = None,
    ) -> float:
        if above is not None:
            what = f"a number > {above:g}"
        elif at_least is not None:
            what = f"a number >= {at_least:g}"
        else:
            what = "a number"
        if at_most is not None:
            what += f" and <= {at_most:g}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.expected(key, what, value)
        try:
            number = float(value)
        except OverflowError:  # an integer beyond the float range
            raise self.expected(key, what, value) from None
        if (
            not math.isfinite(number)
            or (above is not None and number <= above)
            or (at_least is not None and number < at_least)
            or (at_most is not None and number > at_most)
        ):
            raise self.expected(key, what, value)
        return number

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.expected(key, "true or false", value)
        return value

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            raise self.expected(key, "one of " + ", ".join(f'"{c}"' for c in choices), value)
        return value

    def string_list(
        self, value: Any, key: str, pattern: re.Pattern[str] | None = None, what: str = ""
    ) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.expected(key, "a list of strings", value)
        items = []
        for index, item in enumerate(value):
            item_key = f"{key}[{index}]"
            if pattern is None:
                items.append(self.string(item, item_key))
            else:
                items.append(self.pattern(item, item_key, pattern, what))
        return tuple(items)


_SECTIONS = ("target", "sampling", "watch", "steps", "start", "gate", "lint_getters", "native")
_TOP_KEYS = ("name", "description", *_SECTIONS)
_START_KEYS = ("on", "on_log", "after")
_TARGET_KEYS = ("rank", "role", "match", "role_env", "parent_match", "threads")
_SAMPLING_KEYS = ("mode", "rate", "duration", "native")
_WATCH_KEYS = ("function", "file", "why", "fix")
_STEPS_KEYS = ("log", "parser", "loop_thread", "device_wait", "input_wait")
_GATE_KEYS: tuple[str, ...] = (
    "max_share",
    "max_utilization",
    "max_host_step_p50_ms",
    "max_regression",
)
_GATE_KEYS += ("max_wait", "max_blame", "max_ms_per_step")


def _target(check: _Checker, raw: Any) -> TargetSpec:
    data = check.table(raw, "target", _TARGET_KEYS)
    return TargetSpec(
        rank=check.integer(data["rank"], "target.rank", 0) if "rank" in data else 0,
        role=check.string(data["role"], "target.role") if "role" in data else None,
        match=check.regex(data["match"], "target.match") if "match" in data else None,
        role_env=check.pattern(
            data["role_env"], "target.role_env", IDENTIFIER_RE, "an environment variable name"
        )
        if "role_env" in data
        else None,
        parent_match=check.regex(data["parent_match"], "target.parent_match")
        if "parent_match" in data
        else None,
        threads=check.string_list(data.get("threads", []), "target.threads"),
    )


def _sampling(check: _Checker, raw: Any) -> SamplingDefaults:
    data = check.table(raw, "sampling", _SAMPLING_KEYS)
    return SamplingDefaults(
        mode=check.choice(data["mode"], "sampling.mode", SAMPLING_MODES)
        if "mode" in data
        else None,
        rate=check.number(data["rate"], "sampling.rate", above=0) if "rate" in data else None,
        duration=check.number(data["duration"], "sampling.duration", above=0)
        if "duration" in data
        else None,
        native=check.boolean(data["native"], "sampling.native") if "native" in data else None,
    )


def _watch(check: _Checker, raw: Any) -> tuple[WatchedFunction, ...]:
    if not isinstance(raw, list):
        raise check.expected("watch", "an array of tables ([[watch]])", raw)
    entries: list[WatchedFunction] = []
    seen: dict[tuple[str, str | None], int] = {}
    for index, item in enumerate(raw):
        key = f"watch[{index}]"
        data = check.table(item, key, _WATCH_KEYS)
        if "function" not in data:
            raise check.fail(f"{key}.function", "missing; expected a function name")
        if "why" not in data:
            raise check.fail(f"{key}.why", "missing; expected a note on why it is hot")
        function = check.pattern(
            data["function"], f"{key}.function", FUNCTION_RE, "a function name or qualname"
        )
        file = None
        if "file" in data:
            file = check.string(data["file"], f"{key}.file")
            if "/" in file or "\\" in file:
                raise check.expected(f"{key}.file", "a file basename (no directories)", file)
        fix = None
        if "fix" in data:
            fix = check.pattern(
                data["fix"], f"{key}.fix", DOTTED_PATH_RE, "a dotted path like pkg.module.func"
            )
        identity = (function, file)
        if identity in seen:
            raise check.fail(f"{key}.function", f"duplicate of watch[{seen[identity]}]")
        seen[identity] = index
        why = check.string(data["why"], f"{key}.why")
        entries.append(WatchedFunction(function=function, why=why.strip(), file=file, fix=fix))
    return tuple(entries)


def _functions(check: _Checker, data: dict[str, Any], key: str) -> tuple[str, ...]:
    if key not in data:
        return ()
    return check.string_list(data[key], f"steps.{key}", FUNCTION_RE, "a function name")


def _steps(check: _Checker, raw: Any) -> StepsSpec:
    data = check.table(raw, "steps", _STEPS_KEYS)
    has_parser = "parser" in data
    if not has_parser and "log" in data:
        raise check.fail("steps.parser", "missing; expected one of " + ", ".join(STEP_PARSERS))
    return StepsSpec(
        parser=check.choice(data["parser"], "steps.parser", STEP_PARSERS) if has_parser else None,
        log=check.string(data["log"], "steps.log") if "log" in data else None,
        loop_thread=(
            check.regex(data["loop_thread"], "steps.loop_thread") if "loop_thread" in data else None
        ),
        device_wait=_functions(check, data, "device_wait"),
        input_wait=_functions(check, data, "input_wait"),
    )


def _start(check: _Checker, raw: Any) -> StartDefaults:
    data = check.table(raw, "start", _START_KEYS)
    on_log = None  # with `on` too: `on` when gilprof launches the job, `on_log` when attached
    if "on_log" in data:
        on_log = check.string(data["on_log"], "start.on_log")
        path, colon, regex = on_log.partition(":")
        if not colon or not path or not regex:
            raise check.expected("start.on_log", 'FILE:REGEX, e.g. "gen.log:iter ="', on_log)
        check.regex(regex, "start.on_log")
    return StartDefaults(
        on=check.regex(data["on"], "start.on") if "on" in data else None,
        on_log=on_log,
        after=check.number(data["after"], "start.after", at_least=0) if "after" in data else None,
    )


def _percent_table(check: _Checker, data: dict, name: str, what: str) -> MappingProxyType:
    """[gate.NAME] as {key: percent, ms for max_ms_per_step}; function keys look like names."""
    out: dict[str, float] = {}
    unit, most = ("ms", None) if name == "max_ms_per_step" else ("percent", 100)
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise check.expected(f"gate.{name}", f"a table of {what} = {unit}", table)
    for item, limit in table.items():
        key = f"gate.{name}.{item}"
        if what == "function" and not FUNCTION_RE.match(item):
            raise check.expected(key, "a function name or qualname as the key", item)
        out[item] = check.number(limit, key, at_least=0, at_most=most)
    return MappingProxyType(out)


def _gate(check: _Checker, raw: Any) -> GateBudgets:
    data = check.table(raw, "gate", _GATE_KEYS)
    return GateBudgets(
        max_share=_percent_table(check, data, "max_share", "function"),
        max_wait=_percent_table(check, data, "max_wait", "thread regex"),
        max_blame=_percent_table(check, data, "max_blame", "function"),
        max_ms_per_step=_percent_table(check, data, "max_ms_per_step", "function"),
        max_utilization=check.number(
            data["max_utilization"], "gate.max_utilization", above=0, at_most=100
        )
        if "max_utilization" in data
        else None,
        max_host_step_p50_ms=check.number(
            data["max_host_step_p50_ms"], "gate.max_host_step_p50_ms", above=0
        )
        if "max_host_step_p50_ms" in data
        else None,
        max_regression=check.number(data["max_regression"], "gate.max_regression", at_least=0)
        if "max_regression" in data
        else None,
    )


def _load_toml(text: str, label: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses once per nesting level of arrays and tables
        raise InputError(f"{label}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # TOMLDecodeError, or int() refusing an integer of 4300+ digits
        detail = str(exc)
        detail = detail if len(detail) <= 120 else detail[:117] + "..."
        raise InputError(f"{label}: not valid TOML: {detail}") from None


def parse_gate_budgets(text: str, label: str) -> GateBudgets:
    """A budget file for `gilprof gate --budget`: a `[gate]` table, alone or inside a recipe."""
    document = _load_toml(text, label)
    check = _Checker(label)
    if "gate" not in document:
        raise check.fail("gate", "missing; expected a [gate] table of budgets")
    return _gate(check, document["gate"])


def parse_recipe(text: str, label: str) -> Recipe:
    """Validate one recipe's TOML `text`; `label` names the file in error messages."""
    document = _load_toml(text, label)
    check = _Checker(label)
    check.table(document, "", _TOP_KEYS)
    for required in ("name", "description"):
        if required not in document:
            raise check.fail(required, "missing; expected a non-empty string")
    name = check.pattern(
        document["name"], "name", NAME_RE, "a lowercase name of letters, digits, '.', '_', '-'"
    )
    return Recipe(
        name=name,
        description=" ".join(check.string(document["description"], "description").split()),
        target=_target(check, document["target"]) if "target" in document else TargetSpec(),
        sampling=_sampling(check, document["sampling"])
        if "sampling" in document
        else SamplingDefaults(),
        watch=_watch(check, document["watch"]) if "watch" in document else (),
        steps=_steps(check, document["steps"]) if "steps" in document else None,
        start=_start(check, document["start"]) if "start" in document else None,
        gate=_gate(check, document["gate"]) if "gate" in document else GateBudgets(),
        lint_getters=check.string_list(
            document.get("lint_getters", []), "lint_getters", IDENTIFIER_RE, "a getter name"
        ),
        native=native_section(check, document["native"], label) if "native" in document else (),
        source=label,
        text=text,
    )


# ---------------------------------------------------------------------------------------------
# Finding recipes


def _builtin_dir() -> Traversable:
    packaged = resources.files("gilprof") / "recipes_data"
    if packaged.is_dir():
        return packaged
    # A source checkout whose link was not created still has the folder next to the package.
    return Path(__file__).resolve().parents[2] / "recipes"


def _builtin_files() -> dict[str, Traversable]:
    folder = _builtin_dir()
    if not folder.is_dir():
        return {}
    return {
        entry.name[: -len(".toml")]: entry
        for entry in folder.iterdir()
        if entry.name.endswith(".toml") and entry.is_file()
    }


def builtin_names() -> list[str]:
    """Names of the recipes that ship with gilprof, sorted."""
    return sorted(_builtin_files())


def _load_builtin(stem: str, entry: Traversable) -> Recipe:
    label = f"recipes/{entry.name}"
    recipe = parse_recipe(entry.read_text(encoding="utf-8"), label)
    if recipe.name != stem:
        raise InputError(f"{label}: name: expected {stem!r} (the file name), got {recipe.name!r}")
    return recipe


def list_recipes() -> list[Recipe]:
    """Every built-in recipe, validated, sorted by name."""
    return [_load_builtin(stem, entry) for stem, entry in sorted(_builtin_files().items())]


def load_recipe(name_or_path: str) -> Recipe:
    """A built-in recipe by name, or the recipe in the `.toml` file at that path."""
    path = Path(name_or_path)
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{name_or_path}: cannot read recipe: {exc}") from None
        return parse_recipe(text, name_or_path)
    if name_or_path.endswith(".toml") or "/" in name_or_path or "\\" in name_or_path:
        raise InputError(f"{name_or_path}: no such recipe file")
    files = _builtin_files()
    if name_or_path not in files:
        known = ", ".join(sorted(files)) or "none"
        raise InputError(
            f"unknown recipe {name_or_path!r}; known: {known} (or give a path to a .toml file)"
        )
    return _load_builtin(name_or_path, files[name_or_path])


def load_budget_file(path: str) -> GateBudgets:
    """The [gate] table of a budget file (a recipe file works too)."""
    if os.path.exists(path) and not os.path.isfile(path):
        raise InputError(f"{path}: not a regular file")  # a FIFO would block the read
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read budget file: {exc}") from None
    return parse_gate_budgets(text, path)
