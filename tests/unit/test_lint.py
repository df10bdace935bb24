"""`gilprof lint`: fixtures, GP001/GP002/GP003 near misses, suppression, the reference
implementations, the TensorRT-LLM excerpts. Files, output formats and exit codes:
test_lint_command.py.

Fixture files in data/lint mark each line a rule must flag with `# expect: GPxxx`; every other
line of theirs must stay clean, so near misses there are tested by their absence.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

import gilprof
from gilprof.lint import (
    DEFAULT_GETTERS,
    RULES,
    Finding,
    lint_paths,
    lint_source,
    suppressions,
)

DATA = Path(__file__).parent / "data" / "lint"
FIXTURES = sorted(DATA.glob("*.py"))
REFERENCE = Path(gilprof.__file__).parent / "reference"
_EXPECT = re.compile(r"#.*\bexpect: (GP\d{3})")


def expected_markers(source: str) -> set[tuple[int, str]]:
    return {
        (number, match.group(1))
        for number, line in enumerate(source.split("\n"), start=1)
        for match in [_EXPECT.search(line)]
        if match
    }


def located(findings: list[Finding]) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in findings}


def check(code: str, getters: tuple[str, ...] = DEFAULT_GETTERS) -> None:
    """Lint a snippet; its findings must be exactly its `# expect:` markers."""
    source = textwrap.dedent(code)
    assert located(lint_source(source, getters=getters)) == expected_markers(source)


# ---- Fixtures modelled on the seed's code --------------------------------------------------


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda path: path.name)
def test_fixture_findings_are_exactly_the_expect_markers(fixture: Path) -> None:
    source = fixture.read_text()
    result = lint_paths([fixture])
    assert result.errors == ()
    assert result.files_scanned == 1
    assert located(list(result.findings)) == expected_markers(source)


def test_fixtures_expect_every_rule_so_the_marker_check_is_not_vacuous() -> None:
    rules = {rule for path in FIXTURES for _, rule in expected_markers(path.read_text())}
    assert rules == set(RULES) == {"GP001", "GP002", "GP003", "GP004"}


def test_findings_carry_position_rule_message_and_reference_fix() -> None:
    (finding,) = lint_source("import pickle\nblob = pickle.dumps(1)\nx = pickle.loads(blob)\n")
    assert (finding.line, finding.col, finding.rule) == (3, 5, "GP001")
    assert "line 2" in finding.message and "pickle.loads(blob)" in finding.message
    assert finding.fix.startswith("gilprof.reference.broadcast.safe_broadcast")
    assert RULES["GP002"].fix.startswith("gilprof.reference.adp_router.")


def test_the_code_under_analysis_is_never_imported(tmp_path: Path) -> None:
    module = tmp_path / "explodes.py"
    module.write_text(
        "import pickle\nraise SystemExit('imported')\n"
        "def f(o):\n    b = pickle.dumps(o)\n    return pickle.loads(b)\n"
    )
    assert located(list(lint_paths([module]).findings)) == {(5, "GP001")}


# ---- GP001 ---------------------------------------------------------------------------------


def test_gp001_near_misses_loads_of_bytes_from_elsewhere() -> None:
    check(
        """
        import pickle

        def received(comm, obj):
            blob = pickle.dumps(obj)
            comm.Bcast(blob)
            buffer = bytearray(len(blob))
            comm.Bcast(buffer)
            return pickle.loads(buffer)

        def other_variable(obj, wire):
            mine = pickle.dumps(obj)
            theirs = wire.recv()
            return mine, pickle.loads(theirs)

        def json_round_trip(obj, json):
            return json.loads(json.dumps(obj))
        """
    )


def test_gp001_follows_loops_try_and_helpers() -> None:
    check(
        """
        import pickle

        def next_iteration(objs):
            blob = None
            for obj in objs:
                if blob is not None:
                    print(pickle.loads(blob))  # expect: GP001
                blob = pickle.dumps(obj)

        def in_finally(obj):
            try:
                blob = pickle.dumps(obj)
            finally:
                print("sent")
            return pickle.loads(blob)  # expect: GP001

        def serialize(obj):
            return pickle.dumps(obj)

        def wrapped(obj):
            return serialize(obj)

        def through_two_helpers(obj):
            return pickle.loads(memoryview(wrapped(obj)))  # expect: GP001
        """
    )


# ---- GP002 ---------------------------------------------------------------------------------


def test_gp002_near_misses() -> None:
    check(
        """
        def single_read(requests):
            return [len(r.input_token_ids) for r in requests]

        def key_reads_other_list(requests, others):
            ordered = sorted(requests, key=lambda r: len(r.input_token_ids))
            return ordered, [len(o.input_token_ids) for o in others]

        def getter_not_on_the_list(requests):
            ordered = sorted(requests, key=lambda r: r.num_input_tokens)
            return [r.num_input_tokens for r in ordered]

        def different_bases(pairs):
            for a, b in pairs:
                print(a.input_token_ids, b.input_token_ids)

        def loop_variable_attribute_not_the_item(requests):
            ordered = sorted(requests, key=lambda r: len(r.input_token_ids))
            for r in ordered:
                print(r.parent.input_token_ids)
        """
    )


def test_gp002_reads_in_a_while_loop_and_a_nested_loop_count() -> None:
    check(
        """
        def drain(queue, beams):
            while queue:
                head = queue[0]
                if len(head.output_token_ids) > 1:
                    print(head.output_token_ids[-1])  # expect: GP002
                queue.pop(0)
            for request in queue:
                tokens = request.input_token_ids
                for beam in beams:
                    print(beam, request.input_token_ids, tokens)  # expect: GP002
        """
    )


# ---- GP003 ---------------------------------------------------------------------------------


def test_gp003_needs_the_same_test_for_a_fact_set_in_one_branch() -> None:
    check(
        """
        import pickle

        def same_test(comm, obj, rank, root):
            if rank == root:
                blob = pickle.dumps(obj)
                size = len(blob)
            else:
                blob = None
            comm.barrier()
            if rank == root:
                assert size == len(blob)  # expect: GP003

        def other_test(comm, obj, rank, root):
            if rank == root:
                blob = pickle.dumps(obj)
                size = len(blob)
            else:
                blob, size = b"", 1
            if rank != root:
                assert size == len(blob)

        def test_variable_rebound(comm, obj, rank, root):
            if rank == root:
                blob = pickle.dumps(obj)
                size = len(blob)
            rank = comm.Get_rank()
            if rank == root:
                assert size == len(blob)
        """
    )


def test_gp003_near_misses_when_the_container_may_change() -> None:
    check(
        """
        def closure_mutated(cases):
            def add():
                cases.append(1)
            before = len(cases)
            add()
            assert len(cases) > before

        def grows_in_loop(items):
            count = len(items)
            while True:
                if len(items) != count:
                    break
                items.append(None)

        def slice_assignment(buffer):
            size = len(buffer)
            buffer[:0] = b"x"
            return size == len(buffer)

        def aliased(buffer):
            size = len(buffer)
            alias = buffer
            alias.extend(b"x")
            return size == len(buffer)

        def matched(value, buffer):
            size = len(buffer)
            match value:
                case 1:
                    buffer.clear()
                case _:
                    pass
            return size == len(buffer)
        """
    )


def test_gp003_immutable_bytes_survive_being_handed_on() -> None:
    check(
        """
        def send(comm, text):
            payload = text.encode()
            size = len(payload)
            comm.send(payload)
            if len(payload) != size:  # expect: GP003
                raise RuntimeError
            data = bytearray(payload)
            n = len(data)
            comm.Recv(data)
            return n == len(data)
        """
    )


# ---- Suppression, columns ------------------------------------------------------------------


def test_suppression_comments_are_parsed_from_comments_only() -> None:
    source = (
        "a = 1  # gilprof: ignore[GP001, gp002]\n"
        "b = 2  # gilprof: ignore\n"
        "c = '# gilprof: ignore'\n"
        "d = 4  # gilprof: ignored\n"
        "e = 5  # note  # gilprof:ignore[GP003]\n"
    )
    assert suppressions(source) == {1: frozenset({"GP001", "GP002"}), 2: None, 5: {"GP003"}}


def test_columns_count_characters_not_utf8_bytes() -> None:
    source = "import pickle\nb = pickle.dumps(1)\né = 'ü'; x = pickle.loads(b)\n"
    (finding,) = lint_source(source)
    assert finding.col == source.split("\n")[2].index("pickle.loads") + 1 == 14


# ---- The reference implementations ---------------------------------------------------------


def _function_source(path: Path, name: str) -> tuple[ast.FunctionDef, list[str]]:
    if not path.exists():
        pytest.skip(f"{path.name} is not written yet")
    source = path.read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node, source.split("\n")
    pytest.skip(f"{path.name} has no {name} yet")


def _findings_in(path: Path, function: ast.FunctionDef) -> set[tuple[int, str]]:
    assert function.end_lineno is not None
    findings = lint_paths([path]).findings
    return {(f.line, f.rule) for f in findings if function.lineno <= f.line <= function.end_lineno}


def test_reference_safe_broadcast_before_is_flagged_on_its_loads_and_dead_check() -> None:
    path = REFERENCE / "broadcast.py"
    function, lines = _function_source(path, "safe_broadcast_before")
    body = range(function.lineno, (function.end_lineno or 0) + 1)
    sent = next(
        m.group(1) for n in body for m in [re.search(r"(\w+) = \w*pickle\w*\(", lines[n - 1])] if m
    )
    loads_line = next(n for n in body if f"pickle.loads({sent})" in lines[n - 1])
    dead_checks = [
        n
        for n in body
        if re.search(rf"len\({sent}\) [!=]= \w+|\w+ [!=]= len\({sent}\)", lines[n - 1])
    ]
    expected = {(loads_line, "GP001")} | {(n, "GP003") for n in dead_checks}
    assert _findings_in(path, function) == expected
    assert dead_checks, "the seed's dead size check is part of the reference"


def test_reference_balance_before_is_flagged_in_its_loop() -> None:
    path = REFERENCE / "adp_router.py"
    function, lines = _function_source(path, "balance_requests_across_ranks_before")
    body = range(function.lineno, (function.end_lineno or 0) + 1)
    key_line, key = next(
        (n, m.group(1)) for n in body for m in [re.search(r"key=(\w+)", lines[n - 1])] if m
    )
    reread = [
        n
        for n in body
        if n > key_line and ("input_token_ids" in lines[n - 1] or f"{key}(" in lines[n - 1])
    ]
    assert reread and _findings_in(path, function) == {(n, "GP002") for n in reread}


@pytest.mark.parametrize(
    ("module", "function_name"),
    [
        ("broadcast.py", "safe_broadcast"),
        ("adp_router.py", "balance_requests_across_ranks"),
        ("adp_router.py", "balance_requests_across_ranks_fast"),
    ],
)
def test_reference_fixed_versions_are_clean(module: str, function_name: str) -> None:
    path = REFERENCE / module
    function, _ = _function_source(path, function_name)
    assert _findings_in(path, function) == set()


def test_tensorrt_llm_before_excerpts_are_flagged_and_after_excerpts_are_clean() -> None:
    rules = {
        path.name: {f.rule for f in lint_paths([path]).findings}
        for path in sorted(DATA.glob("trtllm_*.py"))
    }
    assert rules == {
        "trtllm_adp_router_after.py": set(),
        "trtllm_adp_router_before.py": {"GP002"},
        "trtllm_bcast_after.py": set(),
        "trtllm_bcast_before.py": {"GP004"},
        "trtllm_communicator_after.py": set(),
        "trtllm_communicator_before.py": {"GP001", "GP003"},
    }
