"""`gilprof lint`: fixtures, GP001/GP003 near misses, suppression, output formats, exit codes.

Fixture files in data/lint mark each line a rule must flag with `# expect: GPxxx`; every other
line of theirs must stay clean, so near misses there are tested by their absence.
"""

from __future__ import annotations

import ast
import json
import os
import re
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import gilprof
from gilprof.cli.main import cli
from gilprof.lint import (
    DEFAULT_GETTERS,
    RULES,
    SCHEMA,
    Finding,
    iter_python_files,
    lint_paths,
    lint_source,
    suppressions,
)
from gilprof.renderers import render

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


# ---- Files, directories, errors ------------------------------------------------------------

ROUND_TRIP = "import pickle\ndef f(o):\n    b = pickle.dumps(o)\n    return pickle.loads(b)\n"


def test_directories_are_walked_for_python_files_skipping_caches_and_venvs(tmp_path: Path) -> None:
    for relative in (
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/notes.txt",
        ".git/hook.py",
        "pkg/__pycache__/a.py",
        "node_modules/x.py",
        ".venv/lib/site.py",
        "myenv/lib/site.py",
        "conda/lib/site.py",
        "pkg/env/c.py",
    ):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("x = 1\n")
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "conda" / "conda-meta").mkdir()
    found = [p.relative_to(tmp_path).as_posix() for p in iter_python_files(tmp_path)]
    assert found == ["pkg/a.py", "pkg/env/c.py", "pkg/sub/b.py"]


