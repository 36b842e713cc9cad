"""The plugin system: entry-point groups, registries, specifier loading and the session.

A :class:`~vally.plugins.session.Session` holds one command's registries (one per kind),
loads plugins named by specifiers and creates them with validated configs. Nothing here is
global. Imports only contracts, models and errors.
"""
