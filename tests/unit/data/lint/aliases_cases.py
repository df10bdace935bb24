"""Lint fixture (never imported or run): GP001 through import aliases and other picklers."""

import pickle as pk
from pickle import dumps as to_bytes
from pickle import loads

import cloudpickle
import dill as serializer


def module_alias(obj):
    blob = pk.dumps(obj)
    return pk.loads(blob)  # expect: GP001


def function_aliases(obj):
    blob = to_bytes(obj)
    return loads(blob)  # expect: GP001


def cloudpickle_then_pickle(obj):
    blob = cloudpickle.dumps(obj)
    return pk.loads(blob[0:])  # expect: GP001


def dill_alias(obj):
    serialized = serializer.dumps(obj)
    return serializer.loads(serialized)  # expect: GP001


def json_is_not_pickle(obj, json):
    text = json.dumps(obj)
    return json.loads(text)
