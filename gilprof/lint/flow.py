"""The data-flow pass the GP001 and GP003 rules share (`Flow`).

Both rules need to know which binding of a name reaches a use, so they run a small abstract
interpretation over one scope's statements at a time: GP001 asks which `pickle.dumps` results
*may* reach a `pickle.loads`, GP003 which `n = len(x)` facts *must* still hold at a comparison.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from gilprof.lint.syntax import COMPREHENSIONS, SCOPE_NODES


def _target_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def evaluated(root: ast.AST) -> Iterator[tuple[ast.AST, frozenset[str]]]:
    """Nodes evaluated when `root` is, with the names a comprehension rebinds around each.

    Lambda bodies run later, so they are skipped; comprehension targets shadow outer names.
    """
    stack: list[tuple[ast.AST, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, shadowed = stack.pop()
        yield node, shadowed
        if isinstance(node, ast.Lambda):
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            stack.extend((d, shadowed) for d in defaults)
        elif isinstance(node, COMPREHENSIONS):
            inner = shadowed
            for generator in node.generators:
                stack.append((generator.iter, inner))
                inner = inner | _target_names(generator.target)
                stack.extend((cond, inner) for cond in generator.ifs)
            results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            stack.extend((r, inner) for r in results)
        else:
            stack.extend((child, shadowed) for child in ast.iter_child_nodes(node))


State = TypeVar("State")


class Flow(Generic[State]):
    """Runs one scope's statements in execution order, carrying an abstract state.

    `None` is an unreachable point (after return/raise/break). Loops iterate to a fixpoint with
    checks muted, then run once more with checks on, so a must-analysis never reports on a
    state that a later iteration would have weakened.
    """

    _MAX_LOOP_PASSES = 8

    def __init__(self) -> None:
        self.muted = 0
        self._breaks: list[list[State]] = []
        self._continues: list[list[State]] = []

    def join(self, a: State, b: State) -> State:
        raise NotImplementedError

    def check(self, evaluated: Sequence[tuple[ast.AST, frozenset[str]]], state: State) -> None:
        """Report on the uses in an expression's `evaluated` nodes, given the state before it."""

    def bind(self, name: str, value: ast.expr | None, state: State) -> State:
        """`name` now holds `value` (None: something the analysis cannot see)."""
        return state

    def store_item(self, target: ast.Subscript, value: ast.expr | None, state: State) -> State:
        """`target` (an item or slice) was assigned `value` (None: deleted or unknown)."""
        return state

    def returned(self, value: ast.expr, state: State) -> None:
        """The scope returns `value`, evaluated in `state`."""

    def effects(self, expr: ast.AST, state: State) -> State:
        """What evaluating `expr` changes besides walrus bindings (e.g. mutating calls)."""
        return state

    def enter_branch(self, test: ast.expr, taken: bool, state: State) -> State:
        """The state inside the branch of `if test` that runs when test is `taken`."""
        return state

    def merge_branches(
        self, test: ast.expr, body: State | None, orelse: State | None
    ) -> State | None:
        return self._join_all([body, orelse])

    def run(self, body: Sequence[ast.stmt], state: State) -> None:
        self.block(body, state)

    def _join_all(self, states: Iterable[State | None]) -> State | None:
        result: State | None = None
        for state in states:
            if state is None:
                continue
            result = state if result is None else self.join(result, state)
        return result

    def expr(self, node: ast.AST | None, state: State) -> State:
        if node is None:
            return state
        nodes = list(evaluated(node))
        if not self.muted:
            self.check(nodes, state)
        for sub, _ in nodes:
            if isinstance(sub, ast.NamedExpr) and isinstance(sub.target, ast.Name):
                state = self.bind(sub.target.id, sub.value, state)
        return self.effects(node, state)

    def store(self, target: ast.expr, value: ast.expr | None, state: State) -> State:
        if isinstance(target, ast.Name):
            return self.bind(target.id, value, state)
        if isinstance(target, (ast.Tuple, ast.List)):
            values: list[ast.expr | None] = [None] * len(target.elts)
            if (
                isinstance(value, (ast.Tuple, ast.List))
                and len(value.elts) == len(target.elts)
                and not any(isinstance(v, ast.Starred) for v in [*value.elts, *target.elts])
            ):
                values = list(value.elts)
            for elt, elt_value in zip(target.elts, values, strict=True):
                state = self.store(elt, elt_value, state)
            return state
        if isinstance(target, ast.Starred):
            return self.store(target.value, None, state)
        if isinstance(target, ast.Subscript):
            state = self.expr(target.slice, state)
            return self.store_item(target, value, state)
        if isinstance(target, ast.Attribute):
            return self.expr(target.value, state)
        return state

    def block(self, body: Sequence[ast.stmt], state: State | None) -> State | None:
        for stmt in body:
            if state is None:
                return None
            state = self.stmt(stmt, state)
        return state

    def stmt(self, node: ast.stmt, state: State) -> State | None:
        if isinstance(node, ast.Assign):
            state = self.expr(node.value, state)
            for target in node.targets:
                state = self.store(target, node.value, state)
            return state
        if isinstance(node, ast.AnnAssign):
            if node.value is None:
                return state
            return self.store(node.target, node.value, self.expr(node.value, state))
        if isinstance(node, ast.AugAssign):
            state = self.expr(node.value, state)
            return self.store(node.target, None, self.expr(node.target, state))
        if isinstance(node, ast.Delete):
            for target in node.targets:
                state = self.store(target, None, state)
            return state
        if isinstance(node, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(node):
                state = self.expr(child, state)
            if isinstance(node, ast.Return) and node.value is not None:
                self.returned(node.value, state)
            return None
        if isinstance(node, (ast.Break, ast.Continue)):
            targets = self._breaks if isinstance(node, ast.Break) else self._continues
            if targets:
                targets[-1].append(state)
            return None
        if isinstance(node, ast.If):
            state = self.expr(node.test, state)
            body = self.block(node.body, self.enter_branch(node.test, True, state))
            orelse = self.block(node.orelse, self.enter_branch(node.test, False, state))
            return self.merge_branches(node.test, body, orelse)
        if isinstance(node, (ast.For, ast.AsyncFor)):
            target = node.target
            return self._loop(
                self.expr(node.iter, state),
                lambda s: self.store(target, None, s),
                node.body,
                node.orelse,
            )
        if isinstance(node, ast.While):
            test = node.test
            return self._loop(state, lambda s: self.expr(test, s), node.body, node.orelse)
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                state = self.expr(item.context_expr, state)
                if item.optional_vars is not None:
                    state = self.store(item.optional_vars, None, state)
            return self.block(node.body, state)
        if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            return self._try(node, state)
        if isinstance(node, ast.Match):
            return self._match(node, state)
        if isinstance(node, SCOPE_NODES):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    state = self.expr(child, state)
                elif isinstance(child, ast.arguments):
                    for default in [*child.defaults, *(d for d in child.kw_defaults if d)]:
                        state = self.expr(default, state)
            return self.bind(node.name, None, state)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                state = self.bind((alias.asname or alias.name).split(".")[0], None, state)
            return state
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                state = self.expr(child, state)
        return state

    def _loop(
        self,
        entry: State,
        enter_iteration: Callable[[State], State],
        body: Sequence[ast.stmt],
        orelse: Sequence[ast.stmt],
    ) -> State | None:
        def one_pass(head: State) -> tuple[State | None, list[State], list[State]]:
            self._breaks.append([])
            self._continues.append([])
            try:
                out = self.block(body, enter_iteration(head))
            finally:
                breaks, continues = self._breaks.pop(), self._continues.pop()
            return out, breaks, continues

        head = entry
        self.muted += 1
        try:
            for _ in range(self._MAX_LOOP_PASSES):
                out, _, continues = one_pass(head)
                widened = self._join_all([entry, out, *continues])
                if widened is None or widened == head:
                    break
                head = widened
        finally:
            self.muted -= 1
        _, breaks, _ = one_pass(head)
        return self._join_all([self.block(orelse, head), *breaks])

    def _try(self, node: ast.stmt, state: State) -> State | None:
        body_out = self.block(getattr(node, "body", []), state)
        # An exception can leave the body anywhere; its two ends stand in for every point.
        raised = self._join_all([state, body_out])
        outs: list[State | None] = [self.block(getattr(node, "orelse", []), body_out)]
        for handler in getattr(node, "handlers", []):
            if raised is None:
                break
            entry = self.expr(handler.type, raised)
            if handler.name:
                entry = self.bind(handler.name, None, entry)
            outs.append(self.block(handler.body, entry))
        merged = self._join_all(outs)
        finalbody = getattr(node, "finalbody", [])
        if not finalbody:
            return merged
        final_out = self.block(finalbody, merged if merged is not None else raised)
        return final_out if merged is not None else None

    def _match(self, node: ast.Match, state: State) -> State | None:
        state = self.expr(node.subject, state)
        outs: list[State | None] = [state]
        for case in node.cases:
            entry = state
            for sub in ast.walk(case.pattern):
                for name in (getattr(sub, "name", None), getattr(sub, "rest", None)):
                    if isinstance(name, str):
                        entry = self.bind(name, None, entry)
            if case.guard is not None:
                entry = self.expr(case.guard, entry)
            outs.append(self.block(case.body, entry))
        return self._join_all(outs)
