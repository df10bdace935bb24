"""The saved profile: the object, its files, bundles of ranks, merging.

The ground every other layer stands on besides gilprof.model: sampling builds profiles,
analysis reads them, nothing here imports either.
"""

from gilprof.profile.bundle import BUNDLE_SCHEMA, load_profiles, merge_profiles, save_bundle
from gilprof.profile.files import read_json_file, write_json_atomic, write_text_atomic
from gilprof.profile.profile import SCHEMA, Profile, Stack, Window

__all__ = [
    "BUNDLE_SCHEMA",
    "SCHEMA",
    "Profile",
    "Stack",
    "Window",
    "load_profiles",
    "merge_profiles",
    "read_json_file",
    "save_bundle",
    "write_json_atomic",
    "write_text_atomic",
]
