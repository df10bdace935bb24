"""GP003: a length compared with a value just computed from it, a check that cannot fail.

A must-analysis over each scope (`_DeadLengthFlow`) tracks facts `n == len(x)`, killed by
rebinding either name or by anything that may resize `x`. Two extensions follow TensorRT-LLM's
safe_broadcast: a length stored into an item of a header array (`header[:] = (1, n, k)`) and read
back from it (`n = int(header[1])`) is still that length on the rank that wrote it, across a
broadcast of the header (which the root only sends); and a container the scope cannot see all
of (a parameter, a module global, another object's attribute, a call's result) loses its facts
whenever code the rule cannot see runs, since that code may resize it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from gilprof.lint.flow import Flow
from gilprof.lint.gp001 import PickleNames
from gilprof.lint.model import RawFinding
from gilprof.lint.syntax import (
    COMPREHENSIONS,
    FUNCTION_NODES,
    Scope,
    bindings,
    call_name,
    root_test,
    short,
)

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
# Calls that return their argument's value unchanged, for reading a length back from a header.
_UNWRAP = frozenset({"int", "item", "index"})
# Collectives where the root only sends: its own buffer is unchanged afterwards.
_BROADCASTS = frozenset({"Bcast", "Ibcast", "bcast", "broadcast", "Broadcast"})


def _slot_key(expr: ast.expr) -> str | None:
    """`header[1]` for `header[1]` (a name subscripted by an int constant), else None."""
    if (
        isinstance(expr, ast.Subscript)
        and isinstance(expr.value, ast.Name)
        and isinstance(expr.slice, ast.Constant)
        and isinstance(expr.slice.value, int)
    ):
        return f"{expr.value.id}[{expr.slice.value}]"
    return None


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


def _is_pure(expr: ast.AST) -> bool:
    """True when evaluating `expr` twice must give the same object (names and lookups only)."""
    return all(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant,
                              ast.Slice, ast.Load, ast.Tuple)) for n in ast.walk(expr))  # fmt: skip


class _DeadLengthFlow(Flow[_Facts]):
    """Must-analysis: which `n = len(x)` facts hold, killed by rebinding or resizing.

    A fact set in one branch of a pure test survives the merge guarded by that test, and
    becomes unconditional again inside a later branch on the same test: safe_broadcast sets the size
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
        # Why a fact holds, for the message: keyed by (length or slot, container).
        self.origin: dict[tuple[str, str], str] = {}
        self._root_sides: dict[str, bool | None] = {}
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
            return value.value is None or isinstance(value.value, (str, bytes, tuple))
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
        read_back = self._read_back(name, value, state) if value is not None else set()
        state = frozenset(
            f
            for f in state
            if name not in f[:2]
            and not f[0].startswith(name + "[")
            and (f[2] is None or name not in f[2][2])
        )
        if immutable:
            state = state | {(_IMMUTABLE, name, None)}
        if isinstance(value, ast.Name):  # an alias could resize the container later
            state = self._drop(state, value.id)
        argument = _len_argument(value) if value is not None else None
        if isinstance(argument, ast.Name) and argument.id != name and value is not None:
            self.origin[(name, argument.id)] = f"{name} = len({argument.id}) at line {value.lineno}"
            state = state | {(name, argument.id, None)}
        return state | read_back

    def _read_back(self, name: str, value: ast.expr, state: _Facts) -> set[_Fact]:
        """`name = int(header[1])` where `header[1]` holds a length this rank stored there."""
        while isinstance(value, ast.Call) and call_name(value) in _UNWRAP and len(value.args) <= 1:
            if isinstance(value.func, ast.Attribute) and not value.args:  # header[1].item()
                value = value.func.value
            elif value.args and isinstance(value.func, ast.Name):  # int(header[1])
                value = value.args[0]
            else:
                break
        slot = _slot_key(value)
        found = {(name, f[1], f[2]) for f in state if slot is not None and f[0] == slot}
        for _, container, _ in found:
            stored = self.origin.get((slot or "", container), "")
            self.origin[(name, container)] = (
                f"{name} is read back at line {value.lineno} from `{slot}`, which holds "
                f"len({container}) on this rank ({stored})"
            )
        return found

    def store_item(self, target: ast.Subscript, value: ast.expr | None, state: _Facts) -> _Facts:
        container: ast.expr = target
        while isinstance(container, (ast.Subscript, ast.Attribute)):
            container = container.value
        if not isinstance(container, ast.Name):
            return state
        name = container.id
        kept = self._drop(state, name)
        kept = frozenset(f for f in kept if not f[0].startswith(name + "["))
        if target.value is not container:
            return kept
        # header[:] = (1, n, k) or header[1] = n: the slot now holds what n holds.
        slots: list[tuple[int, ast.expr]] = []
        whole = isinstance(target.slice, ast.Slice) and target.slice.lower is None
        if whole and isinstance(value, (ast.Tuple, ast.List)):
            slots = list(enumerate(value.elts))
        elif isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, int):
            slots = [(target.slice.value, value)] if value is not None else []
        for index, element in slots:
            if not isinstance(element, ast.Name):
                continue
            key = f"{name}[{index}]"
            for length, measured, guard in state:
                if length == element.id:
                    kept = kept | {(key, measured, guard)}
                    where = self.origin.get((length, measured), "")
                    self.origin[(key, measured)] = f"stored at line {target.lineno}; {where}"
        return kept

    def _root_side(self, guard: _Guard | None) -> bool:
        """True when `guard` is a branch only the root rank takes (e.g. `rank == root`)."""
        if guard is None:
            return False
        if guard[0] not in self._root_sides:
            self._root_sides[guard[0]] = root_test(ast.parse(guard[0], mode="eval").body)
        side = self._root_sides[guard[0]]
        return side is not None and side == guard[1]

    def _slot_effects(self, expr: ast.AST, state: _Facts) -> _Facts:
        """A header handed to a call may be overwritten, except on the root of a broadcast."""
        arrays = {f[0].split("[")[0] for f in state if "[" in f[0]}
        for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
            handed: set[str] = set()
            for argument in [*call.args, *(k.value for k in call.keywords)]:
                if isinstance(argument, ast.Starred):
                    argument = argument.value
                items = argument.elts if isinstance(argument, (ast.List, ast.Tuple)) else [argument]
                handed.update(i.id for i in items if isinstance(i, ast.Name))
            if call_name(call) in _LENGTH_PRESERVING_CALLS:
                handed.clear()
            func = call.func
            mutating = (
                isinstance(func, ast.Attribute) and func.attr not in _LENGTH_PRESERVING_METHODS
            )
            if mutating and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                handed.add(func.value.id)
            sends = call_name(call) in _BROADCASTS
            for array in arrays & handed:
                state = frozenset(
                    f
                    for f in state
                    if not f[0].startswith(array + "[") or (sends and self._root_side(f[2]))
                )
        return state

    def effects(self, expr: ast.AST, state: _Facts) -> _Facts:
        if any("[" in f[0] for f in state):
            state = self._slot_effects(expr, state)
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
            return call_name(node) not in _LENGTH_PRESERVING_CALLS
        return isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom))

    @staticmethod
    def _keeps_length(node: ast.Name, parent: ast.AST, grand: ast.AST | None) -> bool:
        if isinstance(parent, _SAFE_PARENTS):
            return True
        if isinstance(parent, ast.Call) and node in parent.args:
            return call_name(parent) in _LENGTH_PRESERVING_CALLS
        if isinstance(parent, ast.keyword) and isinstance(grand, ast.Call):
            return call_name(grand) in _LENGTH_PRESERVING_CALLS
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
            why = self.origin.get((length.id, other.id), f"{length.id} = len({other.id})")
            return f"{why}, and neither has changed since"
        return None


