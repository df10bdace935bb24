"""The data-flow rules of `gilprof lint` (GP001, GP003) and the AST helpers all rules share.

Nothing here imports the code under analysis. Both rules need to know which binding of a name
reaches a use, so they run a small data-flow pass over one scope's statements (`_Flow`) at a
time: GP001 asks which `pickle.dumps` results *may* reach a `pickle.loads`, GP003 which
`n = len(x)` facts *must* still hold at a comparison. GP002 is syntactic and lives in
gilprof.lint, which also locates, suppresses and reports every finding.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "COMPREHENSIONS",
    "FUNCTION_NODES",
    "SCOPE_NODES",
    "RawFinding",
    "Scope",
    "flow_findings",
    "own_nodes",
    "scope_bodies",
    "short",
]


@dataclass(frozen=True)
class RawFinding:
    """A rule hit at an AST position (1-based line, 0-based UTF-8 byte column)."""

    rule: str
    line: int
    col_offset: int
    message: str


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


def _target_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _evaluated(root: ast.AST) -> Iterator[tuple[ast.AST, frozenset[str]]]:
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


class _Flow(Generic[State]):
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

    def store_item(self, container: ast.expr, state: State) -> State:
        """An item or slice of `container` was assigned or deleted."""
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
        evaluated = list(_evaluated(node))
        if not self.muted:
            self.check(evaluated, state)
        for sub, _ in evaluated:
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
            return self.store_item(target.value, state)
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


# ---- GP001: the sender unpickles what it just pickled -------------------------------------

_PICKLE_MODULES = frozenset({"pickle", "_pickle", "cPickle", "pickle5", "cloudpickle", "dill"})
_PICKLE_FUNCTIONS = frozenset({"dumps", "loads", "load"})
# Calls whose result carries the bytes of their first argument (views, copies, file wrappers).
_BYTES_PASSTHROUGH = frozenset({"memoryview", "bytes", "bytearray", "BytesIO"})
_VIEW_METHODS = frozenset({"tobytes", "toreadonly", "cast", "getvalue", "getbuffer"})


class PickleNames:
    """Which names mean a pickle module, or its dumps/loads, in one source file."""

    def __init__(self, nodes: Iterable[ast.AST]) -> None:
        self.modules = set(_PICKLE_MODULES)
        self.functions: dict[str, str] = {}
        # Functions (and self./cls. methods) of this module that return pickled bytes.
        self.helpers: set[str] = set()
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in _PICKLE_MODULES and alias.asname:
                        self.modules.add(alias.asname)
            elif isinstance(node, ast.ImportFrom):
                from_pickle = node.level == 0 and node.module in _PICKLE_MODULES
                for alias in node.names:
                    local = alias.asname or alias.name
                    if from_pickle and alias.name in _PICKLE_FUNCTIONS:
                        self.functions[local] = alias.name
                    elif alias.name == "pickle":  # e.g. `from mpi4py.MPI import pickle`
                        self.modules.add(local)

    def kind(self, func: ast.expr) -> str | None:
        """What calling `func` does: "dumps", "loads", "load", or None for anything else."""
        if isinstance(func, ast.Name):
            return "dumps" if func.id in self.helpers else self.functions.get(func.id)
        if not isinstance(func, ast.Attribute):
            return None
        if func.attr in self.helpers and getattr(func.value, "id", None) in ("self", "cls"):
            return "dumps"
        if func.attr in _PICKLE_FUNCTIONS:
            base = func.value
            if isinstance(base, ast.Name) and base.id in self.modules:
                return func.attr
            if isinstance(base, ast.Attribute) and base.attr == "pickle":
                return func.attr
        return None


_Origins = dict[str, frozenset[ast.Call]]


class _RoundTripFlow(_Flow[_Origins]):
    """May-analysis: which `dumps(...)` calls a name's bytes can come from."""

    def __init__(self, names: PickleNames, report: Callable[[RawFinding], None]) -> None:
        super().__init__()
        self.names = names
        self.report = report
        self.returns_pickled = False

    def returned(self, value: ast.expr, state: _Origins) -> None:
        self.returns_pickled = self.returns_pickled or bool(self.origins(value, state))

    def join(self, a: _Origins, b: _Origins) -> _Origins:
        merged = dict(a)
        for name, calls in b.items():
            merged[name] = merged.get(name, frozenset()) | calls
        return merged

    def origins(
        self, expr: ast.AST, state: _Origins, shadowed: frozenset[str] = frozenset()
    ) -> frozenset[ast.Call]:
        while True:
            if isinstance(expr, ast.Name):
                return frozenset() if expr.id in shadowed else state.get(expr.id, frozenset())
            if isinstance(expr, (ast.Subscript, ast.NamedExpr)):
                expr = expr.value
                continue
            if isinstance(expr, (ast.IfExp, ast.BoolOp)):
                options = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else expr.values
                found: frozenset[ast.Call] = frozenset()
                for option in options:
                    found |= self.origins(option, state, shadowed)
                return found
            if not isinstance(expr, ast.Call):
                return frozenset()
            if self.names.kind(expr.func) == "dumps":
                return frozenset({expr})
            func = expr.func
            func_name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if func_name in _BYTES_PASSTHROUGH and expr.args:
                expr = expr.args[0]
            elif isinstance(func, ast.Attribute) and func.attr in _VIEW_METHODS:
                expr = func.value
            else:
                return frozenset()

    def bind(self, name: str, value: ast.expr | None, state: _Origins) -> _Origins:
        found = self.origins(value, state) if value is not None else frozenset()
        if not found and name not in state:
            return state
        updated = dict(state)
        if found:
            updated[name] = found
        else:
            del updated[name]
        return updated

    def check(self, evaluated: Sequence[tuple[ast.AST, frozenset[str]]], state: _Origins) -> None:
        for node, shadowed in evaluated:
            if not (isinstance(node, ast.Call) and node.args):
                continue
            if self.names.kind(node.func) not in ("loads", "load"):
                continue
            sources = self.origins(node.args[0], state, shadowed)
            if not sources:
                continue
            dumps_call = min(sources, key=lambda call: (call.lineno, call.col_offset))
            self.report(
                RawFinding(
                    "GP001",
                    node.lineno,
                    node.col_offset,
                    f"`{short(node)}` unpickles what `{short(dumps_call.func)}` pickled at "
                    f"line {dumps_call.lineno}: a deep copy of the payload per call, of an "
                    "object the sender already holds",
                )
            )