def test_a_broken_file_is_reported_and_the_scan_goes_on(tmp_path: Path) -> None:
    (tmp_path / "a_broken.py").write_text("def f(:\n    pass\n")
    (tmp_path / "b_latin.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "c_flagged.py").write_text(ROUND_TRIP)
    script = tmp_path / "tool"  # named explicitly: scanned whatever its suffix
    script.write_text(ROUND_TRIP)
    os.mkfifo(tmp_path / "d_pipe.py")  # reading it would block forever
    result = lint_paths([tmp_path, script, tmp_path / "c_flagged.py", tmp_path / "missing.py"])
    assert result.files_scanned == 2  # c_flagged.py once, though named twice
    assert [(Path(f.path).name, f.line) for f in result.findings] == [
        ("c_flagged.py", 4),
        ("tool", 4),
    ]
    errors = {Path(e.path).name: e for e in result.errors}
    assert set(errors) == {"a_broken.py", "b_latin.py", "d_pipe.py", "missing.py"}
    assert errors["d_pipe.py"].message == "not a regular file"
    assert errors["a_broken.py"].line == 1 and "syntax error" in errors["a_broken.py"].message
    assert "no such file" in errors["missing.py"].message
    assert result.exit_code == 1


# ---- The command: exit codes and formats ---------------------------------------------------


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["lint", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return result.exit_code, result.stdout, result.stderr


def test_exit_0_when_clean_1_with_findings(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("x = 1\n")
    flagged = tmp_path / "flagged.py"
    flagged.write_text(ROUND_TRIP)
    code, out, _ = run(str(clean))
    assert (code, out.strip()) == (0, "no findings in 1 file scanned")
    code, out, _ = run(str(tmp_path))
    lines = out.strip().split("\n")
    assert code == 1
    assert lines[0].startswith(f"{flagged}:4:12: GP001 `pickle.loads(b)`")
    assert lines[0].endswith(f"(fix: {RULES['GP001'].fix})")
    assert lines[1] == "1 finding (GP001: 1) in 2 files scanned"


def test_exit_2_when_nothing_is_flagged_but_input_was_unreadable(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "missing.py"))
    assert code == 2 and f"{tmp_path / 'missing.py'}: error: no such file" in err
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef f(:\n")
    code, out, err = run(str(broken))
    assert code == 2
    assert f"{broken}:2: error: syntax error" in err
    assert "1 path could not be read or parsed" in out
    flagged = tmp_path / "flagged.py"
    flagged.write_text(ROUND_TRIP)
    code, _, err = run(str(broken), str(flagged))
    assert code == 1 and "syntax error" in err


def test_getter_options(tmp_path: Path) -> None:
    source = tmp_path / "route.py"
    source.write_text(
        "def f(rs):\n"
        "    s = sorted(rs, key=lambda r: len(r.input_token_ids) + len(r.tokens()))\n"
        "    return [(r.input_token_ids, r.tokens()) for r in s]\n"
    )
    code, out, _ = run(str(source), "--format", "json", "--getter", "tokens")
    assert code == 1
    assert {f["message"].split("`")[1] for f in json.loads(out)["findings"]} == {
        "input_token_ids",
        "tokens",
    }
    code, out, _ = run(
        str(source), "--format", "json", "--getter", "tokens", "--no-default-getters"
    )
    assert [f["message"].split("`")[1] for f in json.loads(out)["findings"]] == ["tokens"]
    assert run(str(source), "--no-default-getters")[0] == 0
    code, _, err = run(str(source), "--getter", "not a name")
    assert code == 2 and "--getter expects an attribute name" in err


def test_json_output(tmp_path: Path) -> None:
    (tmp_path / "flagged.py").write_text(ROUND_TRIP)
    (tmp_path / "broken.py").write_text("def f(:\n")
    code, out, _ = run(str(tmp_path), "--format", "json")
    document = json.loads(out)
    assert code == 1
    assert set(document) == {"schema", "findings", "files_scanned", "tests_skipped", "errors"}
    assert document["schema"] == SCHEMA == "gilprof.lint/1"
    assert document["files_scanned"] == 1
    (finding,) = document["findings"]
    assert finding == {
        "path": str(tmp_path / "flagged.py"),
        "line": 4,
        "col": 12,
        "rule": "GP001",
        "message": finding["message"],
        "fix": RULES["GP001"].fix,
        "level": "warning",
    }
    assert document["errors"] == [
        {
            "path": str(tmp_path / "broken.py"),
            "line": 1,
            "message": document["errors"][0]["message"],
        }
    ]


def assert_valid_sarif(document: dict) -> None:
    """The parts of SARIF 2.1.0 that code-scanning consumers require."""
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    (run_,) = document["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "gilprof"
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == sorted(RULES)
    for rule in driver["rules"]:
        assert (
            isinstance(rule["shortDescription"]["text"], str) and rule["shortDescription"]["text"]
        )
    for result in run_["results"]:
        assert result["ruleId"] in rule_ids
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] in ("none", "note", "warning", "error")
        assert result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"]
        region = location["region"]
        assert isinstance(region["startLine"], int) and region["startLine"] >= 1
        assert isinstance(region["startColumn"], int) and region["startColumn"] >= 1


def test_sarif_output_is_valid_and_located(tmp_path: Path) -> None:
    (tmp_path / "flagged file.py").write_text(ROUND_TRIP)
    code, out, _ = run(str(tmp_path), "--format", "sarif")
    document = json.loads(out)
    assert code == 1
    assert_valid_sarif(document)
    (result,) = document["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].startswith("file://")
    assert location["artifactLocation"]["uri"].endswith("/flagged%20file.py")
    assert location["region"] == {"startLine": 4, "startColumn": 12}


def test_sarif_relative_paths_stay_relative_and_errors_become_notifications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("src").mkdir()
    Path("src/flagged.py").write_text(ROUND_TRIP)
    result = lint_paths(["./src", "gone.py"])
    document = json.loads(render("lint", "sarif", result))
    assert_valid_sarif(document)
    run_ = document["runs"][0]
    uri = run_["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "src/flagged.py"
    (notification,) = run_["invocations"][0]["toolExecutionNotifications"]
    assert notification["level"] == "error" and "no such file" in notification["message"]["text"]
    clean = json.loads(render("lint", "sarif", lint_paths([])))
    assert_valid_sarif(clean)
    assert clean["runs"][0]["results"] == []


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
