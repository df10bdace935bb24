"""GP004: a per-iteration mpi4py `bcast` whose result the root uses.

mpi4py's lowercase `Comm.bcast(obj, root)` pickles `obj` on the root and unpickles it on every
rank, the root included: the root gets a deep copy of what it already holds (`out is obj` is
False there). A call is flagged when all of these hold, decided by structure only:
- it is `X.bcast(...)` (any receiver: `comm`, `self.comm`, `MPI.COMM_WORLD`, `mpi_comm()`), or a
  call of a wrapper the scanned code defines, which returns a `bcast` result (directly, or
  through other wrappers, in any scanned file);
- it runs per iteration: inside a `for`/`while` body or a comprehension, or in a function that
  is called (directly or through other functions of the file) from such a loop in its file;
- the root can run it: it is not in a branch only other ranks take (`if rank != root:`, the
  `else` of `if rank == root:`, after `if rank == root: ... return`);
- its result is used: returned, stored, passed on, or bound to a name read later.
A wrapper's own `return comm.bcast(...)` is not flagged: its per-iteration callers are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gilprof.lint.model import RawFinding
from gilprof.lint.syntax import COMPREHENSIONS, FUNCTION_NODES, call_name, root_test, short

_Function = ast.FunctionDef | ast.AsyncFunctionDef
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
BCAST = "bcast"


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _returned_calls(expr: ast.expr | None) -> Iterator[ast.Call]:
    """Calls whose value `return expr` hands back: `f(x)`, `a if c else f(x)`, `f(x) or d`."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            yield node
        elif isinstance(node, ast.IfExp):
            stack.extend([node.body, node.orelse])
        elif isinstance(node, ast.BoolOp):
            stack.extend(node.values)
        elif isinstance(node, ast.Await):
            stack.append(node.value)


