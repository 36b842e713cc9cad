"""Spec loading: YAML with located errors, params, eval/experiment/project files, skills.

Turns files on disk into validated models (:mod:`vally.models`); knows nothing of plugins
or runs. Imports only contracts, models and errors.
"""
