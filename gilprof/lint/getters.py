"""Which attribute names GP002 treats as getters that copy on every access.

A name is a copying getter when
- it is given explicitly (`--getter NAME`, a recipe's `lint_getters`, or `getters = [...]` in
  the `[tool.gilprof.lint]` table of the nearest `pyproject.toml` above a scanned path): always;
- the scanned code defines it as a property whose body builds a new container (`list(...)`,
  a comprehension, `.copy()`, `copy.deepcopy(...)`, `tuple(...)`, `[*xs]`, ...);
- or it is on the built-in list (`DEFAULT_GETTERS`: TensorRT-LLM binding getters, whose
  C++ side returns a vector by value, so each access builds a new Python list);
and, for the last two, the scanned code does not also define it as a plain attribute, a class
field (dataclass, NamedTuple, pydantic, ...), `__slots__` entry, or a property that does not
copy: a receiver's type is unknown statically, so a name with both meanings is left alone.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gilprof.errors import InputError
from gilprof.lint.syntax import FUNCTION_NODES, call_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_GETTERS: tuple[str, ...] = (
    "input_token_ids",
    "get_tokens",
    "output_token_ids",
    "get_input_token_ids",
)

_COPY_CALLS = frozenset({"list", "tuple", "dict", "set", "frozenset", "sorted", "bytearray"})
_COPY_METHODS = frozenset({"copy", "deepcopy", "tolist"})
_CACHED = frozenset({"cached_property", "cache", "lru_cache"})


def _decorator_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(target.id if isinstance(target, ast.Name) else getattr(target, "attr", ""))
    return names


def _builds_container(expr: ast.expr | None, bound: dict[str, list[ast.expr]], depth: int) -> bool:
    """True when evaluating `expr` makes a new container (so each access copies)."""
    if expr is None or depth > 3:
        return False
    if isinstance(expr, (ast.ListComp, ast.SetComp, ast.DictComp)):
        return True
    if isinstance(expr, (ast.List, ast.Set, ast.Tuple)):
        return any(isinstance(e, ast.Starred) for e in expr.elts)
    if isinstance(expr, ast.Dict):
        return any(key is None for key in expr.keys)  # {**other}
    if isinstance(expr, ast.IfExp):
        return any(_builds_container(e, bound, depth + 1) for e in (expr.body, expr.orelse))
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return any(_builds_container(e, bound, depth + 1) for e in (expr.left, expr.right))
    if isinstance(expr, ast.Name):
        return any(_builds_container(v, bound, depth + 1) for v in bound.get(expr.id, []))
    if not isinstance(expr, ast.Call):
        return False
    if isinstance(expr.func, ast.Name):
        return expr.func.id in _COPY_CALLS or expr.func.id == "deepcopy"
    return isinstance(expr.func, ast.Attribute) and call_name(expr) in _COPY_METHODS


def property_copies(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when some `return` of `function` hands back a container built by the call."""
    bound: dict[str, list[ast.expr]] = {}
    returns: list[ast.expr | None] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.Return):
            returns.append(node.value)
    return any(_builds_container(value, bound, 0) for value in returns)


@dataclass
class GetterDefinitions:
    """What the scanned code itself says about attribute names (collected over every file)."""

    copying: set[str] = field(default_factory=set)
    plain: set[str] = field(default_factory=set)

    def add(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                self._class_body(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                self.plain.update(
                    t.attr
                    for t in _assigned_targets(node)
                    if isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self"
                )

    def _class_body(self, cls: ast.ClassDef) -> None:
        for stmt in cls.body:
            if isinstance(stmt, FUNCTION_NODES):
                decorators = _decorator_names(stmt)
                if "property" in decorators:
                    (self.copying if property_copies(stmt) else self.plain).add(stmt.name)
                elif decorators & _CACHED:
                    self.plain.add(stmt.name)
                continue
            for target in _assigned_targets(stmt):
                if isinstance(target, ast.Name) and target.id != "__slots__":
                    self.plain.add(target.id)
                elif isinstance(target, ast.Name) and isinstance(stmt, ast.Assign):
                    values = getattr(stmt.value, "elts", [stmt.value])
                    self.plain.update(
                        v.value
                        for v in values
                        if isinstance(v, ast.Constant) and isinstance(v.value, str)
                    )

    def getters(self, defaults: Iterable[str], explicit: Iterable[str] = ()) -> frozenset[str]:
        implied = (frozenset(defaults) | self.copying) - self.plain
        return frozenset(explicit) | implied


def _assigned_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets.extend(target.elts)
        else:
            flat.append(target)
    return flat


def project_getters(path: Path) -> tuple[str, ...]:
    """`getters` from `[tool.gilprof.lint]` in the nearest `pyproject.toml` above `path`.

    Raises InputError when that file is not TOML or the table's `getters` is not a list of
    attribute names.
    """
    start = path.resolve()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            break
    else:
        return ()
    try:
        document = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"{candidate}: cannot read it for [tool.gilprof.lint]: {exc}") from None
    table = document.get("tool", {}).get("gilprof", {}).get("lint", {})
    getters = table.get("getters", []) if isinstance(table, dict) else None
    if not isinstance(getters, list) or not all(
        isinstance(name, str) and name.isidentifier() for name in getters
    ):
        raise InputError(
            f"{candidate}: [tool.gilprof.lint] getters must be a list of attribute names, "
            f'e.g. getters = ["input_token_ids"]'
        )
    return tuple(getters)
