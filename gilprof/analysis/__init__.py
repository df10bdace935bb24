"""Analysis: pure functions from profiles (and step logs) to shares, comparisons, verdicts.

Imports only the profile, steps and ground layers; never sampling, renderers or the CLI.
"""