# ---- GP003: a length compared with a value just computed from it --------------------------

# A pure `if` test as text, which way it went, and the names whose rebinding voids it.
_Guard = tuple[str, bool, frozenset[str]]
# (length variable, container, guard): `length == len(container)` holds on every path here,
# or, with a guard, on every path where that test went that way (e.g. `if rank == root:`).
# With `_IMMUTABLE` as the length, the fact says that the container holds bytes, str or a tuple:
# then nothing but rebinding it can change its length.
_Fact = tuple[str, str, "_Guard | None"]
_IMMUTABLE = ""
_IMMUTABLE_CALLS = frozenset({"bytes", "str", "tuple", "frozenset", "repr", "format", "ascii"})
_IMMUTABLE_METHODS = frozenset(
    {"encode", "decode", "tobytes", "hex", "hexdigest", "digest", "join", "format", "lower",
     "upper", "strip"}
)  # fmt: skip
_Facts = frozenset[_Fact]
# Calls and methods that neither resize their argument/receiver nor keep a reference to it.
_LENGTH_PRESERVING_CALLS = frozenset(
    {
        "len", "memoryview", "bytes", "bytearray", "str", "repr", "int", "float", "bool",
        "hash", "id", "type", "isinstance", "print", "sorted", "list", "tuple", "set",
        "frozenset", "min", "max", "sum", "any", "all", "iter", "enumerate", "zip",
        "reversed", "format", "loads", "dumps", "frombuffer", "join", "getsizeof",
        "debug", "info", "warning", "error", "exception", "critical", "log",
    }
)  # fmt: skip
_LENGTH_PRESERVING_METHODS = frozenset(
    {
        "count", "index", "find", "rfind", "startswith", "endswith", "decode", "encode",
        "hex", "tobytes", "tolist", "copy", "get", "keys", "values", "items", "split",
        "strip", "lower", "upper", "format",
    }
)  # fmt: skip
_SAFE_PARENTS = (ast.Compare, ast.BinOp, ast.UnaryOp, ast.FormattedValue, ast.JoinedStr)
_PURE_TEST_NODES = (ast.Name, ast.Attribute, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp,
                    ast.expr_context, ast.cmpop, ast.boolop, ast.unaryop)  # fmt: skip
