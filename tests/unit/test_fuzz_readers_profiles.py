"""Profile readers against bad input (Profile.load, load_profiles): every truncation of a
gilprof.profile/1 document, a bundle and a /2 stream, newer and older schemas, and any key
of a document or a stream record replaced by any value. See test_fuzz_readers.py.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gilprof.errors import InputError
from gilprof.profile import Profile, load_profiles, save_bundle

from .fuzz_builders import (
    FUZZ,
    JSON_VALUES,
    VALID_PROFILE,
    VALID_PROFILE_TEXT,
    fuzz_scratch,  # noqa: F401 - the module-scoped `scratch` fixture
    outcome,
    paths_of,
    replaced,
    valid_profile,
)


# -- profiles ---------------------------------------------------------------------------------
def test_every_truncation_of_a_profile_and_a_bundle_is_refused(scratch: Path) -> None:
    bundle_path = scratch / "bundle.json"
    save_bundle(bundle_path, [valid_profile(), valid_profile()], version=1)
    path = scratch / "cut.json"
    readers: dict[str, Callable[[Path], Any]] = {
        "Profile.load": Profile.load,
        "load_profiles": load_profiles,
    }
    for text, names in (
        (VALID_PROFILE_TEXT, ("Profile.load", "load_profiles")),
        (bundle_path.read_text(), ("load_profiles",)),
    ):
        complete = len(text.rstrip())
        for length in range(complete):
            path.write_text(text[:length])
            for name in names:
                error = outcome(name, functools.partial(readers[name], path))
                assert isinstance(error, InputError), length
                assert ("empty" if length == 0 else "truncated") in str(error), (length, error)
        path.write_text(text[:complete])
        assert load_profiles(path)


@given(version=st.integers(min_value=3, max_value=10**17))
@FUZZ
def test_newer_schema_is_refused_with_its_version(version: int) -> None:
    data = {**VALID_PROFILE, "schema": f"gilprof.profile/{version}"}
    error = outcome("Profile.load", lambda: Profile.from_dict(data))
    assert isinstance(error, InputError)
    assert f"gilprof.profile/{version}" in str(error) and "newer" in str(error)


def test_older_and_current_schema_load() -> None:
    # /1 documents must load, and /0 (never written) must not; /2 is a stream, not a document.
    assert isinstance(outcome("Profile.load", lambda: Profile.from_dict(VALID_PROFILE)), Profile)
    error = outcome(
        "Profile.load", lambda: Profile.from_dict({**VALID_PROFILE, "schema": "gilprof.profile/0"})
    )
    assert isinstance(error, InputError) and "gilprof.profile/0" in str(error)
    error = outcome(
        "Profile.load", lambda: Profile.from_dict({**VALID_PROFILE, "schema": "gilprof.profile/2"})
    )
    assert isinstance(error, InputError) and "gzip stream" in str(error)


# -- profiles, gilprof.profile/2 streams -----------------------------------------------------------
def _stream_records() -> list[dict[str, Any]]:
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p"
        valid_profile().save(path, version=2)
        return [json.loads(line) for line in gzip.open(path, "rt")]


VALID_RECORDS = _stream_records()


def _write_records(path: Path, records: list[Any]) -> None:
    import gzip

    with open(path, "wb") as out:
        for record in records:
            out.write(gzip.compress((json.dumps(record) + "\n").encode()))


def test_every_truncation_of_a_stream_is_partial_or_refused(scratch: Path) -> None:
    """A cut stream is what a killed capture leaves: it loads marked partial, never as complete,
    and a cut inside the header (nothing to show) is one clear error."""
    bundle = scratch / "bundle.gilprof"
    save_bundle(bundle, [valid_profile(), valid_profile()])
    single = scratch / "single.gilprof"
    valid_profile().save(single, version=2)
    path = scratch / "cut.gilprof"
    for source, names in (
        (single, ("Profile.load", "load_profiles")),
        (bundle, ("load_profiles",)),
    ):
        data = source.read_bytes()
        members = len(load_profiles(source))
        for length in range(len(data)):
            path.write_bytes(data[:length])
            for name in names:
                reader = Profile.load if name == "Profile.load" else load_profiles
                result = outcome(name, functools.partial(reader, path))
                if isinstance(result, InputError):
                    assert "empty" in str(result) or "truncated" in str(result), (length, result)
                    continue
                profiles = [result] if isinstance(result, Profile) else result
                # a bundle cut between two profiles reads as the profiles before the cut
                assert profiles[-1].sampling.partial or len(profiles) < members, length
                assert all(not p.sampling.partial for p in profiles[:-1]), length
        path.write_bytes(data)
        assert not any(p.sampling.partial for p in load_profiles(path))


@given(record=st.integers(0, len(VALID_RECORDS) - 1), data=st.data(), value=JSON_VALUES)
@settings(FUZZ, max_examples=500)
def test_any_key_of_a_stream_record_replaced_by_any_value(
    scratch: Path, record: int, data: st.DataObject, value: Any
) -> None:
    path = data.draw(st.sampled_from(paths_of(VALID_RECORDS[record])))
    records = list(VALID_RECORDS)
    records[record] = replaced(VALID_RECORDS[record], path, value)
    file = scratch / "mutated.gilprof"
    _write_records(file, records)
    loaded = outcome("load_profiles", lambda: load_profiles(file))
    if isinstance(loaded, list):
        # Whatever loads is a profile gilprof can write and read back.
        save_bundle(file, loaded)
        assert len(load_profiles(file)) == len(loaded)


@given(content=st.binary(max_size=3000))
@FUZZ
def test_random_bytes_inside_gzip_members(scratch: Path, content: bytes) -> None:
    import gzip

    path = scratch / "random.gilprof"
    header = gzip.compress((json.dumps(VALID_RECORDS[0]) + "\n").encode())
    for data in (
        gzip.compress(content),
        header + gzip.compress(content),
        header + content,
        b"\x1f\x8b" + content,
    ):
        path.write_bytes(data)
        for name, reader in (("Profile.load", Profile.load), ("load_profiles", load_profiles)):
            result = outcome(name, functools.partial(reader, path))
            if not isinstance(result, InputError):  # only a header and what follows as partial
                profiles = [result] if isinstance(result, Profile) else result
                assert profiles[-1].sampling.partial


@given(path=st.sampled_from(paths_of(VALID_PROFILE)), value=JSON_VALUES)
@settings(FUZZ, max_examples=500)
def test_any_key_of_a_profile_replaced_by_any_value(path: tuple[Any, ...], value: Any) -> None:
    data = replaced(VALID_PROFILE, path, value)
    loaded = outcome("Profile.load", lambda: Profile.from_dict(data))
    if isinstance(loaded, Profile):
        # Whatever loads is a profile gilprof can write and read back.
        text = json.dumps(loaded.to_dict(), allow_nan=False)
        assert isinstance(Profile.from_dict(json.loads(text)), Profile)


@given(path=st.sampled_from(paths_of(VALID_PROFILE)), value=JSON_VALUES)
@FUZZ
def test_mutated_profile_files_and_bundles(
    scratch: Path, path: tuple[Any, ...], value: Any
) -> None:
    data = replaced(VALID_PROFILE, path, value)
    file = scratch / "mutated.json"
    file.write_text(json.dumps(data))  # NaN and Infinity are written as such, and refused
    outcome("Profile.load", lambda: Profile.load(file))
    file.write_text(json.dumps({"schema": "gilprof.bundle/1", "profiles": [VALID_PROFILE, data]}))
    outcome("load_profiles", lambda: load_profiles(file))
