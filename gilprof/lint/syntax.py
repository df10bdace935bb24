"""AST helpers every lint rule shares: scopes, the nodes a scope runs, calls, root tests.

Nothing here imports the code under analysis.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def short(node: ast.AST, limit: int = 60) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def own_nodes(roots: Iterable[ast.AST], *, into_lambdas: bool = True) -> Iterator[ast.AST]:
    """Every node under `roots` that runs in their scope: nested def/class bodies are skipped."""
    stack = list(roots)[::-1]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, SCOPE_NODES) or (isinstance(node, ast.Lambda) and not into_lambdas):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def scope_bodies(tree: ast.Module) -> Iterator[tuple[Scope, list[ast.AST]]]:
    """The module, then every class and function in it, each with its `own_nodes`."""
    stack: list[Scope] = [tree]
    while stack:
        scope = stack.pop()
        nodes = list(own_nodes(scope.body))
        yield scope, nodes
        stack.extend(reversed([n for n in nodes if isinstance(n, SCOPE_NODES)]))


def call_name(call: ast.Call) -> str:
    """`f` for `f(...)` and `x.y.f(...)`; "" for anything else called."""
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


_RANK = re.compile(r"(?:^|[._])(?:[a-z]+_)?rank$|^rank", re.IGNORECASE)
_ROOT_VALUE = re.compile(r"root|src|source|leader|master|driver|^0$", re.IGNORECASE)
_ROOT_FLAG = re.compile(r"(?:^|[._])(?:is|am)_(?:root|leader|master|driver|first_rank|rank_?0)")


def root_test(test: ast.expr) -> bool | None:
    """Which branch of `if test` the root rank takes: True, False, or None when unknown.

    `rank == root`, `rank == 0`, `self.rank != src`, `is_root`, `not self.is_leader`, ...
    """
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = root_test(test.operand)
        return None if inner is None else not inner
    if isinstance(test, (ast.Name, ast.Attribute)):
        return True if _ROOT_FLAG.search(ast.unparse(test)) else None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op = test.ops[0]
    if not isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
        return None
    sides = [ast.unparse(test.left), ast.unparse(test.comparators[0])]
    for rank, value in (sides, sides[::-1]):
        if _RANK.search(rank) and _ROOT_VALUE.search(value) and not _RANK.search(value):
            return isinstance(op, (ast.Eq, ast.Is))
    return None


def bindings(node: ast.AST) -> list[tuple[ast.expr, ast.expr | None]]:
    """(target, value) pairs a statement binds; value None when it is not one expression."""
    if isinstance(node, ast.Assign):
        pairs: list[tuple[ast.expr, ast.expr | None]] = []
        value = node.value
        for target in node.targets:
            if (
                isinstance(target, ast.Tuple)
                and isinstance(value, ast.Tuple)
                and len(target.elts) == len(value.elts)
            ):
                pairs.extend(zip(target.elts, value.elts, strict=True))
            else:
                pairs.append((target, value))
        return pairs
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.NamedExpr):
        return [(node.target, node.value)]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [(node.target, None)]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return [(node.optional_vars, None)]
    return []
