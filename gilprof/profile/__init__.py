"""The saved profile: the object, its files, bundles of ranks, merging.

The ground every other layer stands on besides gilprof.model: sampling builds profiles,
analysis reads them, nothing here imports either.
"""

from gilprof.profile.bundle import BUNDLE_SCHEMA, load_profiles, merge_profiles, save_bundle
from gilprof.profile.files import (
    check_folder,
    check_writable,
    read_json_file,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from gilprof.profile.profile import SCHEMA, SCHEMA_V1, Counts, Profile, Runs, Stack, Window
from gilprof.profile.stream import StreamWriteError, StreamWriter, is_stream, read_streams

__all__ = [
    "BUNDLE_SCHEMA",
    "SCHEMA",
    "SCHEMA_V1",
    "Counts",
    "Profile",
    "Runs",
    "Stack",
    "StreamWriteError",
    "StreamWriter",
    "Window",
    "check_folder",
    "check_writable",
    "is_stream",
    "load_profiles",
    "merge_profiles",
    "read_json_file",
    "read_streams",
    "save_bundle",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]
