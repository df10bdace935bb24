"""`--format pprof`: read back with the protobuf runtime against pprof's profile.proto schema."""

from __future__ import annotations

import gzip
from collections import Counter
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from gilprof.analysis.attribution import attribute
from gilprof.model import Mode, ThreadState
from gilprof.renderers import info, render
from gilprof.renderers.report import ReportData

from .builders import make_profile, sample

# pprof's proto/profile.proto (package perftools.profiles), the fields gilprof writes and a
# reader needs; field numbers and types as upstream.
_I64, _U64, _BOOL = (
    descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_UINT64,
    descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
)
_MSG, _STR = (
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
)
_REP, _OPT = (
    descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
)
_SCHEMA: dict[str, list[tuple[Any, ...]]] = {
    "Profile": [
        ("sample_type", 1, _MSG, _REP, "ValueType"),
        ("sample", 2, _MSG, _REP, "Sample"),
        ("mapping", 3, _MSG, _REP, "Mapping"),
        ("location", 4, _MSG, _REP, "Location"),
        ("function", 5, _MSG, _REP, "Function"),
        ("string_table", 6, _STR, _REP, None),
        ("drop_frames", 7, _I64, _OPT, None),
        ("keep_frames", 8, _I64, _OPT, None),
        ("time_nanos", 9, _I64, _OPT, None),
        ("duration_nanos", 10, _I64, _OPT, None),
        ("period_type", 11, _MSG, _OPT, "ValueType"),
        ("period", 12, _I64, _OPT, None),
        ("comment", 13, _I64, _REP, None),
        ("default_sample_type", 14, _I64, _OPT, None),
    ],
    "ValueType": [("type", 1, _I64, _OPT, None), ("unit", 2, _I64, _OPT, None)],
    "Sample": [
        ("location_id", 1, _U64, _REP, None),
        ("value", 2, _I64, _REP, None),
        ("label", 3, _MSG, _REP, "Label"),
    ],
    "Label": [
        ("key", 1, _I64, _OPT, None),
        ("str", 2, _I64, _OPT, None),
        ("num", 3, _I64, _OPT, None),
        ("num_unit", 4, _I64, _OPT, None),
    ],
    "Mapping": [("id", 1, _U64, _OPT, None)],
    "Location": [
        ("id", 1, _U64, _OPT, None),
        ("mapping_id", 2, _U64, _OPT, None),
        ("address", 3, _U64, _OPT, None),
        ("line", 4, _MSG, _REP, "Line"),
        ("is_folded", 5, _BOOL, _OPT, None),
    ],
    "Line": [("function_id", 1, _U64, _OPT, None), ("line", 2, _I64, _OPT, None)],
    "Function": [
        ("id", 1, _U64, _OPT, None),
        ("name", 2, _I64, _OPT, None),
        ("system_name", 3, _I64, _OPT, None),
        ("filename", 4, _I64, _OPT, None),
        ("start_line", 5, _I64, _OPT, None),
    ],
}


def _profile_class():
    file = descriptor_pb2.FileDescriptorProto(
        name="gilprof_test_profile.proto", package="perftools.profiles", syntax="proto3"
    )
    for name, fields in _SCHEMA.items():
        message = file.message_type.add(name=name)
        for field, number, kind, label, type_name in fields:
            entry = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                entry.type_name = f".perftools.profiles.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("perftools.profiles.Profile"))


def _decode(profile):
    data = render("report", "pprof", ReportData(profile, attribute(profile)))
    parsed = _profile_class()()
    parsed.ParseFromString(gzip.decompress(data))
    return parsed


def _samples(parsed):
    """(window, thread, state, leaf-first function names) -> samples, as pprof would read them."""
    strings = parsed.string_table
    names = {f.id: strings[f.name] for f in parsed.function}
    loc = {loc.id: names[loc.line[0].function_id] for loc in parsed.location}
    out: Counter = Counter()
    for s in parsed.sample:
        labels = {strings[lb.key]: strings[lb.str] if lb.str else lb.num for lb in s.label}
        key = (
            labels["window"],
            labels["thread"],
            labels["gil_state"],
            tuple(loc[i] for i in s.location_id),
        )
        out[key] += s.value[0]
    return out


def test_pprof_round_trips_counts_labels_and_leaf_first_stacks():
    held = sample("exec", "loop", "hot", count=30, tid=7)
    waiting = sample("io", "serve", "wait", count=12, tid=8, state=ThreadState.WAITING)
    profile = make_profile(
        [(100, [held, waiting]), (90, [sample("exec", "loop", count=5, tid=7)])],
        mode=Mode.CONTENTION,
        rate=250,
    )
    parsed = _decode(profile)
    strings = parsed.string_table
    assert strings[0] == ""
    assert [(strings[t.type], strings[t.unit]) for t in parsed.sample_type] == [
        ("samples", "count"),
        ("wall", "nanoseconds"),
    ]
    assert parsed.period == 4_000_000 and strings[parsed.period_type.type] == "wall"
    assert parsed.duration_nanos == 2_000_000_000
    assert _samples(parsed) == {
        ("0", "exec", "held", ("hot", "loop")): 30,
        ("0", "io", "waiting", ("wait", "serve")): 12,
        ("1", "exec", "held", ("loop",)): 5,
    }
    for s in parsed.sample:  # wall time = samples x period
        assert s.value[1] == s.value[0] * parsed.period
    tids = {lb.num for s in parsed.sample for lb in s.label if strings[lb.key] == "tid"}
    assert tids == {7, 8}
    files = {strings[f.filename] for f in parsed.function}
    assert files == {"app.py"}


def test_pprof_is_registered_as_a_binary_report_format():
    renderer = info("report", "pprof")
    assert renderer.binary and renderer.extension == ".pb.gz"


@pytest.mark.parametrize("line", [0, 1, 2**40])
def test_varints_of_any_size_decode(line):
    profile = make_profile([(10, [sample("t", "f", count=2**33, tid=2**47 + 5)])])
    profile.frames[0] = type(profile.frames[0])("f", "app.py", line)
    parsed = _decode(profile)
    assert parsed.sample[0].value[0] == 2**33
    assert parsed.location[0].line[0].line == line
