"""Lint fixture (never imported or run): suppression comments.

Each function would be flagged without its comment; only `partly_suppressed` keeps a finding.
"""

import pickle


def copy_on_purpose(obj):
    blob = pickle.dumps(obj)
    return pickle.loads(blob)  # gilprof: ignore[GP001] -- a deliberate deep copy


def ignore_everything(obj):
    blob = pickle.dumps(obj)
    return pickle.loads(blob)  # gilprof: ignore


def ignore_several(requests):
    ordered = sorted(requests, key=lambda r: len(r.input_token_ids))
    return [r.input_token_ids for r in ordered]  # gilprof: ignore[GP001, GP002]


def partly_suppressed(obj):
    blob = pickle.dumps(obj)
    return pickle.loads(blob)  # gilprof: ignore[GP002]  # expect: GP001


def not_a_suppression(obj):
    blob = pickle.dumps(obj)
    return "# gilprof: ignore", pickle.loads(blob)  # gilprof: ignored  # expect: GP001