# Values that are a new object nothing else holds: a name bound only to these is the scope's own.
_FRESH_CALLS = frozenset(
    {"list", "dict", "set", "tuple", "bytearray", "bytes", "str", "frozenset", "sorted",
     "memoryview", "deque", "OrderedDict", "defaultdict", "Counter", "dumps", "encode"}
)  # fmt: skip
_FRESH_NODES = (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.Constant, ast.JoinedStr, ast.BinOp,
                *COMPREHENSIONS)  # fmt: skip


def _fresh(value: ast.expr | None) -> bool:
    if isinstance(value, _FRESH_NODES):
        return True
    if isinstance(value, ast.IfExp):
        return _fresh(value.body) and _fresh(value.orelse)
    return isinstance(value, ast.Call) and call_name(value) in _FRESH_CALLS


def _local_names(scope: Scope, nodes: list[ast.AST]) -> frozenset[str]:
    """Names whose object only this scope can reach, so code it calls cannot resize it.

    Only a name bound solely to new objects (`[]`, `bytearray(n)`, `pickle.dumps(x)`, ...)
    qualifies: a parameter, a module global, another object's attribute or a call's result may
    be held elsewhere. A name that a nested function or lambda uses is shared with it.
    """
    if isinstance(scope, ast.Module):
        return frozenset()
    fresh: set[str] = set()
    shared: set[str] = set()
    if isinstance(scope, FUNCTION_NODES):
        arguments = scope.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
        shared.update(a.arg for a in every)
    for node in nodes:
        for target, value in bindings(node):
            names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if isinstance(target, ast.Name) and _fresh(value):
                fresh.update(names)
            else:
                shared.update(names)
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            shared.update(node.names)
        elif isinstance(node, (*FUNCTION_NODES, ast.Lambda)):
            shared.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            shared.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(fresh - shared)


def dead_length_findings(
    scopes: list[tuple[Scope, list[ast.AST], list[ast.Call]]], names: PickleNames | None
) -> list[RawFinding]:
    """GP003 in every scope that measures a length (a finding may repeat; callers dedupe)."""
    found: list[RawFinding] = []
    for scope, nodes, calls in scopes:
        measured = [_len_argument(call) for call in calls]
        if not any(argument is not None for argument in measured):
            continue
        names_measured = frozenset(a.id for a in measured if isinstance(a, ast.Name))
        flow = _DeadLengthFlow(found.append, _local_names(scope, nodes), names_measured, names)
        flow.run(scope.body, frozenset())
    return found