def _callee(call: ast.Call) -> str:
    """ "bcast" for `X.bcast(...)`, else the called function's or method's simple name."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == BCAST:
        return BCAST
    return call_name(call)


def _returned_call_nodes(
    function: _Function, parents: dict[ast.AST, ast.AST]
) -> Iterator[ast.Call]:
    """Calls whose value `function` returns, on a path the root can take (`return f(x)`, or
    `y = f(x)` ... `return y`)."""
    bound: dict[str, list[ast.Call]] = {}
    for node in _own(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
    for node in _own(function):
        if isinstance(node, ast.Return) and _root_runs(node, function, parents):
            yield from _returned_calls(node.value)
            if isinstance(node.value, ast.Name):
                yield from bound.get(node.value.id, [])


def returned_callees(tree: ast.Module) -> dict[str, set[str]]:
    """Function name -> names of the calls it returns on a path the root can take."""
    parents = _parents(tree)
    found: dict[str, set[str]] = {}
    for function in ast.walk(tree):
        if isinstance(function, FUNCTION_NODES):
            callees = {_callee(c) for c in _returned_call_nodes(function, parents)}
            if callees:
                found.setdefault(function.name, set()).update(callees)
    return found


def wrappers(returns: dict[str, set[str]]) -> frozenset[str]:
    """Names of functions that return a `bcast` result, directly or through each other."""
    known: set[str] = set()
    while True:
        more = {name for name, calls in returns.items() if calls & (known | {BCAST})}
        if more <= known:
            return frozenset(known)
        known |= more


def _own(function: _Function) -> Iterator[ast.AST]:
    """Nodes of `function` outside nested functions and classes."""
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (*FUNCTION_NODES, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _root_runs(node: ast.AST, function: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """False when `node` sits where only non-root ranks get (by the `if` tests above it)."""
    child = node
    while child is not function and child in parents:
        parent = parents[child]
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            side = root_test(parent.test)
            in_body = child in parent.body if isinstance(parent, ast.If) else child is parent.body
            if side is not None and side != in_body:
                return False
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and child in block:
                for earlier in block[: block.index(child)]:
                    if _root_leaves(earlier):
                        return False
        child = parent
    return True


def _root_leaves(stmt: ast.stmt) -> bool:
    """`if rank == root: ...; return` (no else): after it, the root is gone."""
    return (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and root_test(stmt.test) is True
        and isinstance(stmt.body[-1], _EXITS)
    )


def _loop_of(
    node: ast.AST, function: ast.AST, parents: dict[ast.AST, ast.AST]
) -> ast.stmt | ast.expr | None:
    """The innermost loop (or comprehension) of `function` whose every iteration runs `node`."""
    previous: ast.AST | None = None
    child = node
    while child is not function and child in parents:
        parent = parents[child]
        if isinstance(parent, _LOOPS) and (
            child in parent.body or child is getattr(parent, "test", None)
        ):
            return parent
        if isinstance(parent, COMPREHENSIONS):
            first = parent.generators[0]
            if not (child is first and previous is first.iter):  # that runs once
                return parent
        if isinstance(parent, (*FUNCTION_NODES, ast.ClassDef, ast.Lambda)):
            return None
        previous, child = child, parent
    return None


def _result_used(call: ast.Call, function: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(call)
    if isinstance(parent, ast.Expr):
        return False
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is call:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if len(names) < len(targets):
            return True  # stored into an attribute, an item, or unpacked
        inside = set(ast.walk(call))
        return any(
            isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load)
            for n in ast.walk(function)
            if n not in inside
        )
    return True


class Gp004:
    """GP004 over one module, given the bcast wrappers of every scanned file."""

    def __init__(self, tree: ast.Module, wrapper_names: frozenset[str]) -> None:
        self.tree = tree
        self.wrappers = wrapper_names
        self.parents = _parents(tree)
        self.functions = [n for n in ast.walk(tree) if isinstance(n, FUNCTION_NODES)]
        self.loop_calls = self._called_from_loops()

    def _is_bcast(self, call: ast.Call) -> bool:
        name = _callee(call)
        return name == BCAST or (name in self.wrappers and name != "")

    def _called_from_loops(self) -> dict[str, int]:
        """Function name -> line of a loop in this file that calls it (directly or not)."""
        called: dict[str, int] = {}
        calls_in: dict[str, set[str]] = {}
        for function in self.functions:
            for node in _own(function):
                if isinstance(node, ast.Call) and _local_call(node):
                    calls_in.setdefault(function.name, set()).add(call_name(node))
                    loop = _loop_of(node, function, self.parents)
                    if loop is not None:
                        called.setdefault(call_name(node), loop.lineno)
        for _ in range(4):  # callees of loop-called functions run per iteration too
            for name, line in list(called.items()):
                for callee in calls_in.get(name, ()):
                    called.setdefault(callee, line)
        return called

    def findings(self) -> list[RawFinding]:
        found = []
        for function in self.functions:
            handed_back: set[ast.Call] = set()
            if function.name in self.wrappers:  # its callers are judged instead
                handed_back.update(_returned_call_nodes(function, self.parents))
            for node in _own(function):
                if not (isinstance(node, ast.Call) and self._is_bcast(node)):
                    continue
                if node in handed_back:
                    continue
                why = self._per_iteration(node, function)
                if why is None or not _root_runs(node, function, self.parents):
                    continue
                if not _result_used(node, function, self.parents):
                    continue
                via = "" if _callee(node) == BCAST else " (it returns a `bcast` result)"
                found.append(
                    RawFinding(
                        "GP004",
                        node.lineno,
                        node.col_offset,
                        f"`{short(node)}`{via} runs {why} and the root uses its result: "
                        "mpi4py's `bcast` pickles on the root and unpickles there too, so the "
                        "root gets a deep copy of the object it already holds; keep the object "
                        "on the root",
                    )
                )
        return found

    def _per_iteration(self, node: ast.Call, function: _Function) -> str | None:
        loop = _loop_of(node, function, self.parents)
        if loop is not None:
            return f"on every iteration of the loop at line {loop.lineno}"
        line = self.loop_calls.get(function.name)
        if line is not None:
            return f"on every iteration: `{function.name}` is called from the loop at line {line}"
        return None


def _local_call(call: ast.Call) -> bool:
    """`f(...)`, `self.f(...)` or `cls.f(...)`: a call that may name a function of this file."""
    func = call.func
    if isinstance(func, ast.Name):
        return True
    return isinstance(func, ast.Attribute) and getattr(func.value, "id", "") in ("self", "cls")
