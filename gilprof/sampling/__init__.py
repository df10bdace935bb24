"""Sampling: find the target, run a sampler against it window by window, build a Profile.

Imports only the profile and the ground layer (model, errors); never analysis or renderers.
"""