_ALWAYS_TRUE = (ast.Eq, ast.LtE, ast.GtE)
_ALWAYS_FALSE = (ast.NotEq, ast.Lt, ast.Gt)


def _len_argument(expr: ast.AST) -> ast.expr | None:
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "len"
        and len(expr.args) == 1
        and not expr.keywords
    ):
        return expr.args[0]
    return None


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_pure(expr: ast.AST) -> bool:
    """True when evaluating `expr` twice must give the same object (names and lookups only)."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant,
                              ast.Slice, ast.Load, ast.Tuple)) for n in ast.walk(expr))  # fmt: skip


class _DeadLengthFlow(_Flow[_Facts]):
    """Must-analysis: which `n = len(x)` facts hold, killed by rebinding or resizing.

    A fact set in one branch of a pure test survives the merge guarded by that test, and
    becomes unconditional again inside a later branch on the same test: the seed sets the size
    under `if rank == root:` and compares it under a second `if rank == root:`.
    """

    def __init__(
        self,
        report: Callable[[RawFinding], None],
        local_names: frozenset[str],
        measured: frozenset[str],
        pickle_names: PickleNames | None,
    ) -> None:
        super().__init__()
        self.report = report
        self.local_names = local_names
        self.measured = measured  # names passed to len() somewhere in the scope
        self.pickle_names = pickle_names
        self.set_at: dict[tuple[str, str], int] = {}
        self._guards: dict[ast.expr, tuple[str, frozenset[str]] | None] = {}

    def _guard(self, test: ast.expr, taken: bool) -> _Guard | None:
        if test not in self._guards:
            pure = all(isinstance(n, _PURE_TEST_NODES) for n in ast.walk(test))
            names = frozenset(n.id for n in ast.walk(test) if isinstance(n, ast.Name))
            self._guards[test] = (ast.unparse(test), names) if pure else None
        found = self._guards[test]
        return None if found is None else (found[0], taken, found[1])

    def join(self, a: _Facts, b: _Facts) -> _Facts:
        return a & b

    def enter_branch(self, test: ast.expr, taken: bool, state: _Facts) -> _Facts:
        guard = self._guard(test, taken)
        if guard is None:
            return state
        kept: set[_Fact] = set()
        for length, container, fact_guard in state:
            if fact_guard is None or fact_guard[0] != guard[0]:
                kept.add((length, container, fact_guard))
            elif fact_guard[1] == taken:
                kept.add((length, container, None))
        return frozenset(kept)

    def merge_branches(
        self, test: ast.expr, body: _Facts | None, orelse: _Facts | None
    ) -> _Facts | None:
        if body is None or orelse is None:
            return body if orelse is None else orelse
        merged = set(body & orelse)
        for taken, mine, other in ((True, body, orelse), (False, orelse, body)):
            guard = self._guard(test, taken)
            if guard is not None:
                merged.update((f[0], f[1], guard) for f in mine - other if f[2] is None)
        return frozenset(merged)

    def _drop(self, state: _Facts, container: str) -> _Facts:
        if (_IMMUTABLE, container, None) in state:
            return state
        return frozenset(f for f in state if f[1] != container)

    def _holds_immutable(self, value: ast.expr, state: _Facts) -> bool:
        if isinstance(value, ast.Constant):
            return isinstance(value.value, (str, bytes, tuple))
        if isinstance(value, (ast.JoinedStr, ast.Tuple)):
            return True
        if isinstance(value, ast.Name):
            return (_IMMUTABLE, value.id, None) in state
        if isinstance(value, ast.IfExp):
            return all(self._holds_immutable(v, state) for v in (value.body, value.orelse))
        if not isinstance(value, ast.Call):
            return False
        if self.pickle_names is not None and self.pickle_names.kind(value.func) == "dumps":
            return True
        if isinstance(value.func, ast.Name):
            return value.func.id in _IMMUTABLE_CALLS
        return isinstance(value.func, ast.Attribute) and value.func.attr in _IMMUTABLE_METHODS

    def bind(self, name: str, value: ast.expr | None, state: _Facts) -> _Facts:
        immutable = (
            value is not None and name in self.measured and self._holds_immutable(value, state)
        )
        state = frozenset(
            f for f in state if name not in f[:2] and (f[2] is None or name not in f[2][2])
        )
        if immutable:
            state = state | {(_IMMUTABLE, name, None)}
        if isinstance(value, ast.Name):  # an alias could resize the container later
            state = self._drop(state, value.id)
        argument = _len_argument(value) if value is not None else None
        if isinstance(argument, ast.Name) and argument.id != name and value is not None:
            self.set_at[(name, argument.id)] = value.lineno
            state = state | {(name, argument.id, None)}
        return state

    def store_item(self, container: ast.expr, state: _Facts) -> _Facts:
        while isinstance(container, (ast.Subscript, ast.Attribute)):
            container = container.value
        return self._drop(state, container.id) if isinstance(container, ast.Name) else state

    def effects(self, expr: ast.AST, state: _Facts) -> _Facts:
        frozen = {f[1] for f in state if f[0] == _IMMUTABLE and f[2] is None}
        containers = {f[1] for f in state} - frozen
        if not containers:
            return state
        stack: list[tuple[ast.AST, ast.AST | None, ast.AST | None]] = [(expr, None, None)]
        while stack:
            node, parent, grand = stack.pop()
            if isinstance(node, ast.Lambda):
                continue
            if self._may_run_other_code(node):  # which can resize what it can reach
                state = frozenset(f for f in state if f[1] in self.local_names | frozen)
            if (
                isinstance(node, ast.Name)
                and node.id in containers
                and parent is not None
                and not self._keeps_length(node, parent, grand)
            ):
                state = self._drop(state, node.id)
            stack.extend((child, node, parent) for child in ast.iter_child_nodes(node))
        return state

    @staticmethod
    def _may_run_other_code(node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            return _call_name(node) not in _LENGTH_PRESERVING_CALLS
        return isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom))

    @staticmethod
    def _keeps_length(node: ast.Name, parent: ast.AST, grand: ast.AST | None) -> bool:
        if isinstance(parent, _SAFE_PARENTS):
            return True
        if isinstance(parent, ast.Call) and node in parent.args:
            return _call_name(parent) in _LENGTH_PRESERVING_CALLS
        if isinstance(parent, ast.keyword) and isinstance(grand, ast.Call):
            return _call_name(grand) in _LENGTH_PRESERVING_CALLS
        if isinstance(parent, ast.Attribute):
            called = isinstance(grand, ast.Call) and grand.func is parent
            return not called or parent.attr in _LENGTH_PRESERVING_METHODS
        if isinstance(parent, ast.Subscript):
            return parent.value is node and isinstance(parent.ctx, ast.Load)
        return isinstance(parent, ast.comprehension) and parent.iter is node

    def check(self, evaluated: Sequence[tuple[ast.AST, frozenset[str]]], state: _Facts) -> None:
        if not state and not any(isinstance(node, ast.Compare) for node, _ in evaluated):
            return
        for node, shadowed in evaluated:
            if not isinstance(node, ast.Compare):
                continue
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                reason = self._reason(left, right, state, shadowed)
                if reason is not None and isinstance(op, _ALWAYS_TRUE + _ALWAYS_FALSE):
                    outcome = "True" if isinstance(op, _ALWAYS_TRUE) else "False"
                    message = f"`{short(node)}` is always {outcome}: {reason}"
                    self.report(RawFinding("GP003", node.lineno, node.col_offset, message))
                    break
                left = right

    def _reason(
        self, left: ast.expr, right: ast.expr, state: _Facts, shadowed: frozenset[str]
    ) -> str | None:
        left_arg, right_arg = _len_argument(left), _len_argument(right)
        if left_arg is not None and right_arg is not None:
            same = ast.dump(left_arg) == ast.dump(right_arg)
            if same and _is_pure(left_arg):
                return "both sides are the length of the same object"
            return None
        for length, other in ((left, right_arg), (right, left_arg)):
            if not (isinstance(length, ast.Name) and isinstance(other, ast.Name)):
                continue
            if {length.id, other.id} & shadowed or (length.id, other.id, None) not in state:
                continue
            line = self.set_at.get((length.id, other.id))
            where = f" at line {line}" if line else ""
            return f"{length.id} = len({other.id}){where}, and neither has changed since"
        return None


def _local_names(scope: Scope, nodes: list[ast.AST]) -> frozenset[str]:
    """Names only this scope can reach: code it calls cannot resize them unless handed them.

    A name that a nested function or lambda uses is shared with it, so it is not local.
    """
    if isinstance(scope, ast.Module):
        return frozenset()
    names: set[str] = set()
    if isinstance(scope, FUNCTION_NODES):
        arguments = scope.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        names.update(a.arg for a in every)
    shared: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            shared.update(node.names)
        elif isinstance(node, (*FUNCTION_NODES, ast.Lambda)):
            shared.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
    return frozenset(names - shared)


_ScopeCalls = list[tuple[Scope, list[ast.AST], list[ast.Call]]]


def _find_pickling_helpers(names: PickleNames, scopes: _ScopeCalls) -> None:
    """Add the module's functions that return pickled bytes (and helpers of those) to `names`."""
    for _ in range(3):
        known = len(names.helpers)
        for scope, _, calls in scopes:
            if not isinstance(scope, FUNCTION_NODES) or scope.name in names.helpers:
                continue
            if any(names.kind(call.func) == "dumps" for call in calls):
                flow = _RoundTripFlow(names, lambda finding: None)
                flow.muted = 1  # only what it returns is wanted
                flow.run(scope.body, {})
                if flow.returns_pickled:
                    names.helpers.add(scope.name)
        if len(names.helpers) == known:
            return


def flow_findings(
    tree: ast.Module, *, round_trips: bool = True, dead_lengths: bool = True
) -> list[RawFinding]:
    """GP001 (`round_trips`) and GP003 (`dead_lengths`) findings in one parsed module.

    A finding may be reported more than once (loops are re-run); the caller deduplicates.
    """
    found: list[RawFinding] = []
    scopes: _ScopeCalls = [
        (scope, nodes, [n for n in nodes if isinstance(n, ast.Call)])
        for scope, nodes in scope_bodies(tree)
    ]
    names = PickleNames(n for _, nodes, _ in scopes for n in nodes) if round_trips else None
    if names is not None:
        _find_pickling_helpers(names, scopes)
    for scope, nodes, calls in scopes:
        if names is not None and any(names.kind(call.func) == "dumps" for call in calls):
            _RoundTripFlow(names, found.append).run(scope.body, {})
        measured = [_len_argument(call) for call in calls]
        if dead_lengths and any(argument is not None for argument in measured):
            names_measured = frozenset(a.id for a in measured if isinstance(a, ast.Name))
            flow = _DeadLengthFlow(found.append, _local_names(scope, nodes), names_measured, names)
            flow.run(scope.body, frozenset())
    return found
