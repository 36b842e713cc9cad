"""Contracts: what plugins implement and what the kernel promises them.

Protocols per plugin kind (:mod:`~vally.contracts.protocols`), the run-event hooks
(:mod:`~vally.contracts.hookspecs`) and their payloads and emitter
(:mod:`~vally.contracts.events`), frozen plugin metadata (:mod:`~vally.contracts.metadata`)
and convenience base classes (:mod:`~vally.contracts.bases`). Imports only models and errors.
"""
